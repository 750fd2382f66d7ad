"""The command line, run as a user runs it: a subprocess per case.

Every subcommand and every exit code (0 accepted, 1 rejected, 2 usage or
configuration error, 3 keys unavailable); errors are one line on stderr,
never a traceback, and a secret is never echoed.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from forge import SECRET, hmac_key, private_key

from grelmicro.jwt.testing import TestIssuer

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


TOKEN_LIKE = hmac_key().mint({"sub": "usage-error", "exp": 1})


@pytest.mark.parametrize(
    "argv",
    [
        [TOKEN_LIKE],  # the command forgotten: an invalid choice
        ["verify", "x.y.z", TOKEN_LIKE],  # one argument too many
        ["verify", f"--token={TOKEN_LIKE}"],  # an unknown option with a value
        ["verify", "--leeway", TOKEN_LIKE],  # a value of the wrong type
        ["verify", "--leeway", SECRET_TEXT],
        ["inspect", "--secret", SECRET_TEXT],
        ["verify", f"--secret-e={SECRET_TEXT}"],  # an abbreviation with a value
        ["verify", f"--se={SECRET_TEXT}"],  # an ambiguous abbreviation
    ],
)
def test_usage_errors_never_echo_a_token_or_secret(argv: list[str]):
    result = run(*argv)

    assert result.returncode == 2
    assert "error:" in result.stderr
    assert "Traceback" not in result.stderr
    for secret in (TOKEN_LIKE, SECRET_TEXT, TOKEN_LIKE[:20], SECRET_TEXT[:12]):
        assert secret not in result.stderr + result.stdout


def test_usage_errors_still_name_the_choices():
    result = run("nonsense")

    assert "invalid choice" in result.stderr
    assert "verify" in result.stderr


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


def test_verify_allows_nbf_ahead_by_leeway_ahead():
    # The real clock: nbf 30 s ahead is inside the default 60 s, outside 0.
    token = hmac_key().mint({**fresh(), "nbf": int(time.time()) + 30})

    accepted = run("verify", token, "--secret-env", "JWT_SECRET", env=HS_ENV)
    strict = run("verify", token, "--secret-env", "JWT_SECRET", "--leeway-ahead", "0", env=HS_ENV)

    assert accepted.returncode == 0, accepted.stderr
    assert strict.returncode == 1
    assert one_line_error(strict).startswith("rejected: not-yet-valid: token is not valid before")
    assert "leeway ahead 0s" in one_line_error(strict)


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
    issuer = TestIssuer(audience="api")
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps(issuer.jwks))

    result = run("verify", issuer.mint(aud=None), "--jwks", str(jwks), "--audience", "api")

    assert result.returncode == 1  # no aud in the token while one is configured
    assert one_line_error(result).startswith("rejected: missing-claim")
    ok = run("verify", issuer.mint(), "--jwks", str(jwks), "--audience", "api")
    assert ok.returncode == 0, ok.stderr


def test_verify_with_discovery():
    issuer = TestIssuer(audience="api")
    with issuer.serve(as_issuer=True) as server:
        token = issuer.mint(sub="found")
        discovered = ["--discover", server.issuer, "--allow-insecure-loopback"]

        result = run("verify", token, *discovered, "--audience", "api")
        foreign = run("verify", TestIssuer().mint(), *discovered, "--audience", "api")

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["sub"] == "found"
    assert foreign.returncode == 1
    assert one_line_error(foreign).startswith("rejected: ")


@pytest.mark.parametrize(
    "sources",
    [
        ["--discover", "https://idp.test/", "--jwks-url", "https://idp.test/jwks"],
        ["--discover", "https://idp.test/", "--secret-env", "JWT_SECRET"],
    ],
)
def test_discover_is_a_key_source_of_its_own(sources: list[str]):
    result = run("verify", "x.y.z", *sources, env=HS_ENV)

    assert result.returncode == 2
    assert "use one" in one_line_error(result)


def test_discover_without_https_is_a_configuration_error():
    result = run("verify", "x.y.z", "--discover", "http://idp.example.com/")

    assert result.returncode == 2
    assert one_line_error(result).startswith("error: invalid-config")


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


@pytest.mark.parametrize(
    "value",
    [
        "NOT_SET_ANYWHERE",
        "A3F09C1D77E24B5A9E0C6D2B8F41A7C3E95D0B6A2C4F8E1D",  # a secret shaped like a name
        "tOpSeCrEt_0123456789abcdefABCDEF",
    ],
)
def test_an_unset_secret_env_is_never_repeated(value: str):
    result = run("verify", "x.y.z", "--secret-env", value)

    assert result.returncode == 2
    assert "named by --secret-env is not set" in one_line_error(result)
    assert value not in result.stderr + result.stdout


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
    payload_text = result.stdout.split("payload:\n", 1)[1].split("times (UTC):\n", 1)[0]
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


@pytest.mark.parametrize("scheme", ["Bearer ", "bearer  ", "DPoP ", "Authorization: Bearer "])
def test_inspect_drops_a_pasted_scheme(scheme: str):
    token = hmac_key().mint(fresh())

    result = run("inspect", scheme + token)

    assert result.returncode == 0, result.stderr
    assert '"sub": "user-1"' in result.stdout


def test_inspect_shows_iso_times_and_when_the_token_expires():
    now = int(time.time())
    token = hmac_key().mint({"iat": now - 60, "nbf": now - 60, "exp": now + 3 * 3600 + 600})

    result = run("inspect", token)

    times = result.stdout.split("times (UTC):\n", 1)[1]
    iat = datetime.fromtimestamp(now - 60, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert re.search(rf"iat: {iat} \(\d+m( \d+s)? ago\)", times), times
    # 3h10m from when it was minted: however slow the run, it still shows hours and minutes.
    assert re.search(r"exp: \S+Z \(expires in [23]h \d+m\)", times), times


def test_inspect_says_how_long_ago_a_token_expired():
    result = run("inspect", hmac_key().mint({"exp": 1_700_000_000}))

    assert "exp: 2023-11-14T22:13:20Z (expired " in result.stdout


def test_inspect_shows_unusable_times_as_they_are():
    result = run("inspect", hmac_key().mint({"exp": 1e300, "iat": "yesterday"}))

    assert result.returncode == 0, result.stderr
    assert "exp: 1e+300 (not a time a calendar can show)" in result.stdout
    assert "iat:" not in result.stdout.split("times (UTC):", 1)[1]


@pytest.mark.parametrize("depth", [65, 2500])  # 2500: json.loads hits the recursion limit
def test_inspect_refuses_a_deeply_nested_payload_in_one_line(depth: int):
    payload = "[" * depth + "]" * depth
    token = hmac_key().mint(payload)

    result = run("inspect", "-", stdin=token)

    assert result.returncode == 1
    assert one_line_error(result) == (
        "rejected: too-large: the payload is nested deeper than 64 levels"
    )


def test_inspect_shows_a_payload_nested_64_deep():
    payload = {"a": json.loads("[" * 63 + "]" * 63)}

    result = run("inspect", hmac_key().mint(payload))

    assert result.returncode == 0, result.stderr


def test_a_discovery_issuer_mismatch_is_said_as_a_configuration_error() -> None:
    """A trailing-slash mismatch read "keys unavailable", like an outage, showing neither value."""
    from servers import DocumentServer  # noqa: PLC0415 - a loopback provider for this test

    server = DocumentServer().start()
    try:
        issuer = server.url("/")
        server.set(
            "/.well-known/openid-configuration",
            {"issuer": issuer.rstrip("/"), "jwks_uri": server.url("/jwks")},
        )
        result = run(
            "verify",
            TestIssuer().mint(),
            "--discover",
            issuer,
            "--allow-insecure-loopback",
            "--audience",
            "api",
        )
    finally:
        server.stop()
    line = one_line_error(result)
    assert result.returncode == 3
    assert line.startswith("configuration error: ")
    assert issuer.rstrip("/") in line
    assert "trailing slash" in line
