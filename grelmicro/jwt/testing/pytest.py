"""Pytest fixtures for services guarded by ``grelmicro.jwt``.

Load them in the top ``conftest.py`` of the tests::

    pytest_plugins = ["grelmicro.jwt.testing.pytest"]

(or ``pytest -p grelmicro.jwt.testing.pytest``). They are not loaded
automatically: installing grelmicro adds no fixture to anyone's test run.

- ``jwt_issuer``: a fresh :class:`~grelmicro.jwt.testing.TestIssuer` (ES256,
  ``iss`` ``https://issuer.test/``, ``aud`` ``https://api.test``). Override
  it in a ``conftest.py`` to match the service's settings, and the other
  fixtures follow::

      @pytest.fixture
      def jwt_issuer() -> TestIssuer:
          return TestIssuer(issuer=ISSUER, audience=AUDIENCE)

- ``jwt_verifier``: ``jwt_issuer.verifier()``, the verifier to give the app.
- ``jwt_jwks_server``: ``jwt_issuer.serve()``, a loopback server publishing
  the JWKS (``jwt_jwks_server.jwks_url``), stopped after the test.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from grelmicro.jwt import JWTVerifier
from grelmicro.jwt.testing import ServedJWKS, TestIssuer

__all__ = ["jwt_issuer", "jwt_jwks_server", "jwt_verifier"]


@pytest.fixture
def jwt_issuer() -> TestIssuer:
    """A test issuer with the default settings (override to change them)."""
    return TestIssuer()


@pytest.fixture
def jwt_verifier(jwt_issuer: TestIssuer) -> JWTVerifier:
    """A verifier trusting ``jwt_issuer`` (its keys, ``iss`` and ``aud``)."""
    return jwt_issuer.verifier()


@pytest.fixture
def jwt_jwks_server(jwt_issuer: TestIssuer) -> Iterator[ServedJWKS]:
    """``jwt_issuer``'s JWKS served on 127.0.0.1 for the duration of the test."""
    with jwt_issuer.serve() as server:
        yield server
