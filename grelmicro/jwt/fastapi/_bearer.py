"""JWTBearer: the request flow, and nothing else.

Read the credentials, let each binding read what it needs, verify the token
(waiting for a key refetch when the keys may be rotating), check the token's
confirmation with the bindings, then the grants the route asks for. Every
refusal is built by :class:`grelmicro.jwt.challenges.Challenges` and the grants
are the public checks (``grelmicro.jwt.require_scopes``...);
app wiring lives in :mod:`grelmicro.jwt.fastapi._app`.

FastAPI reads the annotations of :meth:`JWTBearer.__call__` and of the
dependencies :meth:`JWTBearer.as_model` builds at run time: this module does
not postpone annotations.
"""

import copy
import logging
import weakref
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Annotated, Any, TypeVar

from fastapi import Depends, FastAPI
from fastapi.openapi.models import HTTPBearer as HTTPBearerModel
from fastapi.openapi.models import OpenIdConnect as OpenIdConnectModel
from fastapi.openapi.models import SecurityScheme as SecuritySchemeModel
from fastapi.security import SecurityScopes
from fastapi.security.base import SecurityBase
from pydantic import ValidationError
from starlette.exceptions import WebSocketException
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse
from starlette.websockets import WebSocket, WebSocketState

from grelmicro.jwt import _grants
from grelmicro.jwt._claims import Claims
from grelmicro.jwt._config import check_flags
from grelmicro.jwt._confirmation import JKT, UNBOUND, confirmation
from grelmicro.jwt._steps import Pending
from grelmicro.jwt._verifier import JWTVerifier
from grelmicro.jwt.challenges import BEARER, Refusal
from grelmicro.jwt.errors import (
    AccessDeniedError,
    BindingError,
    ConfigurationError,
    DPoPBindingError,
    GuestRejectedError,
    InvalidClaimError,
    KeysUnavailableError,
    TokenRejectedError,
)
from grelmicro.jwt.fastapi import _app
from grelmicro.jwt.fastapi._bindings import Binding, BoundRequest
from grelmicro.jwt.fastapi._challenges import bearer_challenges
from grelmicro.jwt.fastapi._presentation import SUBPROTOCOL, Presentation, read_credentials
from grelmicro.jwt.otel import answered

__all__ = ["JWTBearer"]

logger = logging.getLogger("grelmicro.jwt")

#: Verifiers already warned about serving requests without a started lifespan.
_UNSTARTED: weakref.WeakSet[JWTVerifier] = weakref.WeakSet()

M = TypeVar("M")

_RETRY_AFTER = 5


