"""Key selection by ``kid`` and ``alg`` (design §3).

- A key configured with a kid matches only tokens carrying that kid, or
  tokens carrying none when it is the only key that could verify them.
- A key configured without one matches a token with any kid or none.
- A token without kid is accepted only when exactly one configured key
  (with or without a kid of its own) could verify it.
- Two different keys under one kid make that kid unusable, wherever the
  keys come from (a JWKS, keys in code, both combined).
- The token's alg must be allowed and match the chosen key.
"""

from __future__ import annotations

import json
from typing import Any

import forge
import pytest
from grelmicro_core import Key, KeySet, Policy, Verifier
from support import FRESH, key_for, rejection, verifier

A = forge.Signer("HS256", b"a" * 32)
B = forge.Signer("HS256", b"b" * 32)
C384 = forge.Signer("HS384", b"c" * 48)


def _key(sig: forge.Signer, kid: str | None) -> Key:
    return Key.secret(sig.private, sig.alg, kid)


@pytest.mark.parametrize(
    ("configured", "token_signer", "token_kid", "expected"),
    [
        # A key with a kid: only that kid reaches it.
        ([(A, "a")], A, "a", "ok"),
        ([(A, "a")], A, "b", "unknown-key"),
        # ... or a token naming no kid, when it is the only candidate.
        ([(A, "a")], A, None, "ok"),
        ([(A, "a")], A, "A", "unknown-key"),
        ([(A, "a"), (B, "b")], B, "b", "ok"),
        ([(A, "a"), (B, "b")], A, "b", "signature"),
        ([(A, "a"), (B, "b")], A, None, "unknown-key"),
        # A key without a kid: any kid, or none (the kid is then a hint).
        ([(A, None)], A, None, "ok"),
        ([(A, None)], A, "anything", "ok"),
        # Two kid-less candidates: a token must name neither ambiguously.
        ([(A, None), (B, None)], A, None, "unknown-key"),
        ([(A, None), (B, None)], B, "hint", "unknown-key"),
        # Kid-less keys of different algorithms are not competing candidates.
        ([(A, None), (C384, None)], A, None, "ok"),
        ([(A, None), (C384, None)], C384, None, "ok"),
        # Mixed: the named key wins for its kid; other tokens go to the kid-less key.
        ([(A, "a"), (B, None)], A, "a", "ok"),
        ([(A, "a"), (B, None)], B, "unknown", "ok"),
        # A token without kid: two keys could verify it, neither is chosen.
        ([(A, "a"), (B, None)], B, None, "unknown-key"),
        ([(A, "a"), (B, None)], A, None, "unknown-key"),
        # Never "try both": a kid names one key, the other is not tried.
        ([(A, "a"), (B, None)], B, "a", "signature"),
    ],
)
def test_selection(
    configured: list[tuple[forge.Signer, str | None]],
    token_signer: forge.Signer,
    token_kid: str | None,
    expected: str,
) -> None:
    check = verifier([_key(sig, kid) for sig, kid in configured])
    token = token_signer.mint(FRESH, kid=token_kid)

    assert rejection(check, token) == expected


def test_token_alg_must_match_the_key_its_kid_names() -> None:
    check = verifier([_key(A, "a"), _key(C384, "c")])
    token = forge.Signer("HS384", b"c" * 48).mint(FRESH, kid="a")

    assert rejection(check, token) == "algorithm"


def test_algorithm_allow_list_applies_before_key_choice() -> None:
    keys = KeySet([_key(A, "a"), _key(C384, "c")])
    only_384 = Verifier(keys, Policy(algorithms=["HS384"]))

    assert only_384.algorithms == ["HS384"]
    assert rejection(only_384, A.mint(FRESH, kid="a")) == "algorithm"
    assert rejection(only_384, C384.mint(FRESH, kid="c")) == "ok"


def _jwks(*keys: dict[str, Any]) -> str:
    return json.dumps({"keys": list(keys)})


def test_duplicate_kid_in_jwks_makes_the_kid_unusable() -> None:
    first = forge.signer("ES256")
    second = forge.Signer("ES256", forge.generate("ES256"))
    other = forge.signer("ES384")
    document = _jwks(first.jwk(kid="dup"), second.jwk(kid="dup"), other.jwk(kid="ok"))

    keys = KeySet.from_jwks(document)
    check = Verifier(keys, Policy())

    # Neither holder of the kid verifies, not even the one that signed.
    assert rejection(check, first.mint(FRESH, kid="dup")) == "unknown-key"
    assert rejection(check, second.mint(FRESH, kid="dup")) == "unknown-key"
    assert rejection(check, other.mint(FRESH, kid="ok")) == "ok"
    assert [(kid, code) for kid, code, _ in keys.skipped] == [("dup", "kid-conflict")]


def test_same_key_twice_under_one_kid_is_harmless() -> None:
    sig = forge.signer("ES256")
    keys = KeySet.from_jwks(_jwks(sig.jwk(kid="k"), sig.jwk(kid="k")))

    assert len(keys) == 1
    assert rejection(Verifier(keys, Policy()), sig.mint(FRESH, kid="k")) == "ok"


def test_jwks_keys_without_kid_follow_the_kidless_rule() -> None:
    es256 = forge.signer("ES256")
    ed = forge.signer("EdDSA")
    keys = KeySet.from_jwks(_jwks(es256.jwk(), ed.jwk()))
    check = Verifier(keys, Policy())

    assert rejection(check, es256.mint(FRESH)) == "ok"
    assert rejection(check, ed.mint(FRESH, kid="whatever")) == "ok"
    assert rejection(check, forge.signer("Ed25519").mint(FRESH)) == "ok"


def test_kid_is_compared_exactly() -> None:
    check = verifier(key_for(forge.signer("ES256"), "Key-1"))
    sig = forge.signer("ES256")

    assert rejection(check, sig.mint(FRESH, kid="Key-1")) == "ok"
    assert rejection(check, sig.mint(FRESH, kid="key-1")) == "unknown-key"
    assert rejection(check, sig.mint(FRESH, kid="Key-1 ")) == "unknown-key"
    assert rejection(check, sig.mint(FRESH, kid="")) == "unknown-key"


@pytest.mark.parametrize("source", ["keys", "jwks"])
def test_same_kidless_key_twice_is_one_candidate(source: str) -> None:
    """Regression: a duplicated kid-less key used to count as two candidates."""
    sig = forge.signer("ES256")
    if source == "keys":
        keys = KeySet([key_for(sig), key_for(sig)])
    else:
        keys = KeySet.from_jwks(_jwks(sig.jwk(), sig.jwk()))

    assert rejection(Verifier(keys, Policy()), sig.mint(FRESH)) == "ok"
