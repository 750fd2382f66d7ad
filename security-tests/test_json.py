"""JSON inside the token: duplicates, encodings, numbers, depth and size.

Attack class: header or payload JSON that two parsers read differently
(duplicate members, escaped duplicates), that is not UTF-8 JSON text (UTF-16,
UTF-32, a BOM, invalid or overlong UTF-8, lone surrogates), that is not an
object, that uses non-JSON numbers (NaN, Infinity) or huge ones, and
resource exhaustion: 5,000-deep nesting and 1 MB tokens, which must be
refused before they cost anything.

References:
- RFC 8259 §4 (member names SHOULD be unique), §6 (numbers: no NaN or
  Infinity), §8.1 (UTF-8, no BOM), §8.2 (unpaired surrogates), §9 (parsers
  may limit depth and size);
- RFC 7515 §4 and RFC 7519 §7.2 step 9 / §4 (duplicate names: reject);
- RFC 7519 §7.2 step 10 (the payload is a JSON object, the JWT Claims Set);
- RFC 8725 §3.7 (use UTF-8);
- CWE-674 (uncontrolled recursion), CWE-400 / CWE-407 (resource consumption,
  algorithmic complexity); CVE-2020-10735 (quadratic int/str conversion).
"""

from __future__ import annotations

import time
from typing import Any

import forge
import pytest
from support import accept, key_for, outcome, payload, reject, verifier_for

from grelmicro.jwt import JWTVerifier

#: A hang guard, never a speed check: it trips only on a refusal that does
#: not end (the slowest case here takes about 13 ms). What each test proves
#: is the reason of the refusal: the size or depth check, the number parser,
#: the signature; the time it took is printed and recorded in README.md.
HANG_GUARD_SECONDS = 30.0
MIB = 1 << 20


def _refusal_ms(verifier: JWTVerifier, token: Any, reason: str, runs: int = 5) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        result = outcome(verifier, token)
        elapsed = (time.perf_counter() - start) * 1000
        assert result == ("rejected", reason), result
        best = min(best, elapsed)
    return best


def _timed(
    timings: list[tuple[str, float, str]],
    what: str,
    verifier: JWTVerifier,
    token: Any,
    reason: str,
    runs: int = 5,
) -> None:
    ms = _refusal_ms(verifier, token, reason, runs)
    timings.append((what, ms, reason))
    print(f"{what}: refused as {reason} in {ms:.3f} ms")
    assert ms < HANG_GUARD_SECONDS * 1000, f"{what}: no refusal after {ms / 1000:.0f} s"


def _signed(ring: forge.KeyRing, body: bytes, header: Any = None) -> str:
    return forge.mint(header or {"alg": "HS256"}, body, ring.hs256, "HS256")


DUPLICATE_PAYLOADS = [
    b'{"sub":"user-1","sub":"admin","exp":9999999999}',
    b'{"exp":1,"exp":9999999999}',
    b'{"exp":9999999999,"exp":1}',
    b'{"exp":9999999999,"aud":"a","aud":"b"}',
    b'{"exp":9999999999,"iss":"a","iss":"b"}',
    b'{"exp":9999999999,"\\u0065xp":9999999999}',
    b'{"exp":9999999999,"role":"user","r\\u006fle":"admin"}',
    b'{"exp":9999999999,"x":{"a":1,"a":2}}',
    b'{"exp":9999999999,"x":[{"a":1},{"b":1,"b":2}]}',
    b'{"exp":9999999999,"scope":"a","scope":"a"}',
]


@pytest.mark.parametrize("body", DUPLICATE_PAYLOADS, ids=lambda b: b.decode()[:40])
def test_duplicate_payload_members(ring: forge.KeyRing, body: bytes) -> None:
    reject(verifier_for(ring, "HS256"), _signed(ring, body), "malformed")


@pytest.mark.parametrize(
    "body",
    [b"[]", b'[{"exp":9999999999}]', b'"claims"', b"1", b"1.5", b"null", b"true", b"false", b" "],
    ids=lambda b: b.decode(),
)
def test_payload_must_be_an_object(ring: forge.KeyRing, body: bytes) -> None:
    reject(verifier_for(ring, "HS256"), _signed(ring, body), "malformed")


BAD_UTF8 = [
    b"\xff",
    b"\xc0\xaf",
    b"\xe0\x80\xaf",
    b"\xed\xa0\x80",
    b"\xed\xbf\xbf",
    b"\xe2\x82",
    b"\xf4\x90\x80\x80",
    b"\xf8\x88\x80\x80\x80",
    b"\x80",
]


