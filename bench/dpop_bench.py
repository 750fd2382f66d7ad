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

    .venv/bin/python bench/dpop_bench.py               # the table
    .venv/bin/python bench/dpop_bench.py --rounds 3    # quicker
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "jwt"))

from dpop_proofs import ProofSigner
from minting import NOW, private_key

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
                store.add(key, owner, now=NOW, deadline=NOW + 70)
                local["accepted"] += 1
            except DPoPReplayError as exc:
                local["full" if exc.store_full else "replayed"] += 1
            if index % 1000 == 0:
                peak[0] = max(peak[0], len(store))
        with lock:
            outcomes.update(local)

    pool = [threading.Thread(target=work, args=(seed,)) for seed in range(threads)]
    for thread in pool:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in pool:
        thread.join()
    elapsed = time.perf_counter() - start
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
        "shard_bound": store.shard_size,
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
    dpop = DPoPVerifier(clock=lambda: NOW)
    accepted: Counter[int] = Counter()
    refused: Counter[str] = Counter()
    lock = threading.Lock()
    barrier = threading.Barrier(threads + 1)

    def work(seed: int) -> None:
        order = list(range(unique))
        random.Random(seed).shuffle(order)
        mine: list[int] = []
        local: Counter[str] = Counter()
        barrier.wait()
        for index in order:
            try:
                dpop.check(
                    scheme="DPoP",
                    access_token=token,
                    claims=claims,
                    proof=proofs[index],
                    method="GET",
                    uri=URI,
                )
                mine.append(index)
            except DPoPReplayError:
                local["replayed"] += 1
        with lock:
            accepted.update(mine)
            refused.update(local)

    pool = [threading.Thread(target=work, args=(seed,)) for seed in range(threads)]
    for thread in pool:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in pool:
        thread.join()
    elapsed = time.perf_counter() - start
    return {
        "checks": threads * unique,
        "seconds": elapsed,
        "per_second": threads * unique / elapsed,
        "accepted_once": sum(1 for count in accepted.values() if count == 1),
        "accepted_twice_or_more": sum(1 for count in accepted.values() if count > 1),
        "replays_refused": refused["replayed"],
        "unique": unique,
    }


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
    args = parser.parse_args()
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
    print(f"\nconditions (end): {conditions()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
