"""Two source trees of grelmicro, side by side in one run: cache hit and full verify.

    .venv/bin/python bench/ab_trees.py BASE_PYTHON NEW_PYTHON [--rounds 21]

Each argument is the interpreter of one tree's dev environment (the
``.venv/bin/python`` that ``scripts/setup.sh`` made there: it holds the core
wheel built from that tree and that tree's ``grelmicro``, installed editable).
``setup.sh`` installs the core's quicker ``hooks`` build (no fat LTO): for the
shipped code generation, ``python scripts/corewheel.py PYTHON --install``
first in each tree.
The interpreter running this driver needs ``cryptography`` (the new tree's
``.venv`` has it): it makes the canonical tokens once with ``fixtures.py``
(``shared/bench-token.md``: HS256, RS256, ES256, EdDSA) and hands the same
file to both sides.

Then both interpreters run the same lane script (this file, ``--worker``):
each builds, per algorithm, a verifier with the default cache and one with
``cache_size=0`` through the public ``JWTVerifier(keys=..., audience=...,
issuer=...)`` (``lanes.layer_verifier``; only constructor arguments both trees
have), checks every lane as the bench does (``timing.check``: right claims
back; expired, wrong-audience and tampered tokens refused) and warms it up.
The two worker processes stay alive for the whole run and take turns: one
round is "base times each of its lanes once, then new does" (the order of the
two sides flips every round, the order of the lanes rotates), so a burst of
load on this shared machine falls on both sides alike. A lane's call is the
bench's (``timing.Lane``): the token decoded fresh from ``bytes``, then
``verify(tok)``, in a plain loop, gc off.

Printed: a markdown table of the median and minimum ns/call per side over the
rounds and the ratios new/base of medians and of minimums (below 1: the new
tree is faster), then the conditions (interpreters, core versions and build
kind, load averages at start and end, rounds and calls).
"""

# A bench driver: it runs the interpreters it is given, and prints.
# The tables are typeset: × for ratios.
# ruff: noqa: RUF001, RUF003, PLC0415
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ALGS = ("HS256", "RS256", "ES256", "EdDSA")
# Calls per lane and round, chosen so a round of a lane lasts ~10-40 ms here.
HIT_CALLS = 20_000
MISS_CALLS = {"HS256": 20_000, "RS256": 2_000, "ES256": 1_000, "EdDSA": 1_000}
WARMUP = 1_000


# ---------------------------------------------------------------- the worker


def worker(fixtures_path: str) -> int:
    """One side: build and check the lanes, then time one round per line read."""

    sys.path.insert(0, str(HERE))
    import grelmicro_core
    from lanes import layer_verifier, mapping_of
    from timing import Lane, check, core_build

    import grelmicro

    fx = json.loads(Path(fixtures_path).read_text())
    cases = {c["name"]: c for c in fx["cases"] if c["name"] in ALGS}
    lanes: list[tuple[Lane, bytes, int]] = []
    for alg in ALGS:
        case = cases[alg]
        for kind, options, calls in (
            ("hit", {}, HIT_CALLS),
            ("miss", {"cache_size": 0}, MISS_CALLS[alg]),
        ):
            verifier = layer_verifier(case, fx, **options)
            lane = Lane(
                f"{kind} {alg}",
                kind,
                "grelmicro",
                "verify(tok)",
                {"verify": verifier.verify},
                mapping_of,
            )
            lane.compile()
            problem = check(lane, case)
            if problem is not None:
                print(json.dumps({"error": f"{lane.id}: {problem}"}), flush=True)
                return 1
            raw = case["tokens"]["valid"].encode()
            lane.loop(WARMUP, raw)
            lanes.append((lane, raw, calls))
    print(
        json.dumps(
            {
                "python": platform.python_version(),
                "implementation": platform.python_implementation(),
                "grelmicro": str(Path(grelmicro.__file__).resolve().parents[1]),
                "core": grelmicro_core.__version__,
                "core_file": grelmicro_core.__file__,
                "pgo": core_build(grelmicro_core),
            }
        ),
        flush=True,
    )
    gc.collect()
    gc.disable()
    for r, line in enumerate(sys.stdin):
        if line.strip() != "round":
            break
        shift = r % len(lanes)
        result = {}
        for lane, raw, calls in lanes[shift:] + lanes[:shift]:
            result[lane.id] = lane.loop(calls, raw) / calls
        print(json.dumps(result), flush=True)
    return 0


