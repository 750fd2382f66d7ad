"""Refusal messages that let a user fix a mismatch in seconds.

Issuer and audience refusals name what was expected (configuration) and
what the token said (escaped, capped), and call out a near miss. A token in
a wrong shape (JSON serialization, whitespace around it) is named as such.
No message ever quotes the token itself.
"""

from __future__ import annotations

import json

import jwt as pyjwt
import pytest
from forge import NOW

from grelmicro.jwt import (
    InvalidAudienceError,
    InvalidIssuerError,
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
        ("http://idp.example.com/", "scheme"),
        ("http://idp.example.com", "scheme"),
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
