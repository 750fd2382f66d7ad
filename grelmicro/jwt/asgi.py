"""A plain ASGI middleware: every HTTP request's token checked before the app sees it.

For ASGI apps that are not FastAPI (Starlette, Litestar, Quart, a bare ASGI
callable) served by uvicorn, hypercorn or granian; it needs nothing beyond
``grelmicro[jwt]`` (the ``asgi`` extra is that). FastAPI apps use
``grelmicro.jwt.fastapi.JWTBearer`` (per-route scopes, OpenAPI).

Example:
    >>> from grelmicro.jwt import JWTVerifier
    >>> from grelmicro.jwt.asgi import JWTMiddleware
    >>> verifier = JWTVerifier(jwks_url=..., audience="https://api.example.com")  # doctest: +SKIP
    >>> app = JWTMiddleware(app, verifier, realm="api", exempt=["/health"])  # doctest: +SKIP

The verified :class:`~grelmicro.jwt.Claims` are in
``scope["state"]["grelmicro.jwt.claims"]`` (Starlette: ``request.state``)
and ``scope["grelmicro.jwt.claims"]``. Verification runs on the event loop; a
token whose key must be fetched awaits the fetch (at most ``key_wait``),
never blocking the loop. The ASGI lifespan is wrapped: keys load at startup
(``await verifier.start()``) and the refresh stops at shutdown. Websocket
connections pass through unchecked (guard them in the app).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import TYPE_CHECKING, Any

from grelmicro.jwt._verifier import JWTVerifier
from grelmicro.jwt.challenges import Refusal
from grelmicro.jwt.guard import Guard, GuardedApp, GuardSettings

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["CLAIMS_KEY", "JWTMiddleware"]

#: Where the middleware puts the verified claims in the ASGI scope (and its state).
CLAIMS_KEY = "grelmicro.jwt.claims"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


async def _send(send: Send, status: int, headers: Iterable[tuple[str, str]], body: bytes) -> None:
    raw = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers]
    raw.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class JWTMiddleware(GuardedApp):
    """Guards an ASGI app's HTTP requests; answers refusals and ``/ready`` itself.

    Args:
        app: the ASGI app to guard.
        verifier: the :class:`~grelmicro.jwt.JWTVerifier`, or a ``Guard``.
        lifespan: wrap the ASGI lifespan to start and stop the keys.
        **settings: the route's and the guard's settings
            (:class:`~grelmicro.jwt.guard.GuardedApp` lists them).
    """

    def __init__(
        self,
        app: ASGIApp,
        verifier: JWTVerifier | Guard,
        *,
        lifespan: bool = True,
        **settings: Unpack[GuardSettings],
    ) -> None:
        super().__init__(verifier, settings)
        self.app = app
        self.lifespan = lifespan

    def __repr__(self) -> str:
        return f"JWTMiddleware({self.app!r}, {self.guard!r})"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check an HTTP request's token; pass lifespan and websockets on."""
        kind = scope["type"]
        if kind == "lifespan" and self.lifespan:
            await self._lifespan(scope, receive, send)
            return
        if kind != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if path == self.ready_path:
            answer = self.guard.readiness()
            headers = [("content-type", "application/json"), *answer.headers.items()]
            await _send(send, answer.status_code, headers, json.dumps(answer.body).encode())
            return
        if path in self.exempt:
            await self.app(scope, receive, send)
            return
        values = [raw for name, raw in scope["headers"] if name == b"authorization"]
        claims = None
        if values or not self.optional:
            proofs = [raw for name, raw in scope["headers"] if name == b"dpop"]
            try:
                claims = await self.guard.authenticate_async(
                    values,
                    query=scope.get("query_string", b""),
                    scopes=self.scopes,
                    roles=self.roles,
                    proof=proofs[0] if len(proofs) == 1 else None,
                    method=scope.get("method", "GET"),
                    uri=self._uri(scope),
                )
            except Refusal as refusal:
                await _send(send, refusal.status_code, refusal.header_list(), refusal.body())
                return
        scope[CLAIMS_KEY] = claims
        scope.setdefault("state", {})[CLAIMS_KEY] = claims
        await self.app(scope, receive, send)

    def _uri(self, scope: Scope) -> str:
        path = str(scope.get("root_path", "")) + str(scope.get("path", ""))
        if self.public_url is not None:
            return self.public_url + path
        host = next((v for n, v in scope["headers"] if n == b"host"), b"").decode("latin-1")
        return f"{scope.get('scheme', 'http')}://{host}{path}"

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Start the keys before the app's startup completes; stop them after its shutdown."""
        verifier = self.guard.verifier

        async def wrapped_receive() -> MutableMapping[str, Any]:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await verifier.start()
            return message

        async def wrapped_send(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "lifespan.shutdown.complete":
                await verifier.aclose()
            await send(message)

        await self.app(scope, wrapped_receive, wrapped_send)
