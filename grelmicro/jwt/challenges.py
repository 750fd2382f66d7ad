"""HTTP answers for any framework: challenges, problem bodies, ``Retry-After``.

A verifier raises the error taxonomy (:mod:`grelmicro.jwt.errors`); a web
service answers with a status, a ``WWW-Authenticate`` challenge (RFC 6750
for ``Bearer``, RFC 9449 for ``DPoP``), sometimes ``Retry-After`` or
``DPoP-Nonce``, and an RFC 9457 problem body. :class:`Challenges` turns
one into the other, framework-free: build it once with the realm (and the
DPoP policy, when DPoP is accepted), then :meth:`Challenges.answer` any
:class:`~grelmicro.jwt.JWTError` into a :class:`Refusal` that carries
``status_code``, ``headers`` and :meth:`Refusal.problem` (or
:meth:`Refusal.body`, the JSON bytes). Every integration of this package
(FastAPI, Flask, Django, the WSGI and ASGI middlewares) answers through it.

Example:
    >>> from grelmicro.jwt import JWTError, require_scopes
    >>> from grelmicro.jwt.challenges import Challenges
    >>> challenges = Challenges(realm="orders")
    >>> try:
    ...     claims = verifier.verify(token)
    ...     require_scopes(claims, ["orders:read"])
    ... except JWTError as exc:
    ...     refusal = challenges.answer(exc)
    ...     refusal.status_code, refusal.headers, refusal.body()  # doctest: +SKIP

The answers:

- no credentials (:meth:`Challenges.missing`): 401 with the bare challenge;
- a refused token (:class:`~grelmicro.jwt.TokenRejectedError`): 401
  ``error="invalid_token", error_description="<reason>"``;
- a missing scope: 403 ``insufficient_scope`` with ``scope="<required>"``;
  a missing role or tenant: 403 with the reason as ``error_description``;
- a refused DPoP proof: 401 ``DPoP error="invalid_dpop_proof"``, or
  ``use_dpop_nonce`` with a fresh ``DPoP-Nonce``; a replay store full or
  down: 503; a client over its proof quota: 429;
- no keys (:class:`~grelmicro.jwt.KeysUnavailableError`): 503 with
  ``Retry-After`` the error's own ``retry_after`` (the real time until the
  key source may fetch again; the configured default only when unknown).

The body's ``detail`` is the error class's fixed text, never the
verifier's message (which may name configured values).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from http import HTTPStatus
from typing import Any

from grelmicro.jwt.errors import (
    REASONS,
    AccessDeniedError,
    ConfigurationError,
    DPoPBindingError,
    DPoPProofError,
    DPoPReplayError,
    GuestRejectedError,
    InsufficientRoleError,
    InsufficientScopeError,
    JWTError,
    KeysUnavailableError,
    TokenRejectedError,
)

__all__ = [
    "BEARER",
    "DPOP",
    "PROBLEM_JSON",
    "Challenges",
    "Refusal",
    "problem_headers",
    "retry_after_seconds",
]

#: The RFC 6750 scheme name.
BEARER = "Bearer"
#: The RFC 9449 scheme name.
DPOP = "DPoP"
#: The media type of an RFC 9457 problem body.
PROBLEM_JSON = "application/problem+json"

#: Problem-body details of the ``invalid_request`` reasons: the request's
#: shape, not the token, is at fault (no error class stands for these).
_REQUEST_DETAILS = {
    "multiple-tokens": "The request carries more than one token.",
    "query-token": "Tokens in the URL are not accepted; send an Authorization header.",
    "empty-token": "The credentials are empty.",
}

_MISSING_DETAIL = "A bearer token is required."
_USE_NONCE = "The DPoP proof must carry the server's nonce (see DPoP-Nonce)."
_STORE_FULL = "Too many DPoP proofs are in flight; try again later."
_OVER_QUOTA = "Too many DPoP proofs from this key; slow down."
_STORE_DOWN = "The DPoP replay store cannot be reached; try again later."
_TENANT_DETAIL = "The token's tenant does not have access to this resource."


def _detail_of(reason: str) -> str:
    """The fixed problem-body text of a token refusal's ``reason``."""
    cls = REASONS.get(reason)
    return cls.detail if cls is not None else TokenRejectedError.detail


