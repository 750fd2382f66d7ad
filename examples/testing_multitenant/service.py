"""Invoices: a multi-tenant FastAPI service for organisations signed in with Entra ID.

The multi-tenant sample of docs/testing.md. Two customer organisations
(Entra tenants) use it; each sees only its own invoices. The API accepts
v1 and v2 access tokens and refuses B2B guests. The app is built by a
factory that takes its verifier, and the issuers are built by a function
the tests call with a loopback Entra as the authority.
"""

from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Security

from grelmicro.jwt import Claims, Issuer, JWTVerifier, providers
from grelmicro.jwt.fastapi import JWTBearer

AUDIENCE = "api://invoices"
CONTOSO = "7f0d4e1a-3b2c-4d5e-8f9a-0b1c2d3e4f5a"
FABRIKAM = "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"
CUSTOMERS = [CONTOSO, FABRIKAM]  # the tenants that signed up


def entra_issuers(**options: Any) -> list[Issuer]:
    """Entra's v2 and v1 issuers for our customers, guests refused."""
    return [
        providers.entra_multitenant(
            CUSTOMERS, audience=AUDIENCE, version=version, guests="refuse", **options
        )
        for version in (2, 1)
    ]


def tenant_of(claims: Claims) -> str:
    """The organisation of the caller (every token these issuers accept has one)."""
    if claims.tenant is None:
        raise HTTPException(403, "not an organisation's token")
    return claims.tenant


def create_app(verifier: JWTVerifier) -> FastAPI:
    auth = JWTBearer(verifier, realm="invoices")
    app = FastAPI(title="invoices")
    auth.install(app)
    invoices: dict[str, list[str]] = {}

    @app.get("/invoices")
    def list_invoices(
        claims: Annotated[Claims, Security(auth, scopes=["Invoices.Read"])],
    ) -> list[str]:
        return invoices.get(tenant_of(claims), [])

    @app.post("/invoices", status_code=201)
    def add_invoice(
        number: str, claims: Annotated[Claims, Security(auth, scopes=["Invoices.Write"])]
    ) -> dict[str, str]:
        tenant = tenant_of(claims)
        invoices.setdefault(tenant, []).append(number)
        return {"tenant": tenant, "number": number}

    return app


def production_app() -> FastAPI:
    """What the server runs: Entra's organizations metadata, keys fetched and refreshed."""
    return create_app(JWTVerifier(issuers=entra_issuers()))
