"""The shared DPoP replay store on a real Redis (issue 33, N10 and N22).

A ``redis-server`` from the Debian package (``bash scripts/prereqs.sh
servers``) runs on 127.0.0.1 for this module; each test uses its own key
prefix. The fleet tests run the app of ``dpop_fleet_app.py`` under uvicorn
in separate processes: a captured proof is accepted once across them with
:class:`RedisReplayStore`, once per process without it.
"""

import asyncio
import logging
import os
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import httpx
import pytest
import redis
from daemons import RedisServer, free_port, serving
from dpop_proofs import ProofSigner, access_token
from fastapi import Depends, FastAPI
from forge import SECRET
from servers import serve

from grelmicro.jwt import (
    Claims,
    ConfigurationError,
    DPoPProofError,
    DPoPReplayError,
    DPoPVerifier,
    JWTVerifier,
    Key,
    RedisReplayStore,
    ReplayStore,
)
from grelmicro.jwt.fastapi_dpop import DPoPBearer

TESTS = Path(__file__).resolve().parent
ORIGIN = "https://api.example.com"
URI = f"{ORIGIN}/items"


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with RedisServer(tmp_path_factory.mktemp("redis")) as server:
        yield server


def store_on(server: RedisServer, **options: Any) -> RedisReplayStore:
    """A store with a prefix of its own (tests share the server)."""
    return RedisReplayStore(server.url, prefix=f"test:{uuid.uuid4().hex}", **options)


def fresh_token(signer: ProofSigner) -> str:
    now = int(time.time())
    return access_token(signer.jkt, exp=now + 3600, iat=now)


def dpop_headers(signer: ProofSigner, token: str, proof: str | None = None) -> dict[str, str]:
    proof = proof or signer.proof("GET", URI, token, iat=time.time())
    return {"Authorization": f"DPoP {token}", "DPoP": proof}


# -- a fleet: separate uvicorn processes sharing one Redis ------------------------------


@contextmanager
def uvicorn_process(redis_url: str | None, *, workers: int = 1) -> Iterator[str]:
    """``dpop_fleet_app:app`` under ``uvicorn --workers N`` in a child process."""
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)]),
        "GRELMICRO_TEST_REDIS": redis_url or "",
    }
    command = [
        sys.executable, "-m", "uvicorn", "dpop_fleet_app:app",
        "--host", "127.0.0.1", "--port", str(port),
        "--workers", str(workers), "--log-level", "warning",
    ]  # fmt: skip
    with serving(command, env, port, "uvicorn") as url:
        yield url


def get(url: str, headers: dict[str, str]) -> httpx.Response:
    """One request on a connection of its own (any worker may take it)."""
    with httpx.Client(base_url=url, timeout=30) as client:
        return client.get("/items", headers=headers)


def test_a_captured_proof_is_accepted_once_across_two_replicas(redis_server: RedisServer):
    signer = ProofSigner("ES256", seed=1)
    token = fresh_token(signer)
    captured = dpop_headers(signer, token)
    with uvicorn_process(redis_server.url) as a, uvicorn_process(redis_server.url) as b:
        first = get(a, captured)
        on_b = get(b, captured)
        on_a = get(a, captured)
    assert first.status_code == 200, first.text
    for replay in (on_b, on_a):
        assert replay.status_code == 401
        assert replay.json()["reason"] == "dpop-replay"


def test_without_a_shared_store_each_replica_accepts_the_proof_once():
    """The contrast (the finding N10): per-process memory, one acceptance per process."""
    signer = ProofSigner("ES256", seed=2)
    captured = dpop_headers(signer, fresh_token(signer))
    with uvicorn_process(None) as a, uvicorn_process(None) as b:
        answers = [get(a, captured), get(b, captured), get(a, captured)]
    assert [r.status_code for r in answers] == [200, 200, 401]


