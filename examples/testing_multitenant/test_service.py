"""The invoices service's tests: two tenants served, one refused, v1 and v2 tokens, no guests."""

import contextlib
from collections.abc import AsyncIterator

import httpx
import pytest
from service import AUDIENCE, CONTOSO, CUSTOMERS, FABRIKAM, create_app, entra_issuers

from grelmicro.jwt import JWTVerifier
from grelmicro.jwt.testing import EntraTestIssuer

STRANGER = "0c0c0c0c-0000-4000-8000-00000000dead"  # an Entra tenant that never signed up
READ, WRITE = "Invoices.Read", "Invoices.Write"

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@contextlib.asynccontextmanager
async def serving(verifier: JWTVerifier) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client calling the app in process, its lifespan running (keys load there)."""
    app = create_app(verifier)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://invoices.test") as client,
    ):
        yield client


@pytest.fixture(scope="module")
def entra() -> EntraTestIssuer:
    """Entra ID for the tests: one key pair, tokens of any tenant."""
    return EntraTestIssuer(tenant=CONTOSO, audience=AUDIENCE)


@pytest.fixture
async def client(entra: EntraTestIssuer) -> AsyncIterator[httpx.AsyncClient]:
    """The app with a verifier of the production policy over the test keys."""
    verifier = entra.verifier(tenants=CUSTOMERS, versions=(1, 2), guests="refuse")
    async with serving(verifier) as client:
        yield client


async def test_each_tenant_sees_only_its_own_invoices(client, entra):
    contoso = entra.bearer(tenant=CONTOSO, scp=[READ, WRITE])
    fabrikam = entra.bearer(tenant=FABRIKAM, scp=[READ])

    created = await client.post("/invoices?number=C-1", headers=contoso)
    theirs = await client.get("/invoices", headers=contoso)
    others = await client.get("/invoices", headers=fabrikam)

    assert created.status_code == 201
    assert theirs.json() == ["C-1"]
    assert others.json() == []


async def test_v1_and_v2_tokens_are_accepted(client, entra):
    for version in (1, 2):
        headers = entra.bearer(tenant=FABRIKAM, version=version, scp=READ)
        assert (await client.get("/invoices", headers=headers)).status_code == 200


async def test_a_tenant_that_did_not_sign_up_is_refused(client, entra):
    stranger = entra.bearer(tenant=STRANGER, scp=READ)

    response = await client.get("/invoices", headers=stranger)

    assert response.status_code == 401
    assert response.json()["reason"] == "tenant"


async def test_iss_of_one_tenant_and_tid_of_another_is_refused(client, entra):
    mixed = entra.bearer(tenant=CONTOSO, tid=FABRIKAM, scp=READ)

    response = await client.get("/invoices", headers=mixed)

    assert response.json()["reason"] == "tenant"


async def test_guests_are_refused(client, entra):
    guest = entra.bearer(tenant=CONTOSO, guest=True, scp=READ)

    response = await client.get("/invoices", headers=guest)

    assert response.status_code == 403
    assert response.json()["reason"] == "guest"


async def test_writing_needs_the_write_scope(client, entra):
    reader = entra.bearer(tenant=CONTOSO, scp=READ)

    response = await client.post("/invoices?number=C-2", headers=reader)

    assert response.status_code == 403


async def test_the_production_issuers_against_a_loopback_entra(entra):
    """The production wiring (organizations metadata, key fetch) against a served Entra."""
    with entra.serve() as server:
        issuers = entra_issuers(authority=server.url, allow_insecure_loopback=True)
        async with serving(JWTVerifier(issuers=issuers)) as client:
            v1 = await client.get("/invoices", headers=entra.bearer(version=1, scp=READ))
            other = await client.get("/invoices", headers=entra.bearer(tenant=STRANGER, scp=READ))

    assert v1.status_code == 200
    assert other.json()["reason"] == "tenant"
    assert server.paths["/organizations/v2.0/.well-known/openid-configuration"] == 1
    assert server.paths["/organizations/.well-known/openid-configuration"] == 1
