"""Refusals as FastAPI raises them: :class:`BearerError`, and its problem+json handler.

The answers themselves (challenges, problem bodies, ``Retry-After``) are
built by the framework-free :class:`grelmicro.jwt.challenges.Challenges`;
this module only makes them Starlette ``HTTPException``s, so FastAPI's own
handler answers them when :meth:`JWTBearer.install` did not add
:func:`problem_response`.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse

from grelmicro.jwt.challenges import BEARER, PROBLEM_JSON, Challenges, Refusal

__all__ = ["BEARER", "BearerError", "Challenges", "bearer_challenges", "problem_response"]


class BearerError(Refusal, HTTPException):  # type: ignore[misc] # headers: a dict, always
    """A :class:`~grelmicro.jwt.challenges.Refusal` that is also a Starlette ``HTTPException``.

    ``error`` is the RFC 6750 error code (``invalid_token``,
    ``insufficient_scope``, ``invalid_request``) or ``None`` when the request
    carried no credentials; ``reason`` is the stable kebab-case reason.
    ``missing`` lists what a 403 found missing (scopes or roles); ``wait``
    what a 503 waits for (``KeysUnavailableError.wait``: ``budget``,
    ``provider-failing``...), so a client and a dashboard can tell a paced
    refetch from an outage.
    """

    __str__ = Refusal.__str__
    __repr__ = Refusal.__repr__


def bearer_challenges(realm: str | None, retry_after: int) -> Challenges:
    """The challenges of a FastAPI dependency: answers built as :class:`BearerError`."""
    return Challenges(realm, retry_after, refusal=BearerError)


async def problem_response(request: Request, exc: Exception) -> JSONResponse:  # noqa: ARG001
    """Exception handler: a :class:`BearerError` as ``application/problem+json``."""
    if not isinstance(exc, Refusal):  # pragma: no cover - registered for BearerError only
        raise exc
    return JSONResponse(
        exc.problem(),
        status_code=exc.status_code,
        headers=exc.headers,
        media_type=PROBLEM_JSON,
    )
