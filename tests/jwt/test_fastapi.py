"""The FastAPI dependency, through a real uvicorn on 127.0.0.1 with httpx as the client.

Every answer is checked as a client sees it on the wire: status, the exact
``WWW-Authenticate`` string, the RFC 9457 body; plus the OpenAPI document, the
lifespan, websockets, ``-> Claims`` routes and the ``Depends(verifier.verify)``
mistake. Time is pinned with the verifier's clock.
"""

import socket
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

import httpx
import pytest
from fastapi import APIRouter, Depends, FastAPI, Security, WebSocket
from forge import NOW, SECRET, hmac_key, private_key, tamper
from pydantic import BaseModel
from servers import DocumentServer, Running, jwks_of, serve
from support import HANG_GUARD, documents
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from grelmicro.jwt import Claims, ConfigurationError, JWTVerifier, Key
from grelmicro.jwt.fastapi import JWTBearer, check_routes
from grelmicro.jwt.fastapi._challenges import Challenges
from grelmicro.jwt.fastapi._presentation import read_credentials

ROOT = Path(__file__).resolve().parents[2]
AUDIENCE = "https://api.example.com"
PROBLEM = "application/problem+json"


# -- the app under test ----------------------------------------------------------


class Profile(BaseModel):
    sub: str
    tenant: int


def make_verifier(**settings: Any) -> JWTVerifier:
    settings.setdefault("audience", AUDIENCE)
    return JWTVerifier([Key.secret(SECRET, "HS256")], clock=lambda: NOW, **settings)


def build(
    verifier: JWTVerifier | None = None, *, install: bool = True, **options: Any
) -> tuple[FastAPI, JWTBearer]:
    options.setdefault("realm", "api")
    auth = JWTBearer(verifier or make_verifier(), **options)
    app = FastAPI()

    @app.get("/public")
    def public() -> dict[str, bool]:
        return {"public": True}

    @app.get("/me")
    def me(claims: Annotated[Claims, Depends(auth)]) -> Claims:
        return claims

    @app.get("/me-model", response_model=Claims)
    async def me_model(claims: Annotated[Claims, Depends(auth)]) -> Any:
        return claims

    @app.get("/items")
    def items(claims: Annotated[Claims, Security(auth, scopes=["read:items"])]) -> dict[str, Any]:
        return {"sub": claims.subject}

    @app.get("/admin")
    def admin(
        claims: Annotated[Claims, Security(auth, scopes=["read:items", "admin"])],
    ) -> dict[str, Any]:
        return {"sub": claims.subject}

    @app.get("/maybe")
    def maybe(claims: Annotated[Claims | None, Depends(auth.optional)]) -> dict[str, Any]:
        return {"sub": None if claims is None else claims.subject}

    @app.get("/profile")
    def profile(who: Annotated[Profile, Depends(auth.as_model(Profile))]) -> Profile:
        return who

    @app.get("/profile-scoped")
    def profile_scoped(
        who: Annotated[Profile, Security(auth.as_model(Profile), scopes=["read:items"])],
    ) -> Profile:
        return who

    def subject_of(claims: Annotated[Claims, Depends(auth)]) -> str:
        return str(claims.subject)

    @app.get("/whoami")
    def whoami(subject: Annotated[str, Depends(subject_of)]) -> dict[str, str]:
        return {"subject": subject}

    @app.get("/by-hand")
    def by_hand(token: str = "not-a-jwt") -> Claims:
        return auth.verifier.verify(token)  # a refusal escaping the route's own code

    @app.websocket("/ws-by-hand")
    async def ws_by_hand(websocket: WebSocket) -> None:
        await websocket.accept()
        auth.verifier.verify(await websocket.receive_text())
        await websocket.send_text("verified")

    router = APIRouter(prefix="/area", dependencies=[Security(auth, scopes=["admin"])])

    @router.get("/stats")
    def stats() -> dict[str, bool]:
        return {"ok": True}

    app.include_router(router)

    @app.websocket("/ws")
    async def ws(websocket: WebSocket, claims: Annotated[Claims, Depends(auth)]) -> None:
        await websocket.accept(subprotocol=auth.subprotocol(websocket))
        await websocket.send_text(f"hello {claims.subject}")
        await websocket.close()

    @app.websocket("/ws-scoped")
    async def ws_scoped(
        websocket: WebSocket, claims: Annotated[Claims, Security(auth, scopes=["admin"])]
    ) -> None:
        await websocket.accept()
        await websocket.send_text(f"admin {claims.subject}")
        await websocket.close()

    if install:
        auth.install(app)
    return app, auth


