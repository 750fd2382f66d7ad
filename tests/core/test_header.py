"""JOSE header rules (design §4): crit, b64, alg none, and headers that must
never choose the key (jku, x5u, jwk, x5c)."""

from __future__ import annotations

import json
from typing import Any

import forge
import pytest
from grelmicro_core import Key
from support import FRESH, hs256, key_for, rejection, verifier


@pytest.mark.parametrize(
    ("members", "expected"),
    [
        ({"crit": ["exp"]}, "unsupported"),
        ({"crit": ["b64"], "b64": False}, "unsupported"),
        ({"crit": ["b64"], "b64": True}, "unsupported"),
        ({"crit": ["http://example.com/ext"], "http://example.com/ext": 1}, "unsupported"),
        ({"crit": []}, "malformed"),
        ({"crit": "exp"}, "malformed"),
        ({"crit": [1]}, "malformed"),
        ({"crit": None}, "malformed"),
        ({"b64": False}, "unsupported"),
        ({"b64": "false"}, "malformed"),
        ({"b64": 0}, "malformed"),
        ({"b64": True}, "ok"),
        ({"typ": "JWT", "cty": "JWT", "x-custom": {"a": [1, 2]}}, "ok"),
        ({"kid": 5}, "malformed"),
        ({"kid": None}, "malformed"),
        ({"typ": 1}, "malformed"),
    ],
)
def test_header_members(members: dict[str, Any], expected: str) -> None:
    sig, check = hs256()

    assert rejection(check, sig.mint(FRESH, header={"alg": "HS256", **members})) == expected


NONE_SPELLINGS = ["none", "None", "NONE", "nOnE"]


@pytest.mark.parametrize("alg", NONE_SPELLINGS)
def test_alg_none_with_a_signature_is_refused(alg: str) -> None:
    sig, check = hs256()
    # Even carrying a valid HS256 MAC, the header's alg decides: none is refused.
    token = forge.mint({"alg": alg}, FRESH, sig.private, "HS256")

    assert rejection(check, token) == "algorithm"


@pytest.mark.parametrize("alg", NONE_SPELLINGS)
def test_unsecured_token_is_refused(alg: str) -> None:
    _, check = hs256()
    unsecured = f"{forge.segment({'alg': alg})}.{forge.segment(FRESH)}."

    assert rejection(check, unsecured) == "malformed"


@pytest.mark.parametrize(
    "header",
    [
        {"typ": "JWT"},
        {"alg": None},
        {"alg": ""},
        {"alg": ["HS256"]},
        {"alg": "hs256"},
        {"alg": "HS256 "},
        {"alg": "HMAC-SHA256"},
        {"alg": "RSA-OAEP"},
        {"alg": "ES521"},
    ],
)
def test_missing_or_unknown_alg_is_refused(header: dict[str, Any]) -> None:
    sig, check = hs256()

    assert rejection(check, sig.mint(FRESH, header=header)) == "algorithm"


def test_embedded_jwk_never_supplies_the_key() -> None:
    """An attacker signs with their own key and ships it in the header."""
    attacker = forge.Signer("ES256", forge.generate("ES256"))
    check = verifier(key_for(forge.signer("ES256"), "kid-1"))
    token = attacker.mint(FRESH, kid="kid-1", jwk=attacker.jwk(kid="kid-1"))

    assert rejection(check, token) == "signature"


@pytest.mark.parametrize(
    "members",
    [
        {"jku": "https://attacker.example/jwks.json"},
        {"x5u": "https://attacker.example/cert.pem"},
        {"x5c": ["MIIB"]},
        {"jwk": {"kty": "oct", "k": "AAAA"}},
        {"x5t": "abc", "x5t#S256": "def"},
    ],
)
def test_key_locating_headers_are_ignored(members: dict[str, Any]) -> None:
    """A legitimate token still verifies with the configured key; a forged one does not."""
    legit = forge.signer("ES256")
    attacker = forge.Signer("ES256", forge.generate("ES256"))
    check = verifier(key_for(legit))

    assert rejection(check, legit.mint(FRESH, **members)) == "ok"
    assert rejection(check, attacker.mint(FRESH, **members)) == "signature"


def test_symmetric_key_from_the_header_is_never_used() -> None:
    """HS256 with a secret of the attacker's choosing, advertised in ``jwk``."""
    secret = b"x" * 32
    check = verifier(key_for(forge.signer("ES256")))
    token = forge.mint({"alg": "HS256", "jwk": forge.oct_jwk(secret)}, FRESH, secret)

    assert rejection(check, token) == "algorithm"


def test_header_must_be_an_object() -> None:
    sig, check = hs256()

    for header in ["[]", '"HS256"', "null", "1"]:
        assert rejection(check, sig.mint(FRESH, header=header)) == "malformed", header


@pytest.mark.parametrize(
    "header",
    [
        '{"alg":"HS256","alg":"HS256"}',
        '{"alg":"HS256","kid":"a","kid":"a"}',
        '{"alg":"HS256","x":1,"x":1}',
        '{"alg":"HS256","\\u0061lg":"HS256"}',
        '{"alg":"HS256"}x',
        "{'alg':'HS256'}",
    ],
)
def test_header_json_is_strict(header: str) -> None:
    sig, check = hs256()

    assert rejection(check, sig.mint(FRESH, header=header)) == "malformed"


def test_header_whitespace_between_tokens_is_json() -> None:
    sig, check = hs256()

    assert rejection(check, sig.mint(FRESH, header='{ "alg" : "HS256" ,\n\t"typ":"JWT" }')) == "ok"
    assert rejection(check, sig.mint(FRESH, header=' {"alg":"HS256"}\r\n')) == "ok"


def test_jwe_is_refused() -> None:
    _, check = hs256()
    header = forge.segment({"alg": "dir", "enc": "A256GCM"})

    assert rejection(check, f"{header}..aXY.Y2lwaGVy.dGFn") == "unsupported"


def test_eddsa_header_names_both_select_an_ed25519_key() -> None:
    check = verifier(Key.jwk(json.dumps(forge.signer("EdDSA").jwk())))

    assert rejection(check, forge.signer("EdDSA").mint(FRESH)) == "ok"
    assert rejection(check, forge.signer("Ed25519").mint(FRESH)) == "ok"
