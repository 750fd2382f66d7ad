"""Weak and wrong keys, refused when the verifier is built.

Attack class: a key that makes forgery cheap or is not a verification key
at all: short HMAC secrets, small RSA moduli, tiny or even exponents, EC
points off their curve, Ed25519 points of small order, private keys where a
public key is expected, symmetric keys inside a JWKS, JWKs meant for
encryption or without the ``verify`` operation.

References:
- RFC 7518 §3.2 (HMAC key at least as long as the hash output), §3.3 and
  §3.5 (RSA keys of 2048 bits or more), §6.2.1 (EC public key parameters);
- NIST SP 800-56B / SP 800-89 (RSA public exponent: odd, at least 65537);
- invalid-curve attacks (Biehl-Meyer-Müller 2000; Jager-Schwenk-Somorovsky,
  ESORICS 2015, "Practical invalid curve attacks on TLS-ECDH");
- RFC 8032 §5.1.7 and Chalkias et al. 2020, "Taming the many EdDSAs"
  (small-order public keys make a signature that verifies for any message);
- RFC 7517 §4.2 (``use``), §4.3 (``key_ops``), §5 (JWKS); RFC 8725 §3.5
  (sufficient key entropy); design.md §3 (symmetric keys in a JWKS).
"""

from __future__ import annotations

import base64
import logging
from typing import Any

import forge
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from support import accept, mint, payload, reject

from grelmicro.jwt import InvalidKeyError, JWTVerifier, Key, WeakKeyError


def _refused(build: Any, reason: str) -> InvalidKeyError:
    with pytest.raises(InvalidKeyError) as caught:
        build()
    assert caught.value.reason == reason, caught.value
    assert type(caught.value) is (WeakKeyError if reason == "weak-key" else InvalidKeyError)
    return caught.value


@pytest.mark.parametrize(
    ("alg", "length", "ok"),
    [
        ("HS256", 0, False),
        ("HS256", 1, False),
        ("HS256", 16, False),
        ("HS256", 31, False),
        ("HS256", 32, True),
        ("HS384", 32, False),
        ("HS384", 47, False),
        ("HS384", 48, True),
        ("HS512", 32, False),
        ("HS512", 63, False),
        ("HS512", 64, True),
    ],
)
def test_hmac_secret_length(alg: str, length: int, ok: bool) -> None:
    secret = bytes(range(1, 256))[:length] if length < 255 else b"\x01" * length
    if ok:
        assert Key.secret(secret, alg).algorithm == alg
    else:
        _refused(lambda: Key.secret(secret, alg), "weak-key")


def test_short_text_secret_counts_bytes() -> None:
    # 16 characters of 2-byte UTF-8 are 32 bytes: the limit is about bytes.
    assert Key.secret("é" * 16, "HS256").algorithm == "HS256"
    _refused(lambda: Key.secret("e" * 31, "HS256"), "weak-key")


def test_short_oct_jwk_is_weak(ring: forge.KeyRing) -> None:
    _refused(lambda: Key.jwk(forge.oct_jwk(b"x" * 16), allow_symmetric=True), "weak-key")


@pytest.fixture(scope="module")
def small_rsa() -> dict[int, rsa.RSAPrivateKey]:
    return {bits: rsa.generate_private_key(65537, bits) for bits in (1024, 2047)}


@pytest.mark.parametrize("bits", [1024, 2047])
def test_rsa_modulus_under_2048_bits(small_rsa: dict[int, rsa.RSAPrivateKey], bits: int) -> None:
    public = small_rsa[bits].public_key()
    for alg in ("RS256", "PS256"):
        _refused(lambda alg=alg: Key.pem(forge.spki_pem(public), alg), "weak-key")
        _refused(lambda alg=alg: Key.pem(forge.pkcs1_pem(public), alg), "weak-key")
        _refused(lambda alg=alg: Key.jwk(forge.jwk(public), alg), "weak-key")
    _refused(lambda: Key.pem(forge.certificate_pem(small_rsa[bits]), "RS256"), "weak-key")


def test_rsa_2048_bits_is_enough(ring: forge.KeyRing) -> None:
    assert Key.pem(forge.spki_pem(ring.rsa.public_key()), "RS256").kty == "RSA"


