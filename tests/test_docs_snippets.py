"""Every Python example in the documentation runs.

Each page (``README.md`` and ``docs/**/*.md``) runs in its own interpreter
through ``tests/docs_snippets.py``: blocks in order, one namespace, warnings
as errors, a time limit. A block may opt out only with a
``<!-- snippet: skip (reason) -->`` line before its fence, and skips are few.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemons import RedisServer

RUNNER = Path(__file__).with_name("docs_snippets.py")

_spec = importlib.util.spec_from_file_location("docs_snippets", RUNNER)
assert _spec is not None
assert _spec.loader is not None
snippets = importlib.util.module_from_spec(_spec)
sys.modules["docs_snippets"] = snippets
_spec.loader.exec_module(snippets)

PAGES = [page for page in snippets.pages() if snippets.extract(page)]

#: At most this share of the blocks may be skipped (each with its reason).
MAX_SKIPPED_SHARE = 0.15


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Redis for the pages that show the shared DPoP replay store (``REDIS_URL``)."""
    with RedisServer(tmp_path_factory.mktemp("redis")) as server:
        yield server.url


@pytest.mark.parametrize("page", PAGES, ids=[snippets.relative(page) for page in PAGES])
def test_page_examples_run(page: Path, redis_url: str) -> None:
    result = subprocess.run(
        [sys.executable, "-W", "error", str(RUNNER), str(page)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=snippets.ROOT,
        env={**os.environ, "REDIS_URL": redis_url},
    )
    assert result.returncode == 0, result.stderr[-6000:]
    assert " blocks ran" in result.stdout


def test_there_are_examples_and_few_skips() -> None:
    blocks = [block for page in snippets.pages() for block in snippets.extract(page)]
    skipped = [block for block in blocks if block.skip_reason is not None]
    assert len(blocks) >= 40
    assert len(skipped) <= MAX_SKIPPED_SHARE * len(blocks), [
        (block.page, block.line) for block in skipped
    ]


def test_extract_reads_fences_and_skip_markers(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "Text\n\n```python\nx = 1\n```\n\n```bash\necho no\n```\n\n"
        "<!-- snippet: skip (needs a network IdP) -->\n\n```python\nraise SystemExit(1)\n```\n"
        "\n    ```py\n    y = 2\n    ```\n",
        encoding="utf-8",
    )
    blocks = snippets.extract(page)
    assert [(b.line, b.code, b.skip_reason) for b in blocks] == [
        (3, "x = 1\n", None),
        (13, "raise SystemExit(1)\n", "needs a network IdP"),
        (17, "y = 2\n", None),
    ]


def test_a_block_marked_as_a_file_must_be_that_file(tmp_path: Path) -> None:
    example = "examples/flask/uwsgi.ini"
    text = (snippets.ROOT / example).read_text()
    same = tmp_path / "same.md"
    same.write_text(f"<!-- snippet: file {example} -->\n\n```ini\n{text}```\n")
    edited = tmp_path / "edited.md"
    edited.write_text(f"<!-- snippet: file {example} -->\n\n```ini\n{text}extra = 1\n```\n")
    missing = tmp_path / "missing.md"
    missing.write_text("<!-- snippet: file examples/nowhere.py -->\n\n```python\nx = 1\n```\n")

    [block] = snippets.extract(same)
    assert block.file == example
    assert block.skip_reason is None
    assert snippets.file_mismatch(block) is None
    [block] = snippets.extract(edited)
    assert "is not examples/flask/uwsgi.ini as committed" in (snippets.file_mismatch(block) or "")
    [block] = snippets.extract(missing)
    assert "does not exist" in (snippets.file_mismatch(block) or "")
    result = subprocess.run(
        [sys.executable, str(RUNNER), str(edited)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1
    assert "as committed" in result.stderr


def test_a_failing_example_fails_the_page(tmp_path: Path) -> None:
    page = tmp_path / "failing.md"
    page.write_text("```python\nassert token.count('.') == 2\nraise ValueError('x')\n```\n")
    result = subprocess.run(
        [sys.executable, str(RUNNER), str(page)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1
    assert "block at line 1" in result.stderr
    assert "ValueError" in result.stderr
