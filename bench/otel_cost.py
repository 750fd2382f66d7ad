"""What telemetry adds to a verification: off / no-op provider / SDK, side by side in one run.

Lanes (one HS256 verifier each, the canonical bench token decoded fresh from
``bytes`` on every call):

- ``off``: ``JWTVerifier(...)``, no telemetry (the default).
- ``counters``: ``cache_stats=True`` alone: the cache's hit/miss counters,
  which ``telemetry=`` turns on (what telemetry costs inside the core).
- ``noop``: ``telemetry=Telemetry(...)`` with the OpenTelemetry API's no-op
  meter and tracer providers.
- ``sdk``: ``telemetry=Telemetry(...)`` with the SDK's ``MeterProvider`` and an
  ``InMemoryMetricReader`` (collected once per round, off the timed loop), and
  the SDK's ``TracerProvider``.

Each lane runs on cache hits (``--what hit``, the default) or full
verifications with the cache off (``--what miss``: each accepted one is a
``token.accepted`` event the telemetry observes), or both (``--what both``). Rounds are
interleaved lane by lane with the order rotating, GC off; per lane the
median and the minimum ns per call over the rounds, each with its ratio
to ``off`` (compare the minima on a shared machine). Nothing here asserts a timing.

``python bench/otel_cost.py [--rounds 30] [--calls 20000] [--what both]``
Needs ``opentelemetry-api`` and ``opentelemetry-sdk`` (scripts/requirements-dev.txt).
"""

from __future__ import annotations

import argparse
import gc
import platform
import statistics
import sys
import time
from collections.abc import Callable
from importlib.metadata import version

from fixtures import encode, typical_payload
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NoOpTracerProvider

from grelmicro.jwt import JWTVerifier, Key
from grelmicro.jwt.otel import Telemetry

SECRET = b"otel-cost-bench-secret-0123456789abcdef"
AUDIENCE = "https://api.example.com"
ISSUER = "https://issuer.example.com/"


def build(lane: str, cache_size: int) -> tuple[JWTVerifier, Callable[[], None]]:
    """The verifier of ``lane`` and what to do between rounds (collect the SDK reader)."""
    options: dict[str, object] = {"audience": AUDIENCE, "issuer": ISSUER, "cache_size": cache_size}
    collect: Callable[[], None] = lambda: None  # noqa: E731
    if lane == "counters":
        options["cache_stats"] = True
    elif lane == "noop":
        options["telemetry"] = Telemetry(NoOpMeterProvider(), NoOpTracerProvider())
    elif lane == "sdk":
        reader = InMemoryMetricReader()
        options["telemetry"] = Telemetry(MeterProvider(metric_readers=[reader]), TracerProvider())
        collect = lambda: reader.get_metrics_data() and None  # noqa: E731
    return JWTVerifier([Key.secret(SECRET, "HS256", kid="k1")], **options), collect  # type: ignore[arg-type]


def per_call(verify: Callable[[str], object], raw: bytes, calls: int) -> float:
    """Nanoseconds per call, each on a token decoded fresh from bytes."""
    start = time.perf_counter_ns()
    for _ in range(calls):
        verify(raw.decode())
    return (time.perf_counter_ns() - start) / calls


def run(what: str, lanes: list[str], rounds: int, calls: int, raw: bytes) -> None:
    built = {lane: build(lane, 1024 if what == "hit" else 0) for lane in lanes}
    for verifier, _ in built.values():
        verifier.verify(raw.decode())  # the token is cached (hit lanes)
        per_call(verifier.verify, raw, 1000)  # warm-up
    times: dict[str, list[float]] = {lane: [] for lane in lanes}
    gc.disable()
    try:
        for index in range(rounds):
            order = lanes[index % len(lanes) :] + lanes[: index % len(lanes)]
            for lane in order:
                verifier, collect = built[lane]
                times[lane].append(per_call(verifier.verify, raw, calls))
                collect()
    finally:
        gc.enable()
    # On a shared machine neighbours only ever add time: the minimum over the
    # rounds is the figure to compare; the median shows how noisy the run was.
    base_median, base_min = statistics.median(times["off"]), min(times["off"])
    print(f"\n{what}: {calls} calls x {rounds} rounds per lane")
    header = ("lane", "median ns", "ratio", "min ns", "ratio", "added ns (min)")
    print(
        f"{header[0]:<10}{header[1]:>11}{header[2]:>7}{header[3]:>9}{header[4]:>7}{header[5]:>16}"
    )
    for lane in lanes:
        median, least = statistics.median(times[lane]), min(times[lane])
        print(
            f"{lane:<10}{median:>11.0f}{median / base_median:>7.2f}{least:>9.0f}"
            f"{least / base_min:>7.2f}{least - base_min:>+16.0f}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--what", choices=("hit", "miss", "both"), default="hit")
    opts = parser.parse_args()
    print(
        f"Python {platform.python_version()} ({sys.implementation.name}), {platform.machine()}, "
        f"opentelemetry-sdk {version('opentelemetry-sdk')}, grelmicro-core "
        f"{version('grelmicro-core')}"
    )
    raw = encode("HS256", SECRET, typical_payload(int(time.time()))).encode()
    lanes = ["off", "counters", "noop", "sdk"]
    for what in ("hit", "miss") if opts.what == "both" else (opts.what,):
        run(what, lanes, opts.rounds, opts.calls if what == "hit" else opts.calls // 10, raw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
