"""Signature tampering.

Attack class: a token whose signature, header or payload was altered after
signing, or whose signature has the right shape for a buggy verifier: ECDSA
with r = s = 0 ("psychic signatures"), r or s out of range, DER instead of
the JWS r‖s form, the wrong length, an Ed25519 S that is not reduced, an
RSA-PSS signature with a salt length other than the hash length.

References:
- RFC 7515 §5.2 (validation; any change invalidates the JWS);
- CVE-2022-21449 (Java ECDSA accepted r = s = 0);
- RFC 7518 §3.4 (ECDSA signatures are the fixed-width r‖s, not DER) and
  SEC 1 §4.1.4 (r, s in [1, n-1]);
- RFC 8032 §5.1.7 (Ed25519: reject S >= L);
- RFC 7518 §3.5 (PSS salt length equals the hash output length);
- RFC 8017 §8.2.2 (an RSA signature has exactly the modulus length).

Raw-primitive vectors (Wycheproof ECDSA P1363, Ed25519, RSA, HMAC and the
JOSE-level ``json_web_signature_test.json``) run in the core's Rust tests
(``grelmicro-core/tests/wycheproof.rs``); this module drives the same
failure shapes through the installed package's public API.
"""

from __future__ import annotations

import hashlib
import hmac

import forge
import pytest
from support import accept, mint, payload, reject, verifier_for

ALGS = forge.ALGORITHMS
EC_ALGS = ("ES256", "ES384", "ES512", "ES256K")


@pytest.fixture(scope="module")
def tokens(ring: forge.KeyRing) -> dict[str, str]:
    """One valid token per algorithm."""
    return {alg: mint(ring, alg, {"alg": alg, "typ": "JWT", "x": "aaaa"}) for alg in ALGS}


