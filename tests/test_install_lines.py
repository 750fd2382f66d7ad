"""Every install line of the documentation keeps pip away from the other project's names.

The names ``grelmicro`` and ``grelmicro-core`` on PyPI belong to another
project: a ``pip install`` that names either (``grelmicro[jwt]``,
``grelmicro-core``, ``grelmicro==...``) must read a release, a wheelhouse or
its index only (``--no-index``, an ``--index-url`` that is a ``file://``
path, or a hash lock from a release with ``--require-hashes``). Installing
from a checkout (``".[jwt]"``) is not such a line.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

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
