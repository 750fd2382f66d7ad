r"""Every install in ``scripts/`` and ``.github/workflows/`` is pinned, hashed where it downloads.

    python scripts/check_pins.py        # the list of offending lines; exit 1 when there is one

Run by the test command (``tests/test_pins.py``, milliseconds). The rules:

- ``pip install`` / ``pip download`` reads a hash lock (``--require-hashes``)
  or no index at all (``--no-index``: files this build made or checked);
- ``rustup toolchain install`` names no channel (``rust-toolchain.toml``
  pins it), and nothing runs ``rustup default``;
- ``cargo build|test|clippy|run|install`` and ``maturin build`` carry
  ``--locked`` (Cargo.lock as committed); ``cargo install`` names a ``--version``;
- ``npm install`` is ``npm ci`` (the package lock, with its integrity hashes);
- ``curl ... | sh`` never runs;
- a workflow's ``uses:`` is a full commit SHA, and maturin-action names an
  exact ``maturin-version`` and no ``rust-toolchain`` (the file decides).

A shell line continued with ``\`` is read whole; in Python, the list
literal a ``"pip", "install"`` (or ``maturin`` ``"build"``) starts is. A
command the rules cannot read (its arguments in an array) is exempt when the
line before is a ``# check_pins: <why>`` comment.
"""

# ruff: noqa: T201
from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


#: A comment on the line before a command that the rules cannot read (an
#: argument array, say) and says why it is pinned anyway.
EXEMPT = "# check_pins:"
#: Commands that only print or probe (``say "cargo install ..."``, ``--version``).
PRINTS = re.compile(r"^\s*(say|echo|log|printf)\b|--version\s*(>|\||$|&|;|\))")


def _commands(text: str) -> Iterable[tuple[int, str]]:
    """``(line number, command)`` of a shell or YAML text, continuations joined."""
    lines = text.splitlines()
    number = 0
    while number < len(lines):
        start, line = number, lines[number]
        while line.rstrip().endswith("\\") and number + 1 < len(lines):
            number += 1
            line = line.rstrip()[:-1] + " " + lines[number].strip()
        exempt = start > 0 and lines[start - 1].strip().startswith(EXEMPT)
        if not line.lstrip().startswith("#") and not exempt and not PRINTS.search(line):
            yield start + 1, line
        number += 1


def _python_calls(text: str) -> Iterable[tuple[int, str]]:
    """``(line number, list literal)`` of each pip or maturin command a Python file builds."""
    for found in re.finditer(r'"pip",\s*"(?:install|download)"|find_maturin\(\),\s*"build"', text):
        end = text.find("]", found.end())
        yield text.count("\n", 0, found.start()) + 1, text[found.start() : end]


def problems_of(  # noqa: PLR0912 (one branch per rule, in the order of the module docstring)
    text: str, *, python: bool = False, workflow: bool = False
) -> list[str]:
    """What breaks the rules in one file's text (``line N: why``)."""
    found: list[str] = []
    if python:
        for number, call in _python_calls(text):
            if '"pip"' in call and not ("--require-hashes" in call or "--no-index" in call):
                found.append(f"line {number}: pip without --require-hashes or --no-index")
            if '"build"' in call and "maturin" in call and "--locked" not in text:
                found.append(f"line {number}: maturin build without --locked")
        return found
    for number, line in _commands(text):
        if re.search(r"\bpip3? (install|download)\b", line) and not re.search(
            r"--require-hashes|--no-index", line
        ):
            found.append(f"line {number}: pip without --require-hashes or --no-index")
        if re.search(r"\brustup (toolchain install|install) +(stable|beta|nightly|\d)", line):
            found.append(f"line {number}: rustup names a channel (rust-toolchain.toml pins it)")
        if re.search(r"\brustup default\b", line):
            found.append(f"line {number}: rustup default (rust-toolchain.toml pins the toolchain)")
        cargo = re.search(r"\bcargo (build|test|clippy|run|install)\b", line)
        if cargo and "--locked" not in line:
            found.append(f"line {number}: cargo {cargo[1]} without --locked")
        if cargo and cargo[1] == "install" and "--version" not in line:
            found.append(f"line {number}: cargo install without --version")
        if re.search(r"\bmaturin build\b", line) and "--locked" not in line:
            found.append(f"line {number}: maturin build without --locked")
        if re.search(r"\bnpm (install|i)\b", line):
            found.append(f"line {number}: npm install (npm ci reads the lock)")
        if re.search(r"\bcurl\b[^|]*\|\s*(ba)?sh\b", line):
            found.append(f"line {number}: curl | sh")
        if workflow:
            uses = re.search(r"\buses:\s*(\S+)", line)
            if uses and not uses[1].startswith("./") and not re.search(r"@[0-9a-f]{40}$", uses[1]):
                found.append(f"line {number}: {uses[1]} is not pinned by commit SHA")
            if re.search(r"^\s*rust-toolchain:", line):
                found.append(f"line {number}: rust-toolchain input (rust-toolchain.toml pins it)")
            version = re.search(r"maturin-version:\s*(\S+)", line)
            if version and not re.fullmatch(r'"?\d+\.\d+\.\d+"?', version[1]):
                found.append(f"line {number}: maturin-version {version[1]} is not exact")
            if "args:" in line and "--release" in line and "--locked" not in line:
                found.append(f"line {number}: a maturin-action build without --locked")
    return found


def files() -> list[Path]:
    """What the check reads: the scripts and the workflows."""
    scripts = ROOT / "scripts"
    workflows = ROOT / ".github" / "workflows"
    return sorted([*scripts.glob("*.sh"), *scripts.glob("*.py"), *workflows.glob("*.yml")])


def problems() -> list[str]:
    """Every broken rule of the tree, ``path: line N: why``."""
    found: list[str] = []
    for path in files():
        if path.name == "check_pins.py":
            continue
        text = path.read_text(encoding="utf-8")
        broken = problems_of(
            text, python=path.suffix == ".py", workflow=path.parent.name == "workflows"
        )
        found += [f"{path.relative_to(ROOT)}: {problem}" for problem in broken]
    return found


def main() -> int:
    """Print the broken rules; 1 when there is one."""
    found = problems()
    for problem in found:
        print(problem)
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
