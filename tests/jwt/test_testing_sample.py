"""The sample services of docs/testing.md: their tests pass, with grelmicro.jwt.testing only.

``examples/testing_sample/`` is a small FastAPI service and its pytest
suite; ``examples/testing_multitenant/`` a multi-tenant Entra ID service and
its. Their tests run here in a child interpreter where PyJWT cannot be
imported, and the page shows those files exactly as they are.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import docs_snippets

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "testing_sample"
MULTITENANT = ROOT / "examples" / "testing_multitenant"
PAGE = ROOT / "docs" / "testing.md"

#: Runs the sample's suite with ``import jwt`` (PyJWT) failing.
WITHOUT_PYJWT = (
    "import sys\n"
    "sys.modules['jwt'] = None\n"
    "import pytest\n"
    "raise SystemExit(pytest.main(['-q', '-p', 'no:cacheprovider', *sys.argv[1:]]))\n"
)


def run_sample(*args: str, sample: Path = SAMPLE) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_PYJWT, *args],
        cwd=sample,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_sample_service_tests_pass_without_pyjwt() -> None:
    result = run_sample()

    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert re.search(r"\b6 passed\b", result.stdout), result.stdout[-2000:]


def test_the_multitenant_sample_tests_pass_without_pyjwt() -> None:
    result = run_sample(sample=MULTITENANT)

    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert re.search(r"\b7 passed\b", result.stdout), result.stdout[-2000:]


def test_pyjwt_is_really_out_of_reach_of_the_sample(tmp_path: Path) -> None:
    probe = tmp_path / "test_probe.py"
    probe.write_text("def test_imports_pyjwt():\n    import jwt  # noqa: F401\n")

    result = run_sample(str(probe))

    assert result.returncode == 1
    assert "ModuleNotFoundError" in result.stdout or "ImportError" in result.stdout


def test_the_page_shows_the_sample_files_as_they_are() -> None:
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    shown = {}
    for block in docs_snippets.extract(PAGE):
        before = [line for line in lines[: block.line - 1] if line.strip()][-2:]
        for line in before:
            marker = re.fullmatch(r"<!-- sample: (\S+) -->", line.strip())
            if marker:
                shown[marker[1]] = block.code
    files = sorted(
        path.relative_to(ROOT).as_posix()
        for sample in (SAMPLE, MULTITENANT)
        for path in sample.glob("*.py")
    )

    assert sorted(shown) == files
    for name, code in shown.items():
        assert code == (ROOT / name).read_text(encoding="utf-8"), name
