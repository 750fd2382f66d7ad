"""The command line, run as a user runs it: a subprocess per case.

Every subcommand and every exit code (0 accepted, 1 rejected, 2 usage or
configuration error, 3 keys unavailable); errors are one line on stderr,
never a traceback, and a secret is never echoed.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from forge import SECRET, hmac_key, private_key

SECRET_TEXT = SECRET.decode()


def run(
    *args: str,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
    stdin_fd: int | None = None,
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GRELMICRO_JWT_")}
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "grelmicro.jwt", *args],
        input=stdin if stdin_fd is None else None,
        stdin=stdin_fd
        if stdin_fd is not None
        else (None if stdin is not None else subprocess.DEVNULL),
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
        check=False,
    )


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def fresh(**claims: Any) -> dict[str, Any]:
    return {"sub": "user-1", "exp": int(time.time()) + 600, **claims}


HS_ENV = {"JWT_SECRET": SECRET_TEXT}


# -- help and version ------------------------------------------------------------------


@pytest.mark.parametrize("command", [[], ["verify"], ["inspect"], ["demo"]])
def test_help_has_no_raw_rst(command: list[str]):
    result = run(*command, "--help")

    assert result.returncode == 0
    assert "``" not in result.stdout
    assert "usage: grelmicro-jwt" in result.stdout


def test_main_help_lists_exit_codes():
    assert "3 keys unavailable" in run("--help").stdout.replace("\n", " ")


def test_version():
    result = run("--version")

    assert result.returncode == 0
    assert result.stdout.startswith("grelmicro-jwt ")
    assert "grelmicro-core" in result.stdout


def test_usage_error_exits_2():
    result = run("verify", "--no-such-option")

    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def test_no_command_exits_2():
    assert run().returncode == 2


# -- demo ------------------------------------------------------------------------------


def test_demo():
    result = run("demo")

    assert result.returncode == 0, result.stderr
    assert "accepted" in result.stdout
    assert "REJECTED  reason=expired" in result.stdout


# -- verify: exit 0 and 1 --------------------------------------------------------------


def test_verify_accepts_and_prints_the_claims():
    token = hmac_key().mint(fresh())

    result = run("verify", token, "--secret-env", "JWT_SECRET", env=HS_ENV)

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["sub"] == "user-1"
    assert SECRET_TEXT not in result.stdout + result.stderr


@pytest.mark.parametrize("argument", [["-"], []])
def test_verify_reads_stdin(argument: list[str]):
    token = hmac_key().mint(fresh())

    result = run("verify", *argument, "--secret-env", "JWT_SECRET", stdin=token + "\n", env=HS_ENV)

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["sub"] == "user-1"


def test_verify_pem_file(tmp_path: Path):
    signing = private_key("ES256")
    pem = tmp_path / "public.pem"
    pem.write_bytes(signing.public_pem())

    result = run("verify", signing.mint(fresh()), "--pem", str(pem), "--algorithm", "ES256")

    assert result.returncode == 0, result.stderr


def test_verify_jwks_file(tmp_path: Path):
    signing = private_key("ES256", kid="k1")
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [signing.public_jwk()]}))

    result = run("verify", signing.mint(fresh()), "--jwks", str(jwks), "--audience", "api")

    assert result.returncode == 1  # no aud in the token while one is configured
    assert one_line_error(result).startswith("rejected: missing-claim")
    ok = run("verify", signing.mint(fresh(aud="api")), "--jwks", str(jwks), "--audience", "api")
    assert ok.returncode == 0, ok.stderr


def test_verify_rejected_exits_1_with_one_line():
    token = hmac_key().mint({"sub": "u", "exp": 1_700_000_000})

    result = run("verify", token, "--secret-env", "JWT_SECRET", env=HS_ENV)

    assert result.returncode == 1
    line = one_line_error(result)
    assert line.startswith("rejected: expired: token expired at 2023-11-14T22:13:20Z")
    assert token not in line


def test_verify_bearer_prefix_says_to_strip_it():
    token = hmac_key().mint(fresh())

    result = run("verify", f"Bearer {token}", "--secret-env", "JWT_SECRET", env=HS_ENV)

    assert result.returncode == 1
    assert "without the scheme" in one_line_error(result)


# -- verify: exit 2 ----------------------------------------------------------------------


def test_short_secret_is_a_one_line_configuration_error():
    result = run("verify", "x.y.z", "--secret-env", "JWT_SECRET", env={"JWT_SECRET": "short"})

    assert result.returncode == 2
    assert one_line_error(result).startswith("error: weak-key")
    assert "short" not in result.stderr.split("got")[0]


def test_secret_given_to_secret_env_is_never_echoed():
    result = run("verify", "x.y.z", "--secret-env", SECRET_TEXT)

    assert result.returncode == 2
    assert "NAME of an environment variable" in one_line_error(result)
    assert SECRET_TEXT not in result.stderr + result.stdout
    assert "TOPSECRET" not in result.stderr


def test_unset_secret_env():
    result = run("verify", "x.y.z", "--secret-env", "NOT_SET_ANYWHERE")

    assert result.returncode == 2
    assert "NOT_SET_ANYWHERE" in one_line_error(result)


def test_missing_file_is_a_one_line_error(tmp_path: Path):
    result = run("verify", "x.y.z", "--pem", str(tmp_path / "absent.pem"))

    assert result.returncode == 2
    assert "cannot read the --pem file" in one_line_error(result)


def test_bad_pem_is_a_one_line_error(tmp_path: Path):
    pem = tmp_path / "bad.pem"
    pem.write_text("-----BEGIN PUBLIC KEY-----\\nAAAA\\n-----END PUBLIC KEY-----")

    result = run("verify", "x.y.z", "--pem", str(pem), "--algorithm", "RS256")

    assert result.returncode == 2
    assert "literal" in one_line_error(result)


def test_lower_case_algorithm_is_a_one_line_error(tmp_path: Path):
    result = run(
        "verify", "x.y.z", "--secret-env", "JWT_SECRET", "--algorithm", "hs256", env=HS_ENV
    )

    assert result.returncode == 2
    assert "did you mean HS256" in one_line_error(result)


def test_no_key_is_a_usage_error():
    result = run("verify", "x.y.z")

    assert result.returncode == 2
    assert "no key given" in one_line_error(result)


def test_terminal_without_input_gets_a_usage_hint():
    pty = pytest.importorskip("pty")
    controller, terminal = pty.openpty()
    try:
        result = run("verify", "--secret-env", "JWT_SECRET", env=HS_ENV, stdin_fd=terminal)
    finally:
        os.close(controller)
        os.close(terminal)

    assert result.returncode == 2
    assert "no token given" in one_line_error(result)


def test_empty_stdin_is_a_usage_error():
    result = run("verify", "-", "--secret-env", "JWT_SECRET", stdin="", env=HS_ENV)

    assert result.returncode == 2
    assert "no token on standard input" in one_line_error(result)


# -- verify: exit 3 ----------------------------------------------------------------------


def test_keys_unavailable_exits_3():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # The port is closed again: the fetch is refused at once.
    url = f"http://127.0.0.1:{port}/jwks.json"

    result = run("verify", hmac_key().mint(fresh()), "--jwks-url", url, "--allow-insecure-loopback")

    assert result.returncode == 3
    assert one_line_error(result).startswith("keys unavailable:")


# -- inspect -----------------------------------------------------------------------------


def test_inspect_shows_header_and_payload_unverified():
    token = hmac_key(kid="k1").mint(
        fresh(profile={"city": "Lyon"}), jwk={"kty": "EC", "crv": "P-256"}
    )

    result = run("inspect", token)

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("UNVERIFIED")
    header_text = result.stdout.split("header:\n", 1)[1].split("payload:\n", 1)[0]
    payload_text = result.stdout.split("payload:\n", 1)[1]
    header = json.loads(header_text)
    assert header["jwk"] == {"kty": "EC", "crv": "P-256"}  # a nested object, not its keys
    assert header["kid"] == "k1"
    assert json.loads(payload_text)["profile"] == {"city": "Lyon"}


def test_inspect_reads_stdin():
    result = run("inspect", "-", stdin=hmac_key().mint(fresh()))

    assert result.returncode == 0, result.stderr
    assert "user-1" in result.stdout


def test_inspect_malformed_token_exits_1():
    result = run("inspect", "not-a-token")

    assert result.returncode == 1
    assert one_line_error(result).startswith("rejected: malformed")