# ---------------------------------------------------------------- the driver


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


class Side:
    def __init__(self, name: str, python: str, fixtures: Path) -> None:
        self.name = name
        # Absolute, not resolved: a venv's python is a symlink that must stay one.
        interpreter = str(Path(python).absolute())
        self.proc = subprocess.Popen(
            [interpreter, str(Path(__file__).resolve()), "--worker", str(fixtures)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd="/",  # never import grelmicro from a working directory
        )
        self.info = self.read()
        if "error" in self.info:
            raise SystemExit(f"{name}: lane failed its check: {self.info['error']}")
        self.samples: dict[str, list[float]] = {}

    def read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"{self.name}: worker ended (exit {self.proc.wait()})")
        return json.loads(line)

    def round(self) -> None:
        self.proc.stdin.write("round\n")
        self.proc.stdin.flush()
        for lane_id, ns in self.read().items():
            self.samples.setdefault(lane_id, []).append(ns)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def fmt(ns: float) -> str:
    return f"{ns:,.0f}" if ns >= 100 else f"{ns:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", nargs="?", help="the base tree's interpreter")
    parser.add_argument("new", nargs="?", help="the new tree's interpreter")
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--worker", metavar="FIXTURES", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker)
    if not (args.base and args.new):
        parser.error("give the base and the new interpreter")

    sys.path.insert(0, str(HERE))
    import fixtures

    start_load, started = load(), time.time()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fixtures.json"
        path.write_text(json.dumps(fixtures.build()))
        sides = [Side("base", args.base, path), Side("new", args.new, path)]
        timing_start = time.time()
        for r in range(args.rounds):
            for side in sides if r % 2 == 0 else sides[::-1]:
                side.round()
        timed = time.time() - timing_start
        for side in sides:
            side.close()
    end_load = load()
    base, new = sides

    print(
        "| lane | alg | calls/round | base median | new median | new/base (median) "
        "| base min | new min | new/base (min) | new/base (paired, median of rounds) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for kind in ("hit", "miss"):
        for alg in ALGS:
            lane_id = f"{kind} {alg}"
            b, n = base.samples[lane_id], new.samples[lane_id]
            bm, nm = statistics.median(b), statistics.median(n)
            calls = HIT_CALLS if kind == "hit" else MISS_CALLS[alg]
            label = "cache hit (default cache)" if kind == "hit" else "full verify (`cache_size=0`)"
            # Round r of one side and round r of the other ran back to back
            # (the order flips each round): their ratio cancels the load of
            # that moment; the median of those ratios is the paired figure.
            paired = statistics.median(x / y for x, y in zip(n, b, strict=True))
            print(
                f"| {label} | {alg} | {calls:,} | {fmt(bm)} | {fmt(nm)} | {nm / bm:.3f}× "
                f"| {fmt(min(b))} | {fmt(min(n))} | {min(n) / min(b):.3f}× | {paired:.3f}× |"
            )
    print("\nns/call, loop and `bytes.decode()` included.\n")
    for side in sides:
        i = side.info
        print(
            f"- {side.name}: {i['implementation']} {i['python']}, grelmicro from {i['grelmicro']}, "
            f"grelmicro-core {i['core']} ({i['pgo']})"
        )
    print(f"- CPU: {cpu_model()}, {os.cpu_count()} logical CPUs; {platform.platform()}")
    print(f"- load average (1/5/15 min): {start_load} at start, {end_load} at end")
    print(
        f"- {args.rounds} alternating rounds (side order flips each round, lane order rotates); "
        f"{WARMUP:,} warm-up calls per lane; gc off while timing; "
        f"timing {timed:.1f} s, whole run {time.time() - started:.1f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
