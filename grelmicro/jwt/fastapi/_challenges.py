"""Refusals as the client sees them: status, ``WWW-Authenticate`` challenge, problem body.

:class:`BearerError` is the one exception the dependency raises;
:class:`Challenges` builds every refusal of one dependency from its realm and
the schemes it takes (``Bearer``, and ``DPoP`` when a DPoP binding is
plugged in). The detail text of a refused token is the error class's own
(:attr:`JWTError.detail <grelmicro.jwt.errors.JWTError>`): the body never
carries the verifier's message, which may name configured values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse

from grelmicro.jwt.errors import (
    REASONS,
    AccessDeniedError,
    ConfigurationError,
    GuestRejectedError,
    InsufficientRoleError,
    InsufficientScopeError,
    KeysUnavailableError,
    TokenRejectedError,
)

__all__ = ["BearerError", "Challenges", "problem_response", "quoted"]

BEARER = "Bearer"

#: Problem-body details of the ``invalid_request`` reasons: the request's
#: shape, not the token, is at fault (no error class stands for these).
REQUEST_DETAILS = {
    "multiple-tokens": "The request carries more than one token.",
    "query-token": "Tokens in the URL are not accepted; send an Authorization header.",
    "empty-token": "The credentials are empty.",
}

MISSING_DETAIL = "A bearer token is required."


def detail_of(reason: str) -> str:
    """The fixed problem-body text of a token refusal's ``reason``."""
    cls = REASONS.get(reason)
    return cls.detail if cls is not None else TokenRejectedError.detail


