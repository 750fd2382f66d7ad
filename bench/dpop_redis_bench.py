"""The shared DPoP replay store under a burst, through real uvicorn workers on a real Redis.

The load test (the default): ``tests/jwt/dpop_fleet_app.py`` under ``uvicorn
--workers W`` twice, once with :class:`RedisReplayStore` on a
``redis-server`` started here (127.0.0.1, a free port, no persistence) and
once with each worker's in-process ``ReplayStore`` (the baseline). Each burst
opens C client connections at once, each a DPoP client with its own ES256 key
and bound token; all release together and each sends, on its keep-alive
connection, ``--fresh`` new proofs, then replays its first proof on the same
connection and on a new one (any worker may take it). Conditions checked,
per burst, and the exit status is 1 when one fails:

- every fresh proof is answered 200 (with Redis healthy, a 503 is spurious);
- every replay is refused, 401 ``dpop-replay`` (with the in-process baseline a
  replay on a new connection may reach another worker and be accepted: that
  is the contrast, not a failure);

and the added latency per request is the Redis lane's p50/p99 minus the
baseline's under the same burst (client-side, from writing the request to
reading the whole answer). Scenarios: ``--workers 4 --clients 500`` and one
worker taking the same 500 clients. Bursts of the two lanes alternate
(``--rounds``). Not a test: nothing here asserts a time.

``--micro`` runs the earlier single-caller lanes instead (what one
``record`` costs, no concurrency): ``memory record``, ``redis record``
(blocking client), ``redis async`` (``redis.asyncio``), and the whole
``DPoPVerifier.check`` with each store (``dpop memory``, ``dpop redis``).
``--smoke`` is the bench-smoke session's check: one worker, 50 clients, one
round (after the warm-up burst every scenario has), the same conditions.

    .venv/bin/python bench/dpop_redis_bench.py
    .venv/bin/python bench/dpop_redis_bench.py --workers 4 --clients 500 --rounds 3
    .venv/bin/python bench/dpop_redis_bench.py --micro --calls 5000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
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
    parser.add_argument("--micro", action="store_true", help="the single-caller lanes instead")
    parser.add_argument("--calls", type=int, default=2000, help="--micro: calls per lane and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=4, help="uvicorn workers (load test)")
    parser.add_argument("--clients", type=int, default=500, help="concurrent DPoP clients")
    parser.add_argument("--fresh", type=int, default=4, help="fresh proofs per client and burst")
    parser.add_argument("--max-connections", type=int, help="the store's pool (default: its own)")
    parser.add_argument("--smoke", action="store_true", help="one worker, 50 clients, one round")
    args = parser.parse_args()

    folder = tempfile.mkdtemp(prefix="grelmicro-redis-bench.")
    process = None
    url = args.url
    if url is None:
        process, url = start_redis(folder)
    try:
        if args.micro:
            run(url, args.calls, args.rounds)
        else:
            scenarios = (
                [Scenario(workers=1, clients=50, fresh=2, rounds=1)]
                if args.smoke
                else [
                    Scenario(args.workers, args.clients, args.fresh, args.rounds),
                    Scenario(1, args.clients, args.fresh, args.rounds),
                ]
            )
            ok = load_test(url, scenarios, max_connections=args.max_connections)
            if not ok:
                raise SystemExit(1)
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


# -- the load test: real uvicorn workers, a burst of DPoP clients -----------------------------


@dataclass(frozen=True)
class Scenario:
    workers: int
    clients: int
    fresh: int
    rounds: int


@dataclass
class Burst:
    """What one burst of one lane saw."""

    latencies: list[int] = field(default_factory=list)  # ns, every request
    fresh: Counter[str] = field(default_factory=Counter)  # "200", "503 <reason>", ...
    replays: Counter[str] = field(default_factory=Counter)
    twice: int = 0  # captured proofs accepted more than once (never, whatever else happens)


APP_DIRS = (ROOT / "tests" / "jwt", ROOT / "tests")


@contextmanager
def uvicorn(workers: int, redis_url: str, max_connections: int | None) -> Iterator[int]:
    """``dpop_fleet_app:app`` under ``uvicorn --workers N``; yields its port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(str(d) for d in APP_DIRS),
        "GRELMICRO_TEST_REDIS": redis_url,
        # The store's defaults (timeout 0.25 s), not the tests' generous ones.
        "GRELMICRO_TEST_STORE_DEFAULTS": "1",
    }
    if max_connections is not None:
        env["GRELMICRO_TEST_MAX_CONNECTIONS"] = str(max_connections)
    command = [
        sys.executable, "-m", "uvicorn", "dpop_fleet_app:app", "--host", "127.0.0.1",
        "--port", str(port), "--workers", str(workers), "--log-level", "warning",
        "--backlog", "4096",
    ]  # fmt: skip
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:  # every worker imports the app; /docs answers once one listens
            try:
                with socket.create_connection(("127.0.0.1", port), 0.5):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("uvicorn did not start") from None
                time.sleep(0.1)
        time.sleep(1.0 + 0.5 * workers)  # let every worker finish importing (not timed)
        yield port
    finally:
        process.terminate()
        process.wait(30)


