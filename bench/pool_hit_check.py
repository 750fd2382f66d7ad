"""Regression check: a cache hit from a pool thread costs at most 2x a hit in the owning thread.

On free-threaded CPython 3.13 a hit used to cost ~25x more from a thread
other than the one that built the verifier and stored the entry (the dict's
lock-free read failed on keys that thread owned; see docs/design-notes.md,
"Cache hits from pool threads"). This builds one ``JWTVerifier`` (HS256,
default cache) in the main thread, verifies the token there once, starts one
pool thread afterwards, then times rounds of cache hits alternately in the
main thread and in the pool thread (never both at once). Each side keeps its
fastest round: a noisy, shared machine only ever adds time, so the minimum
over many rounds is the cost that neighbours did not inflate. Exit status 1
when pool / owner > the limit.

Standard library only besides grelmicro (runs on 3.13t, where cryptography
does not install). ``python bench/pool_hit_check.py [--rounds N] [--limit X]``
"""

from __future__ import annotations

import argparse
import sys
import threading
import time

from fixtures import encode, typical_payload

from grelmicro.jwt import JWTVerifier, Key

SECRET = b"pool-hit-check-secret-0123456789abcdef"


def canonical_token(now: int) -> bytes:
    """The canonical benchmark token (shared/bench-token.md), HS256."""
    return encode("HS256", SECRET, typical_payload(now)).encode()


def hit_round(verify: object, raw: bytes, calls: int) -> float:
    """Nanoseconds per hit over ``calls`` hits, each on a token decoded fresh from bytes."""
    check = verify
    start = time.perf_counter_ns()
    for _ in range(calls):
        check(raw.decode())  # type: ignore[operator]
    return (time.perf_counter_ns() - start) / calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--calls", type=int, default=2000, help="hits per round")
    parser.add_argument("--limit", type=float, default=2.0)
    opts = parser.parse_args()

    verifier = JWTVerifier(
        [Key.secret(SECRET, "HS256", kid="k1")],
        audience="https://api.example.com",
        issuer="https://issuer.example.com/",
    )
    raw = canonical_token(int(time.time()))
    first = verifier.verify(raw.decode())  # stored by the owning (main) thread
    assert verifier.verify(raw.decode()) is first, "not a cache hit"
    assert verifier.cache_info().size == 1

    go, done = threading.Semaphore(0), threading.Semaphore(0)
    pool_times: list[float] = []
    pool_hits: list[bool] = []

    def pool_thread() -> None:  # started after the verifier was built, like a server's pool
        # The first call reads the shared table and builds this thread's own
        # claims around the stored payload; the next ones are hits in the
        # thread's view and return that same object.
        mine = verifier.verify(raw.decode())
        pool_hits.append(mine == first and verifier.verify(raw.decode()) is mine)
        for _ in range(opts.rounds):
            go.acquire()
            pool_times.append(hit_round(verifier.verify, raw, opts.calls))
            done.release()

    worker = threading.Thread(target=pool_thread, name="pool-1")
    worker.start()
    owner_times: list[float] = []
    hit_round(verifier.verify, raw, opts.calls)  # warm-up
    for _ in range(opts.rounds):
        owner_times.append(hit_round(verifier.verify, raw, opts.calls))
        go.release()
        done.acquire()
    worker.join()

    owner, pool = min(owner_times), min(pool_times)
    ratio = pool / owner
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    print(
        f"pool-thread cache hit check ({sys.version.split()[0]}, "
        f"{'GIL' if gil else 'free-threaded'}): owner thread {owner:.0f} ns, "
        f"pool thread {pool:.0f} ns, ratio {ratio:.2f} (limit {opts.limit:.2f}; "
        f"fastest of {opts.rounds} rounds of {opts.calls} hits each)"
    )
    if not all(pool_hits):
        print("FAIL: the pool thread did not get the cached claims", file=sys.stderr)
        return 1
    if ratio > opts.limit:
        print(f"FAIL: a pool-thread hit costs {ratio:.2f}x an owner-thread hit", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