def retry_after_seconds(seconds: float | None, default: int) -> int:
    """``Retry-After`` in whole seconds (at least 1): ``seconds`` rounded up, else ``default``."""
    if (
        isinstance(seconds, (int, float))
        and not isinstance(seconds, bool)
        and math.isfinite(seconds)
    ):
        return max(1, math.ceil(seconds))
    return default


def _quoted(value: str, what: str) -> str:
    """``value`` as an RFC 9110 quoted-string body; refuse what cannot be quoted."""
    if any(ord(char) < 0x20 or ord(char) == 0x7F or char in '"\\' for char in value):
        raise ConfigurationError(
            f"{what} may not contain quotes, backslashes or control characters"
        )
    return value


def _scope_token(scope: str) -> str:
    """A scope as RFC 6749 allows it inside the quoted ``scope`` attribute."""
    return "".join(char for char in scope if 0x21 <= ord(char) <= 0x7E and char not in '"\\')


class Refusal(Exception):  # noqa: N818 - an answer, not an error of the program
    """A refusal as the client sees it: status, headers and RFC 9457 problem body.

    ``error`` is the RFC 6750/9449 error code (``invalid_token``,
    ``insufficient_scope``, ``invalid_request``, ``invalid_dpop_proof``,
    ``use_dpop_nonce``) or ``None`` (no credentials, a 503, a 429);
    ``reason`` the stable kebab-case reason; ``missing`` what a 403 found
    missing (configured names, never the token's); ``wait`` what a 503 waits
    for (``fetch-in-flight``, ``budget``, ``provider-failing``...). Raise it
    from a view, or write :attr:`status_code`, :attr:`headers` and
    :meth:`body` into the framework's response.
    """

    def __init__(
        self,
        status_code: int,
        *,
        error: str | None,
        reason: str,
        detail: str,
        headers: dict[str, str],
        missing: Sequence[str] = (),
        wait: str | None = None,
    ) -> None:
        super().__init__(status_code, detail)
        self.status_code = status_code
        self.detail = detail
        self.headers = headers
        self.error = error
        self.reason = reason
        self.missing = tuple(missing)
        self.wait = wait

    def __str__(self) -> str:
        return f"{self.status_code} {self.reason}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.status_code}, reason={self.reason!r})"

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
        if self.missing:
            body["missing"] = list(self.missing)
        if self.wait is not None:
            body["wait"] = self.wait
        return body

    def body(self) -> bytes:
        """:meth:`problem` as compact JSON bytes (send with :data:`PROBLEM_JSON`)."""
        return json.dumps(self.problem(), separators=(",", ":")).encode()

    def header_list(self) -> list[tuple[str, str]]:
        """Every header of the answer, ``Content-Type`` first (for WSGI and ASGI)."""
        return problem_headers(self.headers)


def problem_headers(headers: Mapping[str, str]) -> list[tuple[str, str]]:
    """``Content-Type: application/problem+json`` followed by ``headers``."""
    return [("Content-Type", PROBLEM_JSON), *headers.items()]


