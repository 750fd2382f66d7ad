"""Every install line of the documentation keeps pip away from the other project's names.

The names ``grelmicro`` and ``grelmicro-core`` on PyPI belong to another
project: a ``pip install`` that names either (``grelmicro[jwt]``,
``grelmicro-core``, ``grelmicro==...``) must read a release, a wheelhouse or
its index only (``--no-index``, an ``--index-url`` that is a ``file://``
path, or a hash lock from a release with ``--require-hashes``). Installing
from a checkout (``".[jwt]"``) is not such a line.
"""

from __future__ import annotations

import functools
import itertools
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
OURS = re.compile(r"(?<![\w./-])grelmicro(-core)?(\[|==|\s|\"|'|$)")
GUARDS = ("--no-index", "--index-url file://", '--index-url "file://', "--require-hashes")
#: Commands shown as what NOT to run, by page: (text, why).
SHOWN_AS_WRONG = {
    "docs/installation.md": (
        'pip install "grelmicro[jwt]"',
        "the danger box: it installs the other project",
    ),
}


def install_lines(page: Path) -> list[tuple[int, str]]:
    """``(line number, text)`` of each ``pip install`` command on ``page``, continuations joined."""
    found: list[tuple[int, str]] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    number = 0
    while number < len(lines):
        line = lines[number]
        start = number
        while line.rstrip().endswith("\\") and number + 1 < len(lines):
            number += 1
            line = line.rstrip()[:-1] + " " + lines[number].strip()
        for command in re.findall(r"pip install[^`\n]*", line):
            found.append((start + 1, command))
        number += 1
    return found


def test_the_pages_have_install_lines() -> None:
    assert sum(len(install_lines(page)) for page in PAGES) >= 10


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_install_of_our_names_reads_no_public_index(page: Path) -> None:
    unguarded = [
        (number, command)
        for number, command in install_lines(page)
        if OURS.search(command.removeprefix("pip install"))
        and not any(guard in command for guard in GUARDS)
        and SHOWN_AS_WRONG.get(str(page.relative_to(ROOT)), ("",))[0] != command
    ]
    assert not unguarded, unguarded


def test_an_unguarded_line_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        '```bash\npip install "grelmicro[jwt]"\npip install -q \\\n  grelmicro-core\n```\n'
    )
    found = [c for _, c in install_lines(page) if OURS.search(c.removeprefix("pip install"))]
    assert found == ['pip install "grelmicro[jwt]"', "pip install -q  grelmicro-core"]


#: Directories the project's scripts write that a page may install from
#: (scripts/wheelhouse.py's default, release.yml's ``--out wheelhouse``).
PRODUCED = ("dist/wheelhouse", "wheelhouse")
#: Files a page writes itself before installing from them, by page.
WRITTEN_ON_PAGE = {"docs/shipping.md": {"requirements.txt"}}
#: The options whose value is a path (or a ``file://`` URL) to read.
PATH_OPTIONS = ("-r", "--requirement", "-c", "--constraint", "-f", "--find-links", "--index-url")


@functools.cache
def pip_options() -> set[str]:
    """Every option ``pip install --help`` lists (long and short)."""
    shown = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", shown))


def release_dir() -> str:
    """``grelmicro-<version>-linux-``: how this tree's release tarballs are named."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    return f"grelmicro-{version.replace('+', '-')}-linux-"


@functools.cache
def tracked(path: str) -> bool:
    """Whether git tracks ``path`` (a file, or a directory with files) in this tree."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "--", path],
        capture_output=True,
        text=True,
        check=False,
    )
    return bool(listed.stdout.strip())


def stale_parts(command: str, page: str, options: set[str]) -> list[str]:
    """The flags pip does not have and the paths nothing provides, in one install line."""
    try:
        words = shlex.split(command.split("#", 1)[0])
    except ValueError:
        words = command.split()
    found = [w for w in words if w.startswith("-") and w.split("=", 1)[0] not in options]
    for option, value in itertools.pairwise(words):
        if option not in PATH_OPTIONS or "<" in value:
            continue
        path = re.sub(r"^file://(\$PWD/)?", "", value)
        if path.startswith(("http", "$")):
            continue
        if path.startswith("grelmicro-"):
            if not path.startswith(release_dir()):
                found.append(f"{value}: releases of this tree are {release_dir()}<arch>")
            continue
        known = path in PRODUCED or path in WRITTEN_ON_PAGE.get(page, set())
        if not known and not tracked(path):
            found.append(f"{value}: no such path in the tree or the scripts' output")
    return found


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_install_line_names_options_and_paths_that_exist(page: Path) -> None:
    options = pip_options()
    name = str(page.relative_to(ROOT))
    stale = [
        (number, part)
        for number, command in install_lines(page)
        for part in stale_parts(command, name, options)
    ]
    assert not stale, stale


def test_a_stale_install_line_is_found() -> None:
    options = pip_options()
    assert stale_parts('pip install --find-links dist ".[fastapi]"', "x.md", options) == [
        "dist: no such path in the tree or the scripts' output"
    ]
    assert (
        stale_parts("pip install --no-index --find-links dist/wheelhouse x", "x.md", options) == []
    )
    assert stale_parts(
        "pip install --use-wheel -r grelmicro-0.1.0-jwt-linux-x86_64/r.txt", "x", options
    ) == [
        "--use-wheel",
        f"grelmicro-0.1.0-jwt-linux-x86_64/r.txt: releases of this tree are {release_dir()}<arch>",
    ]