def mint(**claims: Any) -> str:
    claims.setdefault("aud", AUDIENCE)
    claims.setdefault("sub", "user-1")
    claims.setdefault("exp", NOW + 3600)
    return hmac_key().mint(claims)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    app, _ = build()
    with serve(app) as running:
        yield running


def problem(response: httpx.Response) -> dict[str, Any]:
    assert response.headers["content-type"] == PROBLEM
    body: dict[str, Any] = response.json()
    assert body["status"] == response.status_code
    assert body["type"] == "about:blank"
    return body


# -- 200 -----------------------------------------------------------------------


def test_valid_token_returns_the_claims_through_a_claims_annotated_route(client):
    token = mint(scope="read:items", tags=["a", "b"], nested={"k": 1})
    response = client.get("/me", headers=bearer(token))
    assert response.status_code == 200
    assert response.json() == {
        "aud": AUDIENCE,
        "sub": "user-1",
        "exp": NOW + 3600,
        "scope": "read:items",
        "tags": ["a", "b"],
        "nested": {"k": 1},
    }
    assert "www-authenticate" not in response.headers


def test_claims_as_response_model(client):
    response = client.get("/me-model", headers=bearer(mint(tags=["x"])))
    assert response.status_code == 200
    assert response.json()["tags"] == ["x"]


def test_non_ascii_credentials_are_a_malformed_token_not_a_500(client):
    response = client.get("/me", headers=[(b"Authorization", b"Bearer \xe9\xff.\x80.x")])
    assert response.status_code == 401
    assert 'error_description="malformed"' in response.headers["www-authenticate"]


def test_scheme_name_is_case_insensitive(client):
    response = client.get("/me", headers={"Authorization": f"bEaReR {mint()}"})
    assert response.status_code == 200


def test_claims_in_a_users_own_dependency(client):
    assert client.get("/whoami", headers=bearer(mint())).json() == {"subject": "user-1"}


def test_a_router_guarded_as_a_whole(client):
    assert client.get("/area/stats").status_code == 401
    assert client.get("/area/stats", headers=bearer(mint())).status_code == 403
    assert client.get("/area/stats", headers=bearer(mint(scope="admin"))).json() == {"ok": True}
    document = client.get("/openapi.json").json()
    assert document["paths"]["/area/stats"]["get"]["security"] == [{"JWTBearer": ["admin"]}]


def test_a_refusal_escaping_a_routes_own_code_is_401_not_500(client):
    response = client.get("/by-hand")
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == (
        'Bearer realm="api", error="invalid_token", error_description="malformed"'
    )
    assert problem(response)["reason"] == "malformed"


def test_a_refusal_escaping_a_websocket_route_closes_1008(ws_url):
    with connect(f"{ws_url}/ws-by-hand") as ws:
        ws.send(mint(exp=NOW - 1))
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=HANG_GUARD)
    assert closed.value.rcvd is not None
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1008, "expired")


# -- 401 without credentials -------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Basic dXNlcjpwYXNz"}, {"Authorization": "DPoPx abc"}],
    ids=["none", "basic", "other-scheme"],
)
def test_no_bearer_credentials_is_a_bare_challenge(client, headers):
    response = client.get("/me", headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer realm="api"'
    assert problem(response) == {
        "type": "about:blank",
        "title": "Unauthorized",
        "status": 401,
        "detail": "A bearer token is required.",
        "reason": "missing-token",
    }


# -- 401 invalid_token ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "token"),
    [
        ("expired", mint(exp=NOW - 10)),
        ("audience", mint(aud="https://other.example")),
        ("signature", tamper(mint())),
        ("malformed", "not-a-jwt"),
        ("too-large", "a" * 9000),
        ("missing-claim", hmac_key().mint({"aud": AUDIENCE, "sub": "x"})),
        ("algorithm", private_key("ES256").mint({"aud": AUDIENCE, "exp": NOW + 60})),
    ],
)
def test_refused_token_is_invalid_token_with_the_stable_reason(client, reason, token):
    response = client.get("/me", headers=bearer(token))
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == (
        f'Bearer realm="api", error="invalid_token", error_description="{reason}"'
    )
    body = problem(response)
    assert body["error"] == "invalid_token"
    assert body["reason"] == reason
    assert body["title"] == "Unauthorized"
    # never the token, nor any of its segments
    for segment in token.split("."):
        if len(segment) > 8:
            assert segment not in response.text
            assert segment not in response.headers["www-authenticate"]


# -- 403 insufficient_scope -------------------------------------------------------------


