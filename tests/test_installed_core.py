"""The imported ``grelmicro_core`` is the one built from this tree.

``grelmicro-core/build.rs`` records an FNV-1a-64 hash of every ``.rs`` file under ``src/``; the
same hash is computed here from the files on disk. A mismatch means the
installed wheel is stale (rebuild it) or came from somewhere else.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import grelmicro_core
from core_source import CORE, FNV_OFFSET, fnv1a, source_hash


def expected_version(pyproject: Path) -> str:
    """``[project] version`` of the core's pyproject.toml."""
    text = pyproject.read_text(encoding="utf-8")
    try:
        toml = importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")
    except ImportError:  # Python 3.10 without tomli
        toml = None
    if toml is not None:
        return str(toml.loads(text)["project"]["version"])
    project = text.split("[project]", 1)[1].split("\n[", 1)[0]
    match = re.search(r'^version\s*=\s*"([^"]+)"', project, re.MULTILINE)
    assert match, "no version in [project]"
    return match.group(1)


def test_fnv1a_matches_the_published_test_vectors() -> None:
    """Guard for the hash itself (FNV-1a 64-bit reference values)."""
    assert f"{fnv1a(FNV_OFFSET, b''):016x}" == "cbf29ce484222325"
    assert f"{fnv1a(FNV_OFFSET, b'a'):016x}" == "af63dc4c8601ec8c"
    assert f"{fnv1a(FNV_OFFSET, b'foobar'):016x}" == "85944171f73967e8"


def test_source_hash_matches_the_tree() -> None:
    expected = source_hash(CORE / "src")

    assert expected == grelmicro_core.SOURCE_HASH, (
        f"installed core was built from other sources ({grelmicro_core.SOURCE_HASH}, "
        f"tree is {expected}): rebuild and reinstall the wheel"
    )


def test_installed_version_is_the_local_build() -> None:
    expected = expected_version(CORE / "pyproject.toml")

    # A local version label (today "0.9.0+jwt") can never come from a public index.
    assert "+" in expected
    assert importlib.metadata.version("grelmicro-core") == expected
    # The module's own version is the crate's, without the local label.
    assert grelmicro_core.__version__ == expected.split("+", 1)[0]


def test_the_build_says_whether_it_is_profile_guided() -> None:
    # The test runs' wheels are plain builds; `scripts/corewheel.py --pgo`
    # makes the trained ones (benchmarks, releases), never an instrumented
    # one outside its training step.
    assert grelmicro_core.PGO in {"off", "trained"}


def test_the_test_build_has_the_test_hooks() -> None:
    # The suite reads the cache through hooks that only a core built with the
    # cargo feature test-hooks has (scripts/corewheel.py --test-hooks, as
    # setup.sh and the test sessions build it); the shipped kind has none
    # (security-tests/test_cache_oracle.py::test_the_wheel_ships_no_test_hooks).
    from grelmicro_core import _core  # noqa: PLC0415

    for name in ("_entry", "_keys", "_order_length"):
        assert hasattr(_core.TokenCache, name), name
    assert hasattr(_core.VerifyCall, "_view_len")


def test_pgo_training_refuses_a_core_that_is_not_instrumented() -> None:
    # Training a plain build would leave no counts and a profile-less
    # "PGO" wheel: the trainer stops first and names the module it found.
    trainer = Path(__file__).resolve().parents[1] / "scripts" / "pgo_train.py"
    run = subprocess.run(
        [sys.executable, str(trainer)], capture_output=True, text=True, check=False, timeout=120
    )

    assert run.returncode == 1
    assert "is not an instrumented build" in run.stderr
    assert f"PGO={grelmicro_core.PGO!r}" in run.stderr
