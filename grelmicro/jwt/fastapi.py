"""FastAPI glue: a dependency that guards routes with a :class:`JWTVerifier`.

Example:
    >>> from fastapi import Depends, FastAPI, Security
    >>> from grelmicro.jwt import Claims, JWTVerifier
    >>> from grelmicro.jwt.fastapi import JWTBearer
    >>> verifier = JWTVerifier(jwks_url=..., audience="https://api.example.com")  # doctest: +SKIP
    >>> auth = JWTBearer(verifier, realm="api")  # doctest: +SKIP
    >>> app = FastAPI(lifespan=auth.lifespan)  # doctest: +SKIP
    >>> auth.install(app)  # doctest: +SKIP
    >>> @app.get("/items")  # doctest: +SKIP
    ... def items(claims: Claims = Security(auth, scopes=["read:items"])) -> Claims:
    ...     return claims

The dependency answers as RFC 6750 says a bearer-token resource server must:

- no credentials, or another scheme: 401 ``WWW-Authenticate: Bearer``;
- a refused token: 401 ``Bearer error="invalid_token", error_description="<reason>"``
  where the reason is the stable :attr:`TokenRejectedError.reason`;
- a missing scope (checked only once the token verified): 403
  ``Bearer error="insufficient_scope", scope="..."``;
- two tokens (two ``Authorization`` headers, header and query string) or an
  empty one: 400 ``Bearer error="invalid_request"``;
- no keys to verify with: 503 with ``Retry-After``.

With :meth:`JWTBearer.install` the bodies are RFC 9457 problem details
(``application/problem+json``) carrying the same reason. Verification runs
inline on the event loop: a verification (or a cache hit) costs far less than a
hop to a worker thread. This is the only module of ``grelmicro.jwt`` that
imports FastAPI.
"""

import copy
import inspect
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from http import HTTPStatus
from typing import Annotated, Any, TypeVar
from urllib.parse import parse_qsl

from fastapi import Depends, FastAPI
from fastapi.openapi.models import HTTPBearer as HTTPBearerModel
from fastapi.openapi.models import OpenIdConnect as OpenIdConnectModel
from fastapi.routing import APIRoute, APIWebSocketRoute
from fastapi.security import SecurityScopes
from fastapi.security.base import SecurityBase
from pydantic import ValidationError
from starlette.exceptions import HTTPException, WebSocketException
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response
from starlette.types import Scope
from starlette.websockets import WebSocket, WebSocketState

from grelmicro.jwt._claims import Claims
from grelmicro.jwt._config import check_flags
from grelmicro.jwt._verifier import JWTVerifier
from grelmicro.jwt.errors import (
    ConfigurationError,
    KeysUnavailableError,
    TokenRejectedError,
)

__all__ = [
    "SUBPROTOCOL",
    "BearerError",
    "JWTBearer",
    "check_routes",
    "problem_response",
]

logger = logging.getLogger("grelmicro.jwt")

M = TypeVar("M")

#: The websocket subprotocol that announces a token: a client that cannot set
#: headers offers ``Sec-WebSocket-Protocol: bearer, <token>``.
SUBPROTOCOL = "bearer"

#: What a problem body says for each stable reason (fixed text: the body never
#: carries the verifier's message, which may name configured values).
_DETAILS = {
    "malformed": "The token is not a well-formed compact JWS.",
    "too-large": "The token is too large.",
    "unsupported": "The token uses a JOSE feature this service does not accept.",
    "algorithm": "The token's algorithm is not accepted.",
    "unknown-key": "The token was not signed by a known key.",
    "signature": "The token's signature does not verify.",
    "type": "The token's type is not accepted.",
    "expired": "The token has expired.",
    "not-yet-valid": "The token is not valid yet.",
    "issued-in-future": "The token claims to be issued in the future.",
    "too-old": "The token is older than this service accepts.",
    "audience": "The token is not meant for this service.",
    "issuer": "The token's issuer is not trusted by this service.",
    "missing-claim": "The token lacks a required claim.",
    "invalid-claim": "A claim of the token has the wrong type or value.",
    "dpop-binding": "The token is bound to a DPoP key; present it with the DPoP scheme.",
}

_RETRY_AFTER = 5