def test_uvicorn_with_two_workers_accepts_a_proof_once(redis_server: RedisServer):
    """``uvicorn --workers 2``: whichever worker takes each request, one acceptance in all."""
    signer = ProofSigner("ES256", seed=3)
    token = fresh_token(signer)
    captured = dpop_headers(signer, token)
    with uvicorn_process(redis_server.url, workers=2) as url:
        replays = [get(url, captured) for _ in range(12)]
        fresh = [get(url, dpop_headers(signer, token)) for _ in range(12)]
    assert sorted(r.status_code for r in replays) == [200] + [401] * 11
    assert all(r.status_code == 200 for r in fresh)  # every new proof: accepted
    pids = {r.json()["pid"] for r in fresh + replays if r.status_code == 200}
    assert pids  # the pids that served (two when the kernel spread the connections)


def test_two_workers_with_redis_killed_accept_nothing(tmp_path: Path):
    """``uvicorn --workers 2``, Redis killed mid-run: 503 on both workers, no second acceptance."""
    signer = ProofSigner("ES256", seed=8)
    token = fresh_token(signer)
    captured = dpop_headers(signer, token)
    with RedisServer(tmp_path) as server, uvicorn_process(server.url, workers=2) as url:
        first = get(url, captured)
        assert server.process is not None
        server.process.kill()  # not a clean shutdown
        server.process.wait(10)
        down = [get(url, captured) for _ in range(6)]
        down += [get(url, dpop_headers(signer, token)) for _ in range(6)]
    assert first.status_code == 200
    for response in down:
        assert response.status_code == 503
        assert response.json()["reason"] == "dpop-replay-store-unavailable"
        assert response.headers["retry-after"] == "1"


# -- Redis down: fail closed, or the explicit fallback ------------------------------------


def app_with(store: RedisReplayStore) -> FastAPI:
    auth = DPoPBearer(
        JWTVerifier([Key.secret(SECRET)]),
        DPoPVerifier("required", replay_store=store),
        public_url=ORIGIN,
    )
    app = FastAPI()
    auth.install(app)

    @app.get("/items")
    def items(claims: Annotated[Claims, Depends(auth)]) -> dict[str, Any]:
        return {"sub": claims.subject}

    return app


def test_redis_stopped_mid_run_fails_closed(tmp_path: Path):
    signer = ProofSigner("ES256", seed=4)
    token = fresh_token(signer)
    with RedisServer(tmp_path) as server:
        store = store_on(server, retry_after=2)
        with serve(app_with(store)) as client:
            captured = dpop_headers(signer, token)
            first = client.get("/items", headers=captured)
            server.stop()
            replay_while_down = client.get("/items", headers=captured)
            new_while_down = client.get("/items", headers=dpop_headers(signer, token))
            server.start()
            replay_after = client.get("/items", headers=captured)
            new_after = client.get("/items", headers=dpop_headers(signer, token))

    assert first.status_code == 200
    for down in (replay_while_down, new_while_down):
        assert down.status_code == 503
        assert down.json()["reason"] == "dpop-replay-store-unavailable"
        assert down.headers["retry-after"] == "2"
    # A restarted Redis has forgotten (no persistence here): the replay is
    # accepted again; that is what persistence or a replica is for (docs/dpop.md).
    assert replay_after.status_code == 200
    assert new_after.status_code == 200


def test_the_sync_path_fails_closed_too(tmp_path: Path):
    signer = ProofSigner("ES256", seed=5)
    token = fresh_token(signer)
    verifier = JWTVerifier([Key.secret(SECRET)])
    with RedisServer(tmp_path) as server:
        store = store_on(server)
        dpop = DPoPVerifier("required", replay_store=store)
        proof = signer.proof("GET", URI, token, iat=time.time())
        dpop.check(
            scheme="DPoP", access_token=token, claims=verifier.verify(token),
            proof=proof, method="GET", uri=URI,
        )  # fmt: skip
    with pytest.raises(DPoPReplayError) as caught:
        dpop.check(
            scheme="DPoP", access_token=token, claims=verifier.verify(token),
            proof=signer.proof("GET", URI, token, iat=time.time()), method="GET", uri=URI,
        )  # fmt: skip
    assert caught.value.unavailable
    assert not caught.value.store_full
    assert SECRET.decode() not in str(caught.value)


