"""Runs the Python suites inside one interpreter and writes their results as JSON.

Started by ``run.py`` with the interpreter of one bench venv; can also be run
by hand: ``python bench/worker.py --fixtures F --suites algs --out R.json``.
"""

from __future__ import annotations

# grelmicro_core is imported where needed: an interpreter may lack it.
# ruff: noqa: PLC0415
import argparse
import contextlib
import gc
import hashlib
import http.server
import json
import os
import platform
import statistics
import sys
import sysconfig
import threading
import time
import tracemalloc
from importlib import metadata
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import lanes as lanes_mod
from timing import (
    Lane,
    check,
    core_build,
    cyclic_garbage,
    expect_rejection,
    run_rounds,
    timed_threads,
)

SUITES = ("algs", "algs-extra", "sizes", "secrets", "reject", "keysource", "threads", "memory")
REJECTIONS = ("tampered", "wrong_key", "expired", "wrong_aud", "malformed", "unknown_kid")
DISTS = (
    "grelmicro-core",
    "pyjwt",
    "pyjwt-rs",
    "ryjwt",
    "joserfc",
    "authlib",
    "jwcrypto",
    "python-jose",
    "cryptography",
    "msgspec",
    "pydantic",
    "pydantic-core",
)


def log(msg: str) -> None:
    print(f"[{ENV}] {msg}", file=sys.stderr, flush=True)


ENV = "?"


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def meta() -> dict:
    versions = {}
    for dist in DISTS:
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[dist] = metadata.version(dist)
    old = lanes_mod.load_pyjwt_old()
    if old is not None:
        versions["pyjwt (side folder)"] = old.__version__
    info: dict[str, Any] = {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "free_threaded": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
        "gil_enabled": getattr(sys, "_is_gil_enabled", lambda: True)(),
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "loadavg_start": list(os.getloadavg()),
        "versions": versions,
    }
    with contextlib.suppress(ImportError):
        import grelmicro_core

        info["grelmicro_core_source_hash"] = grelmicro_core.SOURCE_HASH
        # A profile-guided build or not: the figures depend on it.
        if "grelmicro-core" in versions:
            versions["grelmicro-core"] += f" ({core_build(grelmicro_core)})"
    info["grelmicro_layer"] = lanes_mod.layer_available() or "available"
    return info


def record(suite: str, case: str, lane: Lane, **extra: Any) -> dict:
    rec = {
        "suite": suite,
        "case": case,
        "lane_id": lane.id,
        "lane": lane.name,
        "group": lane.group,
        "status": lane.status,
        "reason": lane.reason,
        "note": lane.note,
    }
    rec.update(extra)
    return rec


def timed_records(suite: str, case_name: str, lanes: list[Lane], timings: dict) -> list[dict]:
    out = []
    for lane in lanes:
        t = timings.get(lane.id)
        if t is None:
            out.append(record(suite, case_name, lane))
            continue
        out.append(
            record(
                suite,
                case_name,
                lane,
                median_ns=t.median,
                min_ns=t.minimum,
                rounds=len(t.per_call_ns),
                calls_per_round=t.calls,
            )
        )
    return out


def prepare(case: dict, fx: dict, only: set[str] | None = None) -> list[Lane]:
    lanes = lanes_mod.build_lanes(case, fx, only)
    for lane in lanes:
        if lane.status != "ok":
            continue
        try:
            lane.compile()
        except Exception as exc:
            lane.status, lane.reason = "failed", f"compile: {exc!r}"[:200]
            continue
        if lane.checks == "none":
            continue
        problem = check(lane, case)
        if problem is not None:
            lane.status, lane.reason = "failed", problem
    return lanes


def run_verify_suite(suite: str, cases: list[dict], fx: dict, opts: argparse.Namespace) -> list:
    results = []
    for case in cases:
        t0 = time.perf_counter()
        lanes = prepare(case, fx)
        ready = [lane for lane in lanes if lane.status == "ok"]
        raws = {lane.id: case["tokens"]["valid"].encode() for lane in ready}
        timings = run_rounds(ready, raws, opts.rounds, opts.round_ms)
        results.extend(timed_records(suite, case["name"], lanes, timings))
        log(f"{suite} {case['name']}: {len(ready)} lanes timed in {time.perf_counter() - t0:.1f}s")
    return results


REJECT_SKIP = {"floor-loop", "floor-b64json", "floor-hashlib", "floor-sha-core", "floor-sig"}


