"""Properties over many generated inputs (hypothesis).

Attack class: everything above, searched for rather than enumerated:
- any single-byte change, deletion or insertion in a valid token is refused
  (there is no byte a decoder ignores: base64url decoding is canonical, so
  even the unused low bits of a segment's last character count);
- arbitrary bytes, text and token-shaped garbage only ever raise
  :class:`TokenRejectedError` (never ``ValueError``, ``UnicodeError``,
  ``KeyError``... which a web framework would turn into a 500);
- correctly signed payloads with arbitrary JSON come back exactly (integers
  exact, strings intact) or are refused for a claim reason, never with a
  signature or parse error;
- ``str`` and ``bytes`` forms of a token always get the same answer, cached
  or not.

References: RFC 7515 §5.2 (validation), RFC 4648 §3.5 (canonical
encoding), RFC 8259 (JSON), design.md §4-5. Run longer with
``HYPOTHESIS_PROFILE=security-long``.
"""

from __future__ import annotations

import json
from typing import Any

import forge
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from support import NOW, key_for, mint, outcome, payload

from grelmicro.jwt import JWTVerifier
from grelmicro.jwt.errors import REASONS, ClaimsRejectedError

RING = forge.KeyRing()
ALGS = ("HS256", "ES256", "EdDSA", "RS256")
TOKENS = {
    alg: mint(RING, alg, {"alg": alg, "kid": "k"}, payload(scope="read write")) for alg in ALGS
}
VERIFIERS = {alg: JWTVerifier(keys=[key_for(RING, alg, "k")], cache_size=0) for alg in ALGS}
CACHED = {alg: JWTVerifier(keys=[key_for(RING, alg, "k")]) for alg in ALGS}
MULTI = JWTVerifier(
    keys=[key_for(RING, "HS256", "h"), key_for(RING, "ES256", "e"), key_for(RING, "EdDSA")],
    audience="aud",
    issuer="iss",
    typ="at+jwt",
    max_age=3600,
)
B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


@pytest.mark.parametrize("alg", ALGS)
@given(data=st.data())
def test_any_single_byte_change_is_refused(alg: str, data: st.DataObject) -> None:
    token = TOKENS[alg].encode()
    index = data.draw(st.integers(0, len(token) - 1), label="index")
    byte = data.draw(st.integers(0, 255).filter(lambda b: b != token[index]), label="byte")
    changed = token[:index] + bytes([byte]) + token[index + 1 :]
    kind, reason = outcome(VERIFIERS[alg], changed)
    assert kind == "rejected"
    # Changes after the header can only be caught by the signature or the decoder.
    if index > token.index(b"."):
        assert reason in {"signature", "malformed", "unsupported"}, reason


@pytest.mark.parametrize("alg", ALGS)
def test_every_position_with_every_base64url_character(alg: str) -> None:
    # Exhaustive over the alphabet: 64 x len(token) tokens, all refused.
    token = TOKENS[alg]
    verifier = VERIFIERS[alg]
    for index, original in enumerate(token):
        if original == ".":
            continue
        for char in B64URL:
            if char != original:
                changed = token[:index] + char + token[index + 1 :]
                assert outcome(verifier, changed)[0] == "rejected", (index, char)


@pytest.mark.parametrize("alg", ALGS)
@given(data=st.data())
def test_deletions_and_insertions_are_refused(alg: str, data: st.DataObject) -> None:
    token = TOKENS[alg]
    index = data.draw(st.integers(0, len(token)), label="index")
    if data.draw(st.booleans(), label="insert"):
        text = data.draw(st.text(min_size=1, max_size=4), label="inserted")
        changed = token[:index] + text + token[index:]
    else:
        length = data.draw(st.integers(1, 8), label="length")
        changed = token[:index] + token[index + length :]
    assume(changed != token)
    assert outcome(VERIFIERS[alg], changed)[0] == "rejected"


@given(st.binary(max_size=2048))
def test_arbitrary_bytes_only_raise_our_errors(data: bytes) -> None:
    for verifier in (VERIFIERS["HS256"], CACHED["ES256"], MULTI):
        assert outcome(verifier, data)[0] == "rejected"


@given(st.text(max_size=512))
def test_arbitrary_text_only_raises_our_errors(text: str) -> None:
    for verifier in (VERIFIERS["HS256"], CACHED["HS256"], MULTI):
        assert outcome(verifier, text)[0] == "rejected"


segments = st.text(alphabet=B64URL + "=+/ .", max_size=64)


@given(st.lists(segments, min_size=1, max_size=6))
def test_token_shaped_garbage_only_raises_our_errors(parts: list[str]) -> None:
    token = ".".join(parts)
    for verifier in (VERIFIERS["HS256"], MULTI):
        assert outcome(verifier, token)[0] == "rejected"


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
headers = st.fixed_dictionaries(
    {"alg": st.sampled_from(["HS256", "ES256", "EdDSA", "none", "HS512", "RS256", "hs256"])},
    optional={
        "kid": st.one_of(st.sampled_from(["h", "e", "x"]), json_values),
        "typ": st.one_of(st.sampled_from(["at+jwt", "JWT"]), json_values),
        "crit": json_values,
        "b64": json_values,
        "jwk": json_values,
    },
)


@given(header=headers, body=st.dictionaries(st.text(max_size=8), json_values, max_size=6))
def test_structured_hostile_headers_only_raise_our_errors(
    header: dict[str, Any], body: dict[str, Any]
) -> None:
    alg = header["alg"] if header["alg"] in ("HS256", "ES256", "EdDSA") else "HS256"
    token = forge.mint(header, body, RING.private(alg), alg)
    kind, reason = outcome(MULTI, token)
    if kind == "accepted":
        assert header["alg"] in ("HS256", "ES256", "EdDSA")
        assert reason["aud"] == "aud" or "aud" in reason["aud"]


registered = st.fixed_dictionaries(
    {},
    optional={
        "exp": st.one_of(st.integers(NOW - 10, NOW + 10), json_values),
        "nbf": st.one_of(st.integers(NOW - 10, NOW + 10), json_values),
        "iat": st.one_of(st.integers(NOW - 4000, NOW + 10), json_values),
        "aud": st.one_of(st.just("aud"), st.lists(st.sampled_from(["aud", "x"])), json_values),
        "iss": st.one_of(st.just("iss"), json_values),
        "sub": json_values,
    },
)
#: The reasons of the claim checks: the claim classes of the public table.
CLAIM_REASONS = {
    reason
    for reason, cls in REASONS.items()
    if issubclass(cls, ClaimsRejectedError) and cls is not ClaimsRejectedError
}


@given(claims=registered, extra=st.dictionaries(st.text(max_size=8), json_values, max_size=4))
def test_signed_payloads_come_back_exactly_or_fail_a_claim(
    claims: dict[str, Any], extra: dict[str, Any]
) -> None:
    body = {**extra, **claims}
    header = {"alg": "HS256", "kid": "h", "typ": "at+jwt"}
    token = forge.mint(header, body, RING.hs256, "HS256")
    kind, result = outcome(MULTI, token)
    if kind == "accepted":
        # Arrays come back as tuples; compare through JSON.
        assert json.dumps(result, sort_keys=True) == json.dumps(body, sort_keys=True)
    else:
        assert result in CLAIM_REASONS, result


@given(st.binary(max_size=300) | st.sampled_from(list(TOKENS.values())).map(str.encode))
def test_str_and_bytes_get_the_same_answer(data: bytes) -> None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return
    for alg in ("HS256", "ES256"):
        for verifier in (VERIFIERS[alg], CACHED[alg]):
            assert outcome(verifier, data) == outcome(verifier, text)
