"""A bare ASGI app behind grelmicro.jwt.asgi.JWTMiddleware, served by uvicorn in the tests."""

import json
import os

from grelmicro.jwt import JWTVerifier
from grelmicro.jwt.asgi import CLAIMS_KEY, JWTMiddleware

verifier = JWTVerifier(
    jwks_url=os.environ["TEST_JWKS_URL"], allow_insecure_loopback=True, audience="orders"
)


async def orders(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            kind = message["type"].replace("lifespan.", "")
            await send({"type": f"lifespan.{kind}.complete"})
            if kind == "shutdown":
                return
    body = json.dumps({"owner": scope[CLAIMS_KEY].subject}).encode()
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


app = JWTMiddleware(orders, verifier, realm="orders", scopes=["orders:read"])