class Client:
    """One DPoP client: its key, its bound token, its proofs for one burst."""

    def __init__(self, seed: int) -> None:
        self.signer = ProofSigner("ES256", seed=10_000 + seed)
        now = int(time.time())
        self.token = access_token(self.signer.jkt, exp=now + 3600, iat=now)

    def request(self, proof: str) -> bytes:
        return (
            f"GET /items HTTP/1.1\r\nHost: api.example.com\r\n"
            f"Authorization: DPoP {self.token}\r\nDPoP: {proof}\r\n\r\n"
        ).encode()


async def exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes, burst: Burst
) -> str:
    start = time.perf_counter_ns()
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = lines[0].split(" ", 2)[1]
    length = next(
        int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:")
    )
    body = await reader.readexactly(length)
    burst.latencies.append(time.perf_counter_ns() - start)
    if status == "200":
        return status
    try:
        reason = json.loads(body).get("reason", "?")
    except ValueError:
        reason = "?"
    return f"{status} {reason}"


async def one_client(
    port: int, client: Client, proofs: list[str], go: asyncio.Event, burst: Burst
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    await go.wait()
    answers = []
    for proof in proofs:
        answers.append(await exchange(reader, writer, client.request(proof), burst))
        burst.fresh[answers[-1]] += 1
    captured = client.request(proofs[0])
    replays = [await exchange(reader, writer, captured, burst)]
    writer.close()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)  # any worker
    replays.append(await exchange(reader, writer, captured, burst))
    writer.close()
    burst.replays.update(replays)
    burst.twice += [answers[0], *replays].count("200") > 1


async def burst_once(port: int, clients: list[Client], fresh: int) -> Burst:
    burst = Burst()
    now = time.time()
    proofs = [[c.signer.proof("GET", URI, c.token, iat=now) for _ in range(fresh)] for c in clients]
    go = asyncio.Event()
    tasks = [
        asyncio.ensure_future(one_client(port, c, p, go, burst))
        for c, p in zip(clients, proofs, strict=True)
    ]
    await asyncio.sleep(0.5)  # every connection open before the burst (not timed)
    go.set()
    await asyncio.gather(*tasks)
    return burst


def load_test(url: str, scenarios: list[Scenario], *, max_connections: int | None) -> bool:
    info = redis.Redis.from_url(url).info()
    pool = max_connections or RedisReplayStore.__init__.__kwdefaults__["max_connections"]
    print(
        f"# DPoP replay store under a burst: CPython {platform.python_version()}, "
        f"redis-server {info['redis_version']} on 127.0.0.1, {os.cpu_count()} CPUs, "
        f"load {os.getloadavg()[0]:.1f}; uvicorn (h11/asyncio), ES256 proofs, "
        f"store pool {pool} per worker, timeout 0.25 s"
    )
    ok = True
    for scenario in scenarios:
        clients = [Client(i) for i in range(scenario.clients)]
        lanes = {"memory": Burst(), "redis": Burst()}
        with (
            uvicorn(scenario.workers, "", None) as memory_port,
            uvicorn(scenario.workers, url, max_connections) as redis_port,
        ):
            for port in (memory_port, redis_port):  # warm-up: connections, the script
                asyncio.run(burst_once(port, clients, 1))
            for _ in range(scenario.rounds):
                for lane, port in (("memory", memory_port), ("redis", redis_port)):
                    got = asyncio.run(burst_once(port, clients, scenario.fresh))
                    lanes[lane].latencies += got.latencies
                    lanes[lane].fresh.update(got.fresh)
                    lanes[lane].replays.update(got.replays)
                    lanes[lane].twice += got.twice
        print(
            f"\n## {scenario.workers} worker(s), {scenario.clients} clients x "
            f"({scenario.fresh} fresh + 2 replays), {scenario.rounds} round(s)"
        )
        print(f"{'lane':<8} {'p50 ms':>8} {'p99 ms':>8}  fresh answers / replay answers")
        for lane, seen in lanes.items():
            p50, p99 = percentiles(seen.latencies)
            print(
                f"{lane:<8} {p50 / 1000:>8.2f} {p99 / 1000:>8.2f}  "
                f"{dict(seen.fresh)} / {dict(seen.replays)}"
            )
        redis_lane = lanes["redis"]
        expected_fresh = scenario.clients * scenario.fresh * scenario.rounds
        expected_replays = scenario.clients * 2 * scenario.rounds
        spurious = sum(n for answer, n in redis_lane.fresh.items() if answer.startswith("503"))
        refused = redis_lane.replays.get("401 dpop-replay", 0)
        added = [
            (percentiles(redis_lane.latencies)[i] - percentiles(lanes["memory"].latencies)[i])
            / 1000
            for i in (0, 1)
        ]
        print(
            f"redis: {spurious} spurious 503 of {expected_fresh} fresh proofs, "
            f"{refused} of {expected_replays} replays refused, "
            f"{redis_lane.twice} captured proofs accepted twice; "
            f"added per request p50 {added[0]:+.2f} ms, p99 {added[1]:+.2f} ms"
        )
        if (
            redis_lane.fresh.get("200", 0) != expected_fresh
            or refused != expected_replays
            or redis_lane.twice
        ):
            print("FAILED: a fresh proof not accepted, or a replay not refused")
            ok = False
    return ok


if __name__ == "__main__":
    main()