def test_missing_scope_is_403_with_the_required_scopes(client):
    response = client.get("/admin", headers=bearer(mint(scope="read:items")))
    assert response.status_code == 403
    assert response.headers["www-authenticate"] == (
        'Bearer realm="api", error="insufficient_scope", scope="read:items admin"'
    )
    body = problem(response)
    assert body["error"] == "insufficient_scope"
    assert body["reason"] == "insufficient-scope"


def test_scope_is_checked_only_after_the_signature(client):
    response = client.get("/admin", headers=bearer(tamper(mint(scope="profile"))))
    assert response.status_code == 401
    assert 'error_description="signature"' in response.headers["www-authenticate"]


@pytest.mark.parametrize(
    "claims",
    [
        {"scope": "profile read:items"},
        {"scp": "read:items"},
        {"scp": ["profile", "read:items"]},
    ],
    ids=["scope", "scp-string", "scp-array"],
)
def test_scopes_from_scope_and_scp(client, claims):
    assert client.get("/items", headers=bearer(mint(**claims))).status_code == 200


@pytest.mark.parametrize(
    "claims",
    [
        # scope wins over scp: the route once merged them (Claims never did)
        {"scope": "profile", "scp": ["read:items"]},
        # RFC 6749 §3.3 separates scopes with U+0020 only (the route once split on any whitespace)
        {"scope": "profile\tread:items"},
        {"scope": "profile\u00a0read:items"},
        {"scope": "profile\u2003read:items"},
        {"scp": "profile\nread:items"},
        {"scp": ["read:items\u00e9"]},
    ],
    ids=["scope-and-scp", "tab", "no-break-space", "em-space", "scp-newline", "non-ascii"],
)
def test_the_route_grants_exactly_what_claims_has_scopes_grants(client, claims):
    response = client.get("/items", headers=bearer(mint(**claims)))
    assert response.status_code == 403
    assert problem(response)["reason"] == "insufficient-scope"
    assert not make_verifier().verify(mint(**claims)).has_scopes("read:items")


def test_permissions_count_only_when_configured(client):
    token = mint(permissions=["read:items"])
    assert client.get("/items", headers=bearer(token)).status_code == 403
    app, _ = build(permissions=True)
    with serve(app) as auth0:
        assert auth0.get("/items", headers=bearer(token)).status_code == 200


# -- roles from configured claim paths --------------------------------------------------


def roles_app() -> FastAPI:
    auth = JWTBearer(
        make_verifier(),
        realm="api",
        role_claims=["realm_access.roles", "resource_access.orders-api.roles"],
    )
    app = FastAPI()
    auth.install(app)
    clerk = auth.require_roles("clerk")

    @app.get("/orders")
    def orders(
        claims: Annotated[Claims, Security(clerk, scopes=["orders:read"])],
    ) -> dict[str, Any]:
        return {"sub": claims.subject}

    @app.delete("/orders")
    def purge(claims: Annotated[Claims, Depends(clerk.require_roles("admin"))]) -> dict[str, Any]:
        return {"purged_by": claims.subject}

    @app.get("/maybe")
    def maybe(claims: Annotated[Claims | None, Depends(clerk.optional)]) -> dict[str, Any]:
        return {"sub": None if claims is None else claims.subject}

    return app


KEYCLOAK = {
    "scope": "orders:read",
    "realm_access": {"roles": ["clerk"]},
    "resource_access": {"orders-api": {"roles": ["admin"]}, "other": {"roles": ["root"]}},
}


def test_roles_are_read_from_the_configured_claim_paths():
    with serve(roles_app()) as client:
        read = client.get("/orders", headers=bearer(mint(**KEYCLOAK)))
        purge = client.delete("/orders", headers=bearer(mint(**KEYCLOAK)))
        maybe = client.get("/maybe")
        document = client.get("/openapi.json").json()

    assert read.json() == {"sub": "user-1"}
    assert purge.json() == {"purged_by": "user-1"}
    assert maybe.json() == {"sub": None}
    # One security scheme in the document, whatever roles a route requires.
    assert list(document["components"]["securitySchemes"]) == ["JWTBearer"]
    assert document["paths"]["/orders"]["get"]["security"] == [{"JWTBearer": ["orders:read"]}]