class JWTBearer(SecurityBase):
    """A FastAPI dependency that reads the bearer token and verifies it.

    Use it as ``claims: Claims = Depends(auth)``, or ``Security(auth,
    scopes=[...])`` to require scopes, per route or in a router's
    ``dependencies``; ``Security(auth.require_roles("admin"), scopes=[...])``
    also requires roles. :attr:`optional` gives ``None`` for an anonymous
    request instead of a 401; :meth:`as_model` gives the claims as a pydantic
    model.

    Args:
        verifier: the :class:`JWTVerifier` that checks every token.
        realm: the ``realm`` of the ``WWW-Authenticate`` challenges.
        scheme_name: the security scheme's name in the OpenAPI document.
        description: the security scheme's description in the OpenAPI document.
        permissions: also read granted scopes from ``permissions`` (Auth0 RBAC);
            ``scope`` (space-separated) or, without it, ``scp`` (string or
            array) always count, read as ``Claims.scopes`` reads them.
        role_claims: the claim paths roles are read from (default ``"roles"``):
            ``"realm_access.roles"``, ``"resource_access.<client>.roles"``,
            ``"permissions"``, ``"groups"``, ``"cognito:groups"``, or a list.
            A dotted string walks into objects, except one containing ``://``:
            that is one claim name (Auth0's ``"https://example.com/roles"``);
            a tuple of names gives a name with a dot in it.
        bindings: checks of sender-constrained tokens (``cnf``), such as
            :class:`CertificateBinding`; a token bound by a method no binding
            checks is refused.
        retry_after: seconds sent in ``Retry-After`` with a 503.
        openid_connect_url: show an OpenID Connect scheme with this discovery
            URL in the OpenAPI document instead of an HTTP bearer scheme (by
            default taken from a verifier built with OIDC discovery).
        security_scheme: the OpenAPI security scheme to show instead, such as
            ``SwaggerLogin(...).security_scheme()`` for Swagger UI's
            *Authorize* button (authorization code with PKCE).
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
        role_claims: str | Sequence[str | Sequence[str]] | None = None,
        bindings: Iterable[Binding] = (),
        retry_after: int = _RETRY_AFTER,
        openid_connect_url: str | None = None,
        auto_error: bool = True,
        security_scheme: SecuritySchemeModel | None = None,
    ) -> None:
        if not isinstance(verifier, JWTVerifier):
            raise ConfigurationError(
                "JWTBearer takes the JWTVerifier itself (JWTBearer(verifier)), "
                f"not {type(verifier).__name__}"
            )
        check_flags(permissions=permissions, auto_error=auto_error)
        if isinstance(retry_after, bool) or not isinstance(retry_after, int) or retry_after < 0:
            raise ConfigurationError("retry_after must be a whole number of seconds, 0 or more")
        self.bindings = tuple(bindings)
        if not all(isinstance(binding, Binding) for binding in self.bindings):
            raise ConfigurationError("bindings must be Binding instances (CertificateBinding, ...)")
        methods = [binding.method for binding in self.bindings]
        if len(set(methods)) != len(methods):
            raise ConfigurationError("give one binding per confirmation method")
        self.verifier = verifier
        self.realm = realm
        self.permissions = permissions
        self.role_claims = _grants.role_paths(role_claims)
        self.retry_after = retry_after
        self.auto_error = auto_error
        self.scheme_name = scheme_name or "JWTBearer"
        url = openid_connect_url or verifier.discovery_url
        self.model = (
            security_scheme
            if security_scheme is not None
            else OpenIdConnectModel(openIdConnectUrl=url, description=description)
            if url
            else HTTPBearerModel(bearerFormat="JWT", description=description)
        )
        self.challenges = bearer_challenges(realm, retry_after)
        self._schemes = {b"bearer": BEARER}
        for binding in self.bindings:
            binding.configure(self.challenges)
            self._schemes.update(binding.schemes)
        self._checked = frozenset(methods)
        self._required_roles: tuple[str, ...] = ()
        self._required_tenants: tuple[frozenset[str], str | None] | None = None
        self._models: dict[type[Any], Callable[..., Awaitable[Any]]] = {}
        self._optional: JWTBearer | None = None
        self._role_variants: dict[tuple[str, ...], JWTBearer] = {}
        self._start_checked = False

    def __repr__(self) -> str:
        mode = "" if self.auto_error else ", auto_error=False"
        roles = f", roles={list(self._required_roles)!r}" if self._required_roles else ""
        if self._required_tenants is not None:
            roles += f", tenants={sorted(self._required_tenants[0])!r}"
        return f"{type(self).__name__}({self.scheme_name!r}{mode}{roles})"

    # -- the dependency ------------------------------------------------------

    async def __call__(
        self, connection: HTTPConnection, security_scopes: SecurityScopes
    ) -> Claims | None:
        """Verify the request's token; the claims, or ``None`` if anonymous and allowed.

        The one request flow: read the credentials (each binding adds what it
        reads), verify the token, check what binds it to the request, check
        the scopes and roles the route requires.
        """
        if not self._start_checked:
            self._check_started()
        try:
            scope = connection.scope
            presentation = read_credentials(scope, self._schemes, self.challenges)
            if presentation is None:
                if self.auto_error:
                    raise self.challenges.missing()
                return None
            for binding in self.bindings:
                presentation = binding.read(scope, presentation, self.challenges)
            try:
                claims = self.verifier.verify(presentation.token)
            except Pending as pending:  # a fetch this token waits for runs on the loop
                claims = await self._finish(presentation, pending)
            except GuestRejectedError:
                raise self.challenges.guest() from None
            except TokenRejectedError as exc:
                raise self.challenges.invalid_token(exc.reason, presentation.scheme) from None
            except KeysUnavailableError as exc:
                raise self.challenges.keys_unavailable(exc) from None
            if self.bindings or "cnf" in claims:
                await self._check_binding(connection, presentation, claims)
            if security_scopes.scopes or self._required_roles or self._required_tenants:
                self._check_grants(claims, security_scopes.scopes)
        except Refusal as exc:
            answered(self.verifier, exc.status_code, exc.reason)  # telemetry (otel.py)
            if connection.scope["type"] == "websocket":
                await self._close(connection, exc)
            raise
        return claims

    def _check_started(self) -> None:
        """On the first request: warn (once per verifier) when network keys were never started.

        Without ``auth.install(app)`` (or ``await verifier.start()`` in the
        app's lifespan) the keys load on the first request, which waits for
        them, and are refreshed only when requests find them due.
        """
        self._start_checked = True
        sources = self.verifier._key_sources()
        if not sources or any(source.started for source in sources):
            return
        if self.verifier in _UNSTARTED:
            return
        _UNSTARTED.add(self.verifier)
        logger.warning(
            "JWTBearer serves requests with keys from the network, but the verifier was "
            "never started: keys load on the first request and refresh only on requests. "
            "Call auth.install(app), or await verifier.start() in the app's lifespan",
            extra={
                "jwt_event": "verifier.not_started",
                "jwt_sources": [source.source for source in sources],
            },
        )

    async def _finish(self, presentation: Presentation, pending: Pending) -> Claims:
        """Wait for the key fetch the token needs, then its answer (the one place that waits).

        The verification's steps resume on the event loop where the sync
        call left them: the token's arrival stays the start of the request,
        and its outcome is reported once.
        """
        scheme = presentation.scheme
        try:
            claims: Claims = await pending.finish()
        except GuestRejectedError:
            raise self.challenges.guest() from None
        except TokenRejectedError as exc:
            raise self.challenges.invalid_token(exc.reason, scheme) from None
        except KeysUnavailableError as exc:
            raise self.challenges.keys_unavailable(exc) from None
        return claims

    async def _check_binding(
        self, connection: HTTPConnection, presentation: Presentation, claims: Claims
    ) -> None:
        """Every confirmation method in ``cnf`` is checked by a binding, or the token is refused."""
        try:
            bound = confirmation(claims)
        except BindingError as exc:
            raise self.challenges.invalid_token(exc.reason, presentation.scheme) from None
        if self.bindings:
            request = BoundRequest(connection, presentation, claims, bound, self.challenges)
            for binding in self.bindings:
                await binding.check_async(request)
        if bound is UNBOUND:
            return
        refused = bound.unchecked(self._checked)
        if refused is not None:
            # A DPoP-bound token is never a bearer token (RFC 9449 §7.2).
            reason = DPoPBindingError.reason if refused.method == JKT else refused.reason
            raise self.challenges.invalid_token(reason, presentation.scheme)

    def _check_grants(self, claims: Claims, scopes: Sequence[str]) -> None:
        """The route's scopes, roles and tenant: the public checks, answered by the challenges."""
        try:
            if scopes:
                _grants.require_scopes(claims, scopes, permissions=self.permissions)
            if self._required_roles:
                _grants.require_roles(claims, self._required_roles, role_claims=self.role_claims)
            if self._required_tenants is not None:
                tenants, claim = self._required_tenants
                _grants.require_tenant(claims, tenants, claim=claim)
        except AccessDeniedError as exc:
            raise self.challenges.answer(exc) from None

    async def _close(self, connection: HTTPConnection, exc: Refusal) -> None:
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

    def _variant(self, **changes: Any) -> "JWTBearer":
        """A copy with ``changes``: same class, settings, bindings and OpenAPI scheme."""
        sibling = copy.copy(self)
        for name, value in changes.items():
            setattr(sibling, name, value)
        sibling._models = {}
        sibling._optional = None
        sibling._role_variants = {}
        return sibling

    @property
    def optional(self) -> "JWTBearer":
        """The same dependency, answering ``None`` to an anonymous request.

        A request that carries a token still has it verified: a bad token is a
        401, never silently anonymous.
        """
        if not self.auto_error:
            return self
        if self._optional is None:
            self._optional = self._variant(auto_error=False)
        return self._optional

    def require_roles(self, *roles: str) -> "JWTBearer":
        """The same dependency, also requiring every role in ``roles``.

        Roles are read from the ``role_claims`` paths; a token lacking one is
        a 403 whose body names the missing roles (``reason``
        ``insufficient-role``). Use ``Depends(auth.require_roles("admin"))``
        or ``Security(auth.require_roles("admin"), scopes=[...])``.
        """
        if not roles or not all(isinstance(role, str) and role for role in roles):
            raise ConfigurationError("require_roles() takes one or more role names")
        wanted = tuple(dict.fromkeys(self._required_roles + roles))
        cached = self._role_variants.get(wanted)
        if cached is None:
            cached = self._variant(_required_roles=wanted)
            self._role_variants[wanted] = cached
        return cached

    def require_tenant(self, *tenants: str, claim: str | None = None) -> "JWTBearer":
        """The same dependency, also requiring the token's tenant to be one of ``tenants``.

        The tenant is :attr:`Claims.tenant <grelmicro.jwt.Claims.tenant>`:
        read only from the token of an issuer template, from that
        template's tenant claim; another issuer's token has no tenant, even
        with a ``tid``, and is refused here. Another tenant, or none, is a
        403 with reason ``access-denied`` and ``missing: ["tenant"]``; the
        body never shows the token's tenant. The verifier decides which
        tenants may call the service at all (``tenants=``); this narrows one
        route, as ``Depends(auth.require_tenant("<tenant id>"))``.

        ``claim=`` reads that claim from any configured issuer's token
        instead (Auth0 Organizations' ``org_id``): only for a service whose
        every issuer is trusted to set it.
        """
        if not tenants or not all(isinstance(t, str) and t for t in tenants):
            raise ConfigurationError("require_tenant() takes one or more tenant ids")
        if claim is not None and (not isinstance(claim, str) or not claim):
            raise ConfigurationError("require_tenant(claim=) is a claim name")
        if self._required_tenants is not None:
            raise ConfigurationError("require_tenant() is given once per dependency")
        return self._variant(_required_tenants=(frozenset(tenants), claim))

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
                error = bearer.challenges.invalid_token(InvalidClaimError.reason)
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
        return _app.lifespan(self, app)

    def install(self, app: FastAPI) -> None:
        """Set ``app`` up: problem+json refusals and, unless done, the key lifespan.

        Adds the :class:`BearerError` handler (RFC 9457 bodies) and handlers
        that answer a ``TokenRejectedError`` (401) or ``KeysUnavailableError``
        (503) escaping a route's own code the same way, checks the
        routes declared so far with :func:`check_routes` (and again at
        startup), and wraps the app's lifespan with :meth:`lifespan` unless
        the app was built with ``lifespan=auth.lifespan`` already.
        """
        _app.install(self, app)

    async def readiness(self) -> JSONResponse:
        """Readiness endpoint: 200 when keys are loaded and fresh, else 503.

        ``app.add_api_route("/ready", auth.readiness, include_in_schema=False)``.
        """
        return await _app.readiness(self)
