import httpx
import pytest
from service import AUDIENCE, ISSUER

from grelmicro.jwt import JWTVerifier
from grelmicro.jwt.testing import TestIssuer

pytestmark = pytest.mark.anyio


async def test_a_reader_sees_their_orders(client, jwt_issuer):
    writer = jwt_issuer.bearer(sub="alice", scope="orders:read orders:write")
    assert (await client.post("/orders?item=book", headers=writer)).status_code == 201

    mine = await client.get("/orders", headers=jwt_issuer.bearer(sub="alice", scope="orders:read"))
    theirs = await client.get("/orders", headers=jwt_issuer.bearer(sub="bob", scope="orders:read"))

    assert mine.json() == [{"item": "book", "owner": "alice"}]
    assert theirs.json() == []


async def test_writing_needs_the_write_scope(client, jwt_issuer):
    reader = jwt_issuer.bearer(scope="orders:read")

    response = await client.post("/orders?item=book", headers=reader)

    assert response.status_code == 403
    assert 'scope="orders:write"' in response.headers["WWW-Authenticate"]


async def test_clearing_needs_the_admin_role(client, jwt_issuer):
    user, admin = jwt_issuer.bearer(roles=["user"]), jwt_issuer.bearer(roles=["admin"])

    assert (await client.delete("/orders", headers=user)).status_code == 403
    assert (await client.delete("/orders", headers=admin)).status_code == 204


async def test_refusals(client, jwt_issuer):
    stranger = TestIssuer(issuer=ISSUER, audience=AUDIENCE, kid="other")

    anonymous = await client.get("/orders")
    expired = await client.get("/orders", headers=jwt_issuer.bearer(expires_in=-1))
    no_subject = await client.get(
        "/orders", headers=jwt_issuer.bearer(sub=None, scope="orders:read")
    )
    unknown = await client.get("/orders", headers=stranger.bearer(scope="orders:read"))

    assert anonymous.status_code == 401
    assert expired.json()["reason"] == "expired"
    assert no_subject.json()["reason"] == "missing-claim"
    assert unknown.json()["reason"] == "unknown-key"


async def test_keys_from_discovery_as_in_production(make_client, jwt_issuer):
    """The production wiring (discovery, JWKS fetch) against the test issuer, no socket."""
    async with httpx.AsyncClient(transport=jwt_issuer.transport()) as http:
        verifier = JWTVerifier(discover=ISSUER, audience=AUDIENCE, client=http)
        async with make_client(verifier) as client:
            reader = jwt_issuer.bearer(scope="orders:read")
            response = await client.get("/orders", headers=reader)

    assert response.status_code == 200


async def test_keys_from_a_loopback_jwks_server(make_client, jwt_issuer, jwt_jwks_server):
    verifier = JWTVerifier(
        jwks_url=jwt_jwks_server.jwks_url,
        allow_insecure_loopback=True,
        issuer=ISSUER,
        audience=AUDIENCE,
    )

    async with make_client(verifier) as client:
        jwt_issuer.rotate()  # a token naming the new key makes the service refetch
        response = await client.get("/orders", headers=jwt_issuer.bearer(scope="orders:read"))

    assert response.status_code == 200
    assert jwt_jwks_server.requests == 2