class BearerError(HTTPException):
    """A refusal as RFC 6750 words it: status, challenge header and problem body.

    ``error`` is the RFC 6750 error code (``invalid_token``,
    ``insufficient_scope``, ``invalid_request``) or ``None`` when the request
    carried no credentials; ``reason`` is the stable kebab-case reason.
    ``missing`` lists what a 403 found missing (scopes or roles); ``wait``
    what a 503 waits for (``KeysUnavailableError.wait``: ``budget``,
    ``provider-failing``...), so a client and a dashboard can tell a paced
    refetch from an outage.
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
        super().__init__(status_code, detail, headers)
        self.error = error
        self.reason = reason
        self.missing = tuple(missing)
        self.wait = wait

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


def quoted(value: str, what: str) -> str:
    """``value`` as an RFC 9110 quoted-string body; refuse what cannot be quoted."""
    if any(ord(char) < 0x20 or ord(char) == 0x7F or char in '"\\' for char in value):
        raise ConfigurationError(
            f"{what} may not contain quotes, backslashes or control characters"
        )
    return value


def scope_token(scope: str) -> str:
    """A scope as RFC 6749 allows it inside the quoted ``scope`` attribute."""
    return "".join(char for char in scope if 0x21 <= ord(char) <= 0x7E and char not in '"\\')


class Challenges:
    """Every refusal of one dependency, with challenges built once.

    ``schemes`` maps a scheme name to the attributes its error challenges end
    with (``algs="..."`` for DPoP); ``missing`` is the challenge sent when the
    request carries no credentials. A refusal names the scheme the client
    used; ``Bearer`` is the default.
    """

    __slots__ = ("_prefixes", "_suffixes", "missing_challenge", "realm", "retry_after")

    def __init__(self, realm: str | None, retry_after: int) -> None:
        self.realm = realm
        self.retry_after = retry_after
        self._prefixes: dict[str, str] = {}
        self._suffixes: dict[str, str] = {}
        self.add_scheme(BEARER)
        self.missing_challenge = self.challenge(BEARER)

    def add_scheme(self, scheme: str, attributes: str = "") -> None:
        """Answer refusals of ``scheme`` with its own challenge (ending with ``attributes``)."""
        realm = "" if self.realm is None else f'realm="{quoted(self.realm, "realm")}", '
        self._prefixes[scheme] = f"{scheme} {realm}"
        self._suffixes[scheme] = f", {attributes}" if attributes else ""

    def challenge(self, scheme: str) -> str:
        """The bare challenge of ``scheme``: ``Bearer realm="api"``, ``DPoP algs="..."``."""
        return (self._prefixes[scheme] + self._suffixes[scheme].removeprefix(", ")).rstrip(", ")

    def missing(self) -> BearerError:
        """401 without an error code: the request carries no credentials."""
        return BearerError(
            401,
            error=None,
            reason="missing-token",
            detail=MISSING_DETAIL,
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
    ) -> BearerError:
        """``<scheme> [realm], error="<error>", <attributes>[, <scheme's own attributes>]``."""
        prefixes = self._prefixes
        prefix = prefixes.get(scheme, prefixes[BEARER])
        suffix = self._suffixes.get(scheme, "")
        challenge = f'{prefix}error="{error}", {attributes}{suffix}'
        return BearerError(
            status_code,
            error=error,
            reason=reason,
            detail=detail,
            headers={"WWW-Authenticate": challenge, **(headers or {})},
            missing=missing,
        )

    def invalid_token(self, reason: str, scheme: str = BEARER) -> BearerError:
        """401 ``invalid_token`` with the stable reason."""
        return self.refusal(
            401,
            "invalid_token",
            reason,
            detail_of(reason),
            f'error_description="{reason}"',
            scheme=scheme,
        )

    def invalid_request(self, reason: str, scheme: str = BEARER) -> BearerError:
        """400 ``invalid_request``: the request's credentials are malformed."""
        return self.refusal(
            400,
            "invalid_request",
            reason,
            REQUEST_DETAILS[reason],
            f'error_description="{reason}"',
            scheme=scheme,
        )

    def insufficient_scope(self, required: Sequence[str], missing: Sequence[str]) -> BearerError:
        """403 ``insufficient_scope`` naming every scope the route requires (RFC 6750 §3.1)."""
        scope = " ".join(scope_token(item) for item in required)
        detail = f"{InsufficientScopeError.detail}: {scope}."
        return self.refusal(
            403,
            "insufficient_scope",
            InsufficientScopeError.reason,
            detail,
            f'scope="{scope}"',
            missing=missing,
        )

    def insufficient_role(self, missing: Sequence[str]) -> BearerError:
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

    def guest(self) -> BearerError:
        """403: the token verified, but its user is a guest and its issuer refuses guests."""
        return self.refusal(
            403,
            "insufficient_scope",
            GuestRejectedError.reason,
            GuestRejectedError.detail,
            f'error_description="{GuestRejectedError.reason}"',
            missing=("member",),
        )

    def wrong_tenant(self) -> BearerError:
        """403: the token's tenant is not one the route accepts (the token's value is not shown)."""
        return self.refusal(
            403,
            "insufficient_scope",
            AccessDeniedError.reason,
            "The token's tenant does not have access to this resource.",
            f'error_description="{AccessDeniedError.reason}"',
            missing=("tenant",),
        )

    def too_many(
        self, reason: str, detail: str, *, retry_after: float | None = None
    ) -> BearerError:
        """429 with ``Retry-After``: this client alone sends faster than it may.

        ``retry_after``: when it may send again (whole seconds, at least 1);
        the configured default when not known.
        """
        seconds = self.retry_after if retry_after is None else max(1, math.ceil(retry_after))
        return BearerError(
            429,
            error=None,
            reason=reason,
            detail=detail,
            headers={"Retry-After": str(seconds)},
        )

    def keys_unavailable(self, exc: KeysUnavailableError) -> BearerError:
        """The 503 of a verifier's :class:`KeysUnavailableError` (reason, detail, time, wait)."""
        return self.unavailable(exc.reason, exc.detail, retry_after=exc.retry_after, wait=exc.wait)

    def unavailable(
        self,
        reason: str = KeysUnavailableError.reason,
        detail: str | None = None,
        *,
        retry_after: float | None = None,
        wait: str | None = None,
    ) -> BearerError:
        """503 with ``Retry-After``: by default, no keys to verify with.

        ``retry_after``: when the key source may fetch again (whole seconds,
        at least 1); the configured default when not known. ``wait``: what
        the answer waits for (the problem body's ``wait`` member).
        """
        seconds = self.retry_after if retry_after is None else max(1, math.ceil(retry_after))
        return BearerError(
            503,
            error=None,
            reason=reason,
            detail=KeysUnavailableError.detail if detail is None else detail,
            headers={"Retry-After": str(seconds)},
            wait=wait,
        )