def run_reject_suite(cases: list[dict], fx: dict, opts: argparse.Namespace) -> list:
    results = []
    for case in cases:
        lanes = [lane for lane in prepare(case, fx) if lane.id not in REJECT_SKIP]
        for kind in REJECTIONS:
            raw = case["tokens"][kind].encode()
            kind_lanes = []
            for lane in lanes:
                copy = Lane(**{k: v for k, v in vars(lane).items() if not k.startswith("_")})
                if copy.status == "ok":
                    copy.compile()
                    problem = expect_rejection(copy, raw)
                    if problem:
                        copy.status, copy.reason = "failed", f"accepted the {kind} token"
                kind_lanes.append(copy)
            ready = [lane for lane in kind_lanes if lane.status == "ok"]
            timings = run_rounds(
                ready,
                dict.fromkeys((lane.id for lane in ready), raw),
                opts.rounds,
                opts.round_ms,
                reject=True,
            )
            records = timed_records("reject", f"{case['name']} {kind}", kind_lanes, timings)
            for rec, lane in zip(records, kind_lanes, strict=True):
                if lane.status == "ok":
                    rec["cyclic_garbage_per_call"] = cyclic_garbage(lane, raw, reject=True)
            results.extend(records)
        log(f"reject {case['name']}: done")
    return results


class _JWKSHandler(http.server.BaseHTTPRequestHandler):
    body = b"{}"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "max-age=3600")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        pass


def run_keysource_suite(cases: list[dict], fx: dict, opts: argparse.Namespace) -> list:
    """The same verification with the key given as PEM/secret, JWK, JWKS, or a JWKS URL."""
    import grelmicro_core as gcore

    results = []
    for case in cases:
        alg = case["alg"]
        jwks = json.dumps({"keys": [dict(fx["keys"][case["key"]]["jwk"], alg=alg)]}).encode()
        lanes: list[Lane] = []
        source_name = "secret" if lanes_mod.is_hmac(case) else "PEM"
        for source, label in ((source_name.lower(), source_name), ("jwk", "JWK"), ("jwks", "JWKS")):
            try:
                verifier = lanes_mod.core_verifier(gcore, case, fx, source)
            except Exception as exc:
                lanes.append(
                    Lane(
                        f"core-{source}",
                        f"grelmicro core, key from {label}",
                        "grelmicro",
                        status="failed",
                        reason=repr(exc)[:200],
                    )
                )
                continue
            lanes.append(
                Lane(
                    f"core-{source}",
                    f"grelmicro core, key from {label}",
                    "grelmicro",
                    "verify(tok, now())",
                    {"verify": verifier.verify, "now": time.time},
                )
            )
        why = lanes_mod.layer_available()
        server = None
        layer_sources = [
            ("keys", f"grelmicro full, keys=[{source_name}]"),
            ("jwks", "grelmicro full, jwks=document"),
        ]
        if not lanes_mod.is_hmac(case):
            layer_sources.append(("jwks_url", "grelmicro full, jwks_url (after fetch)"))
        for source, label in layer_sources:
            lane_id = f"layer-{source}"
            reason = why
            if reason is None and source == "jwks_url" and not lanes_mod.layer_accepts("jwks_url"):
                reason = "JWTVerifier has no jwks_url option yet"
            if reason is not None:
                lanes.append(lanes_mod.skipped(lane_id, label, "grelmicro", reason))
                continue
            options: dict[str, Any] = {"cache_size": 0}
            try:
                if source == "jwks_url":
                    handler = type("H", (_JWKSHandler,), {"body": jwks})
                    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
                    threading.Thread(target=server.serve_forever, daemon=True).start()
                    options["url"] = f"http://127.0.0.1:{server.server_port}/jwks.json"
                verifier = lanes_mod.layer_verifier(case, fx, source, **options)
                lanes.append(
                    Lane(
                        lane_id,
                        label,
                        "grelmicro",
                        "verify(tok)",
                        {"verify": verifier.verify},
                        lanes_mod.mapping_of,
                    )
                )
            except Exception as exc:
                lanes.append(
                    Lane(lane_id, label, "grelmicro", status="failed", reason=repr(exc)[:200])
                )
        lanes.extend(lanes_mod.pyjwt_lanes(case, fx))
        for lane in lanes:
            if lane.status == "ok":
                lane.compile()
                problem = check(lane, case)
                if problem:
                    lane.status, lane.reason = "failed", problem
        ready = [lane for lane in lanes if lane.status == "ok"]
        raws = {lane.id: case["tokens"]["valid"].encode() for lane in ready}
        timings = run_rounds(ready, raws, opts.rounds, opts.round_ms)
        results.extend(timed_records("keysource", case["name"], lanes, timings))
        if server is not None:
            server.shutdown()
            server.server_close()
        log(f"keysource {case['name']}: done")
    return results


THREAD_LANES = {"grelmicro-core", "grelmicro-full", "grelmicro-hit-digest", "pyjwt", "ryjwt"}
#: Lanes whose pool-thread cost is compared with the building thread's.
POOL_LANES = {"grelmicro-full", "grelmicro-hit-digest"}


