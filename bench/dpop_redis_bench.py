"""What the shared DPoP replay store adds per request: RedisReplayStore against ReplayStore.

Lanes, interleaved in rounds (each proof recorded once; p50 and p99 over
every call of every round):

- ``memory record``   ``ReplayStore.record`` (the in-process default);
- ``redis record``    ``RedisReplayStore.record``: one ``EVALSHA`` round trip
                      on a connection from the pool (blocking client);
- ``redis async``     ``await RedisReplayStore.record_async`` on one event
                      loop (``redis.asyncio``), one call at a time;
- ``dpop memory``     the whole ``DPoPVerifier.check`` (ES256 proof check and
                      the record) with the in-process store;
- ``dpop redis``      the same with the Redis store.

The added latency per DPoP request is ``dpop redis`` minus ``dpop memory``.
A ``redis-server`` is started on 127.0.0.1 (a free port, no persistence)
unless ``--url`` names one. Not a test: nothing here asserts a time.

    .venv/bin/python bench/dpop_redis_bench.py
    .venv/bin/python bench/dpop_redis_bench.py --calls 5000 --url redis://127.0.0.1:6379/0
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import redis  # noqa: E402
from dpop_proofs import ProofSigner, access_token  # noqa: E402 - the tests' proof minting
from forge import SECRET  # noqa: E402

from grelmicro.jwt import DPoPVerifier, JWTVerifier, Key, RedisReplayStore, ReplayStore  # noqa: E402

URI = "https://api.example.com/items"


def start_redis(folder: str) -> tuple[subprocess.Popen[bytes], str]:
    binary = shutil.which("redis-server", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    if binary is None:
        raise SystemExit("redis-server is missing: bash scripts/prereqs.sh servers")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--dir", folder],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + 20
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    client.close()
    return process, url


def percentiles(samples: list[int]) -> tuple[float, float]:
    ordered = sorted(samples)
    return ordered[len(ordered) // 2] / 1000, ordered[int(len(ordered) * 0.99)] / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--url", help="an existing Redis (default: start one)")
    parser.add_argument("--calls", type=int, default=2000, help="calls per lane and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    folder = tempfile.mkdtemp(prefix="grelmicro-redis-bench.")
    process = None
    url = args.url
    if url is None:
        process, url = start_redis(folder)
    try:
        run(url, args.calls, args.rounds)
    finally:
        if process is not None:
            process.terminate()
            process.wait(20)
        shutil.rmtree(folder, ignore_errors=True)


def run(url: str, calls: int, rounds: int) -> None:
    prefix = f"bench:{uuid.uuid4().hex}"
    big = 1 << 24  # no fair-share refusals in the way of the timing
    memory = ReplayStore(big, max_per_key=big)
    shared = RedisReplayStore(url, prefix=prefix, max_size=big, max_per_key=big)
    signer = ProofSigner("ES256", seed=7)
    now = int(time.time())
    token = access_token(signer.jkt, exp=now + 3600, iat=now)
    claims = JWTVerifier([Key.secret(SECRET)]).verify(token)
    dpop_memory = DPoPVerifier("required", replay_store=memory)
    dpop_redis = DPoPVerifier("required", replay_store=shared)
    owner = signer.jkt
    lanes: dict[str, list[int]] = {
        name: []
        for name in ("memory record", "redis record", "redis async", "dpop memory", "dpop redis")
    }
    loop = asyncio.new_event_loop()

    def timed(lane: str, call: Callable[[], object]) -> None:
        start = time.perf_counter_ns()
        call()
        lanes[lane].append(time.perf_counter_ns() - start)

    for _ in range(rounds):
        proofs = {
            lane: [signer.proof("GET", URI, token, iat=time.time()) for _ in range(calls)]
            for lane in ("dpop memory", "dpop redis")
        }
        for index in range(calls):
            t = time.time()
            timed(
                "memory record",
                lambda t=t: memory.record(uuid.uuid4().bytes, owner, now=t, until=t + 70),
            )
            timed(
                "redis record",
                lambda t=t: shared.record(uuid.uuid4().bytes, owner, now=t, until=t + 70),
            )
            timed(
                "redis async",
                lambda t=t: loop.run_until_complete(
                    shared.record_async(uuid.uuid4().bytes, owner, now=t, until=t + 70)
                ),
            )
            for lane, dpop in (("dpop memory", dpop_memory), ("dpop redis", dpop_redis)):
                proof = proofs[lane][index]
                timed(
                    lane,
                    lambda dpop=dpop, proof=proof: dpop.check(
                        scheme="DPoP", access_token=token, claims=claims, proof=proof,
                        method="GET", uri=URI,
                    ),
                )  # fmt: skip
    loop.close()

    info = redis.Redis.from_url(url).info()
    print(
        f"# RedisReplayStore vs ReplayStore: CPython {platform.python_version()}, "
        f"redis-server {info['redis_version']} on 127.0.0.1, {os.cpu_count()} CPUs, "
        f"load {os.getloadavg()[0]:.1f}, {rounds} rounds x {calls} calls"
    )
    print(f"{'lane':<16} {'p50 µs':>9} {'p99 µs':>9}")
    for lane, samples in lanes.items():
        p50, p99 = percentiles(samples)
        print(f"{lane:<16} {p50:>9.1f} {p99:>9.1f}")
    added = [
        percentiles(lanes["dpop redis"])[i] - percentiles(lanes["dpop memory"])[i] for i in (0, 1)
    ]
    print(f"added per DPoP request: p50 {added[0]:.1f} µs, p99 {added[1]:.1f} µs")
    entries = int(info.get("used_memory", 0))
    held = redis.Redis.from_url(url).zcard(f"{{{prefix}}}:seen")
    if held:
        print(
            f"Redis memory: {entries / max(held, 1):.0f} bytes per entry "
            f"over {held} entries (the whole server's used_memory)"
        )


if __name__ == "__main__":
    main()