class BearerError(HTTPException):
    """A refusal as RFC 6750 words it: status, challenge header and problem body.

    ``error`` is the RFC 6750 error code (``invalid_token``,
    ``insufficient_scope``, ``invalid_request``) or ``None`` when the request
    carried no credentials; ``reason`` is the stable kebab-case reason.
    """

    def __init__(
        self,
        status_code: int,
        *,
        error: str | None,
        reason: str,
        detail: str,
        headers: dict[str, str],
    ) -> None:
        super().__init__(status_code, detail, headers)
        self.error = error
        self.reason = reason

    def problem(self) -> dict[str, Any]:
        """The RFC 9457 problem document for this refusal."""
        body: dict[str, Any] = {
            "type": "about:blank",
            "title": HTTPStatus(self.status_code).phrase,
            "status": self.status_code,
            "detail": self.detail,
        }
        if self.error is not None:
            body["error"] = self.error
        body["reason"] = self.reason
        return body


async def problem_response(request: Request, exc: Exception) -> JSONResponse:  # noqa: ARG001
    """Exception handler: a :class:`BearerError` as ``application/problem+json``."""
    if not isinstance(exc, BearerError):  # pragma: no cover - registered for BearerError only
        raise exc
    return JSONResponse(
        exc.problem(),
        status_code=exc.status_code,
        headers=exc.headers,
        media_type="application/problem+json",
    )


def _quoted(value: str, what: str) -> str:
    """``value`` as an RFC 9110 quoted-string body; refuse what cannot be quoted."""
    if any(ord(char) < 0x20 or ord(char) == 0x7F or char in '"\\' for char in value):
        raise ConfigurationError(
            f"{what} may not contain quotes, backslashes or control characters"
        )
    return value