@pytest.mark.parametrize(
    ("claims", "missing"),
    [
        ({**KEYCLOAK, "realm_access": {"roles": ["guest"]}}, ["clerk"]),
        ({**KEYCLOAK, "resource_access": {"orders-api": {"roles": []}}}, ["admin"]),
        # a role at a path that is not configured grants nothing
        (
            {"roles": ["clerk", "admin"], "resource_access": {"other": {"roles": ["admin"]}}},
            ["clerk", "admin"],
        ),
        ({**KEYCLOAK, "realm_access": {"roles": "clerk admin"}}, ["clerk"]),
    ],
    ids=["realm-role-missing", "client-role-missing", "unconfigured-paths", "string-is-one-role"],
)
def test_a_missing_role_is_403_naming_what_was_missing(claims, missing):
    with serve(roles_app()) as client:
        response = client.delete("/orders", headers=bearer(mint(**claims)))

    assert response.status_code == 403
    assert response.headers["www-authenticate"] == (
        'Bearer realm="api", error="insufficient_scope", error_description="insufficient-role"'
    )
    body = problem(response)
    assert body["reason"] == "insufficient-role"
    assert body["missing"] == missing
    assert body["detail"] == f"The token lacks a required role: {', '.join(missing)}."
    verified = make_verifier().verify(mint(**claims))
    paths = ["realm_access.roles", "resource_access.orders-api.roles"]
    assert not verified.has_roles("clerk", "admin", paths=paths)


def test_roles_are_checked_only_after_the_signature_and_the_scopes_still_count():
    with serve(roles_app()) as client:
        forged = client.get("/orders", headers=bearer(tamper(mint(**KEYCLOAK))))
        no_scope = client.get("/orders", headers=bearer(mint(**{**KEYCLOAK, "scope": "x"})))

    assert forged.status_code == 401
    assert no_scope.status_code == 403
    assert problem(no_scope)["reason"] == "insufficient-scope"
    assert problem(no_scope)["missing"] == ["orders:read"]


def test_a_url_named_role_claim_is_one_claim_name():
    # Auth0 namespaced claims: "https://example.com/roles" is one claim,
    # not the path https://example -> com/roles (which would match nothing).
    auth = JWTBearer(make_verifier(), role_claims="https://example.com/roles")
    app = FastAPI()
    auth.install(app)

    @app.get("/audit")
    def audit(claims: Annotated[Claims, Depends(auth.require_roles("auditor"))]) -> dict[str, Any]:
        return {"sub": claims.subject}

    with serve(app) as client:
        allowed = client.get("/audit", headers=bearer(mint(**{URL_ROLES: ["auditor"]})))
        denied = client.get("/audit", headers=bearer(mint(**{URL_ROLES: ["guest"]})))

    assert auth.role_claims == ((URL_ROLES,),)
    assert allowed.status_code == 200
    assert denied.status_code == 403
    assert problem(denied)["missing"] == ["auditor"]


URL_ROLES = "https://example.com/roles"


@pytest.mark.parametrize("roles", [(), ("",), (5,)])
def test_require_roles_needs_role_names(roles):
    with pytest.raises(ConfigurationError, match="role"):
        JWTBearer(make_verifier()).require_roles(*roles)


@pytest.mark.parametrize("paths", ["", "a..b", [], [("a", "")], 5])
def test_role_claims_must_be_claim_paths(paths):
    with pytest.raises(ConfigurationError, match="path"):
        JWTBearer(make_verifier(), role_claims=paths)


# -- confirmation (cnf): checked or refused ---------------------------------------------


@pytest.mark.parametrize(
    ("cnf", "reason"),
    [
        ({"jkt": "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"}, "dpop-binding"),
        ({"x5t#S256": "bwcK0esc3ACC3DB2Y5_lESsXE8o9ltc05O89jdN-dg2"}, "unchecked-binding"),
        (
            {
                "jwk": {
                    "kty": "OKP",
                    "crv": "Ed25519",
                    "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo",
                }
            },
            "unchecked-binding",
        ),
        ({"kid": "k1"}, "unchecked-binding"),
        ({}, "binding"),
        ({"jkt": None}, "binding"),
        ("bound", "binding"),
        ({"x5t#S256": "short"}, "binding"),
    ],
    ids=["jkt", "x5t-S256", "jwk", "kid", "empty", "null-jkt", "not-an-object", "bad-x5t"],
)
def test_a_token_bound_by_a_method_the_route_does_not_check_is_refused(client, cnf, reason):
    response = client.get("/me", headers=bearer(mint(cnf=cnf)))
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == (
        f'Bearer realm="api", error="invalid_token", error_description="{reason}"'
    )
    assert problem(response)["reason"] == reason


# -- 400 invalid_request -------------------------------------------------------------------