@pytest.mark.parametrize("raw", BAD_UTF8, ids=lambda b: b.hex())
def test_invalid_utf8_in_the_payload(ring: forge.KeyRing, raw: bytes) -> None:
    body = b'{"exp":9999999999,"sub":"a' + raw + b'"}'
    reject(verifier_for(ring, "HS256"), _signed(ring, body), "malformed")


@pytest.mark.parametrize("raw", BAD_UTF8[:4], ids=lambda b: b.hex())
def test_invalid_utf8_in_the_header(ring: forge.KeyRing, raw: bytes) -> None:
    header = b'{"alg":"HS256","x":"a' + raw + b'"}'
    reject(verifier_for(ring, "HS256"), _signed(ring, payload_bytes(), header), "malformed")


def payload_bytes() -> bytes:
    return forge.json_bytes(payload())


ENCODINGS = ["utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le"]


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_payload_not_in_utf8(ring: forge.KeyRing, encoding: str) -> None:
    body = '{"sub":"user-1","exp":9999999999}'.encode(encoding)
    reject(verifier_for(ring, "HS256"), _signed(ring, body), "malformed")


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_header_not_in_utf8(ring: forge.KeyRing, encoding: str) -> None:
    header = '{"alg":"HS256"}'.encode(encoding)
    reject(verifier_for(ring, "HS256"), _signed(ring, payload_bytes(), header), "malformed")


@pytest.mark.parametrize(
    "escape",
    ["\\ud800", "\\udfff", "\\udc00\\ud800", "\\ud800x", "\\ud800\\u0041", "\\ud83d"],
)
def test_lone_surrogate_escapes(ring: forge.KeyRing, escape: str) -> None:
    body = b'{"exp":9999999999,"sub":"' + escape.encode() + b'"}'
    reject(verifier_for(ring, "HS256"), _signed(ring, body), "malformed")
    header = b'{"alg":"HS256","x":"' + escape.encode() + b'"}'
    reject(verifier_for(ring, "HS256"), _signed(ring, payload_bytes(), header), "malformed")


def test_surrogate_pair_escape_is_text(ring: forge.KeyRing) -> None:
    body = b'{"exp":9999999999,"sub":"\\ud83d\\ude00"}'
    assert accept(verifier_for(ring, "HS256"), _signed(ring, body))["sub"] == "\U0001f600"


@pytest.mark.parametrize(
    "number", ["NaN", "Infinity", "-Infinity", "nan", "inf", "+1", "01", "1.", ".5", "0x10", "1e"]
)
@pytest.mark.parametrize("member", ["exp", "custom"])
def test_non_json_numbers(ring: forge.KeyRing, number: str, member: str) -> None:
    if member == "exp":
        body = b'{"exp":' + number.encode() + b"}"
        # A time claim that does not even start like a number is a type error.
        reason = "invalid-claim" if number in {"nan", "inf", "+1", ".5"} else "malformed"
    else:
        body = b'{"exp":9999999999,"custom":' + number.encode() + b"}"
        reason = "malformed"
    reject(verifier_for(ring, "HS256"), _signed(ring, body), reason)


@pytest.mark.parametrize(
    "value",
    [2**63 - 1, -(2**63), 2**63, 2**64, -(2**64) - 1, 10**100, -(10**100), 0, -0],
    ids=str,
)
def test_integers_come_back_exact(ring: forge.KeyRing, value: int) -> None:
    body = b'{"exp":9999999999,"n":' + str(value).encode() + b',"a":[' + str(value).encode() + b"]}"
    claims = accept(verifier_for(ring, "HS256"), _signed(ring, body))
    assert claims["n"] == value
    assert type(claims["n"]) is int
    assert claims["a"] == (value,)


def test_huge_exp_integer_is_exact_and_far_ahead(ring: forge.KeyRing) -> None:
    body = b'{"exp":' + str(10**40).encode() + b"}"
    assert accept(verifier_for(ring, "HS256"), _signed(ring, body))["exp"] == 10**40


def test_numbers_with_thousands_of_digits_are_refused_as_malformed(
    ring: forge.KeyRing, timings: list[tuple[str, float, str]]
) -> None:
    # Never converted digit by digit (CVE-2020-10735 class): refused as JSON.
    verifier = verifier_for(ring, "HS256", max_token_size=MIB)
    body = b'{"exp":9999999999,"n":' + b"9" * 600_000 + b"}"
    _timed(
        timings,
        "600,000-digit integer in a signed payload",
        verifier,
        _signed(ring, body),
        "malformed",
    )
    header = b'{"alg":"HS256","n":' + b"9" * 600_000 + b"}"
    token = forge.unsigned(header, payload(), b"\x00" * 32)
    _timed(timings, "600,000-digit integer in a forged header", verifier, token, "malformed")


