"""The timing method every Python lane goes through (``shared/bench-token.md``).

A lane is a call expression over ``tok`` (the token, decoded fresh from
``bytes`` on every call, as a request handler gets it) and the names it needs.
The expression is compiled into a plain ``for`` loop, so no wrapper function
sits between the loop and the library: what is timed is the call a service
would write. The same expression, compiled once more, is what the correctness
check runs, so a lane is checked exactly as it is timed.

Per case: every lane is checked (right claims back; expired, wrong-audience and
tampered tokens rejected), a failing lane is reported and never timed; then
1,000 warm-up calls per lane, a calibration so that one round of a lane lasts
about ``round_ms``, and ``rounds`` rounds with the lanes interleaved round by
round (the order rotates each round), garbage collector off. The result per
lane is the median and the minimum of the per-call time over the rounds.
"""

from __future__ import annotations

import gc
import itertools
import statistics
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

WARMUP_CALLS = 1000


@dataclass
class Lane:
    """One way of verifying a token, as a call expression over ``tok``."""

    id: str  # stable identifier, e.g. "pyjwt"
    name: str  # shown in tables, with the library version
    group: str  # "grelmicro", "reference", "peer" or "floor"
    expr: str = ""
    names: dict[str, Any] = field(default_factory=dict)
    # How to turn the lane's result into a dict to compare (None: it is one).
    to_dict: Callable[[Any], dict] | None = None
    # Floors only check what they do: "sig" (tampered rejected), "claims", None.
    checks: str = "full"
    # Fields compared with the payload; None compares the whole payload.
    fields: tuple[str, ...] | None = None
    status: str = "ok"  # "ok", "failed", "skipped", "unsupported"
    reason: str = ""
    note: str = ""
    reference: bool = False
    _loop: Callable[..., int] | None = None
    _once: Callable[..., Any] | None = None
    _reject_loop: Callable[..., int] | None = None

    def compile(self) -> None:
        args = ", ".join(self.names)
        sep = ", " if args else ""
        src = (
            f"def _loop(_n, _raw{sep}{args}):\n"
            "    _t0 = _clock()\n"
            "    for _ in _repeat(None, _n):\n"
            "        tok = _raw.decode()\n"
            f"        {self.expr}\n"
            "    return _clock() - _t0\n"
            f"def _reject_loop(_n, _raw{sep}{args}):\n"
            "    _t0 = _clock()\n"
            "    for _ in _repeat(None, _n):\n"
            "        tok = _raw.decode()\n"
            "        try:\n"
            f"            {self.expr}\n"
            "        except Exception:\n"
            "            pass\n"
            "    return _clock() - _t0\n"
            f"def _once(_raw{sep}{args}):\n"
            "    tok = _raw.decode()\n"
            f"    return {self.expr}\n"
        )
        ns: dict[str, Any] = {"_clock": time.perf_counter_ns, "_repeat": itertools.repeat}
        exec(compile(src, f"<lane {self.id}>", "exec"), ns)
        self._loop = ns["_loop"]
        self._reject_loop = ns["_reject_loop"]
        self._once = ns["_once"]

    def once(self, raw: bytes) -> Any:
        return self._once(raw, **self.names)

    def loop(self, n: int, raw: bytes, reject: bool = False) -> int:
        fn = self._reject_loop if reject else self._loop
        return fn(n, raw, **self.names)


def core_build(core: Any) -> str:
    """How a grelmicro-core module was built: its PGO state, and whether it is a hooks build.

    A build with the test hooks (``scripts/setup.sh``'s) takes the cargo
    profile ``hooks``, without fat LTO: not the shipped code generation.
    """
    kind = f"PGO {getattr(core, 'PGO', '?')}"
    if hasattr(getattr(core, "TokenCache", None), "_entry"):
        kind += ", hooks build: no fat LTO"
    return kind


def normalize(value: Any) -> Any:
    """JSON arrays may come back as tuples (read-only claims): compare them as lists."""
    if isinstance(value, Mapping):
        return {k: normalize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalize(v) for v in value]
    return value


