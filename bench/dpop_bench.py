"""DPoP (RFC 9449): what a proof costs on top of the bearer path, per algorithm, in one run.

Lanes, interleaved round by round (median of the per-call time over the rounds):

- ``bearer hit``    ``verifier.verify(token)``: the bearer path of a resource
                    server, a cache hit (RS256 access token, the canonical
                    shape of ``shared/bench-token.md``);
- ``token <alg>``   a full verification (cache off) of a token signed with
                    the proof's algorithm: one signature check through the
                    core, the floor a proof check cannot beat;
- ``proof <alg>``   the core's proof check alone (``ProofVerifier.verify``:
                    header, ``jwk`` parse under the key rules, signature,
                    claims, ``htu`` normalisation, ``ath``, thumbprint);
- ``dpop <alg>``    the whole DPoP request path in Python: bearer hit, then
                    ``DPoPVerifier.check`` (proof check + replay-store insert),
                    a fresh proof on every call.

Then a 12-thread flood of the replay store: unique and replayed proofs, with
the outcome counts, the throughput and the store's size against its bound.

Through uvicorn (one worker on 127.0.0.1, a separate process; the load is an
asyncio HTTP/1.1 keep-alive client in this process, every DPoP request with
its own pre-signed proof): ``/none`` (no auth), ``/bearer`` (``JWTBearer``,
cache hit) and ``/dpop`` (``DPoPBearer``) per proof algorithm, requests per
second and the ratio to ``/bearer``.

    .venv/bin/python bench/dpop_bench.py               # the table
    .venv/bin/python bench/dpop_bench.py --rounds 3    # quicker
    .venv/bin/python bench/dpop_bench.py --no-server   # the core lanes only
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import statistics
import sys
import threading
import time
from collections import Counter
from importlib import metadata
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # forge, DPoP proofs

from dpop_proofs import ProofSigner
from forge import NOW, private_key
from support import accepted_proofs
from timing import timed_threads

from grelmicro.jwt import (
    DPoPReplayError,
    DPoPVerifier,
    JWTVerifier,
    Key,
    ReplayStore,
    _core,
)

ALGORITHMS = ("ES256", "ES384", "PS256", "RS256", "EdDSA")
URI = "https://api.example.com/items"
CLAIMS = {
    "iss": "https://idp.example.com/",
    "aud": "https://api.example.com",
    "sub": "user-1",
    "scope": "read:items write:items",
    "iat": NOW,
    "exp": NOW + 3600,
}


def per_call_ns(fn: Any, n: int) -> float:
    start = time.perf_counter_ns()
    fn(n)
    return (time.perf_counter_ns() - start) / n


def bench(rounds: int, calls: int) -> list[tuple[str, str, float]]:
    issuer = private_key("RS256", kid="idp-1")
    verifier = JWTVerifier(
        [Key.pem(issuer.public_pem(), "RS256", kid="idp-1")],
        audience=CLAIMS["aud"],
        issuer=CLAIMS["iss"],
        clock=lambda: NOW,
    )
    lanes: dict[str, Any] = {}
    rows: list[tuple[str, str]] = []

    def add(name: str, alg: str, loop: Any) -> None:
        lanes[name] = loop
        rows.append((name, alg))

    signers = {alg: ProofSigner(alg) for alg in ALGORITHMS}
    tokens = {alg: issuer.mint({**CLAIMS, "cnf": {"jkt": signers[alg].jkt}}) for alg in ALGORITHMS}
    bearer = tokens["ES256"].encode()
    verifier.verify(bearer)

    def bearer_hit(n: int, verify: Any = verifier.verify, raw: bytes = bearer) -> None:
        for _ in range(n):
            verify(raw.decode())

    add("bearer hit", "RS256 token", bearer_hit)
    core = _core.ProofVerifier()
    needed = (rounds + 1) * calls
    for alg in ALGORITHMS:
        signer = signers[alg]
        token = tokens[alg]
        jkt = signer.jkt
        # A token signed with the proof's algorithm, verified with the cache off.
        own = private_key(alg)
        own_verifier = JWTVerifier(
            [Key.pem(own.public_pem(), alg)], cache_size=0, clock=lambda: NOW
        )
        own_token = own.mint({"sub": "user-1", "exp": NOW + 3600}).encode()

        def token_loop(n: int, verify: Any = own_verifier.verify, raw: bytes = own_token) -> None:
            for _ in range(n):
                verify(raw.decode())

        proof = signer.proof("GET", URI, token).encode()

        def proof_loop(
            n: int, check: Any = core.verify, raw: bytes = proof, tok: str = token, jkt: str = jkt
        ) -> None:
            for _ in range(n):
                check(raw.decode(), "GET", URI, tok, jkt, NOW)

        print(f"  minting {needed} {alg} proofs ...", file=sys.stderr, flush=True)
        fresh = iter([signer.proof("GET", URI, token).encode() for _ in range(needed)])
        dpop = DPoPVerifier(clock=lambda: NOW)

        def dpop_loop(
            n: int,
            verify: Any = verifier.verify,
            check: Any = dpop.check,
            proofs: Any = fresh,
            tok: str = token,
        ) -> None:
            for _ in range(n):
                claims = verify(tok)
                check(
                    scheme="DPoP",
                    access_token=tok,
                    claims=claims,
                    proof=next(proofs).decode(),
                    method="GET",
                    uri=URI,
                )

        verifier.verify(token)
        add(f"token {alg}", alg, token_loop)
        add(f"proof {alg}", alg, proof_loop)
        add(f"dpop {alg}", alg, dpop_loop)

    # Warm-up (one round's worth of DPoP proofs is reserved for it).
    for loop in lanes.values():
        loop(calls)
    samples: dict[str, list[float]] = {name: [] for name in lanes}
    order = list(lanes)
    gc.disable()
    try:
        for index in range(rounds):
            rotated = order[index % len(order) :] + order[: index % len(order)]
            for name in rotated:
                samples[name].append(per_call_ns(lanes[name], calls))
    finally:
        gc.enable()
    return [(name, alg, statistics.median(samples[name])) for name, alg in rows]


def flood(bound: int, threads: int = 12, per_thread: int = 8_000) -> dict[str, Any]:
    """12 threads adding replay keys: half unique, half replays of keys already added."""
    store = ReplayStore(bound)
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()
    barrier = threading.Barrier(threads + 1)
    peak = [0]

    def work(seed: int) -> None:
        rng = random.Random(seed)
        local: Counter[str] = Counter()
        mine: list[bytes] = []
        barrier.wait()
        for index in range(per_thread):
            if mine and rng.random() < 0.5:
                key = rng.choice(mine)  # a replay
            else:
                key = rng.getrandbits(256).to_bytes(32, "big")
                mine.append(key)
            # As in the real store: the key is derived from the client's key
            # thumbprint, so one key always lands in its owner's shard.
            owner = f"client-{int.from_bytes(key[:2], 'big') % 1000}"
            try:
                recorded = store.record(key, owner, now=NOW, until=NOW + 70)
                local["accepted" if recorded else "replayed"] += 1
            except DPoPReplayError as exc:
                local["full" if exc.store_full else "over quota"] += 1
            if index % 1000 == 0:
                peak[0] = max(peak[0], len(store))
        with lock:
            outcomes.update(local)

    pool = [threading.Thread(target=work, args=(seed,)) for seed in range(threads)]
    elapsed = timed_threads(pool, barrier)
    return {
        "threads": threads,
        "operations": threads * per_thread,
        "seconds": elapsed,
        "per_second": threads * per_thread / elapsed,
        "outcomes": dict(outcomes),
        "size": len(store),
        "peak": max(peak[0], len(store)),
        "bound": store.max_size,
        "largest_shard": max(store.shard_lengths()),
        "per_key_bound": store.max_per_key,
    }


def flood_proofs(threads: int = 12, unique: int = 1500) -> dict[str, Any]:
    """12 threads presenting the same ``unique`` real ES256 proofs: each is accepted once."""
    signer = ProofSigner("ES256")
    issuer = private_key("RS256", kid="idp-1")
    token = issuer.mint({**CLAIMS, "cnf": {"jkt": signer.jkt}})
    verifier = JWTVerifier(
        [Key.pem(issuer.public_pem(), "RS256", kid="idp-1")],
        audience=CLAIMS["aud"],
        issuer=CLAIMS["iss"],
        clock=lambda: NOW,
    )
    claims = verifier.verify(token)
    proofs = [signer.proof("GET", URI, token) for _ in range(unique)]
    # One client key sends every proof: its quota must hold them all.
    dpop = DPoPVerifier(replay_store=ReplayStore(max_per_key=unique), clock=lambda: NOW)
    accepted: Counter[int] = Counter()
    refused: Counter[str] = Counter()
    lock = threading.Lock()
    barrier = threading.Barrier(threads + 1)

    def work(seed: int) -> None:
        order = list(range(unique))
        random.Random(seed).shuffle(order)
        barrier.wait()
        mine = accepted_proofs(dpop, token, claims, proofs, order, uri=URI)
        with lock:
            accepted.update(mine)
            refused["replayed"] += len(order) - len(mine)

    pool = [threading.Thread(target=work, args=(seed,)) for seed in range(threads)]
    elapsed = timed_threads(pool, barrier)
    return {
        "checks": threads * unique,
        "seconds": elapsed,
        "per_second": threads * unique / elapsed,
        "accepted_once": sum(1 for count in accepted.values() if count == 1),
        "accepted_twice_or_more": sum(1 for count in accepted.values() if count > 1),
        "replays_refused": refused["replayed"],
        "unique": unique,
    }


def build_app(public_pem: bytes) -> Any:
    """The server: the same endpoint with no auth, bearer-only, and DPoP."""
    from fastapi import Depends, FastAPI  # noqa: PLC0415

    from grelmicro.jwt import Claims  # noqa: PLC0415
    from grelmicro.jwt.fastapi import JWTBearer  # noqa: PLC0415
    from grelmicro.jwt.fastapi_dpop import DPoPBearer  # noqa: PLC0415

    verifier = JWTVerifier(
        [Key.pem(public_pem, "RS256", kid="idp-1")],
        audience=CLAIMS["aud"],
        issuer=CLAIMS["iss"],
        clock=lambda: NOW,
    )
    bearer = JWTBearer(verifier)
    # One store big enough for every proof of the run, all of it for one
    # key: the bench sends all of one algorithm's proofs with one client key.
    store = ReplayStore(1 << 20, max_per_key=1 << 20, shards=1)
    dpop = DPoPBearer(
        verifier,
        DPoPVerifier("accepted", replay_store=store, clock=lambda: NOW),
        trust_host_header=True,  # the bench addresses 127.0.0.1:<port>
    )
    app = FastAPI()
    bearer.install(app)

    @app.get("/none")
    async def none() -> dict[str, str]:
        return {"sub": "user-1"}

    @app.get("/bearer")
    async def with_bearer(claims: Claims = Depends(bearer)) -> dict[str, str]:  # noqa: B008
        return {"sub": claims["sub"]}

    @app.get("/dpop")
    async def with_dpop(claims: Claims = Depends(dpop)) -> dict[str, str]:  # noqa: B008
        return {"sub": claims["sub"]}

    return app


def serve(public_pem_path: str) -> None:
    """Server process: bind 127.0.0.1:0, print the port, serve until terminated."""
    import socket  # noqa: PLC0415

    import uvicorn  # noqa: PLC0415

    app = build_app(Path(public_pem_path).read_bytes())
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no Nagle stalls
    print(listener.getsockname()[1], flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False)
    uvicorn.Server(config).run(sockets=[listener])


async def _send_all(port: int, requests: list[bytes], connections: int) -> float:
    """Send every request (keep-alive, ``connections`` at once); the elapsed seconds."""
    import asyncio  # noqa: PLC0415
    import re  # noqa: PLC0415

    pending = iter(requests)
    failures: list[bytes] = []

    async def worker() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            for request in pending:
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                match = re.search(rb"content-length: *(\d+)", head, re.IGNORECASE)
                await reader.readexactly(int(match.group(1)) if match else 0)
                if not head.startswith(b"HTTP/1.1 200"):
                    failures.append(head.split(b"\r\n", 1)[0])
        finally:
            writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(connections)))
    elapsed = time.perf_counter() - start
    if failures:
        raise AssertionError(f"{len(failures)} requests failed, first: {failures[0]!r}")
    return elapsed


def through_uvicorn(rounds: int, requests: int, connections: int) -> list[tuple[str, float]]:
    """Requests per second per lane, median of interleaved rounds."""
    import asyncio  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    issuer = private_key("RS256", kid="idp-1")
    with tempfile.NamedTemporaryFile(suffix=".pem", delete=False) as handle:
        handle.write(issuer.public_pem())
        pem_path = handle.name
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", pem_path], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        host = f"127.0.0.1:{port}"
        plain = issuer.mint(CLAIMS)

        def request(path: str, authorization: str, proof: str | None = None) -> bytes:
            extra = f"DPoP: {proof}\r\n" if proof else ""
            return (
                f"GET {path} HTTP/1.1\r\nHost: {host}\r\n"
                f"Authorization: {authorization}\r\n{extra}\r\n"
            ).encode()

        lanes: dict[str, Any] = {
            "/none": [request("/none", "Bearer x")] * requests,
            "/bearer": [request("/bearer", f"Bearer {plain}")] * requests,
        }
        for alg in ALGORITHMS:
            signer = ProofSigner(alg)
            token = issuer.mint({**CLAIMS, "cnf": {"jkt": signer.jkt}})
            print(f"  signing {(rounds + 1) * requests} {alg} proofs ...", file=sys.stderr)
            proofs = [
                request("/dpop", f"DPoP {token}", signer.proof("GET", f"http://{host}/dpop", token))
                for _ in range((rounds + 1) * requests)
            ]
            lanes[f"/dpop {alg}"] = proofs
        rates: dict[str, list[float]] = {name: [] for name in lanes}
        order = list(lanes)

        async def run() -> None:
            for batch in lanes.values():  # warm-up: the first slice of each lane
                await _send_all(port, batch[:requests], connections)
            for index in range(rounds):
                rotated = order[index % len(order) :] + order[: index % len(order)]
                for name in rotated:
                    batch = lanes[name]
                    part = (
                        batch[(index + 1) * requests : (index + 2) * requests]
                        if name.startswith("/dpop")
                        else batch
                    )
                    elapsed = await _send_all(port, part, connections)
                    rates[name].append(len(part) / elapsed)

        asyncio.run(run())
    finally:
        server.terminate()
        server.wait(10)
        Path(pem_path).unlink()
    return [(name, statistics.median(rates[name])) for name in lanes]


def conditions() -> str:
    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?", "?", "?")
    cpu = platform.processor() or platform.machine()
    try:
        with Path("/proc/cpuinfo").open(encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (
        f"CPython {platform.python_version()} ({sys.implementation.cache_tag}), "
        f"grelmicro-core {metadata.version('grelmicro-core')}, {cpu}, "
        f"{os.cpu_count()} CPUs, load {load[0]:.2f}/{load[1]:.2f}/{load[2]:.2f}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=400, help="calls per lane per round")
    parser.add_argument(
        "--requests", type=int, default=1500, help="HTTP requests per lane per round"
    )
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--no-server", action="store_true", help="skip the uvicorn lanes")
    parser.add_argument("--serve", metavar="PEM", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return 0
    print(f"conditions: {conditions()}")
    results = bench(args.rounds, args.calls)
    by_name = {name: ns for name, _, ns in results}
    hit = by_name["bearer hit"]
    print(f"\nper call, median of {args.rounds} interleaved rounds of {args.calls} calls")
    print(f"bearer path (cache hit, RS256 access token): {hit / 1000:.2f} us\n")
    header = (
        "| proof alg | token verify, cache off (us) | core proof check (us) "
        "| proof / token | bearer + DPoP check (us) | overhead over bearer hit (us) | x bearer |"
    )
    print(header)
    print("|---|---:|---:|---:|---:|---:|---:|")
    for alg in ALGORITHMS:
        token_ns = by_name[f"token {alg}"]
        proof_ns = by_name[f"proof {alg}"]
        dpop_ns = by_name[f"dpop {alg}"]
        print(
            f"| {alg} | {token_ns / 1000:.1f} | {proof_ns / 1000:.1f} | "
            f"{proof_ns / token_ns:.2f} | {dpop_ns / 1000:.1f} | "
            f"{(dpop_ns - hit) / 1000:.1f} | {dpop_ns / hit:.0f} |"
        )
    print("\nreplay store, 12 threads x 8,000 adds, half unique keys, half replays:")
    print(f"  below its bound (65,536): {flood(65_536)}")
    print(f"  saturated (bound 4,096):  {flood(4_096)}")
    print("12 threads presenting the same real ES256 proofs (each proof 12 times):")
    print(f"  {flood_proofs()}")
    if not args.no_server:
        print(
            f"\nthrough uvicorn (1 worker, 127.0.0.1, {args.connections} keep-alive connections, "
            f"{args.requests} requests per lane per round, median of {args.rounds} rounds):\n"
        )
        served = dict(through_uvicorn(args.rounds, args.requests, args.connections))
        print("| endpoint | requests/s | vs /bearer |")
        print("|---|---:|---:|")
        for name, rate in served.items():
            print(f"| {name} | {rate:,.0f} | {rate / served['/bearer']:.2f} |")
    print(f"\nconditions (end): {conditions()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
