"""A bare WSGI app behind grelmicro.jwt.wsgi.JWTMiddleware, served by gunicorn in the tests."""

import json
import os

from grelmicro.jwt import JWTVerifier
from grelmicro.jwt.wsgi import CLAIMS_KEY, JWTMiddleware

verifier = JWTVerifier(
    jwks_url=os.environ["TEST_JWKS_URL"], allow_insecure_loopback=True, audience="orders"
)


def orders(environ, start_response):
    body = json.dumps({"owner": environ[CLAIMS_KEY].subject, "pid": os.getpid()}).encode()
    start_response("200 OK", [("Content-Type", "application/json")])
    return [body]


app = JWTMiddleware(orders, verifier, realm="orders", scopes=["orders:read"])
