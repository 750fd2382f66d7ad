"""A Flask service as the Flask docs page writes it, served by gunicorn in the tests.

``TEST_JWKS_URL`` names the provider; ``TEST_WARMUP`` (optional) is a token
verified at import, in gunicorn's master under ``--preload``.
"""

import os

from flask import Flask

from grelmicro.jwt import JWTVerifier
from grelmicro.jwt.flask import JWTAuth, current_claims

verifier = JWTVerifier(
    jwks_url=os.environ["TEST_JWKS_URL"], allow_insecure_loopback=True, audience="orders"
)
auth = JWTAuth(verifier, realm="orders", role_claims="realm_access.roles")
app = Flask(__name__)
auth.init_app(app)


@app.get("/orders")
@auth.require(scopes=["orders:read"], roles=["clerk"])
def orders() -> dict[str, object]:
    return {"owner": current_claims().subject, "pid": os.getpid()}


if os.environ.get("TEST_WARMUP"):
    verifier.verify(os.environ["TEST_WARMUP"])  # a verification in the master, before fork