@pytest.mark.parametrize(
    "body",
    [
        b'{"exp":9999999999}x',
        b'{"exp":9999999999}{}',
        b'{"exp":9999999999,}',
        b"{'exp':9999999999}",
        b"{exp:9999999999}",
        b'{"exp":9999999999 /* c */}',
        b'{"exp":9999999999}\x00',
        b'{"exp":9999999999',
    ],
    ids=lambda b: b.decode(errors="replace")[:30],
)
def test_not_json(ring: forge.KeyRing, body: bytes) -> None:
    reject(verifier_for(ring, "HS256"), _signed(ring, body), "malformed")


def test_nesting_depth_boundary(ring: forge.KeyRing) -> None:
    # max_depth counts the top-level object: 63 nested arrays inside it make 64 levels.
    verifier = verifier_for(ring, "HS256")
    ok = b'{"exp":9999999999,"x":' + b"[" * 63 + b"]" * 63 + b"}"
    accept(verifier, _signed(ring, ok))
    deep = b'{"exp":9999999999,"x":' + b"[" * 64 + b"]" * 64 + b"}"
    reject(verifier, _signed(ring, deep), "too-large")
    small = verifier_for(ring, "HS256", max_depth=4)
    reject(small, _signed(ring, b'{"exp":9999999999,"x":[[[[1]]]]}'), "too-large")


def _deep(kind: str, depth: int) -> bytes:
    if kind == "arrays":
        return b"[" * depth + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth


@pytest.mark.parametrize("kind", ["arrays", "objects"])
def test_5000_deep_nesting_is_refused_by_the_depth_check(
    ring: forge.KeyRing, timings: list[tuple[str, float, str]], kind: str
) -> None:
    # Raised size limit: the depth check, not the size check, must refuse these.
    verifier = verifier_for(ring, "HS256", max_token_size=MIB)
    header = b'{"alg":"HS256","x":' + _deep(kind, 5000) + b"}"
    forged = forge.unsigned(header, payload(), b"\x00" * 32)
    error = reject(verifier, forged, "too-large")
    assert "nesting" in str(error)
    _timed(
        timings,
        f"5,000-deep {kind} in a forged header (1 MiB limit)",
        verifier,
        forged,
        "too-large",
    )
    body = b'{"exp":9999999999,"x":' + _deep(kind, 5000) + b"}"
    signed = _signed(ring, body)
    _timed(
        timings,
        f"5,000-deep {kind} in a signed payload (1 MiB limit)",
        verifier,
        signed,
        "too-large",
    )
    default = verifier_for(ring, "HS256")
    _timed(
        timings,
        f"5,000-deep {kind} in a forged header (default limits)",
        default,
        forged,
        "too-large",
    )


