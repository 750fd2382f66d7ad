"""Thread scaling of the product object: one ``JWTVerifier``, pool threads started after it.

As a server runs it: every verifier is built (and, for the cache lanes, its
cache filled) in the main thread; then 1, 2 and 4 pool threads, started
for each measurement, call ``verifier.verify(raw.decode())`` on the
canonical token decoded fresh from bytes. Lanes per algorithm:

- ``control``: ``raw.decode()`` then ``hashlib.sha256`` of the text's bytes
  three times, no verifier: what the machine's second core gives right now
  to work that holds no lock (it shares only the interpreter's own objects);
- ``hit digest`` / ``hit token-key``: cache hits (default key, raw-token key);
- ``cache off``: a full verification per call.

Every lane is checked before timing (right claims back; an expired, a
wrong-audience and a tampered token refused). Each thread count runs
``--rounds`` times, interleaved with the others; the report gives the
median calls per second and the ratios 2/1 and 4/1, plus the fastest
round. Standard library and grelmicro only (runs on 3.13t): the tokens and
keys come from ``bench/fixtures.py``'s JSON, made on an interpreter with
``cryptography``::

    python bench/fixtures.py /tmp/fixtures.json
    python3.13t -X gil=0 bench/thread_scaling.py /tmp/fixtures.json
"""

from __future__ import annotations

import argparse
import base64
import gc
import hashlib
import json
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grelmicro.jwt import JWTVerifier, Key, TokenRejectedError

Call = Callable[[str], object]


def verifier_for(case: dict[str, Any], fx: dict[str, Any], **options: Any) -> JWTVerifier:
    material = fx["keys"][case["key"]]
    alg = case["alg"]
    if "secret_b64" in material:
        key = Key.secret(base64.b64decode(material["secret_b64"]), alg, kid=fx["kid"])
    else:
        key = Key.pem(material["pem"], alg, kid=fx["kid"])
    return JWTVerifier(
        [key],
        audience=fx["audience"],
        issuer=fx["issuer"],
        max_token_size=case["max_token_size"],
        **options,
    )


def checked(verifier: JWTVerifier, case: dict[str, Any]) -> Call:
    """``verifier.verify`` after the checks every lane must pass."""
    tokens = case["tokens"]
    claims = verifier.verify(tokens["valid"])
    if claims.subject != case["payload"]["sub"]:
        raise SystemExit(f"{case['name']}: wrong claims back")
    for bad in ("expired", "wrong_aud", "tampered"):
        try:
            verifier.verify(tokens[bad])
        except TokenRejectedError:
            continue
        raise SystemExit(f"{case['name']}: the {bad} token was accepted")
    return verifier.verify


def control(text: str) -> object:
    """Three SHA-256 of the token: work that holds no lock."""
    data = text.encode()
    return hashlib.sha256(hashlib.sha256(hashlib.sha256(data).digest()).digest()).digest()


def rate(call: Call, raw: bytes, threads: int, calls: int) -> float:
    """Calls per second over ``threads`` pool threads started now.

    Each thread's loop is ``verify(raw.decode())`` with ``verify`` a local of
    the thread (the object a server's handler would load), so the loop
    itself shares nothing but that object and ``bytes.decode`` (on 3.13t a
    shared function, a closure cell or a global read per call would each add
    their own contention to every lane).
    """
    barrier = threading.Barrier(threads + 1)

    def work() -> None:
        verify = call
        mine = bytes(raw)  # each thread decodes its own bytes
        barrier.wait()
        for _ in range(calls):
            verify(mine.decode())
        barrier.wait()

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for thread in pool:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    barrier.wait()
    elapsed = time.perf_counter() - start
    for thread in pool:
        thread.join()
    return threads * calls / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fixtures", type=Path)
    parser.add_argument("--cases", default="HS256,RS256,ES256,EdDSA")
    parser.add_argument("--threads", default="1,2,4")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ms", type=float, default=300.0, help="length of one thread's round")
    opts = parser.parse_args()
    fx = json.loads(opts.fixtures.read_text())
    by_name = {case["name"]: case for case in fx["cases"]}
    counts = [int(n) for n in opts.threads.split(",")]
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    print(
        f"# {platform.python_implementation()} {sys.version.split()[0]} "
        f"({'GIL' if gil else 'free-threaded'}), {platform.machine()}, "
        f"medians of {opts.rounds} interleaved rounds of ~{opts.ms:.0f} ms per thread"
    )
    print(
        "| case | lane | 1 thread /s | "
        + " | ".join(f"{n}/1" for n in counts[1:])
        + " | best 2/1 |"
    )
    print("|---|---|---:|" + "---:|" * len(counts[1:]) + "---:|")
    gc.disable()
    for name in opts.cases.split(","):
        case = by_name[name]
        raw = case["tokens"]["valid"].encode()
        lanes: list[tuple[str, Call]] = [
            ("control", control),
            ("hit digest", checked(verifier_for(case, fx), case)),
            ("hit token-key", checked(verifier_for(case, fx, cache_key="token"), case)),
            ("cache off", checked(verifier_for(case, fx, cache_size=0), case)),
        ]
        for lane, call in lanes:
            for _ in range(1000):
                call(raw.decode())
            start = time.perf_counter_ns()
            for _ in range(300):
                call(raw.decode())
            per = (time.perf_counter_ns() - start) / 300
            calls = max(100, int(opts.ms * 1e6 / per))
            rates: dict[int, list[float]] = {n: [] for n in counts}
            for _ in range(opts.rounds):
                for n in counts:
                    rates[n].append(rate(call, raw, n, calls))
            medians = {n: statistics.median(rates[n]) for n in counts}
            ratios = " | ".join(f"{medians[n] / medians[1]:.2f}x" for n in counts[1:])
            best = max(rates[2]) / max(rates[1]) if 2 in rates else float("nan")
            print(f"| {name} | {lane} | {medians[1]:,.0f} | {ratios} | {best:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
