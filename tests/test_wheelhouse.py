"""The wheelhouse's index and platform rules (scripts/wheelhouse.py).

The whole path (build, download, offline install into fresh venvs, a token
verified) is the nox session ``wheelhouse``; these check the parts a pip run
would only show as "no matching distribution".
"""

from __future__ import annotations

import hashlib
import html.parser
import sys
from pathlib import Path

import pytest

pytest.importorskip("tomllib")  # scripts/ need Python 3.11+

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
sys.path.append(str(SCRIPTS))
import wheelhouse  # noqa: E402


class Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.hrefs += [value or "" for name, value in attrs if tag == "a" and name == "href"]


def hrefs(page: Path) -> list[str]:
    parser = Links()
    parser.feed(page.read_text())
    return parser.hrefs


def test_the_index_lists_each_project_by_its_normalized_name_with_hashes(tmp_path: Path) -> None:
    names = [
        "grelmicro-0.90.0+jwt-py3-none-any.whl",
        "grelmicro_core-0.9.0+jwt-cp311-cp311-manylinux_2_34_x86_64.whl",
        "grelmicro_core-0.9.0+jwt-cp312-cp312-win_amd64.whl",
        "typing_extensions-4.16.0-py3-none-any.whl",
    ]
    for number, name in enumerate(names):
        (tmp_path / name).write_bytes(f"wheel {number}".encode())

    simple = wheelhouse.write_index(tmp_path)

    assert hrefs(simple / "index.html") == [
        "grelmicro/",
        "grelmicro-core/",
        "typing-extensions/",
    ]
    core = hrefs(simple / "grelmicro-core" / "index.html")
    assert [link.split("#")[0] for link in core] == [f"../../{n}" for n in names[1:3]]
    for link in core:
        target, digest = link.split("#sha256=")
        file = (simple / "grelmicro-core" / target).resolve()
        assert hashlib.sha256(file.read_bytes()).hexdigest() == digest
    assert hrefs(simple / "grelmicro" / "index.html")[0].startswith("../../grelmicro-0.90.0")


def test_a_rewritten_index_drops_wheels_that_are_gone(tmp_path: Path) -> None:
    (tmp_path / "old_pkg-1.0-py3-none-any.whl").write_bytes(b"x")
    wheelhouse.write_index(tmp_path)
    (tmp_path / "old_pkg-1.0-py3-none-any.whl").unlink()

    simple = wheelhouse.write_index(tmp_path)

    assert not (simple / "old-pkg").exists()
    assert hrefs(simple / "index.html") == []


def test_a_manylinux_core_wheel_takes_dependencies_built_for_older_glibc() -> None:
    platforms = wheelhouse.compatible_platforms("manylinux_2_34_x86_64")

    assert platforms[0] == "manylinux_2_34_x86_64"
    assert "manylinux_2_17_x86_64" in platforms
    assert "manylinux2014_x86_64" in platforms
    assert "manylinux_2_35_x86_64" not in platforms
    assert wheelhouse.compatible_platforms("musllinux_1_2_x86_64") == [
        "musllinux_1_2_x86_64",
        "musllinux_1_1_x86_64",
        "musllinux_1_0_x86_64",
    ]
    assert wheelhouse.compatible_platforms("win_amd64") == ["win_amd64"]
    assert wheelhouse.compatible_platforms("macosx_11_0_arm64") == ["macosx_11_0_arm64"]


def test_our_names_are_never_asked_of_an_index() -> None:
    names = {wheelhouse.corewheel.requirement_name(spec) for spec in wheelhouse.requirements()}

    assert names
    assert not names & {"grelmicro", "grelmicro-core"}