def test_1mb_token_under_the_default_limit(
    ring: forge.KeyRing, timings: list[tuple[str, float, str]]
) -> None:
    verifier = verifier_for(ring, "HS256")
    token = "A" * (MIB // 2) + "." + "A" * (MIB // 2 - 6) + ".AAAA"
    assert len(token) == MIB
    _timed(timings, "1 MiB token, default 8 KiB limit (str)", verifier, token, "too-large")
    _timed(
        timings, "1 MiB token, default 8 KiB limit (bytes)", verifier, token.encode(), "too-large"
    )
    cached = JWTVerifier(keys=[key_for(ring, "HS256")])
    _timed(timings, "1 MiB token, default limit, cache on", cached, token, "too-large")


def test_1mb_tokens_under_a_1mib_limit(
    ring: forge.KeyRing, timings: list[tuple[str, float, str]]
) -> None:
    verifier = verifier_for(ring, "HS256", max_token_size=MIB)
    filler = MIB * 3 // 4
    while True:
        header = b'{"alg":"HS256","x":"' + b"a" * filler + b'"}'
        forged = forge.unsigned(header, payload(), b"\x00" * 32)
        if len(forged) <= MIB:
            break
        filler -= 3
    assert MIB - 8 < len(forged) <= MIB
    _timed(timings, "1 MiB forged token, long header string", verifier, forged, "signature")
    body = b'{"exp":9999999999,"x":"' + b"a" * (filler - 16) + b'"}'
    forged_body = forge.unsigned({"alg": "HS256"}, body, b"\x00" * 32)
    assert MIB - 64 < len(forged_body) <= MIB
    _timed(timings, "1 MiB forged token, long payload", verifier, forged_body, "signature")
    garbage = "A" * (MIB // 2) + "." + "A" * (MIB // 2 - 8) + ".AAAAAA"
    assert len(garbage) == MIB
    _timed(timings, "1 MiB of base64url garbage", verifier, garbage, "malformed")
    over = forged + "A" * (MIB + 1 - len(forged))
    _timed(timings, "1 MiB + 1 byte", verifier, over, "too-large")


def test_1mb_header_with_many_members_is_refused_by_the_signature(
    ring: forge.KeyRing, timings: list[tuple[str, float, str]]
) -> None:
    verifier = verifier_for(ring, "HS256", max_token_size=MIB)
    members = b",".join(b'"%d":0' % i for i in range(70_000))
    forged = forge.unsigned(b'{"alg":"HS256",' + members + b"}", payload(), b"\x00" * 32)
    assert len(forged) <= MIB
    # Refused by the signature: the header was read to its end first. Its
    # time is printed (README: 13 ms; 4-5 s when the duplicate check was
    # quadratic, issue 24 bug 1), never asserted.
    _timed(timings, "1 MiB forged header, 70,000 members", verifier, forged, "signature", runs=3)


def test_payload_with_many_members_is_refused_for_its_duplicate(
    ring: forge.KeyRing, timings: list[tuple[str, float, str]]
) -> None:
    # Only reachable with a valid signature; its time is printed like the rest.
    verifier = verifier_for(ring, "HS256", max_token_size=MIB)
    members = b",".join(b'"%d":0' % i for i in range(60_000))
    body = b'{"exp":9999999999,' + members + b',"0":1}'
    _timed(
        timings,
        "signed payload, 60,000 members + a duplicate",
        verifier,
        _signed(ring, body),
        "malformed",
        runs=3,
    )


def test_header_with_many_members_under_the_default_limit(
    ring: forge.KeyRing, timings: list[tuple[str, float, str]]
) -> None:
    verifier = verifier_for(ring, "HS256")
    members = b",".join(b'"%d":0' % i for i in range(700))
    forged = forge.unsigned(b'{"alg":"HS256",' + members + b"}", payload(), b"\x00" * 32)
    assert len(forged) <= 8192
    _timed(
        timings, "8 KiB forged header, 700 members (default limit)", verifier, forged, "signature"
    )


def test_exp_as_float_and_negative_zero(ring: forge.KeyRing) -> None:
    verifier = verifier_for(ring, "HS256")
    assert accept(verifier, _signed(ring, b'{"exp":1700000000.5}'))["exp"] == 1700000000.5
    reject(verifier, _signed(ring, b'{"exp":-0.0}'), "expired")
    reject(verifier, _signed(ring, b'{"exp":1e-400}'), "expired")
    # Out of a double's range: refused, never read as -infinity (issue 10).
    reject(verifier, _signed(ring, b'{"exp":-1e400}'), "invalid-claim")


# Number literals that overflow a double become +-infinity in most parsers: an
# "exp" of 1e400 is a token that never expires. Refused as invalid claims
# wherever they appear in the payload; in a header they are malformed.
NON_FINITE = [
    b'{"exp":1e400}',
    b'{"exp":-1e309}',
    b'{"exp":1E+999}',
    b'{"exp":' + b"9" * 400 + b"}",
    b'{"exp":9999999999,"nbf":-1e309}',
    b'{"exp":9999999999,"iat":1e400}',
    b'{"exp":9999999999,"n":1e400}',
    b'{"exp":9999999999,"a":[0,[1e400]]}',
    b'{"exp":9999999999,"o":{"p":{"q":-1e309}}}',
]


@pytest.mark.parametrize("body", NON_FINITE, ids=lambda b: b.decode()[:40])
@pytest.mark.parametrize("cache_size", [0, 64])
def test_non_finite_numbers_are_refused(ring: forge.KeyRing, body: bytes, cache_size: int) -> None:
    verifier = verifier_for(ring, "HS256", cache_size=cache_size)
    reject(verifier, _signed(ring, body), "invalid-claim")
    reject(verifier, _signed(ring, body), "invalid-claim")  # and never cached


def test_non_finite_number_in_a_header_is_malformed(ring: forge.KeyRing) -> None:
    token = forge.unsigned(b'{"alg":"HS256","x":1e400}', payload(), b"\x00" * 32)
    reject(verifier_for(ring, "HS256"), token, "malformed")


def test_claims_round_trip_unicode(ring: forge.KeyRing) -> None:
    body = forge.json_bytes(payload(name="Zoë \u202e\u0000 \U0001f600", tags=["é", "\u00df"]))
    claims = accept(verifier_for(ring, "HS256"), _signed(ring, body))
    assert claims["name"] == "Zoë \u202e\u0000 \U0001f600"
    assert claims["tags"] == ("é", "\u00df")


def test_signed_token_built_with_a_json_escape_in_a_member_name(ring: forge.KeyRing) -> None:
    # Escapes are decoded before names are compared: "\u0073ub" is "sub".
    body = b'{"exp":9999999999,"\\u0073ub":"user-1"}'
    assert accept(verifier_for(ring, "HS256"), _signed(ring, body)).subject == "user-1"
