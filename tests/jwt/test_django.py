"""Django views and Django REST framework views under gunicorn (--preload, gthread)."""

from __future__ import annotations

import pytest
from servers import jwks_of
from test_gunicorn import GOOD, K1, get, gunicorn, mint

pytest.importorskip("django")
pytest.importorskip("rest_framework")


def test_django_and_drf_under_gunicorn(server):
    server.set("/jwks", jwks_of(K1))
    with gunicorn("django_app", server.url("/jwks"), worker="gthread", workers=2) as url:
        ready = get(url, "/ready")
        assert ready.status_code == 200, ready.text  # before any token: keys loaded at start

        for route in ("/orders", "/api/orders"):
            assert get(url, route, mint(K1, **GOOD)).json()["owner"] == "alice"

            missing = get(url, route)
            assert missing.status_code == 401, (route, missing.text)
            assert missing.headers["WWW-Authenticate"] == 'Bearer realm="orders"'

            bad = get(url, route, mint(K1, **GOOD, aud="other"))
            assert bad.status_code == 401
            assert 'error_description="audience"' in bad.headers["WWW-Authenticate"]
            assert bad.json()["reason"] == "audience"

            no_role = get(url, route, mint(K1, scope="orders:read"))
            assert no_role.status_code == 403
            assert no_role.json()["reason"] == "insufficient-role"

            no_scope = get(url, route, mint(K1, realm_access={"roles": ["clerk"]}))
            assert no_scope.status_code == 403
            assert 'scope="orders:read"' in no_scope.headers["WWW-Authenticate"]

        # A key the provider does not have: a paced refetch, then 401 unknown-key or 503.
        server.stop()
        stranger = get(url, "/api/orders", mint(K1.with_kid("k9"), **GOOD))
        assert stranger.status_code in (401, 503)
        if stranger.status_code == 503:
            assert int(stranger.headers["Retry-After"]) >= 1