class Challenges:
    """Every refusal of one guarded service, with its challenges built once.

    Args:
        realm: the ``realm`` of every challenge (quoted; no quotes, backslashes
            or control characters).
        retry_after: the ``Retry-After`` of a 503 or 429 when the error does
            not say (a :class:`~grelmicro.jwt.KeysUnavailableError` from a key
            source does: its ``retry_after`` is used).
        refusal: the class the answers are built as (a subclass of
            :class:`Refusal`: FastAPI's ``BearerError`` is one).

    A refusal names the scheme the client used (``Bearer`` by default);
    :meth:`add_dpop` adds the ``DPoP`` challenge.
    """

    __slots__ = (
        "_nonce",
        "_prefixes",
        "_refusal",
        "_suffixes",
        "missing_challenge",
        "realm",
        "retry_after",
    )

    def __init__(
        self,
        realm: str | None = None,
        retry_after: int = 5,
        *,
        refusal: type[Refusal] = Refusal,
    ) -> None:
        if isinstance(retry_after, bool) or not isinstance(retry_after, int) or retry_after < 0:
            raise ConfigurationError("retry_after must be a whole number of seconds, 0 or more")
        if not (isinstance(refusal, type) and issubclass(refusal, Refusal)):
            raise ConfigurationError("refusal must be Refusal or a subclass of it")
        if realm is not None and not isinstance(realm, str):
            raise ConfigurationError("realm must be a string")
        self.realm = realm
        self.retry_after = retry_after
        self._refusal = refusal
        self._prefixes: dict[str, str] = {}
        self._suffixes: dict[str, str] = {}
        self._nonce: Callable[[], str] | None = None
        self.add_scheme(BEARER)
        #: The challenge of a request without credentials.
        self.missing_challenge = self.challenge(BEARER)

    def __repr__(self) -> str:
        return f"Challenges(realm={self.realm!r}, schemes={list(self._prefixes)!r})"

    # -- schemes -------------------------------------------------------------

    def add_scheme(self, scheme: str, attributes: str = "") -> None:
        """Answer refusals of ``scheme`` with its own challenge (ending with ``attributes``)."""
        realm = "" if self.realm is None else f'realm="{_quoted(self.realm, "realm")}", '
        self._prefixes[scheme] = f"{scheme} {realm}"
        self._suffixes[scheme] = f", {attributes}" if attributes else ""

    def add_dpop(
        self,
        algorithms: Sequence[str],
        mode: str = "accepted",
        nonce: Callable[[], str] | None = None,
    ) -> None:
        """Add the RFC 9449 ``DPoP`` challenge (``algs="..."``).

        ``mode`` (a :class:`~grelmicro.jwt.DPoPVerifier`'s) says what an
        anonymous request hears: ``DPoP`` alone (``required``), ``Bearer``
        then ``DPoP`` (``accepted``), ``Bearer`` alone (``off``). ``nonce``
        gives the ``DPoP-Nonce`` sent with ``use_dpop_nonce``
        (``DPoPNonces.current``).
        """
        self.add_scheme(DPOP, f'algs="{" ".join(algorithms)}"')
        self._nonce = nonce
        if mode == "required":
            self.missing_challenge = self.challenge(DPOP)
        elif mode == "accepted":
            self.missing_challenge = f"{self.challenge(BEARER)}, {self.challenge(DPOP)}"

    def challenge(self, scheme: str) -> str:
        """The bare challenge of ``scheme``: ``Bearer realm="api"``, ``DPoP algs="..."``."""
        return (self._prefixes[scheme] + self._suffixes[scheme].removeprefix(", ")).rstrip(", ")

    # -- the answer to an error ----------------------------------------------

    def answer(  # noqa: PLR0911 - one answer per family of the taxonomy
        self,
        exc: JWTError,
        scheme: str = BEARER,
        *,
        required: Sequence[str] | None = None,
    ) -> Refusal:
        """The HTTP answer to ``exc``, challenged in ``scheme`` (the one the client used).

        ``required``: the scopes the route requires, for the ``scope``
        attribute of a 403 (default: the error's own ``required``).

        Raises:
            TypeError: ``exc`` is a :class:`~grelmicro.jwt.ConfigurationError`
                (a service that hits one must not start: it has no HTTP answer).
        """
        if isinstance(exc, (DPoPProofError, DPoPReplayError)):
            return self._dpop_refusal(exc)
        if isinstance(exc, DPoPBindingError):
            return self.invalid_token(exc.reason, DPOP if DPOP in self._prefixes else scheme)
        if isinstance(exc, GuestRejectedError):
            return self.guest()  # verified, but a guest of an issuer that refuses them: 403
        if isinstance(exc, TokenRejectedError):
            return self.invalid_token(exc.reason, scheme)
        if isinstance(exc, KeysUnavailableError):
            return self.keys_unavailable(exc)
        if isinstance(exc, InsufficientScopeError):
            wanted = exc.required if required is None else tuple(required)
            return self.insufficient_scope(wanted or exc.missing, exc.missing)
        if isinstance(exc, InsufficientRoleError):
            return self.insufficient_role(exc.missing)
        if isinstance(exc, AccessDeniedError):
            return self.wrong_tenant() if exc.missing == ("tenant",) else self.access_denied(exc)
        raise TypeError(f"{type(exc).__name__} has no HTTP answer (raised while building)")

    def _dpop_refusal(self, exc: DPoPProofError | DPoPReplayError) -> Refusal:
        if isinstance(exc, DPoPProofError):
            return self.use_dpop_nonce() if exc.use_nonce else self.proof_refused(exc.reason)
        if exc.unavailable:
            return self.unavailable(
                "dpop-replay-store-unavailable", _STORE_DOWN, retry_after=exc.retry_after
            )
        if exc.store_full:
            return self.unavailable(
                "dpop-replay-store-full", _STORE_FULL, retry_after=exc.retry_after
            )
        if exc.over_quota:
            return self.too_many("dpop-replay-over-quota", _OVER_QUOTA, retry_after=exc.retry_after)
        return self.proof_refused(exc.reason)

    # -- each answer -----------------------------------------------------------

    def missing(self) -> Refusal:
        """401 without an error code: the request carries no credentials."""
        return self._refusal(
            401,
            error=None,
            reason="missing-token",
            detail=_MISSING_DETAIL,
            headers={"WWW-Authenticate": self.missing_challenge},
        )

    def refusal(
        self,
        status_code: int,
        error: str,
        reason: str,
        detail: str,
        attributes: str,
        *,
        scheme: str = BEARER,
        headers: Mapping[str, str] | None = None,
        missing: Sequence[str] = (),
    ) -> Refusal:
        """``<scheme> [realm], error="<error>", <attributes>[, <scheme's own attributes>]``."""
        prefixes = self._prefixes
        prefix = prefixes.get(scheme, prefixes[BEARER])
        suffix = self._suffixes.get(scheme, "")
        challenge = f'{prefix}error="{error}", {attributes}{suffix}'
        return self._refusal(
            status_code,
            error=error,
            reason=reason,
            detail=detail,
            headers={"WWW-Authenticate": challenge, **(headers or {})},
            missing=missing,
        )

    def invalid_token(self, reason: str, scheme: str = BEARER) -> Refusal:
        """401 ``invalid_token`` with the stable reason."""
        return self.refusal(
            401,
            "invalid_token",
            reason,
            _detail_of(reason),
            f'error_description="{reason}"',
            scheme=scheme,
        )

    def invalid_request(self, reason: str, scheme: str = BEARER) -> Refusal:
        """400 ``invalid_request``: ``multiple-tokens``, ``query-token`` or ``empty-token``."""
        return self.refusal(
            400,
            "invalid_request",
            reason,
            _REQUEST_DETAILS[reason],
            f'error_description="{reason}"',
            scheme=scheme,
        )

    def insufficient_scope(self, required: Sequence[str], missing: Sequence[str]) -> Refusal:
        """403 ``insufficient_scope`` naming every scope the route requires (RFC 6750 §3.1)."""
        scope = " ".join(_scope_token(item) for item in required)
        detail = f"{InsufficientScopeError.detail}: {scope}."
        return self.refusal(
            403,
            "insufficient_scope",
            InsufficientScopeError.reason,
            detail,
            f'scope="{scope}"',
            missing=missing,
        )

    def insufficient_role(self, missing: Sequence[str]) -> Refusal:
        """403 naming the roles the token lacks (configured names, never the token's)."""
        detail = f"{InsufficientRoleError.detail}: {', '.join(missing)}."
        return self.refusal(
            403,
            "insufficient_scope",
            InsufficientRoleError.reason,
            detail,
            f'error_description="{InsufficientRoleError.reason}"',
            missing=missing,
        )

    def guest(self) -> Refusal:
        """403: the token verified, but its user is a guest and its issuer refuses guests."""
        return self.refusal(
            403,
            "insufficient_scope",
            GuestRejectedError.reason,
            GuestRejectedError.detail,
            f'error_description="{GuestRejectedError.reason}"',
            missing=("member",),
        )

    def wrong_tenant(self) -> Refusal:
        """403: the token's tenant is not one the route accepts (the token's value is not shown)."""
        return self.refusal(
            403,
            "insufficient_scope",
            AccessDeniedError.reason,
            _TENANT_DETAIL,
            f'error_description="{AccessDeniedError.reason}"',
            missing=("tenant",),
        )

    def access_denied(self, exc: AccessDeniedError) -> Refusal:
        """403 for any other :class:`~grelmicro.jwt.AccessDeniedError` (its class's detail)."""
        return self.refusal(
            403,
            "insufficient_scope",
            exc.reason,
            exc.detail,
            f'error_description="{exc.reason}"',
            missing=exc.missing,
        )

    def proof_refused(self, reason: str) -> Refusal:
        """401 ``DPoP error="invalid_dpop_proof"`` (``dpop-proof`` or ``dpop-replay``)."""
        detail = DPoPReplayError.detail if reason == DPoPReplayError.reason else None
        return self.refusal(
            401,
            "invalid_dpop_proof",
            reason,
            detail or DPoPProofError.detail,
            f'error_description="{reason}"',
            scheme=DPOP,
        )

    def use_dpop_nonce(self) -> Refusal:
        """401 ``DPoP error="use_dpop_nonce"`` with a fresh ``DPoP-Nonce`` header."""
        nonce = self._nonce
        return self.refusal(
            401,
            "use_dpop_nonce",
            "use-dpop-nonce",
            _USE_NONCE,
            'error_description="use-dpop-nonce"',
            scheme=DPOP,
            headers=None if nonce is None else {"DPoP-Nonce": nonce()},
        )

    def too_many(self, reason: str, detail: str, *, retry_after: float | None = None) -> Refusal:
        """429 with ``Retry-After``: this client alone sends faster than it may."""
        return self._refusal(
            429,
            error=None,
            reason=reason,
            detail=detail,
            headers={"Retry-After": str(retry_after_seconds(retry_after, self.retry_after))},
        )

    def keys_unavailable(self, exc: KeysUnavailableError) -> Refusal:
        """The 503 of a :class:`~grelmicro.jwt.KeysUnavailableError`: reason, detail, time, wait."""
        return self.unavailable(exc.reason, exc.detail, retry_after=exc.retry_after, wait=exc.wait)

    def unavailable(
        self,
        reason: str = KeysUnavailableError.reason,
        detail: str | None = None,
        *,
        retry_after: float | None = None,
        wait: str | None = None,
    ) -> Refusal:
        """503 with ``Retry-After``: by default, no keys to verify with.

        ``retry_after``: when to try again (rounded up, at least 1 s); the
        configured default when not known. ``wait``: the body's ``wait``.
        """
        return self._refusal(
            503,
            error=None,
            reason=reason,
            detail=KeysUnavailableError.detail if detail is None else detail,
            headers={"Retry-After": str(retry_after_seconds(retry_after, self.retry_after))},
            wait=wait,
        )
