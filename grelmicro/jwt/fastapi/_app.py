"""App wiring: lifespan, exception handlers, readiness, and the route check.

:func:`install` sets an app up for a dependency (problem+json refusals, the
key lifespan); :func:`check_routes` refuses ``Depends(verifier.verify)``.
These are reached through :class:`~grelmicro.jwt.fastapi.JWTBearer`'s
methods of the same names.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any, Protocol

from fastapi import FastAPI
from fastapi.routing import APIRoute, APIWebSocketRoute
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse, Response
from starlette.websockets import WebSocket, WebSocketState

from grelmicro.jwt import guard
from grelmicro.jwt._verifier import JWTVerifier
from grelmicro.jwt.errors import ConfigurationError, KeysUnavailableError, TokenRejectedError
from grelmicro.jwt.fastapi._challenges import BearerError, Challenges, problem_response


class Bearer(Protocol):
    """What app wiring reads of a ``JWTBearer`` (this module sits below it: no import)."""

    verifier: JWTVerifier
    challenges: Challenges

    def subprotocol(self, websocket: HTTPConnection) -> str | None:
        """The websocket subprotocol to accept with, if any."""
        ...


__all__ = ["check_routes", "install", "lifespan", "readiness"]


@asynccontextmanager
async def lifespan(bearer: Bearer, app: FastAPI | None) -> AsyncIterator[None]:
    """Check the routes, load the keys; stop the background refresh at shutdown."""
    if app is not None:
        check_routes(app)
    verifier = bearer.verifier
    start = getattr(verifier, "start", None)
    if start is not None:
        await start()
    try:
        yield
    finally:
        aclose = getattr(verifier, "aclose", None)
        if aclose is not None:
            await aclose()


def install(bearer: Bearer, app: FastAPI) -> None:
    """Handlers for refusals (and verifier errors escaping routes), route check, lifespan."""
    app.add_exception_handler(BearerError, problem_response)
    # A refusal raised by a route's own verifier call is the client's fault, not a 500.
    escaped: Any = _escaped_handler(bearer)  # HTTP and websocket connections both come here
    app.add_exception_handler(TokenRejectedError, escaped)
    app.add_exception_handler(KeysUnavailableError, escaped)
    check_routes(app)
    inner = app.router.lifespan_context
    if getattr(inner, "__self__", None) is bearer:
        return

    @asynccontextmanager
    async def wrapped(application: Any) -> AsyncIterator[Any]:
        async with lifespan(bearer, app), inner(application) as state:
            yield state

    app.router.lifespan_context = wrapped


def _escaped_handler(bearer: Bearer) -> Any:
    challenges = bearer.challenges

    async def escaped(connection: Any, exc: Exception) -> Response | None:
        """A verifier error raised in a route's own code, answered like the dependency."""
        if isinstance(exc, TokenRejectedError):
            error = challenges.invalid_token(exc.reason)
        elif isinstance(exc, KeysUnavailableError):
            error = challenges.keys_unavailable(exc)
        else:  # pragma: no cover - registered for those two only
            raise exc
        if isinstance(connection, WebSocket):
            if connection.client_state is WebSocketState.CONNECTING:
                await connection.accept(subprotocol=bearer.subprotocol(connection))
            if connection.application_state is not WebSocketState.DISCONNECTED:
                await connection.close(1013 if error.status_code == 503 else 1008, error.reason)
            return None
        return await problem_response(connection, error)

    return escaped


async def readiness(bearer: Bearer) -> JSONResponse:
    """200 when keys are loaded and fresh, else 503 with ``Retry-After`` (``guard.readiness``)."""
    answer = guard.readiness(bearer.verifier, bearer.challenges.retry_after)
    return JSONResponse(answer.body, status_code=answer.status_code, headers=answer.headers)


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
