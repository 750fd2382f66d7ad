"""Another project owns the names grelmicro and grelmicro-core on PyPI.

When its distribution is what got installed (``pip install "grelmicro[jwt]"``
without the wheelhouse), importing ``grelmicro.jwt`` fails with a message
that names the clash and the way out, instead of an obscure error later.
The child interpreters see a foreign distribution's metadata first on their
path, as pip would leave it after installing the other project over ours.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from grelmicro.jwt import _core


def foreign_dist(root: Path, name: str, version: str) -> Path:
    """A directory holding only the installed-distribution metadata of ``name`` ``version``."""
    info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return root


CHILD = "import sys; sys.path.insert(0, sys.argv[1]); import grelmicro.jwt"


def import_jwt_with(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


@pytest.mark.parametrize("installed", ["0.20.0", "0.90.0", "0.90.0+other"])
def test_a_grelmicro_without_our_label_is_named_as_the_other_project(installed: str) -> None:
    problem = _core.foreign_grelmicro_problem(installed)

    assert problem is not None
    assert f"grelmicro {installed} is installed" in problem
    assert "cannot share an environment" in problem
    assert "--no-index --find-links" in problem


@pytest.mark.parametrize("installed", ["0.90.0+jwt", "0.91.3+jwt", None])
def test_ours_or_a_source_tree_passes(installed: str | None) -> None:
    assert _core.foreign_grelmicro_problem(installed) is None


def test_importing_over_the_other_projects_grelmicro_fails_clearly(tmp_path: Path) -> None:
    run = import_jwt_with(foreign_dist(tmp_path, "grelmicro", "0.20.0"))

    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: grelmicro 0.20.0 is installed")
    assert "another project's grelmicro" in last
    assert "cannot share an environment" in last


def test_importing_with_the_other_projects_core_fails_clearly(tmp_path: Path) -> None:
    run = import_jwt_with(foreign_dist(tmp_path, "grelmicro-core", "0.1.5"))

    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: grelmicro ")
    assert "grelmicro-core 0.1.5 is installed" in last
    assert "belongs to another project" in last
    assert "cannot share an environment" in last


def test_the_real_install_imports(tmp_path: Path) -> None:
    # The same child with nothing foreign on its path: the checks above fire
    # on the foreign metadata, not on every import.
    run = import_jwt_with(tmp_path)

    assert run.returncode == 0, run.stderr
