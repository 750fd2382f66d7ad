"""A verifier is immutable: however long it lives, whatever it has seen, it
answers a token exactly as a freshly built one would.

(The core may remember decisions about header segments it has already
authenticated; nothing here depends on how, only on the answers.)
"""

from __future__ import annotations

import random
from typing import Any

import forge
from grelmicro_core import Key, KeySet, Policy, Verifier
from support import FRESH, NOW, key_for, rejection, together

ES_A = forge.signer("ES256")
ES_B = forge.Signer("ES256", forge.generate("ES256"))
ATTACKER = forge.Signer("ES256", forge.generate("ES256"))


def build() -> Verifier:
    keys = KeySet([key_for(ES_A, "a"), key_for(ES_B, "b"), Key.secret(b"h" * 32, "HS256", "h")])
    return Verifier(keys, Policy(typ="at+jwt"))


def _tokens() -> list[str]:
    hs = forge.Signer("HS256", b"h" * 32)
    header_a = {"alg": "ES256", "kid": "a", "typ": "at+jwt"}
    tokens = [
        ES_A.mint(FRESH, header=header_a),
        # Same header bytes, forged signature / other signer.
        ATTACKER.mint(FRESH, header=header_a),
        ES_B.mint(FRESH, header=header_a),
        # Same header bytes, claims that fail.
        ES_A.mint({"exp": NOW}, header=header_a),
        ES_A.mint({"sub": "no-exp"}, header=header_a),
        ES_B.mint(FRESH, header={"alg": "ES256", "kid": "b", "typ": "at+jwt"}),
        ES_B.mint(FRESH, header={"alg": "ES256", "kid": "b", "typ": "JWT"}),
        ES_B.mint(FRESH, header={"alg": "ES256", "kid": "b"}),
        ES_A.mint(FRESH, header={"alg": "ES256", "kid": "zzz", "typ": "at+jwt"}),
        hs.mint(FRESH, header={"alg": "HS256", "kid": "h", "typ": "at+jwt"}),
        hs.mint(FRESH, header={"alg": "HS256", "kid": "a", "typ": "at+jwt"}),
        forge.mint({"alg": "HS256", "kid": "a"}, FRESH, forge.spki_pem(ES_A.private)),
    ]
    # The same JSON header written in several byte forms, more than a handful.
    for spacing in range(8):
        text = '{"alg":"ES256",' + " " * spacing + '"kid":"a","typ":"at+jwt"}'
        tokens.append(ES_A.mint({**FRESH, "n": spacing}, header=text))
        tokens.append(ATTACKER.mint({**FRESH, "n": spacing}, header=text))
    return tokens


TOKENS = _tokens()


def answers(check: Verifier, tokens: list[str]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for token in tokens:
        kind = rejection(check, token)
        out.append((kind, check.verify(token, NOW) if kind == "ok" else None))
    return out


def test_expected_mix_of_answers() -> None:
    """Guard: the token list exercises accepts and several kinds of refusal."""
    kinds = {kind for kind, _ in answers(build(), TOKENS)}

    assert {
        "ok",
        "signature",
        "expired",
        "missing-claim",
        "type",
        "unknown-key",
        "algorithm",
    } <= kinds


def test_long_lived_verifier_answers_like_a_fresh_one() -> None:
    fresh = [answers(build(), [token])[0] for token in TOKENS]
    long_lived = build()
    rng = random.Random(1234)

    for _ in range(5):
        order = list(range(len(TOKENS)))
        rng.shuffle(order)
        got = answers(long_lived, [TOKENS[i] for i in order])
        assert got == [fresh[i] for i in order]


def test_forged_token_after_a_valid_one_with_the_same_header() -> None:
    check = build()
    header = {"alg": "ES256", "kid": "a", "typ": "at+jwt"}
    good = ES_A.mint(FRESH, header=header)
    forged = ATTACKER.mint({**FRESH, "sub": "admin"}, header=header)

    for _ in range(3):
        assert rejection(check, good) == "ok"
        assert rejection(check, forged) == "signature"


def test_threads_never_see_each_others_claims() -> None:
    """Eight threads share one verifier; each must get back its own claims."""
    check = build()
    per_thread = [
        [
            ES_A.mint({**FRESH, "sub": f"t{t}-{i}"}, kid="a", typ="at+jwt")
            if i % 2
            else ES_B.mint({**FRESH, "sub": f"t{t}-{i}"}, kid="b", typ="at+jwt")
            for i in range(30)
        ]
        for t in range(8)
    ]
    mismatches: list[str] = []

    def work(t: int) -> None:
        for i, token in enumerate(per_thread[t] * 3):
            sub = check.verify(token, NOW)["sub"]
            if sub != f"t{t}-{i % 30}":
                mismatches.append(f"thread {t} token {i} got {sub}")

    assert together(8, work) == []
    assert mismatches == []
