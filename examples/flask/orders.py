"""The Flask orders service of docs/frameworks.md: Keycloak tokens, roles and scopes.

Configured from the environment: GRELMICRO_JWT_JWKS_URL (or GRELMICRO_JWT_DISCOVER),
GRELMICRO_JWT_ISSUER, GRELMICRO_JWT_AUDIENCE. Served by gunicorn.conf.py or uwsgi.ini.
"""

from flask import Flask

from grelmicro.jwt import JWTVerifier
from grelmicro.jwt.flask import JWTAuth, current_claims

verifier = JWTVerifier.from_env()
auth = JWTAuth(verifier, realm="orders", role_claims="realm_access.roles")
app = Flask(__name__)
auth.init_app(app)  # 401/403/503 with their challenges, GET /ready, keys loaded now


@app.get("/orders")
@auth.require(scopes=["orders:read"], roles=["clerk"])
def list_orders():
    return {"owner": current_claims().subject, "orders": []}


@app.post("/orders")
@auth.require(scopes=["orders:write"], roles=["manager"])
def create_order():
    return {"created_by": current_claims().subject}, 201