def _as_dict(lane: Lane, value: Any) -> dict:
    if lane.to_dict is not None:
        return normalize(lane.to_dict(value))
    if isinstance(value, Mapping):
        return normalize(value)
    raise TypeError(f"lane returned {type(value).__name__}, not a mapping")


def check(lane: Lane, case: dict) -> str | None:
    """Returns None when the lane behaves, else what went wrong."""
    tokens = case["tokens"]
    payload = case["payload"]
    try:
        got = lane.once(tokens["valid"].encode())
    except Exception as exc:
        return f"valid token refused: {type(exc).__name__}: {exc}"[:300]
    if lane.checks in ("full", "claims"):
        try:
            claims = _as_dict(lane, got)
        except Exception as exc:
            return f"result not usable: {type(exc).__name__}: {exc}"[:300]
        want = payload if lane.fields is None else {k: payload.get(k) for k in lane.fields}
        have = claims if lane.fields is None else {k: claims.get(k) for k in lane.fields}
        if have != want:
            diff = sorted(k for k in set(want) | set(have) if want.get(k) != have.get(k))
            return f"wrong claims back (differ on: {', '.join(diff)[:120]})"
    bad = {"full": ("expired", "wrong_aud", "tampered"), "sig": ("tampered",)}.get(lane.checks, ())
    for which in bad:
        try:
            lane.once(tokens[which].encode())
        except Exception:
            continue
        return f"accepted the {which.replace('_', '-')} token"
    return None


def expect_rejection(lane: Lane, raw: bytes) -> str | None:
    try:
        lane.once(raw)
    except Exception:
        return None
    return "accepted a token it must reject"


@dataclass
class Timing:
    per_call_ns: list[float]
    calls: int

    @property
    def median(self) -> float:
        return statistics.median(self.per_call_ns)

    @property
    def minimum(self) -> float:
        return min(self.per_call_ns)


def cyclic_garbage(lane: Lane, raw: bytes, reject: bool, calls: int = 1000) -> float:
    """Objects left in reference cycles per call (what the gc must later find)."""
    gc_was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        lane.loop(calls, raw, reject)
        return gc.collect() / calls
    finally:
        if gc_was:
            gc.enable()


def run_rounds(
    lanes: list[Lane],
    raws: dict[str, bytes],
    rounds: int,
    round_ms: float,
    reject: bool = False,
    warmup: int = WARMUP_CALLS,
) -> dict[str, Timing]:
    """Times the lanes (already checked) interleaved round by round."""
    if not lanes:
        return {}
    gc_was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        calls: dict[str, int] = {}
        for lane in lanes:
            raw = raws[lane.id]
            lane.loop(warmup, raw, reject)
            # Calibrate: grow the batch until it lasts >= 2 ms, then scale.
            n = 8
            while True:
                spent = lane.loop(n, raw, reject)
                if spent >= 2_000_000 or n >= 1 << 22:
                    break
                n *= 4
            per = spent / n
            calls[lane.id] = max(3, int(round_ms * 1e6 / per))
        per_call: dict[str, list[float]] = {lane.id: [] for lane in lanes}
        for r in range(rounds):
            shift = r % len(lanes)
            for lane in lanes[shift:] + lanes[:shift]:
                n = calls[lane.id]
                per_call[lane.id].append(lane.loop(n, raws[lane.id], reject) / n)
                if reject:
                    # A caught exception often leaves a reference cycle (traceback
                    # -> frame -> exception); with gc off they pile up. Collect
                    # them between rounds, outside the timed loop.
                    gc.collect()
    finally:
        if gc_was:
            gc.enable()
    return {lane_id: Timing(v, calls[lane_id]) for lane_id, v in per_call.items()}


def timed_threads(pool: list[threading.Thread], barrier: threading.Barrier) -> float:
    """Start ``pool``, release it at ``barrier`` and time until every thread has ended, in seconds.

    The caller is the barrier's last party: each thread waits at it before its work.
    """
    for thread in pool:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in pool:
        thread.join()
    return time.perf_counter() - start
