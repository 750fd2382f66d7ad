"""Structure and encoding of the compact serialization.

Attack class: tokens that are not exactly three canonical base64url segments
(JWE's five, two, four, empty ones), padding, the standard base64 alphabet,
whitespace, non-canonical trailing bits (two encodings of the same bytes, so
a "different" token with the same signature), non-ASCII look-alikes, and
inputs that are not text at all. A lenient decoder turns each into a parser
differential or a cache-key collision.

References:
- RFC 7515 §3.1 and §7.1 (compact serialization: exactly three parts),
  §2 (base64url without padding, no line breaks or whitespace);
- RFC 7516 §3.1 / §9 (JWE compact serialization has five parts; telling JWS
  and JWE apart);
- RFC 4648 §3.5 (canonical encoding: pad bits must be zero) and §5
  (base64url alphabet);
- RFC 8725 §3.1 and §2.8 (do not accept what was not signed as signed).
"""

from __future__ import annotations

import forge
import pytest
from support import accept, key_for, mint, outcome, payload, reject, verifier_for

from grelmicro.jwt import JWTVerifier

ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


@pytest.fixture(scope="module")
def token(ring: forge.KeyRing) -> str:
    return mint(ring, "HS256")


@pytest.fixture(scope="module")
def verifier(ring: forge.KeyRing) -> JWTVerifier:
    return verifier_for(ring, "HS256")


@pytest.mark.parametrize(
    "shape",
    ["", ".", "..", "...", "a", "a.b", "a.b.c.d", "a.b.c.d.e.f", "a.b.c.d.e.f.g"],
    ids=repr,
)
def test_wrong_number_of_segments(verifier: JWTVerifier, shape: str) -> None:
    reject(verifier, shape, "malformed")


def test_five_empty_segments_look_like_jwe(verifier: JWTVerifier) -> None:
    reject(verifier, "....", "unsupported")


@pytest.mark.parametrize("count", [1, 2, 4, 6, 7])
def test_real_segments_in_the_wrong_number(verifier: JWTVerifier, token: str, count: int) -> None:
    head, body, sig = token.split(".")
    pool = [head, body, sig, body, sig, head, body]
    reject(verifier, ".".join(pool[:count]), "malformed")


def test_jwe_compact_serialization(verifier: JWTVerifier) -> None:
    header = forge.segment({"alg": "RSA-OAEP", "enc": "A256GCM"})
    jwe = ".".join([header, forge.b64url(b"k" * 256), forge.b64url(b"iv" * 6), "Y2lwaGVy", "dGFn"])
    reject(verifier, jwe, "unsupported")
    header = forge.segment({"alg": "dir", "enc": "A128CBC-HS256"})
    reject(verifier, f"{header}..{forge.b64url(b'i' * 16)}.Y2lwaGVy.dGFn", "unsupported")


@pytest.mark.parametrize("empty", ["header", "payload", "signature", "all"])
def test_empty_segments(verifier: JWTVerifier, token: str, empty: str) -> None:
    head, body, sig = token.split(".")
    parts = {
        "header": ["", body, sig],
        "payload": [head, "", sig],
        "signature": [head, body, ""],
        "all": ["", "", ""],
    }[empty]
    reject(verifier, ".".join(parts), "malformed")


def _refused_by_signature_or_decoder(verifier: JWTVerifier, token: str, where: int) -> None:
    if where == 1:
        assert outcome(verifier, token) in {("rejected", "signature"), ("rejected", "malformed")}
    else:
        reject(verifier, token, "malformed")


def _segments_needing_padding(ring: forge.KeyRing) -> str:
    for i in range(64):
        candidate = mint(ring, "HS256", {"alg": "HS256", "p": "x" * i}, payload(p="y" * i))
        head, body, _ = candidate.split(".")
        if len(head) % 4 and len(body) % 4:
            return candidate
    raise AssertionError("unreachable")


@pytest.mark.parametrize("where", [0, 1, 2])
@pytest.mark.parametrize("pad", ["=", "==", "%3D", "=\n"])
def test_padding(ring: forge.KeyRing, verifier: JWTVerifier, where: int, pad: str) -> None:
    candidate = _segments_needing_padding(ring)
    accept(verifier, candidate)
    parts = candidate.split(".")
    parts[where] += pad
    # The signature covers the payload text: a padded payload fails either the
    # signature or the decoder, whichever the core checks first; the re-signed
    # variant below must reach the decoder and fail there.
    _refused_by_signature_or_decoder(verifier, ".".join(parts), where)
    if where < 2:
        resigned = ".".join(parts[:2])
        mac = forge.sign("HS256", ring.hs256, resigned.encode())
        reject(verifier, f"{resigned}.{forge.b64url(mac)}", "malformed")


def test_standard_base64_alphabet(ring: forge.KeyRing, verifier: JWTVerifier) -> None:
    for i in range(256):
        candidate = mint(ring, "HS256", body=payload(n=i))
        sig = candidate.split(".")[2]
        if "-" in sig or "_" in sig:
            reject(verifier, candidate.replace("-", "+").replace("_", "/"), "malformed")
            return
    pytest.fail("no signature with '-' or '_' in 256 tries")


WHITESPACE = [
    (" ", 0),
    ("\t", 0),
    ("\n", -1),
    ("\r\n", -1),
    (" ", -1),
    ("\u00a0", -1),
    ("\u200b", 10),
    (" ", 10),
    ("\n", 10),
    (" ", "dot"),
    ("\n", "dot"),
]


