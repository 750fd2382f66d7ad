"""Build tooling depends on nothing in ``tests/``; the arrow runs from the tests to ``scripts/``.

The core's source hash (``scripts/core_source.py``) and the JWS minting of
the PGO workload (``scripts/jws.py``) live with the build; the tests reach
them through ``tests/core_source.py`` and ``tests/forge.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import core_source
import forge
import pytest

pytest.importorskip("tomllib")  # scripts/ need Python 3.11+

ROOT = Path(__file__).resolve().parents[1]
BUILD_MODULES = ("corewheel", "wheelhouse", "pgo_train", "jws", "core_source", "check_dockerfile")

# Isolated mode (-I): no current directory, no PYTHONPATH; only scripts/ is added.
PROBE = """
import importlib, json, sys
sys.path.insert(0, sys.argv[1])
for name in sys.argv[2:]:
    importlib.import_module(name)
print(json.dumps(sorted({getattr(m, "__file__", None) or "" for m in list(sys.modules.values())})))
"""


def test_build_scripts_import_nothing_from_the_tests() -> None:
    run = subprocess.run(
        [sys.executable, "-I", "-c", PROBE, str(ROOT / "scripts"), *BUILD_MODULES],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd="/",
    )
    assert run.returncode == 0, run.stderr
    files = [Path(f) for f in json.loads(run.stdout) if f]
    tests = ROOT / "tests"
    assert [f for f in files if f.is_relative_to(tests)] == []
    assert ROOT / "scripts" / "jws.py" in files


def test_the_tests_use_the_build_implementations() -> None:
    assert core_source.source_hash is sys.modules["grelmicro_scripts_core_source"].source_hash
    assert Path(sys.modules["jws"].__file__ or "") == ROOT / "scripts" / "jws.py"
    assert forge.mint is sys.modules["jws"].mint
