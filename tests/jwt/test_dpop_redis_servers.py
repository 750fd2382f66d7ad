"""The shared DPoP replay store on the servers a fleet runs (issue 38).

Each server is real and started here on 127.0.0.1 (``tests/daemons.py``):
Valkey (``scripts/get-valkey.sh``, from Debian trixie), a three-node Redis
Cluster made with ``redis-cli --cluster create``, and a master, a replica and
a Sentinel that fails the master over. On each, the same replay rules hold:
a proof is accepted once, through the blocking and the async path, fair
shares apply, and a worker whose clock runs 80 s ahead erases nothing.
"""

import asyncio
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from daemons import RedisCluster, RedisSentinel, RedisServer, wait_for
from redis.sentinel import Sentinel

from grelmicro.jwt import DPoPReplayError, RedisReplayStore

WINDOW = 70.0


def record(store: RedisReplayStore, key: bytes, owner: str = "a", *, skew: float = 0.0) -> bool:
    now = time.time() + skew
    return store.record(key, owner, now=now, until=now + WINDOW)


def record_async(store: RedisReplayStore, key: bytes, owner: str = "a") -> bool:
    now = time.time()

    async def run() -> bool:
        return await store.record_async(key, owner, now=now, until=now + WINDOW)

    return asyncio.run(run())


def replay_rules_hold(make: "type[RedisReplayStore] | object") -> None:
    """The rules every server must keep; ``make(**options)`` builds a store."""
    store = make(prefix=f"test:{uuid.uuid4().hex}", max_size=8, max_per_key=8)  # type: ignore[operator]
    other = make(prefix=store.prefix, max_size=8, max_per_key=8)  # type: ignore[operator]
    # Once, across two stores (two workers), on both paths.
    captured = uuid.uuid4().bytes
    assert record(store, captured)
    assert not record(other, captured)
    assert not record_async(other, captured)
    fresh = uuid.uuid4().bytes
    assert record_async(store, fresh)
    assert not record(other, fresh)
    # A worker 80 s ahead records its own proofs and erases nobody's.
    assert record(other, uuid.uuid4().bytes, "b", skew=80)
    assert not record(store, captured)
    # The fair share: a holds 2 and b 1 of 8; a may hold 3 (2 * 2 keys < 5 free),
    # then 3 * 2 >= 4 free refuses it.
    assert record(store, uuid.uuid4().bytes)
    with pytest.raises(DPoPReplayError) as caught:
        record(store, uuid.uuid4().bytes)
    assert caught.value.over_quota
    assert caught.value.retry_after == pytest.approx(WINDOW, abs=2.0)
    store.close()
    other.close()


# -- Valkey -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def valkey(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with RedisServer(tmp_path_factory.mktemp("valkey"), server="valkey-server") as server:
        yield server


def test_the_replay_rules_hold_on_valkey(valkey: RedisServer):
    info = redis.Redis.from_url(valkey.url).info("server")
    assert "valkey_version" in info or info.get("server_name") == "valkey"

    def make(**options: object) -> RedisReplayStore:
        return RedisReplayStore(valkey.url, **options)  # type: ignore[arg-type]

    replay_rules_hold(make)


# -- Redis Cluster ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    with RedisCluster(tmp_path_factory.mktemp("cluster")) as running:
        yield running


def test_the_replay_rules_hold_on_a_three_node_cluster(cluster: RedisCluster):
    clients = []

    def make(**options: object) -> RedisReplayStore:
        client = redis.RedisCluster(host="127.0.0.1", port=cluster.port, socket_timeout=1.0)
        clients.append(client)
        return RedisReplayStore(client=client, **options)  # type: ignore[arg-type]

    replay_rules_hold(make)
    # The keys of one store share a hash tag: one slot, on one node of three.
    probe = clients[0]
    prefix = f"test:{uuid.uuid4().hex}"
    store = RedisReplayStore(client=probe, prefix=prefix)
    assert record(store, uuid.uuid4().bytes, "owner")
    names = probe.keys(f"{{{prefix}}}:*", target_nodes=redis.RedisCluster.ALL_NODES)
    assert len(names) == 3
    assert len({probe.keyslot(name) for name in names}) == 1
    holders = [n for n in cluster.nodes if redis.Redis(port=n.port).dbsize() > 0]
    assert len(holders) < len(cluster.nodes)


# -- Sentinel: a failover ------------------------------------------------------------------


def test_a_sentinel_failover_accepts_nothing_twice_and_resumes(tmp_path: Path):
    with RedisSentinel(tmp_path) as running:
        sentinel = Sentinel([("127.0.0.1", running.port)], socket_timeout=0.5)
        client = sentinel.master_for(running.name, socket_timeout=0.5, socket_connect_timeout=0.5)
        store = RedisReplayStore(client=client, prefix=f"test:{uuid.uuid4().hex}")
        captured = uuid.uuid4().bytes
        assert record(store, captured)
        # Written to the replica before the master dies (the store does not wait
        # for replicas itself: docs/dpop.md, "Sentinel").
        with redis.Redis(port=running.master.port, socket_timeout=10) as direct:
            assert direct.execute_command("WAIT", 1, 5000) == 1
        old = running.master.port
        assert running.master.process is not None
        os.kill(running.master.process.pid, signal.SIGKILL)
        running.master.process.wait(10)

        outcomes: list[str] = []

        def resumed() -> bool:
            # During the switch: the captured proof is never accepted again.
            try:
                assert not record(store, captured), "a captured proof accepted twice"
                outcomes.append("refused")
            except DPoPReplayError as exc:
                outcomes.append("unavailable" if exc.unavailable else "other refusal")
            try:
                return record(store, uuid.uuid4().bytes)
            except DPoPReplayError:
                return False

        wait_for(resumed, "service after the failover", guard=60)
        assert running.master_port() != old
        assert not record(store, captured)  # the new master remembers it
        assert record_async(store, uuid.uuid4().bytes)  # the async path resumed too
        assert set(outcomes) <= {"refused", "unavailable"}
        store.close()
