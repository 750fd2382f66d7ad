"""examples/log-config.json: under uvicorn, the library's records are JSON lines with their fields.

Without it, uvicorn configures only its own loggers, and the library's
warnings reach stderr through Python's last-resort handler as bare text (no
level, logger, time or pid). The config (docs/observability.md, "Logs under
uvicorn") names ``examples/log_format.py``'s formatter; the service of
examples/Dockerfile runs with it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
CONFIG = EXAMPLES / "log-config.json"
BASE = {"time", "level", "logger", "pid", "message"}


def json_lines(text: str) -> list[dict[str, object]]:
    """Every line of ``text`` that is a JSON object (uvicorn may print others first)."""
    found = []
    for line in text.splitlines():
        if line.startswith("{"):
            found.append(json.loads(line))
    return found


def test_a_key_source_event_is_one_json_line_with_its_jwt_fields() -> None:
    code = (
        "import json, logging.config, sys\n"
        f"logging.config.dictConfig(json.load(open({str(CONFIG)!r})))\n"
        "from grelmicro.jwt._events import log_event\n"
        "log_event(logging.WARNING, 'keys.fetch_failed', 'https://idp.test/jwks.json',\n"
        "          'fetch failed: %s', 'timeout', error='timeout', failures=1)\n"
        "logging.getLogger('grelmicro.jwt').debug('not at INFO')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=EXAMPLES,
        env=dict(os.environ, PYTHONPATH=str(EXAMPLES)),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    [line] = json_lines(done.stderr)
    assert set(line) >= BASE
    assert line["level"] == "WARNING"
    assert line["logger"] == "grelmicro.jwt"
    assert line["message"] == "fetch failed: timeout"
    assert line["jwt_event"] == "keys.fetch_failed"
    assert line["jwt_source"] == "https://idp.test/jwks.json"
    assert line["jwt_error"] == "timeout"
    assert line["jwt_failures"] == 1
    assert isinstance(line["pid"], int)
    assert str(line["time"]).endswith("+00:00")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_uvicorn_with_the_config_writes_the_librarys_warning_as_a_json_line() -> None:
    pytest.importorskip("uvicorn")
    pytest.importorskip("fastapi")
    env = dict(
        os.environ,
        # Nothing listens there.
        GRELMICRO_JWT_JWKS_URL=f"https://127.0.0.1:{free_port()}/jwks.json",
        GRELMICRO_JWT_AUDIENCE="https://api.example.com",
        GRELMICRO_JWT_ISSUER="https://idp.example.com/",
    )
    cmd = [
        sys.executable, "-m", "uvicorn", "service_app:app", "--host", "127.0.0.1",
        "--port", str(free_port()), "--log-config", str(CONFIG),
    ]  # fmt: skip
    server = subprocess.Popen(
        cmd, cwd=EXAMPLES, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    seen: list[dict[str, object]] = []
    try:
        assert server.stderr is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = server.stderr.readline()
            if not line:
                break
            seen += json_lines(line)
            if any(record.get("jwt_event") == "keys.fetch_failed" for record in seen):
                break
    finally:
        server.terminate()
        server.wait(timeout=30)
        if server.stderr is not None:
            server.stderr.close()
    failed = [record for record in seen if record.get("jwt_event") == "keys.fetch_failed"]
    assert failed, seen
    assert failed[0]["level"] == "WARNING"
    assert failed[0]["logger"] == "grelmicro.jwt"
    assert failed[0]["pid"] == server.pid
    assert failed[0]["jwt_source"] == env["GRELMICRO_JWT_JWKS_URL"]
    assert any(str(record["logger"]).startswith("uvicorn") for record in seen)
