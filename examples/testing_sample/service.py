"""Orders: a small FastAPI service guarded by grelmicro.jwt.

The sample of docs/testing.md. The app is built by a factory that takes
its verifier: production passes one that discovers the identity provider,
the tests one that trusts a test issuer. Every route states what it needs
(a scope, or a role), and the tests keep those checks.
"""

from typing import Annotated

from fastapi import Depends, FastAPI, HTTPException, Security

from grelmicro.jwt import Claims, JWTVerifier
from grelmicro.jwt.fastapi import JWTBearer

ISSUER = "https://login.example.com/"
AUDIENCE = "https://orders.example.com"


def create_app(verifier: JWTVerifier) -> FastAPI:
    auth = JWTBearer(verifier, realm="orders")
    app = FastAPI(title="orders")
    auth.install(app)  # problem+json refusals; network keys load in the lifespan
    orders: list[dict[str, str]] = []

    def admin(claims: Annotated[Claims, Depends(auth)]) -> Claims:
        if "admin" not in claims.get("roles", ()):
            raise HTTPException(403, "needs the admin role")
        return claims

    @app.get("/orders")
    def list_orders(
        claims: Annotated[Claims, Security(auth, scopes=["orders:read"])],
    ) -> list[dict[str, str]]:
        owner = claims.require("sub", str)
        return [order for order in orders if order["owner"] == owner]

    @app.post("/orders", status_code=201)
    def place_order(
        item: str, claims: Annotated[Claims, Security(auth, scopes=["orders:write"])]
    ) -> dict[str, str]:
        order = {"item": item, "owner": claims.require("sub", str)}
        orders.append(order)
        return order

    @app.delete("/orders", status_code=204)
    def clear_orders(_: Annotated[Claims, Depends(admin)]) -> None:
        orders.clear()

    return app


def production_app() -> FastAPI:
    """What the server runs: keys from the identity provider's discovery document."""
    return create_app(JWTVerifier(discover=ISSUER, audience=AUDIENCE))
