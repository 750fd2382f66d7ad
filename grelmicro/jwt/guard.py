"""One request's check for any framework: credentials, verification, bindings, grants.

:class:`Guard` is what every integration of this package (Flask, Django
and DRF, the WSGI and ASGI middlewares) calls with what it read from the
request: the ``Authorization`` header, the query string, and for
sender-constrained tokens the ``DPoP`` proof, the method and URL, the client
certificate. It answers the verified :class:`~grelmicro.jwt.Claims`, or
raises a :class:`~grelmicro.jwt.challenges.Refusal` carrying the status,
the headers and the problem body to send. FastAPI's ``JWTBearer`` reads a
Starlette connection instead, but answers through the same
:class:`~grelmicro.jwt.challenges.Challenges` and grant checks.

Example:
    >>> from grelmicro.jwt import JWTVerifier
    >>> from grelmicro.jwt.challenges import Refusal
    >>> from grelmicro.jwt.guard import Guard
    >>> guard = Guard(verifier, realm="orders", role_claims="realm_access.roles")  # doctest: +SKIP
    >>> try:
    ...     claims = guard.authenticate(
    ...         headers.get("Authorization"), scopes=["orders:read"], roles=["clerk"]
    ...     )
    ... except Refusal as refusal:
    ...     respond(refusal.status_code, refusal.header_list(), refusal.body())  # doctest: +SKIP

:func:`readiness` is the ``/ready`` answer of every integration: 200 when
keys are loaded and fresh, else 503 with ``Retry-After`` the real time to
the key source's next attempt.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple, TypedDict
from urllib.parse import parse_qsl

from grelmicro.jwt import _grants
from grelmicro.jwt._claims import Claims
from grelmicro.jwt._confirmation import JKT, X5T_S256, Confirmation, confirmation
from grelmicro.jwt._dpop import DPoPVerifier
from grelmicro.jwt._steps import Pending
from grelmicro.jwt._verifier import JWTVerifier
from grelmicro.jwt.challenges import BEARER, DPOP, Challenges, Refusal, retry_after_seconds
from grelmicro.jwt.errors import (
    AccessDeniedError,
    BindingError,
    CertificateBindingError,
    ConfigurationError,
    DPoPBindingError,
    DPoPProofError,
    DPoPReplayError,
    KeysUnavailableError,
    TokenRejectedError,
)

__all__ = [
    "Guard",
    "GuardSettings",
    "GuardedApp",
    "Readiness",
    "readiness",
    "split_authorization",
]

#: What an ``Authorization`` header may be given as.
Header = str | bytes | Sequence[str | bytes] | None


def split_authorization(value: bytes) -> tuple[bytes, bytes]:
    """``(scheme, credentials)`` of an ``Authorization`` value, whitespace trimmed.

    Spaces and tabs (RFC 9110 optional whitespace; a token68 holds neither)
    around and after the scheme are skipped.
    """
    parts = value.split(None, 1)
    if len(parts) == 2:
        return parts[0], parts[1].rstrip()
    return (parts[0] if parts else b""), b""


def _bytes(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode("latin-1", "replace")


def _has_query_token(query: bytes) -> bool:
    """Whether the query string names ``access_token``, percent-encoded or not."""
    if b"access_token" not in query and b"%" not in query:
        return False
    pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
    return any(name == "access_token" for name, _ in pairs)


def _thumbprint(der: bytes) -> str:
    digest = hashlib.sha256(der).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


class Readiness(NamedTuple):
    """The ``/ready`` answer: status (200 or 503), headers, JSON body."""

    status_code: int
    headers: dict[str, str]
    body: dict[str, Any]


def readiness(verifier: JWTVerifier, retry_after: int = 5) -> Readiness:
    """200 when the verifier's keys are loaded and fresh, else 503 with ``Retry-After``.

    The body says ``ready`` and the key counters; ``problem`` when a
    configuration error keeps keys from loading. ``Retry-After`` is the key
    source's real time to its next attempt (``retry_after`` only when it is
    not known). An issuer template with a ``tenants=`` callable adds
    ``tenant_lookups`` (per template: ``failing``, ``failures``,
    ``timeouts``, ``busy``, ``last_error``; counts, never a tenant id), and
    ``tenant_problem`` while they fail; they leave the status as the keys
    say (failing lookups refuse only tenants not decided yet).
    """
    state = verifier.health()
    body: dict[str, Any] = {"ready": bool(state.ready)}
    for name in ("key_count", "fetch_count", "stale_uses"):
        value = getattr(state, name, None)
        if isinstance(value, int):
            body[name] = value
    if state.problem:  # a configuration error says so, not "keys unavailable"
        body["problem"] = state.problem
    lookups = getattr(state, "tenant_lookups", ())
    if lookups:
        body["tenant_lookups"] = [
            {
                "issuer": each.issuer,
                "failing": each.failing,
                "failures": each.failures,
                "timeouts": each.timeouts,
                "busy": each.busy,
                "last_error": each.last_error,
            }
            for each in lookups
        ]
        failing = [each.problem for each in lookups if each.failing]
        if failing:
            body["tenant_problem"] = "; ".join(failing)
    if body["ready"]:
        return Readiness(200, {}, body)
    seconds = retry_after_seconds(state.retry_after, retry_after)
    return Readiness(503, {"Retry-After": str(seconds)}, body)


class Guard:
    """Checks one request's token, framework-free; every refusal a :class:`Refusal`.

    Args:
        verifier: the :class:`~grelmicro.jwt.JWTVerifier` that checks every token.
        realm: the ``realm`` of the ``WWW-Authenticate`` challenges.
        retry_after: ``Retry-After`` seconds when an error does not say.
        permissions: also count Auth0's ``permissions`` array as scopes.
        role_claims: the claim paths roles are read from (default ``roles``;
            ``"realm_access.roles"`` for Keycloak).
        dpop: a :class:`~grelmicro.jwt.DPoPVerifier`: accept ``Authorization:
            DPoP`` with its proof (then pass ``proof``, ``method`` and ``uri``).
        certificates: check certificate-bound tokens (RFC 8705
            ``cnf.x5t#S256``) against the ``certificate`` passed in.

    A token bound by a confirmation method the guard does not check is
    refused (``unchecked-binding``; ``dpop-binding`` for DPoP): never
    accepted as a plain bearer token.
    """

    def __init__(
        self,
        verifier: JWTVerifier,
        *,
        realm: str | None = None,
        retry_after: int = 5,
        permissions: bool = False,
        role_claims: str | Sequence[str | Sequence[str]] | None = None,
        dpop: DPoPVerifier | None = None,
        certificates: bool = False,
    ) -> None:
        if not isinstance(verifier, JWTVerifier):
            raise ConfigurationError(
                f"Guard takes the JWTVerifier itself, not {type(verifier).__name__}"
            )
        if dpop is not None and not isinstance(dpop, DPoPVerifier):
            raise ConfigurationError("dpop must be a DPoPVerifier")
        for name, flag in (("permissions", permissions), ("certificates", certificates)):
            if not isinstance(flag, bool):
                raise ConfigurationError(f"{name} must be True or False")
        self.verifier = verifier
        self.permissions = permissions
        self.role_claims = _grants.role_paths(role_claims)
        self.challenges = Challenges(realm, retry_after)
        self.dpop = dpop
        self._schemes = {b"bearer": BEARER}
        checked = []
        if dpop is not None and dpop.mode != "off":
            nonces = dpop.nonces
            self.challenges.add_dpop(
                dpop.algorithms, dpop.mode, None if nonces is None else nonces.current
            )
            self._schemes[b"dpop"] = DPOP
            checked.append(JKT)
        if certificates:
            checked.append(X5T_S256)
        self._checked = frozenset(checked)

    def __repr__(self) -> str:
        return f"Guard({self.verifier!r}, realm={self.challenges.realm!r})"

    # -- the flow ------------------------------------------------------------------

    def credentials(self, authorization: Header, query: str | bytes = b"") -> tuple[str, bytes]:
        """``(scheme, token)`` of the request.

        ``authorization``: the ``Authorization`` header's value, or every
        value when the framework gives them all (two are refused).

        Raises:
            Refusal: 401 without credentials (or with another scheme); 400
                ``invalid_request`` for two tokens, a token in the query
                string or empty credentials.
        """
        values = (
            []
            if authorization is None
            else [authorization]
            if isinstance(authorization, (str, bytes))
            else list(authorization)
        )
        challenges = self.challenges
        header = _bytes(values[0]) if values else None
        scheme = BEARER
        if header is not None:
            scheme = self._schemes.get(split_authorization(header)[0].lower(), BEARER)
        if len(values) > 1:
            raise challenges.invalid_request("multiple-tokens", scheme)
        if query and _has_query_token(_bytes(query)):
            raise challenges.invalid_request(
                "query-token" if header is None else "multiple-tokens", scheme
            )
        if header is None:
            raise challenges.missing()
        raw_scheme, token = split_authorization(header)
        known = self._schemes.get(raw_scheme.lower())
        if known is None:
            raise challenges.missing()  # another scheme: not ours
        if not token:
            raise challenges.invalid_request("empty-token", known)
        return known, token

    def authenticate(
        self,
        authorization: Header,
        *,
        query: str | bytes = b"",
        scopes: Iterable[str] = (),
        roles: Iterable[str] = (),
        tenants: Iterable[str] = (),
        tenant_claim: str = "tid",
        proof: str | bytes | None = None,
        method: str = "GET",
        uri: str = "",
        certificate: bytes | None = None,
    ) -> Claims:
        """The request's verified claims, checked for ``scopes``, ``roles`` and ``tenants``.

        Waits (in this thread, at most the verifier's ``key_wait``) for a key
        fetch the token needs. For DPoP give ``proof`` (the ``DPoP`` header),
        ``method`` and ``uri`` (as the client addressed it: the origin it
        knows, not a client-chosen ``Host``); for certificate-bound tokens the
        client ``certificate`` (DER).

        Raises:
            Refusal: the answer to send (401, 400, 403, 429 or 503).
        """
        scheme, token = self.credentials(authorization, query)
        try:
            claims = self.verifier.verify(token)
        except JWTErrors as exc:
            raise self.challenges.answer(exc, scheme) from None
        try:
            bound = confirmation(claims)
            if self._needs_proof(scheme, bound):
                self.dpop.check(  # type: ignore[union-attr] # _needs_proof: a DPoPVerifier
                    scheme=scheme,
                    access_token=token,
                    claims=claims,
                    proof=proof,
                    method=method,
                    uri=uri,
                )
            self._bindings(bound, certificate)
        except BindingErrors as exc:
            raise self.challenges.answer(exc, scheme) from None
        self.check(claims, scopes=scopes, roles=roles, tenants=tenants, tenant_claim=tenant_claim)
        return claims

    async def authenticate_async(
        self,
        authorization: Header,
        *,
        query: str | bytes = b"",
        scopes: Iterable[str] = (),
        roles: Iterable[str] = (),
        tenants: Iterable[str] = (),
        tenant_claim: str = "tid",
        proof: str | bytes | None = None,
        method: str = "GET",
        uri: str = "",
        certificate: bytes | None = None,
    ) -> Claims:
        """:meth:`authenticate` on an event loop: a key fetch is awaited, never blocked on.

        A shared DPoP replay store is awaited too (``check_async``).

        Raises:
            Refusal: the answer to send.
        """
        scheme, token = self.credentials(authorization, query)
        try:
            try:
                claims = self.verifier.verify(token)
            except Pending as pending:  # the fetch runs on the loop; wait for it there
                claims = await pending.finish()
        except JWTErrors as exc:
            raise self.challenges.answer(exc, scheme) from None
        try:
            bound = confirmation(claims)
            if self._needs_proof(scheme, bound):
                await self.dpop.check_async(  # type: ignore[union-attr] # as above
                    scheme=scheme,
                    access_token=token,
                    claims=claims,
                    proof=proof,
                    method=method,
                    uri=uri,
                )
            self._bindings(bound, certificate)
        except BindingErrors as exc:
            raise self.challenges.answer(exc, scheme) from None
        self.check(claims, scopes=scopes, roles=roles, tenants=tenants, tenant_claim=tenant_claim)
        return claims

    def _needs_proof(self, scheme: str, bound: Confirmation) -> bool:
        """Whether the DPoP rules apply: the DPoP scheme, a ``jkt``-bound token, or DPoP only."""
        dpop = self.dpop
        if dpop is None or dpop.mode == "off":
            return False
        return scheme == DPOP or bound.jkt is not None or dpop.mode == "required"

    def _bindings(self, bound: Confirmation, certificate: bytes | None) -> None:
        """The certificate binding; a ``cnf`` method not checked here refuses the token.

        Raises:
            BindingError: the certificate does not match, or a method is unchecked.
        """
        expected = bound.x5t_s256
        if (
            X5T_S256 in self._checked
            and expected is not None
            and (certificate is None or not hmac.compare_digest(_thumbprint(certificate), expected))
        ):
            raise CertificateBindingError("the client certificate does not match")
        refused = bound.unchecked(self._checked)
        if refused is not None:
            if refused.method == JKT:  # a DPoP-bound token is never a bearer token
                raise DPoPBindingError("a DPoP-bound token presented without its proof")
            raise refused

    def check(
        self,
        claims: Claims,
        *,
        scopes: Iterable[str] = (),
        roles: Iterable[str] = (),
        tenants: Iterable[str] = (),
        tenant_claim: str = "tid",
    ) -> None:
        """Require ``scopes``, ``roles`` and one of ``tenants`` of verified ``claims``.

        Raises:
            Refusal: 403 ``insufficient_scope`` (scopes, naming them all), 403
                ``insufficient-role`` or ``access-denied`` (tenant).
        """
        scopes = tuple(scopes)
        roles = tuple(roles)
        tenants = tuple(tenants)
        try:
            if scopes:
                _grants.require_scopes(claims, scopes, permissions=self.permissions)
            if roles:
                _grants.require_roles(claims, roles, role_claims=self.role_claims)
            if tenants:
                _grants.require_tenant(claims, tenants, claim=tenant_claim)
        except AccessDeniedError as exc:
            raise self.challenges.answer(exc) from None

    def answer(self, exc: TokenRejectedError | KeysUnavailableError | AccessDeniedError) -> Refusal:
        """The answer to a verifier error raised by the app's own code (not through the guard)."""
        return self.challenges.answer(exc)

    def readiness(self) -> Readiness:
        """:func:`readiness` of this guard's verifier (``/ready``)."""
        return readiness(self.verifier, self.challenges.retry_after)


#: The errors a verification raises that have an HTTP answer.
JWTErrors = (TokenRejectedError, KeysUnavailableError)
#: The errors of the binding checks (DPoP proof, replay, confirmation).
BindingErrors = (BindingError, DPoPProofError, DPoPReplayError)


class GuardSettings(TypedDict, total=False):
    """What a middleware takes besides its app (keywords; see :class:`GuardedApp`)."""

    scopes: Sequence[str]
    roles: Sequence[str]
    exempt: Iterable[str]
    optional: bool
    ready_path: str | None
    public_url: str | None
    realm: str | None
    retry_after: int
    permissions: bool
    role_claims: str | Sequence[str | Sequence[str]] | None
    dpop: DPoPVerifier | None
    certificates: bool


#: The settings of the route (the others are the :class:`Guard`'s).
_ROUTE_SETTINGS = ("scopes", "roles", "exempt", "optional", "ready_path", "public_url")


class GuardedApp:
    """What the WSGI and ASGI middlewares share: the guard, the route's policy, the paths.

    ``verifier`` is a :class:`JWTVerifier` (a :class:`Guard` is built over
    it with the guard's settings) or a ready :class:`Guard` (then only the
    route's settings). The settings, by keyword (:class:`GuardSettings`):

    - ``scopes``, ``roles``: what every request's token must grant or hold;
    - ``exempt``: paths served without a token (``/health``), exact matches;
    - ``optional``: let anonymous requests through (``claims`` is ``None``);
      a token that is sent is still verified;
    - ``ready_path``: the readiness path (``"/ready"``; ``None``: none);
    - ``public_url``: the origin clients address, for DPoP ``htu``;
    - the :class:`Guard`'s: ``realm``, ``retry_after``, ``permissions``,
      ``role_claims``, ``dpop``, ``certificates``.
    """

    def __init__(self, verifier: JWTVerifier | Guard, settings: GuardSettings) -> None:
        route: dict[str, Any] = {k: v for k, v in settings.items() if k in _ROUTE_SETTINGS}
        options: dict[str, Any] = {k: v for k, v in settings.items() if k not in _ROUTE_SETTINGS}
        if isinstance(verifier, Guard):
            if options:
                raise ConfigurationError("give Guard options to the Guard, not the middleware")
            self.guard = verifier
        else:
            self.guard = Guard(verifier, **options)
        self.scopes = tuple(route.get("scopes", ()))
        self.roles = tuple(route.get("roles", ()))
        self.exempt = frozenset(route.get("exempt", ()))
        self.optional = bool(route.get("optional", False))
        self.ready_path: str | None = route.get("ready_path", "/ready")
        public_url = route.get("public_url")
        self.public_url = None if public_url is None else str(public_url).rstrip("/")