class SharedControl:
    """The thread suite's reference-counting control (see run_threads_suite)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = object()

    def get(self, token: str) -> object:
        return self.value


def thread_rate(lane: Lane, raw: bytes, threads: int, calls: int) -> float:
    barrier = threading.Barrier(threads + 1)

    def work() -> None:
        barrier.wait()
        lane.loop(calls, raw)

    pool = [threading.Thread(target=work) for _ in range(threads)]
    return threads * calls / timed_threads(pool, barrier)


def owner_and_pool_ns(lane: Lane, raw: bytes, calls: int, rounds: int) -> tuple[float, float]:
    """Fastest per-call time in the building (main) thread and in one pool thread.

    The pool thread is started here, after the lane's verifier was built and
    its cache filled by the main thread, as a server's pool is; the two sides
    take turns, never running at once.
    """
    go, done = threading.Semaphore(0), threading.Semaphore(0)
    pool: list[float] = []

    def work() -> None:
        for _ in range(rounds):
            go.acquire()
            t0 = time.perf_counter_ns()
            lane.loop(calls, raw)
            pool.append((time.perf_counter_ns() - t0) / calls)
            done.release()

    worker = threading.Thread(target=work)
    worker.start()
    owner = []
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        lane.loop(calls, raw)
        owner.append((time.perf_counter_ns() - t0) / calls)
        go.release()
        done.acquire()
    worker.join()
    return min(owner), min(pool)


def run_threads_suite(cases: list[dict], fx: dict, opts: argparse.Namespace) -> list:
    """Verifications per second with 1, 2 and 4 threads sharing one verifier.

    Every lane is built in the main thread before any pool thread starts. The
    product lanes (grelmicro full verify and cache hit) also report a pool
    thread's time per call against the building thread's.
    """
    results = []
    gc.disable()
    try:
        for case in cases:
            lanes = prepare(case, fx, THREAD_LANES)
            # Controls: how much of a second core this shared machine gives right
            # now. One hashes 64 KiB (no lock, no shared Python object touched);
            # the other calls a method of one shared object that returns one
            # shared object, the least a shared verifier's hit can cost in
            # reference counting.
            shared = SharedControl()
            controls = [
                Lane(
                    "control-sha256",
                    "control: hashlib.sha256 of 64 KiB (holds no lock)",
                    "floor",
                    "sha(big)",
                    {"sha": hashlib.sha256, "big": bytes(65536)},
                    checks="none",
                ),
                Lane(
                    "control-shared-call",
                    "control: a method of one shared object returning a shared object",
                    "floor",
                    "shared.get(tok)",
                    {"shared": shared},
                    checks="none",
                ),
            ]
            for control in controls:
                control.compile()
            lanes[:0] = controls
            raw = case["tokens"]["valid"].encode()
            for lane in lanes:
                if lane.status != "ok":
                    results.append(record("threads", case["name"], lane))
                    continue
                lane.loop(1000, raw)
                t0 = time.perf_counter_ns()
                lane.loop(200, raw)
                per = (time.perf_counter_ns() - t0) / 200
                calls = max(50, int(opts.thread_ms * 1e6 / per))
                rates: dict[int, list[float]] = {1: [], 2: [], 4: []}
                for _ in range(opts.thread_rounds):
                    for threads, got in rates.items():
                        got.append(thread_rate(lane, raw, threads, calls))
                r1, r2, r4 = (statistics.median(rates[n]) for n in (1, 2, 4))
                extra = {}
                if lane.id in POOL_LANES:
                    owner, pool = owner_and_pool_ns(
                        lane, raw, max(50, calls // 10), max(10, opts.thread_rounds * 4)
                    )
                    extra = {"owner_ns": owner, "pool_ns": pool, "pool_ratio": pool / owner}
                results.append(
                    record(
                        "threads",
                        case["name"],
                        lane,
                        one_thread_per_s=r1,
                        two_threads_per_s=r2,
                        four_threads_per_s=r4,
                        speedup=r2 / r1,
                        speedup4=r4 / r1,
                        best_speedup=max(rates[2]) / max(rates[1]),
                        rounds=opts.thread_rounds,
                        calls_per_thread=calls,
                        **extra,
                    )
                )
            log(f"threads {case['name']}: done")
    finally:
        gc.enable()
    return results


MEMORY_LANES = {
    "grelmicro-core",
    "grelmicro-full",
    "grelmicro-hit-digest",
    "grelmicro-hit-token",
    "pyjwt",
    "pyjwt-old",
    "pyjwt-rs",
    "ryjwt",
    "ryjwt-struct",
    "joserfc",
    "authlib",
    "jwcrypto",
    "python-jose",
}


def run_memory_suite(cases: list[dict], fx: dict, opts: argparse.Namespace) -> list:
    """RSS before/after many verifications, and what tracemalloc sees per call."""
    results = []
    for case in cases:
        lanes = prepare(case, fx, MEMORY_LANES)
        raw = case["tokens"]["valid"].encode()
        for lane in lanes:
            if lane.status != "ok":
                results.append(record("memory", case["name"], lane))
                continue
            lane.loop(20_000 if opts.mem_calls >= 200_000 else 2_000, raw)
            t0 = time.perf_counter_ns()
            lane.loop(1000, raw)
            per = (time.perf_counter_ns() - t0) / 1000
            calls = opts.mem_calls
            if lane.group != "grelmicro":  # peers: bounded by time, not count
                calls = min(calls, max(10_000, int(opts.mem_seconds * 1e9 / per)))
            gc.collect()
            rss0 = rss_bytes()
            t0 = time.perf_counter()
            lane.loop(calls, raw)
            seconds = time.perf_counter() - t0
            gc.collect()
            rss1 = rss_bytes()
            # tracemalloc: blocks/bytes the result holds, peak during one call, net over 1,000.
            tracemalloc.start()
            lane.loop(100, raw)
            before = tracemalloc.take_snapshot()
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            result = lane.once(raw)
            peak = tracemalloc.get_traced_memory()[1] - base
            after = tracemalloc.take_snapshot()
            diff = after.compare_to(before, "filename")
            held_blocks = sum(d.count_diff for d in diff)
            held_bytes = sum(d.size_diff for d in diff)
            del result
            cur0 = tracemalloc.get_traced_memory()[0]
            lane.loop(1000, raw)
            gc.collect()
            net = (tracemalloc.get_traced_memory()[0] - cur0) / 1000
            tracemalloc.stop()
            results.append(
                record(
                    "memory",
                    case["name"],
                    lane,
                    calls=calls,
                    seconds=seconds,
                    rss_before=rss0,
                    rss_after=rss1,
                    result_blocks=held_blocks,
                    result_bytes=held_bytes,
                    peak_bytes_per_call=peak,
                    net_bytes_per_call=net,
                    cyclic_garbage_per_call=cyclic_garbage(lane, raw, reject=False),
                )
            )
            log(
                f"memory {case['name']} {lane.id}: {calls} calls, "
                f"RSS {rss0 >> 10} -> {rss1 >> 10} KiB"
            )
    return results


def main() -> int:
    global ENV
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixtures", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--env", default="manual")
    parser.add_argument("--suites", default="algs")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--round-ms", type=float, default=20.0)
    parser.add_argument("--reject-cases", default="HS256,RS256")
    parser.add_argument("--keysource-cases", default="HS256,RS256,ES256")
    parser.add_argument("--thread-cases", default="HS256,RS256,ES256,EdDSA")
    parser.add_argument("--thread-ms", type=float, default=300.0)
    parser.add_argument("--thread-rounds", type=int, default=5)
    parser.add_argument("--memory-cases", default="HS256")
    parser.add_argument("--mem-calls", type=int, default=2_000_000)
    parser.add_argument("--mem-seconds", type=float, default=6.0)
    opts = parser.parse_args()
    ENV = opts.env
    fx = json.loads(opts.fixtures.read_text())
    by_name = {case["name"]: case for case in fx["cases"]}
    info = meta()
    log(f"CPython {info['python']} ({sys.executable}); grelmicro.jwt: {info['grelmicro_layer']}")
    # Suites run over the cases an option names: (the names, the runner).
    over_named_cases = {
        "reject": (opts.reject_cases, run_reject_suite),
        "keysource": (opts.keysource_cases, run_keysource_suite),
        "threads": (opts.thread_cases, run_threads_suite),
        "memory": (opts.memory_cases, run_memory_suite),
    }
    results: list[dict] = []
    started = time.time()
    for suite in opts.suites.split(","):
        t0 = time.perf_counter()
        if suite in ("algs", "algs-extra", "sizes", "secrets"):
            cases = [c for c in fx["cases"] if c["suite"] == suite]
            results += run_verify_suite(suite, cases, fx, opts)
        elif suite in over_named_cases:
            names, run = over_named_cases[suite]
            results += run([by_name[name] for name in names.split(",")], fx, opts)
        else:
            parser.error(f"unknown suite {suite!r} (one of {', '.join(SUITES)})")
        rss = rss_bytes()
        info.setdefault("rss_after_suite", {})[suite] = rss
        log(f"suite {suite} took {time.perf_counter() - t0:.1f}s; RSS {rss >> 20} MiB")
    info["loadavg_end"] = list(os.getloadavg())
    info["gil_enabled_end"] = getattr(sys, "_is_gil_enabled", lambda: True)()
    info["seconds"] = time.time() - started
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.write_text(json.dumps({"env": ENV, "meta": info, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
