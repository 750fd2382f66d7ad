#!/usr/bin/env bash
# Build a free-threaded CPython 3.13t (or reuse one), build the core wheel for
# it from this tree, and run the thread tests there with the GIL disabled.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
FT_PYTHON="${GRELMICRO_FT_PYTHON:-/opt/python3.13t/bin/python3.13t}"
if [ ! -x "$FT_PYTHON" ]; then
    # Built from source by the project's own script (a few minutes, once).
    FT_PYTHON="$(bash scripts/get-freethreaded-python.sh | sed -n 's/^FT_PYTHON=//p' | tail -n 1)"
fi
"$FT_PYTHON" -c 'import sys; assert not sys._is_gil_enabled(), "GIL is enabled"'
VENV="$ROOT/.ft-venv"
[ -x "$VENV/bin/python" ] || "$FT_PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
# cryptography (cffi) and msgspec do not build for 3.13t, and pydantic-core
# releases after 2.33 (pyo3 0.29+) refuse free-threaded 3.13: pin what works.
"$VENV/bin/python" -m pip install -q pytest httpx anyio "pydantic<2.12"
rm -f dist/grelmicro_core-*-cp313-cp313t-*.whl
"$ROOT/.venv/bin/maturin" build --release -q -m grelmicro-core/Cargo.toml -i "$VENV/bin/python" -o dist
"$VENV/bin/python" -m pip install -q --no-index --find-links dist --force-reinstall --no-deps grelmicro-core
"$VENV/bin/python" -m pip install -q --no-deps -e "$ROOT"
export GRELMICRO_FT_PYTHON="$VENV/bin/python"
"$VENV/bin/python" -X gil=0 -m pytest -q -p no:cacheprovider \
    tests/test_installed_core.py tests/core/test_freethreaded.py tests/jwt/test_concurrency.py
"$VENV/bin/python" -c 'import sys, grelmicro.jwt; assert not sys._is_gil_enabled(); print("GIL still disabled after import: OK")'
# A cache hit from a pool thread must cost at most 2x a hit in the thread that
# built the verifier (3.13t once paid ~25x: docs/design-notes.md).
"$VENV/bin/python" -X gil=0 bench/pool_hit_check.py --limit 2.0