def test_two_authorization_headers_are_invalid_request(client):
    token = mint()
    response = client.get(
        "/me", headers=[("Authorization", f"Bearer {token}"), ("Authorization", f"Bearer {token}")]
    )
    assert response.status_code == 400
    assert response.headers["www-authenticate"] == (
        'Bearer realm="api", error="invalid_request", error_description="multiple-tokens"'
    )
    assert problem(response)["error"] == "invalid_request"


def test_token_in_header_and_query_is_invalid_request(client):
    token = mint()
    response = client.get("/me", params={"access_token": token}, headers=bearer(token))
    assert response.status_code == 400
    assert 'error_description="multiple-tokens"' in response.headers["www-authenticate"]


def test_token_in_the_query_string_is_never_used(client):
    response = client.get("/me", params={"access_token": mint()})
    assert response.status_code == 400
    assert response.headers["www-authenticate"] == (
        'Bearer realm="api", error="invalid_request", error_description="query-token"'
    )


@pytest.mark.parametrize(
    "value",
    ["Bearer\t{token}", "Bearer \t {token}", "bearer\t\t{token}"],
    ids=["tab-separator", "mixed-whitespace", "two-tabs"],
)
def test_whitespace_around_the_scheme_still_reads_the_credentials(client, value):
    # RFC 9110 optional whitespace: once read as "no credentials" (a bare 401).
    response = client.get("/me", headers=[(b"Authorization", value.format(token=mint()).encode())])
    assert response.status_code == 200
    assert response.json()["sub"] == "user-1"


@pytest.mark.parametrize(
    ("value", "scheme", "token"),
    [
        (b" Bearer abc", "Bearer", b"abc"),
        (b"\tBearer abc", "Bearer", b"abc"),
        (b"Bearer\tabc\t", "Bearer", b"abc"),
        (b"BEARER  abc", "Bearer", b"abc"),
        (b"Basic abc", None, None),
        (b"Bearerabc", None, None),
    ],
    ids=[
        "leading-space",
        "leading-tab",
        "tab-around",
        "two-spaces",
        "other-scheme",
        "no-separator",
    ],
)
def test_the_credentials_reader_trims_optional_whitespace(value, scheme, token):
    # Leading whitespace never crosses h11, but other servers pass it through:
    # the reader once read " Bearer <token>" as no credentials.
    scope = {"type": "http", "headers": [(b"authorization", value)], "query_string": b""}
    read = read_credentials(scope, {b"bearer": "Bearer"}, Challenges(None, 5))
    assert (read and read.scheme, read and read.token) == (scheme, token)


@pytest.mark.parametrize(
    "query",
    ["access%5Ftoken=x", "%61ccess_token=x", "page=1&access%5ftoken=", "access_token"],
    ids=["escaped-underscore", "escaped-letter", "lower-case-escape", "bare-name"],
)
def test_an_encoded_query_token_is_still_refused(client, query):
    # ?access%5Ftoken= once escaped the query-token check (a plain byte search).
    response = client.get(f"/me?{query}", headers=bearer(mint()))
    assert response.status_code == 400
    assert problem(response)["reason"] == "multiple-tokens"
    assert client.get(f"/me?{query}").json()["reason"] == "query-token"


def test_empty_bearer_credentials_are_invalid_request(client):
    response = client.get("/me", headers={"Authorization": "Bearer"})
    assert response.status_code == 400
    assert 'error_description="empty-token"' in response.headers["www-authenticate"]


# -- 503 -----------------------------------------------------------------------------------


def network_verifier(url: str, **settings: Any) -> JWTVerifier:
    settings.setdefault("audience", AUDIENCE)
    return JWTVerifier(jwks_url=url, allow_insecure_loopback=True, clock=lambda: NOW, **settings)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_lifespan_loads_network_keys_at_startup_and_stops_the_refresh_at_shutdown():
    signer = private_key("ES256", kid="k1")
    with documents({"/jwks.json": {"keys": [signer.public_jwk()]}}) as (base, log):
        verifier = network_verifier(f"{base}/jwks.json")
        app, auth = build(verifier)
        app.add_api_route("/ready", auth.readiness)
        assert not verifier.health().ready
        with serve(app) as client:
            # keys were fetched during startup, before any request
            assert log == ["/jwks.json"]
            assert verifier.health().ready
            assert client.get("/ready").json()["ready"] is True
            token = signer.mint({"aud": AUDIENCE, "sub": "net", "exp": NOW + 60})
            assert client.get("/me", headers=bearer(token)).json()["sub"] == "net"
        # shutdown ran aclose(): the background refresh task is gone
        (source,) = verifier._key_sources()  # type: ignore[attr-defined]
        assert source._background is None
        assert source._closed


