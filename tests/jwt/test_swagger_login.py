"""Swagger UI's Authorize button: the OpenAPI scheme and Swagger UI's settings (issue 39).

What Swagger UI reads is checked here (the ``oauth2`` authorization-code
flow with the full scope names, and ``initOAuth`` with the client id and
PKCE on in the ``/docs`` page); a token carrying the short ``scp`` names
then passes ``Security(auth, scopes=[...])``. The login itself, clicked in
a real browser against a real provider, is ``test_swagger_browser.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI, Security
from forge import NOW, private_key
from servers import serve

from grelmicro.jwt import Claims, ConfigurationError, JWTVerifier
from grelmicro.jwt.fastapi import JWTBearer, SwaggerLogin

TENANT = "0f6b3c4e-2a1d-4c8b-9e7f-1a2b3c4d5e6f"
API = "api://orders-api"


def test_entra_login_shows_full_scope_names_and_routes_check_short_ones() -> None:
    key = private_key("RS256", kid="k1", seed=91)
    login = SwaggerLogin.entra(
        TENANT, client_id="swagger-spa", api=API, scopes={"Orders.Read": "Read orders"}
    )
    verifier = JWTVerifier(
        jwks={"keys": [key.public_jwk()]},
        issuer=f"https://login.microsoftonline.com/{TENANT}/v2.0",
        audience=API,
        clock=lambda: float(NOW),
    )
    auth = JWTBearer(verifier, security_scheme=login.security_scheme())
    app = FastAPI(swagger_ui_init_oauth=login.init_oauth())
    auth.install(app)

    reader = Security(auth, scopes=["Orders.Read"])  # the short name the token carries

    @app.get("/orders")
    def orders(claims: Claims = reader) -> dict[str, Any]:
        return {"sub": claims.subject}

    token = key.mint(
        {
            "iss": f"https://login.microsoftonline.com/{TENANT}/v2.0",
            "aud": API,
            "sub": "u",
            "scp": "Orders.Read",
            "exp": NOW + 600,
        }
    )
    with serve(app) as client:
        scheme = client.get("/openapi.json").json()["components"]["securitySchemes"]["JWTBearer"]
        flow = scheme["flows"]["authorizationCode"]
        assert scheme["type"] == "oauth2"
        assert flow["authorizationUrl"] == (
            f"https://login.microsoftonline.com/{TENANT}/oauth2/v2.0/authorize"
        )
        assert flow["tokenUrl"].endswith("/oauth2/v2.0/token")
        assert flow["scopes"] == {f"{API}/Orders.Read": "Read orders"}
        page = client.get("/docs").text
        assert '"usePkceWithAuthorizationCodeGrant": true' in page
        assert '"clientId": "swagger-spa"' in page
        assert client.get("/docs/oauth2-redirect").status_code == 200
        ok = client.get("/orders", headers={"Authorization": f"Bearer {token}"})
        assert ok.status_code == 200
        assert client.get("/orders").status_code == 401


def test_authorize_params_reach_swagger_ui() -> None:
    login = SwaggerLogin(
        authorization_url="https://idp.example.com/authorize",
        token_url="https://idp.example.com/oauth/token",
        client_id="swagger-spa",
        scopes={"orders:read": "Read orders"},
        authorize_params={"audience": "https://orders.example"},
    )
    app = FastAPI(swagger_ui_init_oauth=login.init_oauth())
    with serve(app) as client:
        page = client.get("/docs").text
    assert '"additionalQueryStringParams": {"audience": "https://orders.example"}' in page


def test_a_login_refuses_what_swagger_could_not_use() -> None:
    with pytest.raises(ConfigurationError):
        SwaggerLogin(authorization_url="", token_url="t", client_id="c", scopes={})
    with pytest.raises(ConfigurationError):
        SwaggerLogin(
            authorization_url="a", token_url="t", client_id="c", scopes={}, selected=("x",)
        )
    with pytest.raises(ConfigurationError, match="authorize_params"):
        SwaggerLogin(
            authorization_url="a",
            token_url="t",
            client_id="c",
            scopes={},
            authorize_params={"audience": 1},  # type: ignore[dict-item]
        )


def test_entra_login_ticks_selected_short_names_and_passes_authorize_params() -> None:
    login = SwaggerLogin.entra(
        TENANT,
        client_id="swagger-spa",
        api=API + "/",
        scopes={"Orders.Read": "Read orders", "Orders.Write": "Change orders"},
        selected=("Orders.Read",),
        authorize_params={"prompt": "select_account"},
    )
    settings = login.init_oauth()
    assert settings["scopes"] == f"{API}/Orders.Read"  # the full name, one ticked
    assert settings["additionalQueryStringParams"] == {"prompt": "select_account"}
    with pytest.raises(ConfigurationError, match="not in scopes"):
        SwaggerLogin.entra(
            TENANT, client_id="c", api=API, scopes={"Orders.Read": "r"}, selected=("Nope",)
        )