def test_the_fallback_is_an_explicit_opt_in(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    signer = ProofSigner("ES256", seed=6)
    token = fresh_token(signer)
    server = RedisServer(tmp_path)  # never started: nothing listens on its port
    store = store_on(server, fallback=ReplayStore())
    captured = dpop_headers(signer, token)
    with caplog.at_level(logging.WARNING, "grelmicro.jwt"), serve(app_with(store)) as client:
        first = client.get("/items", headers=captured)
        replay = client.get("/items", headers=captured)
    assert first.status_code == 200
    assert replay.status_code == 401
    assert replay.json()["reason"] == "dpop-replay"
    events = [getattr(r, "jwt_event", None) for r in caplog.records]
    assert events.count("dpop.replay_store.down") == 1


# -- the fair-share rule, in process and on Redis ---------------------------------------


@pytest.fixture(params=["in-process", "redis"])
def small_store(request: pytest.FixtureRequest, redis_server: RedisServer) -> Any:
    def make(max_size: int) -> Any:
        if request.param == "redis":
            return store_on(redis_server, max_size=max_size, max_per_key=max_size)
        return ReplayStore(max_size, max_per_key=max_size)

    return make


def test_a_keys_share_shrinks_as_keys_fill_the_store(small_store: Any):
    """One ``now`` for every call: the Redis store dates entries by the server's clock."""
    store = small_store(8)
    now, window = time.time(), 70.0

    def record(owner: str) -> bool:
        return bool(store.record(uuid.uuid4().bytes, owner, now=now, until=now + window))

    # Alone, a key takes up to half: 4 entries (3 < 8 - 3, then 4 < 8 - 4 fails).
    assert [record("a") for _ in range(4)] == [True] * 4
    with pytest.raises(DPoPReplayError) as caught:
        record("a")
    assert caught.value.over_quota
    # The key's own oldest entry frees its room: one window from its recording.
    assert caught.value.retry_after == pytest.approx(window, abs=1.0)
    # A newcomer is let in while there is room; with two keys the shares shrink:
    # b takes 2 (1 * 2 keys < 3 free, then 2 * 2 < 2 fails).
    assert record("b")
    assert record("b")
    with pytest.raises(DPoPReplayError) as second:
        record("b")
    assert second.value.over_quota
    # Newcomers get in until the store is full (the last free entry, for d).
    assert record("c")
    with pytest.raises(DPoPReplayError):
        record("c")  # 1 * 3 keys >= 1 free
    assert record("d")
    with pytest.raises(DPoPReplayError) as full:
        record("e")
    assert full.value.store_full
    assert full.value.retry_after == pytest.approx(window, abs=1.0)


def test_a_replay_is_a_replay_in_both_stores(small_store: Any):
    store = small_store(8)
    key, now = uuid.uuid4().bytes, time.time()
    assert store.record(key, "a", now=now, until=now + 70)
    assert not store.record(key, "a", now=now + 1, until=now + 71)
    assert not store.record(key, "a", now=now, until=now + 70)


def test_an_entry_is_forgotten_after_its_deadline_on_the_servers_clock(
    redis_server: RedisServer,
):
    """The in-process store's expiry is tested with a virtual clock; Redis has only its own."""
    store = store_on(redis_server, max_size=2, max_per_key=2)
    server = redis.Redis.from_url(redis_server.url)
    key, now = uuid.uuid4().bytes, time.time()
    assert store.record(key, "a", now=now, until=now + 0.005)  # 5 ms on the server's clock
    recorded = server_ms(server)
    # The server's clock passes the deadline: 5 ms rounded up to whole ms
    # (float seconds can make it 6), and an entry goes once now > deadline.
    while server_ms(server) <= recorded + 7:
        pass
    assert store.record(key, "a", now=now, until=now + 70)  # forgotten: recorded again
    server.close()


def server_ms(server: Any) -> int:
    seconds, micros = server.time()
    return int(seconds) * 1000 + int(micros) // 1000


# -- configuration -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"url": 6379},
        {"url": "http://localhost:6379"},
        {"url": "redis://127.0.0.1:1", "prefix": "{a}"},
        {"url": "redis://127.0.0.1:1", "prefix": ""},
        {"url": "redis://127.0.0.1:1", "timeout": 0},
        {"url": "redis://127.0.0.1:1", "max_size": 0},
        {"url": "redis://127.0.0.1:1", "max_per_key": 0},
        {"url": "redis://127.0.0.1:1", "fallback": "memory"},
        {"url": "redis://127.0.0.1:1", "max_connections": True},
    ],
)
def test_bad_settings_are_configuration_errors(options: dict[str, Any]):
    with pytest.raises(ConfigurationError):
        RedisReplayStore(**options)


