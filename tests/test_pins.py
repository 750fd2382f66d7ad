"""Every install of the scripts and workflows is pinned and hashed (scripts/check_pins.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT / "scripts"))
import check_pins  # noqa: E402

pytest.importorskip("tomllib")  # scripts/ need Python 3.11+
import tomllib  # noqa: E402


def test_every_install_in_scripts_and_workflows_is_pinned() -> None:
    assert check_pins.problems() == []


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ('"$PY" -m pip install -q -r "$REQS"', "pip without --require-hashes"),
        ("    pip download -d out \\\n      httpx==0.28.1", "pip without --require-hashes"),
        ("rustup toolchain install stable --component llvm-tools", "names a channel"),
        ("rustup default stable", "rustup default"),
        ("cargo build --release", "cargo build without --locked"),
        ("cargo install -q --locked cargo-fuzz", "cargo install without --version"),
        ("maturin build --release -m grelmicro-core/Cargo.toml", "maturin build without --locked"),
        ("npm install oauth2-mock-server", "npm install"),
        ("curl -sSf https://sh.rustup.rs | sh", "curl | sh"),
    ],
)
def test_one_unpinned_line_fails_the_check(line: str, why: str) -> None:
    [problem] = check_pins.problems_of(f"set -e\n{line}\n")
    assert why in problem


def test_a_workflow_step_that_floats_fails_the_check() -> None:
    text = (
        "      - uses: actions/checkout@v7\n"
        "      - uses: PyO3/maturin-action@e83996d129638aa358a18fbd1dfb82f0b0fb5d3b\n"
        "        with:\n"
        "          maturin-version: latest\n"
        "          rust-toolchain: stable\n"
        "          args: --release --out dist\n"
    )
    found = check_pins.problems_of(text, workflow=True)
    assert [p.split(": ", 1)[1] for p in found] == [
        "actions/checkout@v7 is not pinned by commit SHA",
        "maturin-version latest is not exact",
        "rust-toolchain input (rust-toolchain.toml pins it)",
        "a maturin-action build without --locked",
    ]


def test_python_builds_a_pip_command_only_against_hashes_or_no_index() -> None:
    bad = 'cmd = [python, "-m", "pip", "install", "-q", "httpx"]\n'
    good = 'cmd = [python, "-m", "pip", "install", "--no-index", "--find-links", d, w]\n'
    assert check_pins.problems_of(bad, python=True) == [
        "line 1: pip without --require-hashes or --no-index"
    ]
    assert check_pins.problems_of(good, python=True) == []


def test_the_rust_toolchain_is_an_exact_release_with_what_the_release_needs() -> None:
    toolchain = tomllib.loads((ROOT / "rust-toolchain.toml").read_text())["toolchain"]
    assert toolchain["channel"].count(".") == 2
    assert {"llvm-tools", "clippy", "rustfmt"} <= set(toolchain["components"])
    assert {
        "x86_64-unknown-linux-musl",
        "aarch64-unknown-linux-gnu",
        "aarch64-unknown-linux-musl",
    } <= set(toolchain["targets"])


def test_the_dev_and_docs_tools_are_locked_by_hash() -> None:
    import lock  # noqa: PLC0415 (scripts/ on the path above)

    for name in ("dev.txt", "docs.txt"):
        text = (ROOT / "locks" / name).read_text()
        assert not lock.unhashed(text), name
    assert {"pip", "hatchling", "maturin", "pytest"} <= set(
        lock.pins((ROOT / "locks" / "dev.txt").read_text())
    )