def _rsa_jwk(n: int, e: int | bytes) -> dict[str, str]:
    e_bytes = e if isinstance(e, bytes) else e.to_bytes(max(1, (e.bit_length() + 7) // 8), "big")
    return {
        "kty": "RSA",
        "n": forge.b64url(n.to_bytes((n.bit_length() + 7) // 8, "big")),
        "e": forge.b64url(e_bytes),
    }


@pytest.mark.parametrize(
    "e",
    [0, 1, 2, 3, 5, 17, 257, 65535, 65536, 65538, (1 << 34) + 1, b"", b"\x00\x00\x00\x03"],
    ids=repr,
)
def test_rsa_exponent_too_small_even_or_too_large(ring: forge.KeyRing, e: int | bytes) -> None:
    n = ring.rsa.public_key().public_numbers().n
    _refused(lambda: Key.jwk(_rsa_jwk(n, e), "RS256"), "weak-key")


def test_rsa_exponent_3_key_pair() -> None:
    key = rsa.generate_private_key(3, 2048)
    _refused(lambda: Key.pem(forge.spki_pem(key.public_key()), "RS256"), "weak-key")


def test_rsa_even_or_oversized_modulus(ring: forge.KeyRing) -> None:
    n = ring.rsa.public_key().public_numbers().n
    _refused(lambda: Key.jwk(_rsa_jwk(n + 1, 65537), "RS256"), "invalid-key")
    _refused(lambda: Key.jwk(_rsa_jwk((1 << 8200) | 1, 65537), "RS256"), "invalid-key")


P256_P = 2**256 - 2**224 + 2**192 + 2**96 - 1


def _ec_jwk(x: int, y: int, size: int = 32, crv: str = "P-256") -> dict[str, str]:
    return {
        "kty": "EC",
        "crv": crv,
        "x": forge.b64url(x.to_bytes(size, "big")),
        "y": forge.b64url(y.to_bytes(size, "big")),
    }


def test_ec_points_off_the_curve(ring: forge.KeyRing) -> None:
    numbers = ring.p256.public_key().public_numbers()
    x, y = numbers.x, numbers.y
    for bad in (
        _ec_jwk(1, 2),
        _ec_jwk(0, 0),
        _ec_jwk(x, (y + 1) % P256_P),
        _ec_jwk(x + 1, y),
        _ec_jwk(x, P256_P - y + 1),
        _ec_jwk(x + P256_P, y, size=33),
        _ec_jwk(x, y + P256_P, size=33),
        _ec_jwk(x, y, size=48, crv="P-384"),
    ):
        _refused(lambda bad=bad: Key.jwk(bad), "invalid-key")


def test_ec_point_off_the_curve_in_spki(ring: forge.KeyRing) -> None:
    der = bytearray(forge.spki_der(ring.p256.public_key()))
    der[-1] ^= 0x01  # last byte of y
    body = base64.encodebytes(bytes(der))
    pem = b"-----BEGIN PUBLIC KEY-----\n" + body + b"-----END PUBLIC KEY-----\n"
    _refused(lambda: Key.pem(pem, "ES256"), "invalid-key")


# The eight points of small order on edwards25519, by their encodings.
SMALL_ORDER = [
    "0100000000000000000000000000000000000000000000000000000000000000",
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "0000000000000000000000000000000000000000000000000000000000000000",
    "0000000000000000000000000000000000000000000000000000000000000080",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
]


@pytest.mark.parametrize("form", ["jwk", "spki-pem"])
@pytest.mark.parametrize("encoding", SMALL_ORDER)
def test_ed25519_small_order_public_key(encoding: str, form: str) -> None:
    point = bytes.fromhex(encoding)
    if form == "jwk":
        document = {"kty": "OKP", "crv": "Ed25519", "x": forge.b64url(point)}
        _refused(lambda: Key.jwk(document), "invalid-key")
    else:
        # SubjectPublicKeyInfo for id-Ed25519 (RFC 8410 §4) around the raw point.
        der = bytes.fromhex("302a300506032b6570032100") + point
        body = base64.encodebytes(der)
        pem = b"-----BEGIN PUBLIC KEY-----\n" + body + b"-----END PUBLIC KEY-----\n"
        _refused(lambda: Key.pem(pem, "EdDSA"), "invalid-key")


def test_ed25519_identity_key_does_not_verify_a_blank_signature() -> None:
    identity = bytes.fromhex(SMALL_ORDER[0])
    try:
        key = Key.jwk({"kty": "OKP", "crv": "Ed25519", "x": forge.b64url(identity)})
    except InvalidKeyError:
        return  # refused when built: the forgery below is impossible
    verifier = JWTVerifier(keys=[key], cache_size=0)
    token = forge.unsigned({"alg": "EdDSA"}, payload(sub="admin"), identity + bytes(32))
    reject(verifier, token, "signature")


PRIVATE_PEMS = ["rsa-pkcs8", "rsa-traditional", "ec-pkcs8", "ec-traditional", "ed25519-pkcs8"]


@pytest.mark.parametrize("which", PRIVATE_PEMS)
def test_private_key_pem_is_refused(ring: forge.KeyRing, which: str) -> None:
    key, alg = {
        "rsa": (ring.rsa, "RS256"),
        "ec": (ring.p256, "ES256"),
        "ed25519": (ring.ed25519, "EdDSA"),
    }[which.split("-", maxsplit=1)[0]]
    pem = forge.private_pem(key, traditional=which.endswith("traditional"))
    _refused(lambda: Key.pem(pem, alg), "invalid-key")


# Issue 10: Key.pem read only the first block, so "public key, then the private
# key" built without a word. Several blocks are accepted only as certificates of
# the same key; anything else is refused.
MULTI_BLOCK = {
    "public-then-private": lambda r: (
        forge.spki_pem(r.p256.public_key()) + forge.private_pem(r.p256)
    ),
    "private-then-public": lambda r: (
        forge.private_pem(r.p256) + forge.spki_pem(r.p256.public_key())
    ),
    "two-public-keys": lambda r: (
        forge.spki_pem(r.p256.public_key()) + forge.spki_pem(r.other_p256.public_key())
    ),
    "key-then-certificate": lambda r: (
        forge.spki_pem(r.p256.public_key()) + forge.certificate_pem(r.p256)
    ),
    "chain-of-two-keys": lambda r: (
        forge.certificate_pem(r.p256) + forge.certificate_pem(r.other_p256)
    ),
    "public-then-broken-block": lambda r: (
        forge.spki_pem(r.p256.public_key())
        + b"-----BEGIN PUBLIC KEY-----\n!!!\n-----END PUBLIC KEY-----\n"
    ),
}


@pytest.mark.parametrize("form", sorted(MULTI_BLOCK))
def test_pem_with_more_than_one_block_is_refused(ring: forge.KeyRing, form: str) -> None:
    _refused(lambda: Key.pem(MULTI_BLOCK[form](ring), "ES256"), "invalid-key")


def test_pem_certificates_of_one_key_are_accepted(ring: forge.KeyRing) -> None:
    pem = forge.certificate_pem(ring.p256) + forge.certificate_pem(ring.p256, "renewed")
    verifier = JWTVerifier(keys=[Key.pem(pem, "ES256")], cache_size=0)
    accept(verifier, mint(ring, "ES256", {"alg": "ES256"}))


def test_pem_certificate_request_is_refused(ring: forge.KeyRing) -> None:
    from cryptography import x509  # noqa: PLC0415
    from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415
    from cryptography.x509.oid import NameOID  # noqa: PLC0415

    request = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "idp")]))
        .sign(ring.p256, hashes.SHA256())
    )
    error = _refused(
        lambda: Key.pem(request.public_bytes(serialization.Encoding.PEM), "ES256"), "invalid-key"
    )
    assert "signing request" in str(error)