# -- one clock for the fleet: the server's (N30) ------------------------------------------


def test_a_worker_80_s_ahead_cannot_erase_the_others_entries(redis_server: RedisServer):
    """Two workers, one Redis, clocks 80 s apart: a captured proof is refused at both.

    Before, each call purged entries by its caller's clock: the fast worker's
    next proof erased every live entry, and the captured proof was accepted
    again at the correct worker.
    """
    prefix = f"test:{uuid.uuid4().hex}"
    tokens = JWTVerifier([Key.secret(SECRET)])
    on_time = DPoPVerifier("required", replay_store=store_on_prefix(redis_server, prefix))
    ahead = DPoPVerifier(
        "required",
        replay_store=store_on_prefix(redis_server, prefix),
        clock=lambda: time.time() + 80,
    )
    victim, other = ProofSigner("ES256", seed=30), ProofSigner("ES256", seed=31)
    victim_token, other_token = fresh_token(victim), fresh_token(other)

    def present(dpop: DPoPVerifier, token: str, proof: str) -> None:
        dpop.check(
            scheme="DPoP", access_token=token, claims=tokens.verify(token),
            proof=proof, method="GET", uri=URI,
        )  # fmt: skip

    captured = victim.proof("GET", URI, victim_token, iat=time.time())
    present(on_time, victim_token, captured)
    # The fast worker serves a client whose clock agrees with it (a proof it accepts).
    present(ahead, other_token, other.proof("GET", URI, other_token, iat=time.time() + 80))
    with pytest.raises(DPoPReplayError) as caught:
        present(on_time, victim_token, captured)
    assert caught.value.reason == "dpop-replay"
    with pytest.raises(DPoPProofError):  # the fast worker: outside its iat window anyway
        present(ahead, victim_token, captured)


def store_on_prefix(server: RedisServer, prefix: str) -> RedisReplayStore:
    return RedisReplayStore(server.url, prefix=prefix)


# -- a burst is not an outage (N25) ----------------------------------------------------------


def test_a_burst_of_500_on_one_event_loop_is_all_recorded(redis_server: RedisServer):
    """500 proofs at once on one loop, a pool of 2: none refused (it raised at the 65th)."""
    store = store_on(redis_server, max_connections=2, timeout=2.0)
    now = time.time()

    async def burst() -> list[bool]:
        calls = [
            store.record_async(uuid.uuid4().bytes, f"client-{i}", now=now, until=now + 70)
            for i in range(500)
        ]
        return list(await asyncio.gather(*calls))

    assert asyncio.run(burst()) == [True] * 500
    store.close()


def test_a_burst_of_threads_waits_for_the_blocking_pool(redis_server: RedisServer):
    """64 threads at once on a pool of 2: each waits for a connection, none is refused."""
    store = store_on(redis_server, max_connections=2, timeout=5.0)
    now = time.time()
    start = threading.Barrier(64)

    def one(i: int) -> bool:
        start.wait()
        return store.record(uuid.uuid4().bytes, f"client-{i}", now=now, until=now + 70)

    with ThreadPoolExecutor(64) as pool:
        assert list(pool.map(one, range(64))) == [True] * 64
    store.close()