def test_keys_unavailable_is_503_with_retry_after_and_not_ready():
    verifier = network_verifier(f"http://127.0.0.1:{closed_port()}/jwks.json")
    app, auth = build(verifier, retry_after=7)
    app.add_api_route("/ready", auth.readiness)
    with serve(app) as client:  # a key source that is down does not stop startup
        response = client.get("/me", headers=bearer(mint()))
        ready = client.get("/ready")
    assert response.status_code == 503
    # When the key source loads again (about a second away, with jitter), not the fallback.
    assert response.headers["retry-after"] in ("1", "2")
    assert "www-authenticate" not in response.headers
    assert problem(response)["reason"] == "keys-unavailable"
    assert problem(response)["wait"] == "provider-failing"  # every 503 says what it waits for
    assert ready.status_code == 503
    # The real time to the next attempt (about a second while no keys are
    # held), not the fixed fallback (7) the dependency was given.
    assert ready.headers["retry-after"] in ("1", "2")
    assert ready.json()["ready"] is False


def test_websocket_keys_unavailable_closes_with_1013():
    verifier = network_verifier(f"http://127.0.0.1:{closed_port()}/jwks.json")
    app, _ = build(verifier)
    running = Running(app)
    assert running.start()
    try:
        url = running.url.replace("http://", "ws://")
        with connect(f"{url}/ws", additional_headers=bearer(mint())) as ws:
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=HANG_GUARD)
    finally:
        running.stop()
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 1013
    assert closed.value.rcvd.reason == "keys-unavailable"


def test_discovery_shows_an_openid_connect_scheme(server: DocumentServer):
    signer = private_key("ES256", kid="k1")
    base = server.url("")
    issuer = f"{base}/"
    server.set("/jwks.json", jwks_of(signer))
    server.set(
        "/.well-known/openid-configuration", {"issuer": issuer, "jwks_uri": f"{base}/jwks.json"}
    )
    verifier = JWTVerifier(
        discover=issuer, allow_insecure_loopback=True, audience=AUDIENCE, clock=lambda: NOW
    )
    app, _ = build(verifier)
    with serve(app) as client:
        schemes = client.get("/openapi.json").json()["components"]["securitySchemes"]
        token = signer.mint({"iss": issuer, "aud": AUDIENCE, "sub": "oidc", "exp": NOW + 60})
        assert client.get("/me", headers=bearer(token)).json()["sub"] == "oidc"
    assert verifier.discovery_url == f"{base}/.well-known/openid-configuration"
    assert make_verifier().discovery_url is None
    assert schemes == {
        "JWTBearer": {
            "type": "openIdConnect",
            "openIdConnectUrl": f"{base}/.well-known/openid-configuration",
        }
    }


def test_verification_runs_on_the_event_loop_thread_even_for_sync_routes():
    seen: list[str] = []
    verifier = make_verifier(on_reject=lambda error: seen.append(threading.current_thread().name))
    app, _ = build(verifier)  # /me is a sync route: FastAPI runs its body in a worker thread
    running = Running(app)
    assert running.start()
    try:
        with httpx.Client(base_url=running.url) as client:
            assert client.get("/me", headers=bearer(mint(exp=NOW - 1))).status_code == 401
    finally:
        running.stop()
    assert seen == [running.thread.name]


# -- variants ------------------------------------------------------------------------------


def test_optional_gives_none_to_anonymous_requests_only(client):
    assert client.get("/maybe").json() == {"sub": None}
    assert client.get("/maybe", headers=bearer(mint())).json() == {"sub": "user-1"}
    refused = client.get("/maybe", headers=bearer(mint(exp=NOW - 1)))
    assert refused.status_code == 401
    assert 'error_description="expired"' in refused.headers["www-authenticate"]


def test_optional_is_the_same_dependency_class_and_settings():
    class Custom(JWTBearer):
        extra = "kept"

    auth = Custom(make_verifier(), realm="x", permissions=True)
    optional = auth.optional
    assert type(optional) is Custom
    assert (optional.auto_error, auth.auto_error) == (False, True)
    assert (optional.realm, optional.permissions, optional.extra) == ("x", True, "kept")
    assert optional.optional is optional
    assert auth.optional is optional


def test_typed_claims(client):
    response = client.get("/profile", headers=bearer(mint(tenant=7)))
    assert response.status_code == 200
    assert response.json() == {"sub": "user-1", "tenant": 7}