@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("alg", ALGS)
def test_signature_bit_flip(
    ring: forge.KeyRing, tokens: dict[str, str], alg: str, where: str
) -> None:
    verifier = verifier_for(ring, alg)
    accept(verifier, tokens[alg])
    signature = forge.signature_of(tokens[alg])
    index = {"first": 0, "middle": len(signature) // 2, "last": len(signature) - 1}[where]
    for bit in (0, 7):
        tampered = forge.with_signature(tokens[alg], forge.flip_bit(signature, index, bit))
        reject(verifier, tampered, "signature")


@pytest.mark.parametrize("alg", ALGS)
def test_payload_changed_after_signing(
    ring: forge.KeyRing, tokens: dict[str, str], alg: str
) -> None:
    verifier = verifier_for(ring, alg)
    head, _, sig = tokens[alg].split(".")
    for body in (payload(sub="user-2"), payload(sub="admin"), payload(exp=forge.NOW + 10**9)):
        reject(verifier, f"{head}.{forge.segment(body)}.{sig}", "signature")


@pytest.mark.parametrize("alg", ALGS)
def test_header_changed_after_signing(
    ring: forge.KeyRing, tokens: dict[str, str], alg: str
) -> None:
    # The header stays valid for this verifier; only a harmless member changed.
    verifier = verifier_for(ring, alg)
    _, body, sig = tokens[alg].split(".")
    for header in (
        {"alg": alg, "typ": "JWT", "x": "aaab"},
        {"alg": alg, "typ": "JWT"},
        {"alg": alg, "typ": "JWT", "x": "aaaa", "y": 1},
        {"typ": "JWT", "alg": alg, "x": "aaaa"},
    ):
        reject(verifier, f"{forge.segment(header)}.{body}.{sig}", "signature")


@pytest.mark.parametrize("alg", ALGS)
def test_truncated_and_extended_signatures(
    ring: forge.KeyRing, tokens: dict[str, str], alg: str
) -> None:
    verifier = verifier_for(ring, alg)
    signature = forge.signature_of(tokens[alg])
    for changed in (
        signature[:-1],
        signature[: len(signature) // 2],
        signature[:1],
        signature + b"\x00",
        signature + b"\xff",
        b"\x00" + signature,
        signature + signature,
        bytes(len(signature)),
        b"\xff" * len(signature),
    ):
        reject(verifier, forge.with_signature(tokens[alg], changed), "signature")


@pytest.mark.parametrize("alg", ALGS)
def test_signature_moved_from_another_token(
    ring: forge.KeyRing, tokens: dict[str, str], alg: str
) -> None:
    verifier = verifier_for(ring, alg)
    other = mint(ring, alg, {"alg": alg}, payload(sub="someone-else"))
    reject(verifier, forge.with_signature(tokens[alg], forge.signature_of(other)), "signature")


def _r_s(token: str, alg: str) -> tuple[int, int]:
    raw = forge.signature_of(token)
    size = forge.EC_SIZE[alg]
    return int.from_bytes(raw[:size], "big"), int.from_bytes(raw[size:], "big")


ECDSA_SHAPES = [
    "r=s=0",
    "r=0",
    "s=0",
    "r=s=n",
    "r=n",
    "s=n",
    "r+n",
    "s+n",
    "r=s=1",
    "r=s=n-1",
    "r=s=max",
    "swap",
]


@pytest.mark.parametrize("shape", ECDSA_SHAPES)
@pytest.mark.parametrize("alg", EC_ALGS)
def test_ecdsa_out_of_range_values(
    ring: forge.KeyRing, tokens: dict[str, str], alg: str, shape: str
) -> None:
    # CVE-2022-21449 and relatives: r and s must both be in [1, n-1].
    verifier = verifier_for(ring, alg)
    n = forge.EC_ORDER[alg]
    size = forge.EC_SIZE[alg]
    r, s = _r_s(tokens[alg], alg)
    top = (1 << (8 * size)) - 1
    values = {
        "r=s=0": (0, 0),
        "r=0": (0, s),
        "s=0": (r, 0),
        "r=s=n": (n, n),
        "r=n": (n, s),
        "s=n": (r, n),
        "r+n": (r + n, s),
        "s+n": (r, s + n),
        "r=s=1": (1, 1),
        "r=s=n-1": (n - 1, n - 1),
        "r=s=max": (top, top),
        "swap": (s, r),
    }[shape]
    if max(values) > top:
        values = (values[0] & top, values[1] & top)
    reject(verifier, forge.with_signature(tokens[alg], forge.rs(*values, size)), "signature")


@pytest.mark.parametrize("alg", EC_ALGS)
def test_ecdsa_der_encoding_is_refused(
    ring: forge.KeyRing, tokens: dict[str, str], alg: str
) -> None:
    # The same (valid) signature, DER-encoded as many libraries emit it.
    verifier = verifier_for(ring, alg)
    der = forge.ecdsa_der(forge.signature_of(tokens[alg]))
    reject(verifier, forge.with_signature(tokens[alg], der), "signature")


@pytest.mark.parametrize("alg", EC_ALGS)
def test_ecdsa_coordinates_of_the_wrong_width(
    ring: forge.KeyRing, tokens: dict[str, str], alg: str
) -> None:
    verifier = verifier_for(ring, alg)
    r, s = _r_s(tokens[alg], alg)
    size = forge.EC_SIZE[alg]
    for width in (size - 1, size + 1, size + 2, 2 * size):
        if max(r.bit_length(), s.bit_length()) > 8 * width:
            continue
        raw = r.to_bytes(width, "big") + s.to_bytes(width, "big")
        reject(verifier, forge.with_signature(tokens[alg], raw), "signature")


def test_p521_signature_with_65_byte_coordinates(ring: forge.KeyRing) -> None:
    # Some signers emit 2x65 bytes for P-521 (bits rounded down, not up).
    verifier = verifier_for(ring, "ES512")
    for _ in range(64):
        token = mint(ring, "ES512", {"alg": "ES512"})
        r, s = _r_s(token, "ES512")
        if max(r.bit_length(), s.bit_length()) <= 520:
            raw = r.to_bytes(65, "big") + s.to_bytes(65, "big")
            reject(verifier, forge.with_signature(token, raw), "signature")
            return
    pytest.fail("no P-521 signature with both values under 2^520 in 64 tries")


def test_es256_signature_from_a_p384_key_has_the_wrong_length(ring: forge.KeyRing) -> None:
    verifier = verifier_for(ring, "ES256")
    token = forge.mint({"alg": "ES256"}, payload(), ring.p384, "ES384")
    assert len(forge.signature_of(token)) == 96
    reject(verifier, token, "signature")


@pytest.mark.parametrize("alg", ["EdDSA", "Ed25519"])
def test_ed25519_non_canonical_s(ring: forge.KeyRing, tokens: dict[str, str], alg: str) -> None:
    # S + L verifies under a lax check (same point); RFC 8032 requires S < L.
    verifier = verifier_for(ring, alg)
    signature = forge.signature_of(tokens[alg])
    r_part, s = signature[:32], int.from_bytes(signature[32:], "little")
    for bad_s in (s + forge.ED25519_L, forge.ED25519_L, s + 2 * forge.ED25519_L):
        if bad_s >= 1 << 256:
            continue
        raw = r_part + bad_s.to_bytes(32, "little")
        reject(verifier, forge.with_signature(tokens[alg], raw), "signature")


def test_ed25519_degenerate_signatures(ring: forge.KeyRing, tokens: dict[str, str]) -> None:
    verifier = verifier_for(ring, "EdDSA")
    identity = bytes([1]) + bytes(31)
    for raw in (
        bytes(64),
        identity + bytes(32),
        identity + (1).to_bytes(32, "little"),
        b"\xff" * 64,
        forge.signature_of(tokens["EdDSA"])[32:] + forge.signature_of(tokens["EdDSA"])[:32],
    ):
        reject(verifier, forge.with_signature(tokens["EdDSA"], raw), "signature")


@pytest.mark.parametrize(
    ("alg", "salt"),
    [
        ("PS256", 0),
        ("PS256", 20),
        ("PS256", 31),
        ("PS256", 33),
        ("PS256", 64),
        ("PS256", 222),
        ("PS384", 32),
        ("PS384", 0),
        ("PS512", 32),
        ("PS512", 48),
    ],
)
def test_pss_with_the_wrong_salt_length(ring: forge.KeyRing, alg: str, salt: int) -> None:
    verifier = verifier_for(ring, alg)
    accept(verifier, mint(ring, alg, {"alg": alg}))
    reject(verifier, mint(ring, alg, {"alg": alg}, salt_length=salt), "signature")


def _modulus(ring: forge.KeyRing) -> int:
    return ring.rsa.public_key().public_numbers().n


@pytest.mark.parametrize("alg", ["RS256", "PS256"])
def test_rsa_signature_values_out_of_range(
    ring: forge.KeyRing, tokens: dict[str, str], alg: str
) -> None:
    verifier = verifier_for(ring, alg)
    n = _modulus(ring)
    for value in (0, 1, n - 1, n, n + 1, (1 << 2048) - 1):
        raw = value.to_bytes(256, "big")
        reject(verifier, forge.with_signature(tokens[alg], raw), "signature")


def test_rsa_signature_without_its_leading_zero(ring: forge.KeyRing) -> None:
    # RFC 8017 §8.2.2: the signature is exactly k bytes; a short one (its
    # leading 0x00 dropped, as a lax encoder does) must not be left-padded.
    verifier = verifier_for(ring, "RS256")
    for i in range(4096):
        token = mint(ring, "RS256", {"alg": "RS256"}, payload(n=i))
        signature = forge.signature_of(token)
        if signature[0] == 0:
            accept(verifier, token)
            reject(verifier, forge.with_signature(token, signature[1:]), "signature")
            return
    pytest.fail("no RS256 signature starting with 0x00 in 4096 tries")


@pytest.mark.parametrize("label", ["RS256", "RS384", "RS512"])
def test_rsa_signature_with_another_hash(ring: forge.KeyRing, label: str) -> None:
    verifier = verifier_for(ring, label)
    for actual in ("RS256", "RS384", "RS512"):
        if actual != label:
            token = forge.mint({"alg": label}, payload(), ring.rsa, actual)
            reject(verifier, token, "signature")


HMAC_SHAPES = ["other-hash", "header-only", "payload-only", "padded-input", "std-base64-input"]


@pytest.mark.parametrize("shape", HMAC_SHAPES)
def test_hmac_over_the_wrong_bytes(ring: forge.KeyRing, shape: str) -> None:
    verifier = verifier_for(ring, "HS256")
    body = payload()
    # A header whose segment needs padding and holds a '-' or '_', so the
    # padded and standard-alphabet variants really differ.
    head_seg = next(
        seg
        for seg in (forge.segment({"alg": "HS256", "n": "?" * i}) for i in range(64))
        if len(seg) % 4 and ("-" in seg or "_" in seg)
    )
    body_seg = forge.segment(body)
    message = {
        "other-hash": None,
        "header-only": head_seg,
        "payload-only": body_seg,
        "padded-input": head_seg + "=" * (-len(head_seg) % 4) + "." + body_seg,
        "std-base64-input": head_seg.replace("-", "+").replace("_", "/") + "." + body_seg,
    }[shape]
    if message is None:
        mac = hmac.new(ring.hs256, f"{head_seg}.{body_seg}".encode(), hashlib.sha512).digest()[:32]
    else:
        mac = hmac.new(ring.hs256, message.encode(), hashlib.sha256).digest()
    reject(verifier, f"{head_seg}.{body_seg}.{forge.b64url(mac)}", "signature")


def test_hmac_with_a_near_miss_secret(ring: forge.KeyRing) -> None:
    verifier = verifier_for(ring, "HS256")
    for secret in (
        ring.hs256[:-1] + bytes([ring.hs256[-1] ^ 1]),
        # (not ring.hs256 + b"\x00": HMAC zero-pads short keys, RFC 2104 §2.)
        ring.hs256[:-1],
        ring.hs256.upper(),
    ):
        reject(verifier, forge.mint({"alg": "HS256"}, payload(), secret, "HS256"), "signature")
