"""Inline or offloaded? Verifying on the event loop vs in a worker thread.

    python bench/offload.py            # 15 interleaved rounds, prints a table
    python bench/offload.py --rounds 5

An async handler can call ``verifier.verify(token)`` inline, or hand it to a
thread with ``await asyncio.to_thread(verifier.verify, token)`` (or
``loop.run_in_executor`` with a pool). This script awaits N handlers in a
row on one event loop, each verifying one token, in three ways, with the
lanes interleaved round by round in one process: inline, ``to_thread``, and
``run_in_executor`` on a one-thread pool. It prints the median and minimum
per-call time and the ratio to the inline lane, for a cache hit and for full
verifications (cache off) of HS256, ES256 and EdDSA tokens. Tokens are
decoded fresh from ``bytes`` for every call, keys parsed once
(``shared/bench-token.md``'s method, with the canonical claims).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fixtures import encode, forge, typical_payload

from grelmicro.jwt import JWTVerifier, Key
from grelmicro.jwt._demo import AUDIENCE, ISSUER

CALLS = 2000


def cases(now: int) -> list[tuple[str, Key, bytes, int]]:
    """(label, key, token bytes, cache size) per case."""
    secret = os.urandom(32)
    ec_key = forge.generate("ES256")
    ed_key = forge.generate("EdDSA")
    payload = typical_payload(now)

    def signed(alg: str, key: Any) -> bytes:
        return encode(alg, key, payload).encode()

    def pem(key: Any) -> bytes:
        return forge.spki_pem(key)

    hs = signed("HS256", secret)
    return [
        ("HS256 cache hit", Key.secret(secret, "HS256", kid="k1"), hs, 1024),
        ("HS256 full verify", Key.secret(secret, "HS256", kid="k1"), hs, 0),
        (
            "ES256 full verify",
            Key.pem(pem(ec_key), "ES256", kid="k1"),
            signed("ES256", ec_key),
            0,
        ),
        (
            "EdDSA full verify",
            Key.pem(pem(ed_key), "EdDSA", kid="k1"),
            signed("EdDSA", ed_key),
            0,
        ),
    ]


Lane = Callable[[bytes], Awaitable[float]]


def lanes(verifier: JWTVerifier, pool: ThreadPoolExecutor) -> dict[str, Lane]:
    verify = verifier.verify

    async def inline(raw: bytes) -> float:
        start = time.perf_counter()
        for _ in range(CALLS):
            verify(raw.decode())
        return (time.perf_counter() - start) / CALLS

    async def to_thread(raw: bytes) -> float:
        start = time.perf_counter()
        for _ in range(CALLS):
            await asyncio.to_thread(verify, raw.decode())
        return (time.perf_counter() - start) / CALLS

    async def executor(raw: bytes) -> float:
        loop = asyncio.get_running_loop()
        start = time.perf_counter()
        for _ in range(CALLS):
            await loop.run_in_executor(pool, verify, raw.decode())
        return (time.perf_counter() - start) / CALLS

    return {
        "inline verify()": inline,
        "await asyncio.to_thread(verify)": to_thread,
        "await run_in_executor(1-thread pool)": executor,
    }


async def run(rounds: int) -> list[tuple[str, str, float, float, float]]:
    now = int(time.time())
    rows = []
    with ThreadPoolExecutor(max_workers=1) as pool:
        for label, key, token, cache_size in cases(now):
            verifier = JWTVerifier(
                keys=[key], audience=AUDIENCE, issuer=ISSUER, cache_size=cache_size
            )
            assert verifier.verify(token).subject == "user-1234567890"
            timed = lanes(verifier, pool)
            samples: dict[str, list[float]] = {name: [] for name in timed}
            for lane in timed.values():  # warm-up
                await lane(token)
            gc.disable()
            try:
                for index in range(rounds):
                    names = list(timed)
                    names = names[index % len(names) :] + names[: index % len(names)]
                    for name in names:
                        samples[name].append(await timed[name](token))
            finally:
                gc.enable()
            reference = statistics.median(samples["inline verify()"])
            for name, values in samples.items():
                median = statistics.median(values)
                rows.append((label, name, median * 1e6, min(values) * 1e6, median / reference))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    rows = asyncio.run(run(args.rounds))
    load = " / ".join(f"{value:.2f}" for value in os.getloadavg())
    print(
        f"CPython {platform.python_version()}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load {load}; {args.rounds} rounds of {CALLS} calls per lane"
    )
    print("| case | lane | median µs | min µs | ratio to inline |")
    print("|---|---|---:|---:|---:|")
    for label, name, median, low, ratio in rows:
        print(f"| {label} | {name} | {median:.2f} | {low:.2f} | {ratio:.2f}x |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
