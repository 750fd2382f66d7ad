"""Shared fixtures for the ``grelmicro.jwt`` tests.

Time is pinned: every verification passes ``now=NOW`` (or a fake clock), so
no test depends on the wall clock. Tokens are minted by :mod:`minting` with
``cryptography`` directly, never with the code under test.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from minting import ASYMMETRIC, NOW, SECRET, FakeClock, SigningKey, hmac_key, private_key

from grelmicro.jwt import JWTVerifier, Key


@pytest.fixture
def signer() -> SigningKey:
    """The HS256 key whose secret is :data:`minting.SECRET`."""
    return hmac_key()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_verifier() -> Callable[..., JWTVerifier]:
    """Build a verifier over the HS256 :data:`SECRET` key with any settings."""

    def build(**settings: Any) -> JWTVerifier:
        return JWTVerifier([Key.secret(SECRET, "HS256")], **settings)

    return build


@pytest.fixture
def token(signer: SigningKey) -> Callable[..., str]:
    """Mint an HS256 token; ``exp`` defaults to an hour after :data:`NOW`."""

    def mint(**claims: Any) -> str:
        claims.setdefault("exp", NOW + 3600)
        claims = {name: value for name, value in claims.items() if value is not None}
        return signer.mint(claims)

    return mint


@pytest.fixture(params=ASYMMETRIC)
def asymmetric(request: pytest.FixtureRequest) -> SigningKey:
    """One signing key per asymmetric algorithm family."""
    algorithm: str = request.param
    return private_key(algorithm, kid=f"{algorithm.lower()}-1")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
