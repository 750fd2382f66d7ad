"""Shared fixtures for the ``grelmicro.jwt`` tests.

Time is pinned: every verification passes ``now=NOW`` (or a fake clock), so
no test depends on the wall clock. Tokens are minted by :mod:`forge` with
``cryptography`` directly, never with the code under test.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from forge import ASYMMETRIC, NOW, SECRET, Signer, hmac_key, private_key
from servers import DocumentServer
from support import HANG_GUARD, FakeClock

from grelmicro.jwt import JWTVerifier, Key, _events, _keys


class HeardLogCapture(pytest.LogCaptureFixture):
    """pytest's ``caplog`` whose every read first waits for the events still queued.

    An event emitted on an event loop thread is logged by the library's
    dispatcher thread (``grelmicro.jwt._events``): a test that reads the log
    right after an async action reads it once those events were heard.
    """

    def get_records(self, when: Any) -> list[Any]:
        assert _events.flush(HANG_GUARD)
        return super().get_records(when)

    @property
    def records(self) -> list[Any]:
        assert _events.flush(HANG_GUARD)
        return super().records

    @property
    def text(self) -> str:
        assert _events.flush(HANG_GUARD)
        return super().text

    @property
    def record_tuples(self) -> list[tuple[str, int, str]]:
        assert _events.flush(HANG_GUARD)
        return super().record_tuples

    @property
    def messages(self) -> list[str]:
        assert _events.flush(HANG_GUARD)
        return super().messages


@pytest.fixture
def caplog(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """pytest's own ``caplog``, read as :class:`HeardLogCapture`."""
    caplog.__class__ = HeardLogCapture
    return caplog


@pytest.fixture
def signer() -> Signer:
    """The HS256 key whose secret is :data:`forge.SECRET`."""
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
def token(signer: Signer) -> Callable[..., str]:
    """Mint an HS256 token; ``exp`` defaults to an hour after :data:`NOW`."""

    def mint(**claims: Any) -> str:
        claims.setdefault("exp", NOW + 3600)
        claims = {name: value for name, value in claims.items() if value is not None}
        return signer.mint(claims)

    return mint


@pytest.fixture(params=ASYMMETRIC)
def asymmetric(request: pytest.FixtureRequest) -> Signer:
    """One signing key per asymmetric algorithm family."""
    algorithm: str = request.param
    return private_key(algorithm, kid=f"{algorithm.lower()}-1")


@pytest.fixture
def server() -> Iterator[DocumentServer]:
    """A document server on 127.0.0.1 (a key source), stopped when the test ends."""
    srv = DocumentServer().start()
    yield srv
    srv.stop()


@pytest.fixture
def other_server() -> Iterator[DocumentServer]:
    """A second, independent document server (another issuer)."""
    srv = DocumentServer().start()
    yield srv
    srv.stop()


#: The three cache set-ups every cache-sensitive behaviour is checked under.
CACHE_MODES = {
    "uncached": {"cache_size": 0},
    "digest": {"cache_key": "digest"},
    "token": {"cache_key": "token"},
}


@pytest.fixture(params=list(CACHE_MODES))
def cache_mode(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Each behaviour holds with the cache off, keyed by digest, keyed by token."""
    return dict(CACHE_MODES[request.param])


@pytest.fixture(scope="session")
def demo() -> tuple[str, dict[str, str]]:
    """``examples/fastapi_demo.py`` run once: its output, and its blocks by title."""
    demo_script = Path(__file__).resolve().parents[2] / "examples" / "fastapi_demo.py"
    result = subprocess.run(
        [sys.executable, str(demo_script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    blocks = {block.split("\n", 1)[0]: block for block in result.stdout.split("--- ")[1:]}
    return result.stdout, blocks


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _padded_keys_logged_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test sees its own "logged once" memory of left-padded EC keys.

    The memory is process-wide by design (one INFO line per key), so a test
    that pads a key would otherwise silence the line for every later test
    that uses the same key.
    """
    monkeypatch.setattr(_keys, "_PADDED_LOGGED", set())