def test_claims_that_do_not_fit_the_model_are_401_without_echo(client, caplog):
    response = client.get("/profile", headers=bearer(mint(tenant="SECRET-TENANT-VALUE")))
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == (
        'Bearer realm="api", error="invalid_token", error_description="invalid-claim"'
    )
    assert problem(response)["reason"] == "invalid-claim"
    assert "SECRET-TENANT-VALUE" not in response.text


def test_typed_claims_with_scopes(client):
    ok = client.get("/profile-scoped", headers=bearer(mint(tenant=1, scope="read:items")))
    assert ok.status_code == 200
    denied = client.get("/profile-scoped", headers=bearer(mint(tenant=1)))
    assert denied.status_code == 403
    assert 'scope="read:items"' in denied.headers["www-authenticate"]


def test_without_install_the_default_handler_keeps_the_rfc6750_headers():
    app, _ = build(install=False, realm=None)
    with serve(app) as client:
        missing = client.get("/me")
        expired = client.get("/me", headers=bearer(mint(exp=NOW - 1)))
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == "Bearer"
    assert missing.json() == {"detail": "A bearer token is required."}
    assert expired.headers["www-authenticate"] == (
        'Bearer error="invalid_token", error_description="expired"'
    )


# -- OpenAPI ---------------------------------------------------------------------------------


def test_openapi_shows_a_bearer_scheme_with_scopes_and_docs_stay_open(client):
    assert client.get("/docs").status_code == 200
    response = client.get("/openapi.json")
    assert response.status_code == 200
    document = response.json()
    assert document["components"]["securitySchemes"] == {
        "JWTBearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
    }
    paths = document["paths"]
    assert paths["/me"]["get"]["security"] == [{"JWTBearer": []}]
    assert paths["/items"]["get"]["security"] == [{"JWTBearer": ["read:items"]}]
    assert paths["/admin"]["get"]["security"] == [{"JWTBearer": ["read:items", "admin"]}]
    assert paths["/profile-scoped"]["get"]["security"] == [{"JWTBearer": ["read:items"]}]
    assert "security" not in paths["/public"]["get"]
    # no query parameter leaks in from the dependency
    assert "parameters" not in paths["/me"]["get"]
    me_schema = paths["/me"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert me_schema["type"] == "object"


def test_openid_connect_scheme_when_asked():
    app, _ = build(openid_connect_url="https://idp.example.com/.well-known/openid-configuration")
    with serve(app) as client:
        schemes = client.get("/openapi.json").json()["components"]["securitySchemes"]
    assert schemes == {
        "JWTBearer": {
            "type": "openIdConnect",
            "openIdConnectUrl": "https://idp.example.com/.well-known/openid-configuration",
        }
    }


# -- lifespan and readiness ------------------------------------------------------------------


def test_install_keeps_the_apps_own_lifespan_and_readiness_reports():
    events: list[str] = []

    @asynccontextmanager
    async def own(app: FastAPI) -> AsyncIterator[dict[str, str]]:
        events.append("start")
        yield {"greeting": "hi"}
        events.append("stop")

    auth = JWTBearer(make_verifier())
    app = FastAPI(lifespan=own)
    auth.install(app)
    app.add_api_route("/ready", auth.readiness)

    with serve(app) as client:
        assert events == ["start"]
        ready = client.get("/ready")
    assert events == ["start", "stop"]
    assert ready.status_code == 200
    assert ready.json()["ready"] is True


def test_lifespan_argument_runs_the_key_lifespan():
    auth = JWTBearer(make_verifier())
    app = FastAPI(lifespan=auth.lifespan)
    auth.install(app)  # does not wrap a second time
    assert app.router.lifespan_context.__self__ is auth  # type: ignore[attr-defined]

    @app.get("/me")
    def me(claims: Annotated[Claims, Depends(auth)]) -> Claims:
        return claims

    with serve(app) as client:
        assert client.get("/me", headers=bearer(mint())).status_code == 200


# -- websockets ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ws_url(client: httpx.Client) -> str:
    return str(client.base_url).replace("http://", "ws://")


def test_websocket_with_an_authorization_header(ws_url):
    with connect(f"{ws_url}/ws", additional_headers=bearer(mint())) as ws:
        assert ws.recv(timeout=HANG_GUARD) == "hello user-1"


def test_websocket_with_the_token_as_subprotocol(ws_url):
    with connect(f"{ws_url}/ws", subprotocols=["bearer", mint()]) as ws:  # type: ignore[list-item]
        assert ws.subprotocol == "bearer"
        assert ws.recv(timeout=HANG_GUARD) == "hello user-1"


@pytest.mark.parametrize(
    ("path", "kwargs", "reason"),
    [
        ("/ws", {}, "missing-token"),
        ("/ws", {"additional_headers": {"Authorization": f"Bearer {tamper(mint())}"}}, "signature"),
        ("/ws", {"subprotocols": ["bearer", mint(exp=NOW - 5)]}, "expired"),
        (
            "/ws-scoped",
            {"additional_headers": {"Authorization": f"Bearer {mint()}"}},
            "insufficient-scope",
        ),
    ],
    ids=["no-token", "forged", "expired-subprotocol", "scope"],
)
def test_websocket_refusal_closes_with_1008(ws_url, path, kwargs, reason):
    with connect(f"{ws_url}{path}", **kwargs) as ws:
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=HANG_GUARD)
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 1008
    assert closed.value.rcvd.reason == reason


