"""Refusal messages that let a user fix a mismatch in seconds.

Issuer and audience refusals name what was expected (configuration) and
what the token said (escaped, capped), and call out a near miss. A token in
a wrong shape (JSON serialization, whitespace around it) is named as such.
No message ever quotes the token itself.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time

import jwt as pyjwt
import pytest
from forge import NOW, hmac_key

from grelmicro.jwt import (
    InvalidAudienceError,
    InvalidIssuerError,
    Issuer,
    JWTVerifier,
    Key,
    TokenRejectedError,
)
from grelmicro.jwt._core import near_miss

SECRET = b"s" * 32
ISSUER = "https://idp.example.com/"
AUDIENCE = "api://orders"


def mint(**claims: object) -> str:
    return pyjwt.encode({"exp": NOW + 60, **claims}, SECRET, algorithm="HS256")


def refusal(verifier: JWTVerifier, token: str) -> TokenRejectedError:
    with pytest.raises(TokenRejectedError) as caught:
        verifier.verify(token, now=NOW)
    message = str(caught.value)
    for part in token.split("."):
        if len(part) > 8:
            assert part not in message  # never the token, nor any of its segments
    return caught.value


@pytest.fixture
def verifier() -> JWTVerifier:
    return JWTVerifier(keys=[Key.secret(SECRET)], issuer=ISSUER, audience=AUDIENCE)


@pytest.mark.parametrize(
    ("seen", "how"),
    [
        ("https://idp.example.com", "trailing slash"),
        ("https://IDP.example.com/", "letter case"),
        ("http://idp.example.com/", "only the scheme differs"),
        (" https://idp.example.com/", "whitespace"),
    ],
)
def test_issuer_near_miss_is_called_out(verifier: JWTVerifier, seen: str, how: str) -> None:
    error = refusal(verifier, mint(iss=seen, aud=AUDIENCE))
    assert isinstance(error, InvalidIssuerError)
    message = str(error)
    assert f'expected "{ISSUER}"' in message
    assert f'"{seen}"' in message
    assert "near miss" in message
    assert how in message
    assert error.expected == (ISSUER,)


def test_issuer_far_miss_names_both_without_a_near_miss(verifier: JWTVerifier) -> None:
    message = str(refusal(verifier, mint(iss="https://other.example.org/", aud=AUDIENCE)))
    assert '"https://other.example.org/"' in message
    assert f'"{ISSUER}"' in message
    assert "near miss" not in message


def test_audience_mismatch_names_expected_and_seen(verifier: JWTVerifier) -> None:
    error = refusal(verifier, mint(iss=ISSUER, aud=["api://Orders", "account"]))
    assert isinstance(error, InvalidAudienceError)
    message = str(error)
    assert f'expected "{AUDIENCE}"' in message
    assert '"api://Orders", "account"' in message
    assert "near miss" in message
    assert "letter case" in message


def test_aud_without_a_configured_audience_says_what_to_pass() -> None:
    verifier = JWTVerifier(keys=[Key.secret(SECRET)])
    message = str(refusal(verifier, mint(aud="api://orders")))
    assert '"api://orders"' in message
    assert "audience=" in message


def test_token_values_are_escaped_and_capped(verifier: JWTVerifier) -> None:
    hostile = "\x1b[31m\u202eevil\n" + "x" * 1000
    message = str(refusal(verifier, mint(iss=hostile, aud=AUDIENCE)))
    assert "\x1b" not in message
    assert "\u202e" not in message
    assert "\n" not in message
    assert "\\x1b" in message
    assert "x" * 200 not in message  # capped
    assert len(message) < 600


def test_json_serialized_jws_gets_its_own_message(verifier: JWTVerifier) -> None:
    token = mint(iss=ISSUER, aud=AUDIENCE)
    header, payload, signature = token.split(".")
    flattened = json.dumps(
        {
            "payload": payload,
            "protected": header,
            "header": {"kid": "a.b.c"},
            "signature": signature,
        }
    )
    error = refusal(verifier, flattened)
    assert error.reason == "unsupported"
    assert "JSON-serialized" in str(error)
    assert "JWE) are not accepted" not in str(error)


@pytest.mark.parametrize("wrap", ["{}\n", " {}", "\t{} \r\n"])
def test_whitespace_around_a_token_gets_its_own_message(verifier: JWTVerifier, wrap: str) -> None:
    token = mint(iss=ISSUER, aud=AUDIENCE)
    error = refusal(verifier, wrap.format(token))
    assert error.reason == "malformed"
    assert "whitespace around" in str(error)
    assert verifier.verify(token, now=NOW)  # the same token, stripped, verifies


def test_near_miss_rules() -> None:
    assert near_miss("https://a/", "https://a/") is None
    assert near_miss("https://a", "https://b") is None
    assert near_miss("api", "API") == "only letter case differs"
    assert near_miss("https://a", "https://a/") == "only a trailing slash differs"


# -- several issuers: a token whose iss names none of them ------------------------------

OTHER_ISSUER = "https://login.example.org/tenant/v2.0"


@pytest.fixture
def router() -> JWTVerifier:
    """A verifier routing by ``iss`` between two issuers."""
    return JWTVerifier(
        issuers=[
            Issuer(ISSUER, keys=[Key.secret(SECRET, kid="a")]),
            Issuer(OTHER_ISSUER, keys=[Key.secret(SECRET, kid="b")]),
        ],
        audience=AUDIENCE,
    )


@pytest.mark.parametrize(
    ("seen", "near", "how"),
    [
        ("https://idp.example.com", ISSUER, "trailing slash"),
        ("https://login.example.org/tenant/v2.0/", OTHER_ISSUER, "trailing slash"),
        ("http://idp.example.com/", ISSUER, "only the scheme differs"),
    ],
)
def test_unknown_issuer_names_the_configured_ones_and_the_near_miss(
    router: JWTVerifier, seen: str, near: str, how: str
) -> None:
    error = refusal(router, mint(iss=seen, aud=AUDIENCE))
    assert isinstance(error, InvalidIssuerError)
    message = str(error)
    assert "not one of the configured issuers" in message
    assert f'expected "{ISSUER}", "{OTHER_ISSUER}"' in message
    assert f'the token\'s issuer is "{seen}"' in message
    assert f'near miss: "{seen}" vs the expected "{near}"' in message
    assert how in message
    assert error.expected == (ISSUER, OTHER_ISSUER)


def test_unknown_issuer_far_miss_has_no_near_miss(router: JWTVerifier) -> None:
    message = str(refusal(router, mint(iss="https://evil.example.net/", aud=AUDIENCE)))
    assert '"https://evil.example.net/"' in message
    assert f'expected "{ISSUER}", "{OTHER_ISSUER}"' in message
    assert "near miss" not in message


def test_unknown_issuer_from_the_token_is_escaped_and_capped(router: JWTVerifier) -> None:
    hostile = "\x1b[31m\u202eevil\n" + "x" * 1000
    message = str(refusal(router, mint(iss=hostile, aud=AUDIENCE)))
    assert "\x1b" not in message
    assert "\u202e" not in message
    assert "\n" not in message
    assert "\\x1b" in message
    assert "x" * 200 not in message  # capped
    assert len(message) < 600


@pytest.mark.parametrize("iss", [None, 42])
def test_a_token_without_a_string_iss_is_refused_naming_the_claim(
    router: JWTVerifier, iss: object
) -> None:
    claims = {"aud": AUDIENCE} if iss is None else {"aud": AUDIENCE, "iss": iss}
    token = hmac_key(secret=SECRET).mint({"exp": NOW + 60, **claims})  # PyJWT refuses iss=42
    error = refusal(router, token)
    assert isinstance(error, InvalidIssuerError)
    assert "no iss claim" in str(error)
    assert error.expected == (ISSUER, OTHER_ISSUER)


# -- the same message in the DEBUG log and in the CLI --------------------------------


def test_the_debug_log_carries_the_message(
    router: JWTVerifier, caplog: pytest.LogCaptureFixture
) -> None:
    token = mint(iss="https://idp.example.com", aud=AUDIENCE)
    with caplog.at_level(logging.DEBUG, logger="grelmicro.jwt"):
        error = refusal(router, token)
    logged = [r.getMessage() for r in caplog.records if r.name == "grelmicro.jwt"]
    assert logged == [f"token rejected: issuer: {error}"]
    assert "near miss" in logged[0]
    for part in token.split("."):
        assert part not in logged[0]


def test_the_cli_shows_expected_seen_and_near_miss() -> None:
    claims = {"iss": "https://idp.example.com", "aud": AUDIENCE, "exp": int(time.time()) + 600}
    token = pyjwt.encode(claims, SECRET, algorithm="HS256")  # the CLI reads the wall clock
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GRELMICRO_JWT_")}
    environ["JWT_SECRET"] = SECRET.decode()
    command = [sys.executable, "-m", "grelmicro.jwt", "verify", token]
    options = ["--secret-env", "JWT_SECRET", "--issuer", ISSUER, "--audience", AUDIENCE]
    result = subprocess.run(
        [*command, *options, "--algorithm", "HS256"],
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    line = result.stderr.strip()
    assert line.startswith("rejected: issuer: ")
    assert f'expected "{ISSUER}"' in line
    assert 'the token\'s issuer is "https://idp.example.com"' in line
    assert "near miss: only a trailing slash differs" in line
    for part in token.split("."):
        assert part not in result.stdout + result.stderr


# -- issue 33 (N19): quotes that cannot be closed, near misses that are real ------------------


@pytest.mark.parametrize(
    "seen",
    [
        'https://idp.example.com/" (near miss: only a trailing slash differs',
        'evil\\" expected "https://idp.example.com/',
        "line\nbreak\u2028",
    ],
)
def test_a_token_value_cannot_close_its_quotes(verifier: JWTVerifier, seen: str) -> None:
    message = str(refusal(verifier, mint(iss=seen, aud=AUDIENCE)))
    said = message.split("the token's issuer is ", 1)[1].split(", expected ", 1)[0]
    # One quoted value: starts and ends with a quote, every inner quote escaped.
    assert said.startswith('"')
    assert said.endswith('"')
    inner = said[1:-1].replace("\\\\", "")
    assert '"' not in inner.replace('\\"', "")
    assert "\n" not in message
    assert "\u2028" not in message
    assert message.endswith(f'expected "{ISSUER}"')  # no near miss outside the quotes


@pytest.mark.parametrize(
    "seen",
    [
        "http://idp.example.com",  # the scheme and a trailing slash
        "http://IDP.example.com/",  # the scheme and the case
        "x https://idp.example.com/",
        "https://evil.example/?https://idp.example.com/",
        "idp.example.com/",
    ],
)
def test_the_scheme_hint_needs_the_scheme_alone_to_differ(verifier: JWTVerifier, seen: str) -> None:
    message = str(refusal(verifier, mint(iss=seen, aud=AUDIENCE)))
    assert "only the scheme differs" not in message


def test_the_scheme_near_miss_rules() -> None:
    assert near_miss("http://a.example/", "https://a.example/") == "only the scheme differs"
    assert near_miss("HTTP://a.example/", "https://a.example/") == "only the scheme differs"
    assert near_miss("ftp://a.example/", "https://a.example/") == "only the scheme differs"
    assert near_miss("http://a.example", "https://a.example/") is None
    assert near_miss("a.example/", "https://a.example/") is None
    assert near_miss("1http://a.example/", "https://a.example/") is None
