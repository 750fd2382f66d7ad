import contextlib

import httpx
import pytest
from service import AUDIENCE, ISSUER, create_app

from grelmicro.jwt.testing import TestIssuer

pytest_plugins = ["grelmicro.jwt.testing.pytest"]


@pytest.fixture
def jwt_issuer() -> TestIssuer:
    """The plugin's issuer, with the service's issuer and audience."""
    return TestIssuer(issuer=ISSUER, audience=AUDIENCE)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def make_client():
    """An httpx client calling the app in process, with the app's lifespan running."""

    @contextlib.asynccontextmanager
    async def client_for(verifier):
        app = create_app(verifier)
        transport = httpx.ASGITransport(app=app)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url="http://orders.test") as client,
        ):
            yield client

    return client_for


@pytest.fixture
async def client(make_client, jwt_verifier):
    async with make_client(jwt_verifier) as client:
        yield client