class JWTBearer(SecurityBase):
    """A FastAPI dependency that reads the bearer token and verifies it.

    Use it as ``claims: Claims = Depends(auth)``, or ``Security(auth,
    scopes=[...])`` to require scopes, per route or in a router's
    ``dependencies``. :attr:`optional` gives ``None`` for an anonymous request
    instead of a 401; :meth:`as_model` gives the claims as a pydantic model.

    Args:
        verifier: the :class:`JWTVerifier` that checks every token.
        realm: the ``realm`` of the ``WWW-Authenticate`` challenges.
        scheme_name: the security scheme's name in the OpenAPI document.
        description: the security scheme's description in the OpenAPI document.
        permissions: also read granted scopes from ``permissions`` (Auth0 RBAC);
            ``scope`` (space-separated) and ``scp`` (string or array) always count.
        retry_after: seconds sent in ``Retry-After`` with a 503.
        openid_connect_url: show an OpenID Connect scheme with this discovery
            URL in the OpenAPI document instead of an HTTP bearer scheme (by
            default taken from a verifier built with OIDC discovery).
        auto_error: ``False`` answers an anonymous request with ``None``
            rather than a 401 (a bad token is still a 401).
    """

    def __init__(
        self,
        verifier: JWTVerifier,
        *,
        realm: str | None = None,
        scheme_name: str | None = None,
        description: str | None = None,
        permissions: bool = False,
        retry_after: int = _RETRY_AFTER,
        openid_connect_url: str | None = None,
        auto_error: bool = True,
    ) -> None:
        if not isinstance(verifier, JWTVerifier):
            raise ConfigurationError(
                "JWTBearer takes the JWTVerifier itself (JWTBearer(verifier)), "
                f"not {type(verifier).__name__}"
            )
        check_flags(permissions=permissions, auto_error=auto_error)
        if isinstance(retry_after, bool) or not isinstance(retry_after, int) or retry_after < 0:
            raise ConfigurationError("retry_after must be a whole number of seconds, 0 or more")
        self.verifier = verifier
        self.realm = realm
        self.permissions = permissions
        self.retry_after = retry_after
        self.auto_error = auto_error
        self.scheme_name = scheme_name or "JWTBearer"
        url = openid_connect_url or _discovery_url(verifier)
        self.model = (
            OpenIdConnectModel(openIdConnectUrl=url, description=description)
            if url
            else HTTPBearerModel(bearerFormat="JWT", description=description)
        )
        # The constructor options, for variants built by subclasses (DPoPBearer.optional).
        self._options: dict[str, Any] = {
            "realm": realm,
            "scheme_name": scheme_name,
            "description": description,
            "permissions": permissions,
            "retry_after": retry_after,
            "openid_connect_url": openid_connect_url,
        }
        # Challenge strings are built once; a refusal only appends its error.
        self._challenge = "Bearer" if realm is None else f'Bearer realm="{_quoted(realm, "realm")}"'
        self._error_prefix = "Bearer " if realm is None else self._challenge + ", "
        self._models: dict[type[Any], Callable[..., Awaitable[Any]]] = {}
        self._optional: JWTBearer | None = None

    def __repr__(self) -> str:
        mode = "" if self.auto_error else ", auto_error=False"
        return f"JWTBearer({self.scheme_name!r}{mode})"

    # -- the dependency ------------------------------------------------------

    async def __call__(
        self, connection: HTTPConnection, security_scopes: SecurityScopes
    ) -> Claims | None:
        """Verify the request's bearer token; the claims, or ``None`` if anonymous and allowed.

        The one request flow: read the credentials, verify the token, check
        what binds it to the request, check the scopes. :class:`DPoPBearer`
        changes the three steps that differ (``_credentials``,
        ``_check_binding``, ``_token_refused``), not the flow.
        """
        try:
            credentials = self._credentials(connection.scope)
            if credentials is None:
                if self.auto_error:
                    raise self._missing()
                return None
            scheme, token, proof = credentials
            try:
                claims = self.verifier.verify(token)
            except KeysUnavailableError:
                # Network keys may be rotating or still loading: the async path
                # waits for the fetch the sync one started, and reports once.
                claims = await self._refreshing(scheme, token)
            except TokenRejectedError as exc:
                raise self._token_refused(scheme, exc.reason) from None
            self._check_binding(connection, scheme, token, proof, claims)
            if security_scopes.scopes:
                self._check_scopes(claims, security_scopes.scopes)
        except BearerError as exc:
            if connection.scope["type"] == "websocket":
                await self._close(connection, exc)
            raise
        return claims

    async def _refreshing(self, scheme: str, token: bytes) -> Claims:
        try:
            return await self.verifier.verify_async(token)
        except TokenRejectedError as exc:
            raise self._token_refused(scheme, exc.reason) from None
        except KeysUnavailableError as exc:
            error = self._unavailable()
            if exc.retry_after is not None:  # when the key source may fetch again
                seconds = str(max(1, math.ceil(exc.retry_after)))
                error.headers = {**(error.headers or {}), "Retry-After": seconds}
            raise error from None

    def _credentials(self, scope: Scope) -> tuple[str, bytes, bytes | None] | None:
        """``(scheme, token, proof)`` of the request, ``None`` without credentials."""
        token = self._token(scope)
        return None if token is None else ("Bearer", token, None)

    def _check_binding(  # the arguments are for DPoPBearer's proof check
        self,
        connection: HTTPConnection,  # noqa: ARG002
        scheme: str,  # noqa: ARG002
        token: bytes,  # noqa: ARG002
        proof: bytes | None,  # noqa: ARG002
        claims: Claims,
    ) -> None:
        """A DPoP-bound token is never a bearer token (RFC 9449 §7.2).

        Its holder must also prove possession of its key.
        """
        if _is_bound(claims):
            raise self._invalid_token("dpop-binding")

    def _token_refused(self, scheme: str, reason: str) -> BearerError:  # noqa: ARG002
        """The refusal of a token presented with ``scheme`` (DPoPBearer words it per scheme)."""
        return self._invalid_token(reason)

    def _authorization(self, scope: Scope) -> bytes | None:
        """The request's one ``Authorization`` header, ``None`` if it has none."""
        value: bytes | None = None
        for name, raw in scope["headers"]:
            if name == b"authorization":
                if value is not None:
                    raise self._invalid_request(
                        "multiple-tokens", "The request carries more than one Authorization header."
                    )
                value = raw
        return value

    def _token(self, scope: Scope) -> bytes | None:
        """The bearer token of the request, ``None`` if it carries none."""
        value = self._authorization(scope)
        query = scope.get("query_string")
        if query and b"access_token" in query and _has_query_token(query):
            if value is not None:
                raise self._invalid_request(
                    "multiple-tokens", "The request carries a token in the header and the URL."
                )
            raise self._invalid_request(
                "query-token",
                "Tokens in the URL are not accepted; send an Authorization: Bearer header.",
            )
        if scope["type"] == "websocket":
            offered = _subprotocol_token(scope)
            if offered is not None:
                if value is not None:
                    raise self._invalid_request(
                        "multiple-tokens",
                        "The request carries a token in the header and the subprotocol.",
                    )
                return offered
        if value is None:
            return None
        scheme, _, credentials = value.partition(b" ")
        if scheme.lower() != b"bearer":
            return None  # another scheme: not ours, answered like no credentials
        token = credentials.lstrip(b" ")
        if not token:
            raise self._invalid_request("empty-token", "The Bearer credentials are empty.")
        return token

    def _check_scopes(self, claims: Claims, required: list[str]) -> None:
        granted = self._granted(claims)
        for scope in required:
            if scope not in granted:
                raise self._insufficient_scope(required)

    def _granted(self, claims: Claims) -> set[str]:
        """Scopes the token grants: ``scope``, ``scp`` and, if asked, ``permissions``."""
        granted: set[str] = set()
        names = ("scope", "scp", "permissions") if self.permissions else ("scope", "scp")
        for name in names:
            value = claims.get(name)
            if isinstance(value, str):
                granted.update(value.split())
            elif isinstance(value, tuple):
                granted.update(item for item in value if isinstance(item, str))
        return granted

    # -- refusals ------------------------------------------------------------

    def _missing(self) -> BearerError:
        return BearerError(
            401,
            error=None,
            reason="missing-token",
            detail="A bearer token is required.",
            headers={"WWW-Authenticate": self._challenge},
        )

    def _refusal(
        self,
        status_code: int,
        error: str,
        reason: str,
        detail: str,
        attributes: str,
        *,
        prefix: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> BearerError:
        """A refusal whose challenge names ``error``: ``<prefix>error="<error>", <attributes>``.

        ``prefix`` is the scheme and realm (by default the Bearer ones);
        ``headers`` are sent after ``WWW-Authenticate``.
        """
        challenge = (self._error_prefix if prefix is None else prefix) + f'error="{error}", '
        return BearerError(
            status_code,
            error=error,
            reason=reason,
            detail=detail,
            headers={"WWW-Authenticate": challenge + attributes, **(headers or {})},
        )

    def _invalid_token(self, reason: str) -> BearerError:
        detail = _DETAILS.get(reason, "The token was refused.")
        return self._refusal(401, "invalid_token", reason, detail, f'error_description="{reason}"')

    def _invalid_request(self, reason: str, detail: str) -> BearerError:
        return self._refusal(
            400, "invalid_request", reason, detail, f'error_description="{reason}"'
        )

    def _insufficient_scope(self, required: list[str]) -> BearerError:
        scope = " ".join(_scope_token(item) for item in required)
        detail = f"The token lacks a required scope: {scope}."
        return self._refusal(
            403, "insufficient_scope", "insufficient-scope", detail, f'scope="{scope}"'
        )

    def _unavailable(
        self,
        reason: str = KeysUnavailableError.reason,
        detail: str = "The keys to verify tokens are unavailable; try again later.",
    ) -> BearerError:
        """A 503 with ``Retry-After``: by default, no keys to verify with."""
        return BearerError(
            503,
            error=None,
            reason=reason,
            detail=detail,
            headers={"Retry-After": str(self.retry_after)},
        )

    async def _close(self, connection: HTTPConnection, exc: BearerError) -> None:
        """Refuse a websocket: accept the handshake, then close 1008 (1013 for a 503).

        A close code can only follow an accepted handshake; refusing it
        outright would show the client a bare HTTP 403 without the reason.
        """
        if (
            isinstance(connection, WebSocket)
            and connection.client_state is WebSocketState.CONNECTING
        ):
            await connection.accept(subprotocol=self.subprotocol(connection))
        code = 1013 if exc.status_code == 503 else 1008
        raise WebSocketException(code, reason=exc.reason) from None

    # -- variants ------------------------------------------------------------

    @property
    def optional(self) -> "JWTBearer":
        """The same dependency, answering ``None`` to an anonymous request.

        A request that carries a token still has it verified: a bad token is a
        401, never silently anonymous.
        """
        if not self.auto_error:
            return self
        if self._optional is None:
            # A copy keeps whatever a subclass set up (DPoPBearer's proof checks).
            sibling = copy.copy(self)
            sibling.auto_error = False
            sibling._models = {}
            self._optional = sibling
        return self._optional

    def as_model(self, model: type[M]) -> Callable[..., Awaitable[M]]:
        """A dependency giving the verified claims as ``model`` (a pydantic model class).

        Use ``Depends(auth.as_model(MyClaims))`` or ``Security(auth.as_model(MyClaims),
        scopes=[...])``. Claims that do not fit the model are a 401
        ``invalid_token`` with reason ``invalid-claim``; the body never echoes
        the claims (the field names that failed are logged).
        """
        cached = self._models.get(model)
        if cached is not None:
            return cached
        validate = getattr(model, "model_validate", None)
        if validate is None:
            raise ConfigurationError(f"{model!r} is not a pydantic model class")
        bearer = self

        async def claims_model(
            connection: HTTPConnection, claims: Annotated[Claims | None, Depends(bearer)]
        ) -> Any:
            if claims is None:
                return None
            try:
                return validate(claims.to_dict())
            except ValidationError as exc:
                failed = sorted(
                    {".".join(str(part) for part in error["loc"]) for error in exc.errors()}
                )
                logger.info("token claims do not fit %s (fields: %r)", model.__name__, failed)
                error = bearer._invalid_token("invalid-claim")
            if connection.scope["type"] == "websocket":
                await bearer._close(connection, error)
            raise error

        claims_model.__name__ = f"{model.__name__}_claims"
        self._models[model] = claims_model
        return claims_model

    def subprotocol(self, websocket: HTTPConnection) -> str | None:
        """``"bearer"`` if the client offered it (accept the websocket with it), else ``None``."""
        offered = websocket.scope.get("subprotocols") or ()
        return SUBPROTOCOL if SUBPROTOCOL in offered else None

    # -- application glue ------------------------------------------------------

    def lifespan(self, app: FastAPI) -> AbstractAsyncContextManager[None]:
        """App lifespan: keys loaded at startup, background refresh stopped at shutdown.

        ``FastAPI(lifespan=auth.lifespan)``. Startup also runs
        :func:`check_routes` so a ``Depends(verifier.verify)`` stops the app.
        """
        return self._lifespan(app)

    @asynccontextmanager
    async def _lifespan(self, app: FastAPI | None) -> AsyncIterator[None]:
        if app is not None:
            check_routes(app)
        verifier = self.verifier
        start = getattr(verifier, "start", None)
        if start is not None:
            await start()
        try:
            yield
        finally:
            aclose = getattr(verifier, "aclose", None)
            if aclose is not None:
                await aclose()

    def install(self, app: FastAPI) -> None:
        """Set ``app`` up: problem+json refusals and, unless done, the key lifespan.

        Adds the :class:`BearerError` handler (RFC 9457 bodies) and handlers
        that answer a ``TokenRejectedError`` (401) or ``KeysUnavailableError``
        (503) escaping a route's own code the same way, checks the
        routes declared so far with :func:`check_routes` (and again at
        startup), and wraps the app's lifespan with :meth:`lifespan` unless
        the app was built with ``lifespan=auth.lifespan`` already.
        """
        app.add_exception_handler(BearerError, problem_response)
        # A refusal raised by a route's own verifier call is the client's fault, not a 500.
        escaped: Any = self._escaped  # HTTP and websocket connections both come here
        app.add_exception_handler(TokenRejectedError, escaped)
        app.add_exception_handler(KeysUnavailableError, escaped)
        check_routes(app)
        inner = app.router.lifespan_context
        if getattr(inner, "__self__", None) is self:
            return
        bearer = self

        @asynccontextmanager
        async def lifespan(application: Any) -> AsyncIterator[Any]:
            async with bearer._lifespan(app), inner(application) as state:
                yield state

        app.router.lifespan_context = lifespan

    async def _escaped(self, connection: Any, exc: Exception) -> Response | None:
        """Handler: a verifier error raised in a route's own code, answered like the dependency."""
        if isinstance(exc, TokenRejectedError):
            error = self._invalid_token(exc.reason)
        elif isinstance(exc, KeysUnavailableError):
            error = self._unavailable()
        else:  # pragma: no cover - registered for those two only
            raise exc
        if isinstance(connection, WebSocket):
            if connection.client_state is WebSocketState.CONNECTING:
                await connection.accept(subprotocol=self.subprotocol(connection))
            if connection.application_state is not WebSocketState.DISCONNECTED:
                await connection.close(1013 if error.status_code == 503 else 1008, error.reason)
            return None
        return await problem_response(connection, error)

    async def readiness(self) -> JSONResponse:
        """Readiness endpoint: 200 when keys are loaded and fresh, else 503.

        ``app.add_api_route("/ready", auth.readiness, include_in_schema=False)``.
        """
        health = getattr(self.verifier, "health", None)
        body: dict[str, Any] = {"ready": True}
        if health is not None:
            state = health()
            body["ready"] = bool(state.ready)
            for name in ("key_count", "fetch_count", "stale_uses"):
                value = getattr(state, name, None)
                if isinstance(value, int):
                    body[name] = value
        if body["ready"]:
            return JSONResponse(body)
        return JSONResponse(body, status_code=503, headers={"Retry-After": str(self.retry_after)})


def _is_bound(claims: Claims) -> bool:
    """Whether the token is sender-constrained with DPoP (``cnf.jkt``, RFC 9449 §6)."""
    cnf = claims.get("cnf")
    return isinstance(cnf, Mapping) and cnf.get("jkt") is not None


def _has_query_token(query: bytes) -> bool:
    pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
    return any(name == "access_token" for name, _ in pairs)


def _subprotocol_token(scope: Scope) -> bytes | None:
    """The token offered as ``Sec-WebSocket-Protocol: bearer, <token>``."""
    offered = scope.get("subprotocols") or ()
    for index, name in enumerate(offered[:-1]):
        if name == SUBPROTOCOL:
            return str(offered[index + 1]).encode("latin-1", "replace")
    return None


def _scope_token(scope: str) -> str:
    """A scope as RFC 6749 allows it inside the quoted ``scope`` attribute."""
    return "".join(char for char in scope if 0x21 <= ord(char) <= 0x7E and char not in '"\\')


def _discovery_url(verifier: JWTVerifier) -> str | None:
    """The OIDC discovery URL of a verifier whose only key source is ``discover=``."""
    router = getattr(verifier, "_router", None)
    sources = list(getattr(router, "_sources", None) or ())
    if len(sources) != 1:
        return None
    issuer = getattr(sources[0], "discover", None)
    if not isinstance(issuer, str) or not issuer:
        return None
    return issuer.rstrip("/") + "/.well-known/openid-configuration"


# -- the Depends(verifier.verify) mistake ------------------------------------


def _is_verify_function(call: object) -> bool:
    """Whether ``call`` is a verifier's ``verify``/``verify_async`` (judged by signature).

    As a FastAPI dependency such a function would take ``token`` and ``now``
    from the query string.
    """
    if isinstance(getattr(call, "__self__", None), JWTVerifier):
        return True
    if not str(getattr(call, "__module__", "") or "").startswith("grelmicro"):
        return False
    try:
        parameters = list(inspect.signature(call).parameters.values())  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    names = [parameter.name for parameter in parameters]
    return bool(names) and names[0] == "token" and "now" in names


def _dependants(route: object) -> Iterator[tuple[str, Any]]:
    """``(label, dependant)`` for every route under ``route`` (mounts included)."""
    if isinstance(route, (APIRoute, APIWebSocketRoute)):
        methods = sorted(getattr(route, "methods", None) or {"WEBSOCKET"})
        yield f"{' '.join(methods)} {route.path}", route.dependant
    for child in getattr(route, "routes", None) or ():
        yield from _dependants(child)


def check_routes(app: FastAPI) -> None:
    """Refuse routes that use ``Depends(verifier.verify)``.

    Raises:
        ConfigurationError: a route depends on a verifier's ``verify`` or
            ``verify_async`` directly; the message says what to write instead.
    """
    for label, root in _dependants(app.router):
        stack = [root]
        while stack:
            dependant = stack.pop()
            if dependant.call is not None and _is_verify_function(dependant.call):
                raise ConfigurationError(
                    f"{label}: Depends(verifier.verify) would read the token and `now` "
                    "from the query string. Write `auth = JWTBearer(verifier)` once "
                    "(from grelmicro.jwt.fastapi), then `claims: Claims = Depends(auth)` "
                    "or `Security(auth, scopes=[...])`."
                )
            stack.extend(dependant.dependencies)