@pytest.mark.parametrize(("space", "where"), WHITESPACE, ids=repr)
def test_whitespace_anywhere(verifier: JWTVerifier, token: str, space: str, where: object) -> None:
    if where == 0:
        tampered = space + token
    elif where == -1:
        tampered = token + space
    elif where == "dot":
        tampered = token.replace(".", space + ".", 1)
    else:
        tampered = token[:10] + space + token[10:]
    reject(verifier, tampered, "malformed")


def test_bearer_prefix_is_not_part_of_a_token(verifier: JWTVerifier, token: str) -> None:
    reject(verifier, "Bearer " + token, "malformed")
    reject(verifier, "bearer:" + token, "malformed")


def _non_canonical_variants(segment: str) -> list[str]:
    """Same decoded bytes, different text: only the unused low bits differ."""
    decoded = forge.unb64url(segment)
    out = []
    for char in ALPHABET:
        variant = segment[:-1] + char
        if variant == segment:
            continue
        try:
            same = forge.unb64url(variant) == decoded
        except ValueError:
            continue
        if same:
            out.append(variant)
    return out


@pytest.mark.parametrize("where", [0, 1, 2], ids=["header", "payload", "signature"])
def test_non_canonical_trailing_bits(
    ring: forge.KeyRing, verifier: JWTVerifier, where: int
) -> None:
    candidate = _segments_needing_padding(ring)
    parts = candidate.split(".")
    variants = _non_canonical_variants(parts[where])
    assert variants, "segment length leaves no unused bits"
    for variant in variants:
        changed = list(parts)
        changed[where] = variant
        # A lenient decoder would accept this: same bytes, same signature.
        # (The payload text is covered by the signature, so it may fail there
        # first unless re-signed, as a lax issuer's encoder would.)
        _refused_by_signature_or_decoder(verifier, ".".join(changed), where)
        if where < 2:
            resigned = ".".join(changed[:2])
            mac = forge.sign("HS256", ring.hs256, resigned.encode())
            reject(verifier, f"{resigned}.{forge.b64url(mac)}", "malformed")


@pytest.mark.parametrize("length", [1, 5, 9])
def test_impossible_base64_length(verifier: JWTVerifier, token: str, length: int) -> None:
    head, body, _ = token.split(".")
    reject(verifier, f"{head}.{body}.{'A' * length}", "malformed")


NON_ASCII = [
    ("é", 12),
    ("\u0410", 12),
    ("\uff45", 12),  # fullwidth e
    ("\u2024", "dot"),
    ("\uff0e", "dot"),
    ("\u3002", "dot"),
    ("\u0000", 12),
    ("\u00ff", -1),
    ("\U0001f600", 12),
]


@pytest.mark.parametrize(("char", "where"), NON_ASCII, ids=repr)
def test_non_ascii_characters(verifier: JWTVerifier, token: str, char: str, where: object) -> None:
    if where == "dot":
        tampered = token.replace(".", char)
    elif where == -1:
        tampered = token + char
    else:
        tampered = token[:12] + char + token[12:]
    reject(verifier, tampered, "malformed")
    reject(verifier, tampered.encode("utf-8"), "malformed")


@pytest.mark.parametrize("raw", [b"\xff", b"\x80", b"\xc3", b"\xfe\xff", b"\xed\xa0\x80"], ids=repr)
def test_non_utf8_bytes(verifier: JWTVerifier, token: str, raw: bytes) -> None:
    data = token.encode()
    reject(verifier, data[:12] + raw + data[12:], "malformed")


def test_str_and_bytes_are_the_same_token(verifier: JWTVerifier, token: str) -> None:
    assert accept(verifier, token) == accept(verifier, token.encode("ascii"))


CACHE_MODES = {
    "uncached": {"cache_size": 0},
    "digest": {"cache_key": "digest"},
    "token": {"cache_key": "token"},
    "digest-stats": {"cache_key": "digest", "cache_stats": True},
}


@pytest.mark.parametrize("mode", list(CACHE_MODES))
@pytest.mark.parametrize("surrogate", [chr(0xD800), chr(0xDFFF)], ids=["high", "low"])
def test_lone_surrogate_in_a_str_token(
    ring: forge.KeyRing, token: str, mode: str, surrogate: str
) -> None:
    verifier = JWTVerifier(keys=[key_for(ring, "HS256")], **CACHE_MODES[mode])
    reject(verifier, token[:12] + surrogate + token[12:], "malformed")


@pytest.mark.parametrize("mode", list(CACHE_MODES))
@pytest.mark.parametrize(
    "value",
    [None, 0, 1.5, b"", bytearray(b"a.b.c"), memoryview(b"a.b.c"), ["a.b.c"], {"t": 1}, object()],
    ids=lambda v: type(v).__name__,
)
def test_not_text_at_all(ring: forge.KeyRing, mode: str, value: object) -> None:
    verifier = JWTVerifier(keys=[key_for(ring, "HS256")], **CACHE_MODES[mode])
    reject(verifier, value, "malformed")


@pytest.mark.parametrize("mode", list(CACHE_MODES))
def test_size_limit_boundary(ring: forge.KeyRing, mode: str) -> None:
    candidate = mint(ring, "HS256", body=payload(pad="x" * 700))
    size = len(candidate)
    at_limit = JWTVerifier(keys=[key_for(ring, "HS256")], max_token_size=size, **CACHE_MODES[mode])
    accept(at_limit, candidate)
    below = JWTVerifier(keys=[key_for(ring, "HS256")], max_token_size=size - 1, **CACHE_MODES[mode])
    reject(below, candidate, "too-large")
    reject(below, candidate.encode(), "too-large")


def test_size_limit_applies_to_bytes_not_characters(ring: forge.KeyRing) -> None:
    verifier = verifier_for(ring, "HS256", max_token_size=64)
    reject(verifier, "é" * 40, "too-large")
    reject(verifier, "a" * 65, "too-large")