def test_encrypted_private_key_pem_is_refused(ring: forge.KeyRing) -> None:
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

    pem = ring.p256.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"passphrase"),
    )
    _refused(lambda: Key.pem(pem, "ES256"), "invalid-key")


@pytest.mark.parametrize("family", ["rsa", "p256", "ed25519"])
def test_private_jwk_is_refused(ring: forge.KeyRing, family: str) -> None:
    private = {"rsa": ring.rsa, "p256": ring.p256, "ed25519": ring.ed25519}[family]
    _refused(lambda: Key.jwk(forge.private_jwk(private)), "invalid-key")


@pytest.mark.parametrize("member", ["d", "p", "q", "dp", "dq", "qi", "oth"])
def test_any_private_member_marks_a_private_jwk(ring: forge.KeyRing, member: str) -> None:
    document = forge.jwk(ring.rsa.public_key(), **{member: "AQAB"})
    _refused(lambda: Key.jwk(document), "invalid-key")


def test_oct_jwk_needs_an_explicit_opt_in(ring: forge.KeyRing) -> None:
    _refused(lambda: Key.jwk(forge.oct_jwk(ring.hs256)), "invalid-key")
    assert Key.jwk(forge.oct_jwk(ring.hs256), allow_symmetric=True).kty == "oct"