def test_websocket_scoped_accepts_with_the_scope(ws_url):
    headers = bearer(mint(scope="admin"))
    with connect(f"{ws_url}/ws-scoped", additional_headers=headers) as ws:
        assert ws.recv(timeout=HANG_GUARD) == "admin user-1"


# -- the Depends(verifier.verify) mistake --------------------------------------------------------


@pytest.mark.parametrize("attribute", ["verify", "verify_async"])
@pytest.mark.parametrize("setup", ["plain", "lifespan", "install-first"])
def test_depends_verifier_verify_is_refused_when_the_route_is_declared(attribute, setup):
    # Even in an app that never touches our glue: FastAPI would otherwise read
    # the token (and now=) from the query string.
    verifier = make_verifier()
    auth = JWTBearer(verifier)
    app = FastAPI(lifespan=auth.lifespan) if setup == "lifespan" else FastAPI()
    if setup == "install-first":
        auth.install(app)

    with pytest.raises(ConfigurationError, match=r"query string.*JWTBearer\(verifier\)"):

        @app.get("/x")
        def x(claims: Annotated[Claims, Depends(getattr(verifier, attribute))]) -> Claims:
            return claims

    assert not [r for r in app.routes if getattr(r, "path", None) == "/x"]
    check_routes(app)  # nothing half-registered is left behind


def test_a_users_own_verify_function_is_not_flagged():
    def verify(token: str, now: float | None = None) -> dict[str, str]:
        return {}

    app = FastAPI()

    @app.get("/x")
    def x(claims: Annotated[dict[str, str], Depends(verify)]) -> dict[str, str]:
        return claims

    check_routes(app)


def test_construction_refusals():
    verifier = make_verifier()
    with pytest.raises(ConfigurationError, match=r"JWTBearer\(verifier\)"):
        JWTBearer(verifier.verify)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="realm"):
        JWTBearer(verifier, realm='a"b')
    with pytest.raises(ConfigurationError, match="retry_after"):
        JWTBearer(verifier, retry_after=-1)
    with pytest.raises(ConfigurationError, match="permissions"):
        JWTBearer(verifier, permissions="no")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="pydantic"):
        JWTBearer(verifier).as_model(dict)


# -- the demo ------------------------------------------------------------------------------------


def test_demo_prints_each_answer_and_stops_cleanly(demo: tuple[str, dict[str, str]]):
    out, blocks = demo
    expected = {
        "valid token, scope read:items": ("HTTP/1.1 200 OK", "WWW-Authenticate: (none)"),
        "expired token": (
            "HTTP/1.1 401 Unauthorized",
            'WWW-Authenticate: Bearer realm="demo", error="invalid_token", '
            'error_description="expired"',
        ),
        "wrong audience": (
            "HTTP/1.1 401 Unauthorized",
            'WWW-Authenticate: Bearer realm="demo", error="invalid_token", '
            'error_description="audience"',
        ),
        "token lacking the scope": (
            "HTTP/1.1 403 Forbidden",
            'WWW-Authenticate: Bearer realm="demo", error="insufficient_scope", scope="read:items"',
        ),
        "forged signature": (
            "HTTP/1.1 401 Unauthorized",
            'WWW-Authenticate: Bearer realm="demo", error="invalid_token", '
            'error_description="signature"',
        ),
        "no token": ("HTTP/1.1 401 Unauthorized", 'WWW-Authenticate: Bearer realm="demo"'),
    }
    for title, (status, challenge) in expected.items():
        lines = blocks[title].splitlines()
        assert lines[2] == status, blocks[title]
        assert lines[3] == challenge, blocks[title]
    assert '"reason":"expired"' in blocks["expired token"]
    assert '"owner":"alice"' in blocks["valid token, scope read:items"]
    assert out.rstrip().endswith("service stopped cleanly")
