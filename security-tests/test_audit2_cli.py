"""Attack class: the command line echoing a secret, or failing with a traceback.

Issue 24, finding 6: ``--secret-env <value>`` echoed a secret that looks
like a variable name (upper-case hex), and ``inspect`` printed a
``RecursionError`` traceback for a deeply nested payload. The rule chosen:
the CLI never repeats the value given to ``--secret-env`` (nor a secret read
from the environment) and every failure is one line on stderr with its exit
code (1 refused, 2 usage or configuration), never a traceback.

Each case runs the installed entry points as a subprocess (``python -m
grelmicro.jwt`` and the ``grelmicro-jwt`` console script of the wheel).

References: CWE-209 (error message with sensitive information), CWE-532
(sensitive information in logs), CWE-214 (process arguments), CWE-674
(uncontrolled recursion), RFC 8725 §3.10.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import forge
import pytest

SCRIPT = Path(sys.executable).parent / "grelmicro-jwt"
ENTRY_POINTS = {
    "module": [sys.executable, "-m", "grelmicro.jwt"],
    "script": [str(SCRIPT)],
}

#: A secret as an operator might paste it: 64 upper-case hex digits, which fit
#: the shape of an environment variable name.
HEX_SECRET = "9F2C4E7A1B3D5F6081A2C3E4F5061728394A5B6C7D8E9FA0B1C2D3E4F5A6B7C8"
TOKEN = forge.mint({"alg": "HS256", "typ": "JWT"}, {"sub": "u", "exp": forge.NOW + 60}, b"k" * 32)


def run(
    args: list[str],
    *,
    entry: str = "module",
    stdin: str | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    if entry == "script" and not SCRIPT.exists():
        pytest.fail(f"the wheel installs no console script at {SCRIPT}")
    return subprocess.run(
        [*ENTRY_POINTS[entry], *args],
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )


def assert_one_line_failure(result: subprocess.CompletedProcess[str], code: int) -> str:
    """Exit ``code``, nothing on stdout, one line on stderr, no traceback; the line."""
    assert result.returncode == code, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "Error:" not in result.stderr.replace("error:", "")  # no exception repr
    lines = result.stderr.strip().splitlines()
    # argparse's usage line may precede its own one-line error.
    assert len([line for line in lines if not line.startswith("usage:")]) == 1, lines
    return lines[-1]


def assert_never_shown(result: subprocess.CompletedProcess[str], secret: str) -> None:
    for stream in (result.stdout, result.stderr):
        for needle in {secret, secret.lower(), secret[: len(secret) // 2], secret[-16:]}:
            assert needle not in stream, f"secret material in the output: {stream!r}"


# -- --secret-env never echoes its value --------------------------------------------------


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize(
    "argv",
    [
        ["verify", TOKEN, "--secret-env", HEX_SECRET],
        ["verify", TOKEN, f"--secret-env={HEX_SECRET}"],
        ["verify", "--secret-env", HEX_SECRET, TOKEN],
        ["verify", TOKEN, "--secret-env", HEX_SECRET.lower()],
        ["verify", TOKEN, "--secret-env", "X" + HEX_SECRET],
        ["verify", TOKEN, "--secret-env", HEX_SECRET, "--algorithm", "HS512"],
        ["verify", TOKEN, "--secret-env", HEX_SECRET, "--kid", "k1", "--audience", "api"],
    ],
    ids=["spaced", "equals", "before-token", "lower-hex", "prefixed", "hs512", "more-options"],
)
def test_a_secret_given_as_the_variable_name_is_never_echoed(entry: str, argv: list[str]):
    environment = {name: value for name, value in os.environ.items() if HEX_SECRET not in name}
    result = subprocess.run(
        [*ENTRY_POINTS[entry], *argv],
        input="",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=environment,
    )
    line = assert_one_line_failure(result, 2)
    assert "--secret-env" in line
    assert_never_shown(result, HEX_SECRET)


@pytest.mark.parametrize(
    "value",
    [HEX_SECRET, "c2VjcmV0LXZhbHVlLXRoYXQtaXMtbG9uZy1lbm91Z2g+/=", "s3cr3t with spaces and !"],
    ids=["upper-hex", "base64", "phrase"],
)
def test_argument_errors_around_the_secret_never_repeat_it(value: str):
    # An unknown option after the secret: argparse's message must not list it.
    result = run(["verify", TOKEN, "--secret-env", value, "--no-such-option", value])
    assert_one_line_failure(result, 2)
    assert_never_shown(result, value)


@pytest.mark.parametrize(
    ("secret", "reason"),
    [
        ("CANARY-short", "weak-key"),
        (forge.spki_pem(forge.KeyRing().p256.public_key()).decode(), "invalid-key"),
    ],
    ids=["short-secret", "public-key-pem"],
)
def test_a_bad_secret_from_the_environment_is_never_shown(secret: str, reason: str):
    argv = ["verify", TOKEN, "--secret-env", "GRELMICRO_AUDIT_SECRET"]
    result = run(argv, env={"GRELMICRO_AUDIT_SECRET": secret})
    line = assert_one_line_failure(result, 2)
    assert reason in line
    body = "".join(secret.splitlines()[1:-1]) or secret
    for needle in (secret, body[:24], body[-24:]):
        assert needle not in result.stdout + result.stderr


# -- inspect: deep nesting is one line, never a traceback -------------------------------


def _token_with_payload(payload_text: str, header: str = '{"alg":"HS256","typ":"JWT"}') -> str:
    return ".".join((forge.b64url(header.encode()), forge.b64url(payload_text.encode()), "c2ln"))


def _deep(depth: int, kind: str) -> str:
    if kind == "arrays":
        return '{"a":' + "[" * depth + "]" * depth + "}"
    return "{" + '"a":{' * depth + "}" * depth + "}"


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("kind", ["arrays", "objects"])
@pytest.mark.parametrize("depth", [65, 1_000, 100_000])
def test_inspect_of_a_deeply_nested_payload_is_one_line(entry: str, kind: str, depth: int):
    token = _token_with_payload(_deep(depth, kind))
    result = run(["inspect", "-"], entry=entry, stdin=token)
    line = assert_one_line_failure(result, 1)
    assert "too-large" in line


def test_inspect_of_a_deep_payload_given_as_an_argument_with_a_scheme():
    token = _token_with_payload(_deep(20_000, "arrays"))
    result = run(["inspect", f"Bearer {token}"])
    assert "too-large" in assert_one_line_failure(result, 1)


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_inspect_of_a_deeply_nested_header_is_one_line(depth: int):
    header = '{"alg":"HS256","x":' + "[" * depth + "]" * depth + "}"
    result = run(["inspect", "-"], stdin=_token_with_payload('{"sub":"u"}', header))
    assert_one_line_failure(result, 1)


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_verify_of_a_deeply_nested_token_is_one_line(depth: int):
    token = _token_with_payload(_deep(depth, "arrays"))
    result = run(
        ["verify", "-", "--secret-env", "GRELMICRO_AUDIT_SECRET"],
        stdin=token,
        env={"GRELMICRO_AUDIT_SECRET": "an-hmac-secret-of-thirty-two-byte"},
    )
    assert_one_line_failure(result, 1)


def test_inspect_positive_control_a_nesting_within_the_limit_is_shown():
    token = _token_with_payload(_deep(60, "arrays"))
    result = run(["inspect", "-"], stdin=token)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("UNVERIFIED")
    payload = result.stdout.split("payload:\n", 1)[1]
    assert json.loads(payload.split("times (UTC):")[0]) == json.loads(_deep(60, "arrays"))