@pytest.mark.parametrize("use", ["enc", "ENC", "SIG", "sig ", "", 1, None, ["sig"]], ids=repr)
def test_jwk_use_other_than_sig(ring: forge.KeyRing, use: object) -> None:
    document = forge.jwk(ring.p256.public_key(), use=use)
    _refused(lambda: Key.jwk(document), "invalid-key")


@pytest.mark.parametrize(
    "ops",
    [["sign"], ["encrypt"], ["wrapKey", "deriveKey"], [], "verify", ["Verify"], [None], {}],
    ids=repr,
)
def test_jwk_key_ops_without_verify(ring: forge.KeyRing, ops: object) -> None:
    document = forge.jwk(ring.p256.public_key(), key_ops=ops)
    _refused(lambda: Key.jwk(document), "invalid-key")


def test_jwk_use_sig_and_key_ops_verify_are_accepted(ring: forge.KeyRing) -> None:
    document = forge.jwk(ring.p256.public_key(), use="sig", key_ops=["sign", "verify"])
    assert Key.jwk(document).algorithm == "ES256"


def _jwks(ring: forge.KeyRing) -> dict[str, Any]:
    return {
        "keys": [
            forge.jwk(ring.p256.public_key(), kid="good"),
            forge.private_jwk(ring.other_p256, kid="private"),
            forge.oct_jwk(ring.hs256, kid="symmetric"),
            forge.jwk(ring.other_p256.public_key(), kid="encryption", use="enc"),
            forge.jwk(ring.other_p256.public_key(), kid="sign-only", key_ops=["sign"]),
            _ec_jwk(1, 2) | {"kid": "off-curve"},
            forge.jwk(rsa.generate_private_key(65537, 1024).public_key(), kid="rsa-1024"),
        ]
    }


def test_jwks_skips_unusable_keys_and_reports_them(
    ring: forge.KeyRing, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="grelmicro"):
        verifier = JWTVerifier(jwks=_jwks(ring), cache_size=0)
    skipped = {r.args[0] for r in caplog.records if r.levelno >= logging.WARNING and r.args}
    assert skipped == {"private", "symmetric", "encryption", "sign-only", "off-curve", "rsa-1024"}
    accept(verifier, mint(ring, "ES256", {"alg": "ES256", "kid": "good"}))
    for kid in ("private", "encryption", "sign-only", "off-curve"):
        token = forge.mint({"alg": "ES256", "kid": kid}, payload(), ring.other_p256, "ES256")
        reject(verifier, token, "unknown-key")
    token = forge.mint({"alg": "HS256", "kid": "symmetric"}, payload(), ring.hs256, "HS256")
    reject(verifier, token, "algorithm")


def test_jwks_with_only_unusable_keys_is_a_build_error(ring: forge.KeyRing) -> None:
    document = {"keys": [k for k in _jwks(ring)["keys"] if k.get("kid") != "good"]}
    _refused(lambda: JWTVerifier(jwks=document), "invalid-key")


def test_symmetric_jwks_key_only_with_opt_in(ring: forge.KeyRing) -> None:
    document = {"keys": [forge.oct_jwk(ring.hs256, kid="s")]}
    _refused(lambda: JWTVerifier(jwks=document), "invalid-key")
    verifier = JWTVerifier(jwks=document, allow_symmetric=True, cache_size=0)
    accept(verifier, mint(ring, "HS256", {"alg": "HS256", "kid": "s"}))
