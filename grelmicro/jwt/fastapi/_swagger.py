"""Swagger UI's *Authorize* button: OAuth 2.0 authorization code with PKCE.

FastAPI draws the button from the security scheme of the OpenAPI document.
An ``openIdConnect`` scheme (the default of a verifier built by discovery)
tells Swagger UI where the metadata is, but a working login also needs the
client id of a public client (a single-page app registration), PKCE, and
the scope names the *authorize request* takes, which are not always the
names the token carries: Entra ID asks for ``api://<app>/Orders.Read`` and
writes ``scp: "Orders.Read"``. :class:`SwaggerLogin` holds those three
things and gives both halves: the scheme for :class:`JWTBearer`
(``security_scheme=``) and the ``swagger_ui_init_oauth`` of ``FastAPI(...)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi.openapi.models import OAuth2, OAuthFlowAuthorizationCode, OAuthFlows

from grelmicro.jwt.errors import ConfigurationError

__all__ = ["SwaggerLogin"]


class SwaggerLogin:
    """The authorization-code-with-PKCE login of Swagger UI for one provider.

    Args:
        authorization_url: the provider's ``authorization_endpoint``.
        token_url: the provider's ``token_endpoint``.
        client_id: a *public* client registered for Swagger UI, with the
            redirect URI ``<your app>/docs/oauth2-redirect`` (a single-page
            application platform in Entra ID): no secret is ever sent to a browser.
        scopes: the scope names of the authorize request mapped to a
            description; for Entra ID the full names
            (``api://<app id>/Orders.Read``), while routes check the short
            names the token carries (``Security(auth, scopes=["Orders.Read"])``).
        selected: the scopes ticked when the dialog opens (all by default).
        authorize_params: more parameters of the authorize request, such as
            Auth0's ``audience`` or the ``resource`` of RFC 8707, without
            which some providers issue an opaque token for their own
            ``userinfo`` instead of a JWT for your API. Swagger UI also puts
            them in the query of the token request.
    """

    __slots__ = (
        "authorization_url",
        "authorize_params",
        "client_id",
        "scopes",
        "selected",
        "token_url",
    )

    def __init__(
        self,
        *,
        authorization_url: str,
        token_url: str,
        client_id: str,
        scopes: Mapping[str, str],
        selected: tuple[str, ...] | None = None,
        authorize_params: Mapping[str, str] | None = None,
    ) -> None:
        for name, value in (
            ("authorization_url", authorization_url),
            ("token_url", token_url),
            ("client_id", client_id),
        ):
            if not isinstance(value, str) or not value:
                raise ConfigurationError(f"SwaggerLogin: {name} is a non-empty string")
        if not isinstance(scopes, Mapping) or not all(
            isinstance(k, str) and k and isinstance(v, str) for k, v in scopes.items()
        ):
            raise ConfigurationError("SwaggerLogin: scopes maps scope names to descriptions")
        params = {} if authorize_params is None else authorize_params
        if not isinstance(params, Mapping) or not all(
            isinstance(k, str) and k and isinstance(v, str) for k, v in params.items()
        ):
            raise ConfigurationError("SwaggerLogin: authorize_params maps names to strings")
        self.authorize_params = dict(params)
        self.authorization_url = authorization_url
        self.token_url = token_url
        self.client_id = client_id
        self.scopes = dict(scopes)
        self.selected = tuple(self.scopes) if selected is None else tuple(selected)
        unknown = [name for name in self.selected if name not in self.scopes]
        if unknown:
            raise ConfigurationError(f"SwaggerLogin: selected scopes {unknown!r} are not in scopes")

    @classmethod
    def entra(
        cls,
        tenant: str,
        *,
        client_id: str,
        api: str,
        scopes: Mapping[str, str],
        selected: tuple[str, ...] | None = None,
        authority: str = "https://login.microsoftonline.com",
        authorize_params: Mapping[str, str] | None = None,
    ) -> SwaggerLogin:
        """Entra ID: ``tenant`` (an id, or ``organizations``), the API's ``api://`` URI.

        ``scopes`` maps the short names the token carries (``Orders.Read``)
        to descriptions; the authorize request asks for ``<api>/<name>``.
        ``selected`` names the scopes ticked at first, by their short names
        (default: all); ``authorize_params`` as for the constructor
        (``{"prompt": "select_account"}``, ``{"domain_hint": ...}``).
        """
        base = f"{authority.rstrip('/')}/{tenant}/oauth2/v2.0"
        prefix = api.rstrip("/")
        return cls(
            authorization_url=f"{base}/authorize",
            token_url=f"{base}/token",
            client_id=client_id,
            scopes={f"{prefix}/{name}": text for name, text in scopes.items()},
            selected=None if selected is None else tuple(f"{prefix}/{name}" for name in selected),
            authorize_params=authorize_params,
        )

    def security_scheme(self, description: str | None = None) -> OAuth2:
        """The OpenAPI scheme: ``oauth2`` with one ``authorizationCode`` flow."""
        flow = OAuthFlowAuthorizationCode(
            authorizationUrl=self.authorization_url,
            tokenUrl=self.token_url,
            scopes=self.scopes,
        )
        return OAuth2(flows=OAuthFlows(authorizationCode=flow), description=description)

    def init_oauth(self) -> dict[str, Any]:
        """``FastAPI(swagger_ui_init_oauth=...)``: the client id, PKCE on, the scopes ticked."""
        settings: dict[str, Any] = {
            "clientId": self.client_id,
            "usePkceWithAuthorizationCodeGrant": True,
            "scopes": " ".join(self.selected),
        }
        if self.authorize_params:
            settings["additionalQueryStringParams"] = dict(self.authorize_params)
        return settings
