"""The source hash of ``grelmicro-core``, computed as ``grelmicro-core/build.rs`` does.

The one implementation (standard library only, so any interpreter can run
it): ``build.rs`` records an FNV-1a-64 hash of every ``.rs`` file under
``src/`` as ``SOURCE_HASH``; a wheel whose hash differs from
:func:`source_hash` of the tree is stale. Build tooling (``corewheel.py``)
imports it from here; the tests reach it through ``tests/core_source.py``.
"""

from __future__ import annotations

from pathlib import Path

CORE = Path(__file__).resolve().parent.parent / "grelmicro-core"

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
MASK = (1 << 64) - 1


def fnv1a(state: int, data: bytes) -> int:
    """``state`` advanced over ``data`` by FNV-1a 64-bit."""
    for byte in data:
        state ^= byte
        state = (state * FNV_PRIME) & MASK
    return state


def source_hash(src: Path) -> str:
    """The hash build.rs computes over the ``.rs`` files under ``src``.

    For each file, sorted by its ``/``-separated path relative to ``src``:
    the path, a zero byte, the contents, a zero byte.
    """
    state = FNV_OFFSET
    for name in sorted(p.relative_to(src).as_posix() for p in src.rglob("*.rs")):
        state = fnv1a(state, name.encode() + b"\0")
        state = fnv1a(state, (src / name).read_bytes() + b"\0")
    return f"{state:016x}"
