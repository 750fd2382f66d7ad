"""JSON path: the core's single-pass builder against jiter's and orjson's, side by side.

Decodes the canonical payload (bench-token.md) into Python objects and applies the
claim rules a service uses (exp, nbf, iss, aud). The core does both in one pass
in Rust; the others parse, then the rules run in Python. Only the core and jiter
with ``catch_duplicate_keys=True`` refuse duplicate member names, as the contract
requires. Run: ``python bench/json_path.py`` (needs ``jiter`` and ``orjson``).
"""

from __future__ import annotations

import gc
import json
import statistics
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jiter
import orjson
from grelmicro_core import Policy
from grelmicro_core._core import _decode_payload

NOW = 1796018278
AUDIENCE = "https://api.example.com"
ISSUER = "https://issuer.example.com/"
PAYLOAD = {
    "iss": ISSUER,
    "sub": "user-1234567890",
    "aud": AUDIENCE,
    "iat": NOW,
    "nbf": NOW,
    "exp": NOW + 3600,
    "jti": "6f1c2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f",
    "scope": "read:items write:items",
    "email": "jane.doe@example.com",
    "name": "Jane Doe",
    "roles": ["admin", "user"],
}


def check(claims: dict[str, Any]) -> dict[str, Any]:
    """The same rules as the core, written in Python."""
    if not claims["exp"] > NOW or not claims["nbf"] <= NOW:
        raise ValueError("time")
    if claims["iss"] != ISSUER:
        raise ValueError("issuer")
    audience = claims["aud"]
    if AUDIENCE not in ([audience] if isinstance(audience, str) else audience):
        raise ValueError("audience")
    return claims


def main(rounds: int = 9, number: int = 20_000) -> None:
    raw = json.dumps(PAYLOAD, separators=(",", ":")).encode()
    policy = Policy(audience=[AUDIENCE], issuer=[ISSUER])
    lanes: dict[str, Callable[[], object]] = {
        "core builder + claim checks (one pass)": lambda: _decode_payload(raw, policy, NOW),
        "jiter keys cached, duplicate check + checks": lambda: check(
            jiter.from_json(raw, cache_mode="keys", catch_duplicate_keys=True)
        ),
        "jiter keys cached + checks (no dup check)": lambda: check(
            jiter.from_json(raw, cache_mode="keys")
        ),
        "orjson + checks (no dup check)": lambda: check(orjson.loads(raw)),
        "json.loads + checks (no dup check)": lambda: check(json.loads(raw)),
    }
    for lane in lanes.values():
        assert lane()["sub"] == "user-1234567890"  # type: ignore[index]
    gc.disable()
    times: dict[str, list[float]] = {name: [] for name in lanes}
    for _ in range(rounds):
        for name, lane in lanes.items():
            times[name].append(timeit.timeit(lane, number=number) / number * 1e9)
    gc.enable()
    base = statistics.median(times["json.loads + checks (no dup check)"])
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:45} median {median:6.0f} ns  min {min(values):6.0f} ns  {median / base:.2f}x")
    load = Path("/proc/loadavg").read_text(encoding="ascii").split()[:3]
    print("jiter", jiter.__version__, "orjson", orjson.__version__, "load", load)


if __name__ == "__main__":
    main()
