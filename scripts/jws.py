"""Compact JWS tokens minted by hand (RFC 7515 JWS, RFC 7518 JWA).

Headers and payloads are serialised with :mod:`json`, encoded as unpadded
base64url and signed with the standard library (HMAC) or the
``cryptography`` primitives (RSA, ECDSA, EdDSA), which are imported only when
an asymmetric key is used (a free-threaded interpreter without
``cryptography`` can still mint HMAC tokens). Nothing here imports
``grelmicro``: a bug in the code under test cannot cancel itself out.

The one home of these primitives. The PGO trainer (``scripts/pgo_train.py``,
which shapes the shipped binary) mints its workload with them; the tests'
forge (``tests/forge.py``) builds its hostile tokens on them. Build tooling
never imports from ``tests/``; the arrow runs from the tests to here.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any

HMAC_ALGORITHMS = ("HS256", "HS384", "HS512")
RSA_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
EC_ALGORITHMS = ("ES256", "ES384", "ES512", "ES256K")
EDDSA_ALGORITHMS = ("EdDSA", "Ed25519")
#: Every JWS algorithm the verifier supports (design §3).
ALGORITHMS = HMAC_ALGORITHMS + RSA_ALGORITHMS + EC_ALGORITHMS + EDDSA_ALGORITHMS

# Group orders (public constants of each curve).
P256_N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
P384_N = int(
    "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFC7634D81F4372DDF"
    "581A0DB248B0A77AECEC196ACCC52973",
    16,
)
P521_N = int(
    "01FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF"
    "FA51868783BF2F966B7FCC0148F709A5D03BB5C9B8899C47AEBB6FB71E91386409",
    16,
)
SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
ED25519_L = 2**252 + 27742317777372353535851937790883648493


@dataclass(frozen=True)
class Curve:
    """One ECDSA algorithm's curve (RFC 7518 §3.4, RFC 8812 for ES256K)."""

    cryptography_name: str  # the class name in cryptography.hazmat...ec
    crv: str  # the JWK "crv" member
    size: int  # bytes of one coordinate (and of r, s)
    hash_bits: str
    order: int


#: ECDSA algorithm -> its curve.
CURVES = {
    "ES256": Curve("SECP256R1", "P-256", 32, "256", P256_N),
    "ES384": Curve("SECP384R1", "P-384", 48, "384", P384_N),
    "ES512": Curve("SECP521R1", "P-521", 66, "512", P521_N),
    "ES256K": Curve("SECP256K1", "secp256k1", 32, "256", SECP256K1_N),
}
#: Byte width of one ECDSA coordinate (r or s) per JWS algorithm.
EC_SIZE = {alg: curve.size for alg, curve in CURVES.items()}
EC_ORDER = {alg: curve.order for alg, curve in CURVES.items()}

_HMAC = {"HS256": hashlib.sha256, "HS384": hashlib.sha384, "HS512": hashlib.sha512}


def b64url(data: bytes) -> str:
    """Unpadded base64url (RFC 7515 §2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64url(text: str | bytes) -> bytes:
    """Inverse of :func:`b64url` (tolerant: for reading our own tokens only)."""
    if isinstance(text, str):
        text = text.encode("ascii")
    return base64.urlsafe_b64decode(text + b"=" * (-len(text) % 4))


def json_bytes(value: Any) -> bytes:
    """Compact JSON as an issuer sends it; ``bytes`` pass through, ``str`` is UTF-8 text.

    A ``str`` is taken as JSON text already written (to build duplicates, odd
    spacing, escapes); ``bytes`` let invalid JSON or invalid UTF-8 through.
    """
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def segment(value: Any) -> str:
    """A base64url segment from a dict/list (JSON), ``str`` (JSON text) or raw ``bytes``."""
    return b64url(json_bytes(value))


def signing_input(header: Any, payload: Any) -> str:
    """``b64url(header) "." b64url(payload)`` (RFC 7515 §5.1)."""
    return segment(header) + "." + segment(payload)


def sha(bits: str) -> Any:
    """A ``cryptography`` SHA-2 hash object: ``sha("256")``."""
    from cryptography.hazmat.primitives import hashes  # noqa: PLC0415

    return getattr(hashes, f"SHA{bits}")()


def ecdsa_raw(der: bytes, size: int) -> bytes:
    """DER ECDSA signature -> the JWS form r‖s, each ``size`` bytes (RFC 7518 §3.4)."""
    from cryptography.hazmat.primitives.asymmetric.utils import (  # noqa: PLC0415
        decode_dss_signature,
    )

    r, s = decode_dss_signature(der)
    return r.to_bytes(size, "big") + s.to_bytes(size, "big")


def sign(alg: str, key: Any, message: bytes, *, salt_length: int | None = None) -> bytes:
    """The JWA signature of ``alg`` over ``message`` with ``key``.

    ``key`` is ``bytes`` for HS* (standard library only), else a
    ``cryptography`` private key. ``salt_length`` overrides the PSS salt (JWA
    mandates the hash length).
    """
    if alg in _HMAC:
        return hmac.new(bytes(key), message, _HMAC[alg]).digest()
    from cryptography.hazmat.primitives.asymmetric import ec, padding  # noqa: PLC0415

    if alg in RSA_ALGORITHMS:
        digest = sha(alg[2:])
        if alg.startswith("RS"):
            return key.sign(message, padding.PKCS1v15(), digest)
        salt = digest.digest_size if salt_length is None else salt_length
        return key.sign(message, padding.PSS(padding.MGF1(digest), salt), digest)
    if alg in CURVES:
        curve = CURVES[alg]
        return ecdsa_raw(key.sign(message, ec.ECDSA(sha(curve.hash_bits))), curve.size)
    if alg in EDDSA_ALGORITHMS:
        return key.sign(message)
    raise ValueError(f"forge cannot sign {alg!r}")


def mint(
    header: Any,
    payload: Any,
    key: Any,
    alg: str | None = None,
    *,
    salt_length: int | None = None,
) -> str:
    """A compact JWS. ``alg`` picks the signature maths (default: the header's ``alg``).

    ``header`` and ``payload`` are dicts (compact JSON), JSON text (``str``)
    or raw ``bytes``.
    """
    alg = header["alg"] if alg is None else alg
    message = signing_input(header, payload)
    signature = sign(alg, key, message.encode("ascii"), salt_length=salt_length)
    return message + "." + b64url(signature)


def with_signature(token: str, signature: bytes) -> str:
    """``token`` with its signature replaced by ``signature`` (re-encoded)."""
    head, body, _ = token.split(".")
    return f"{head}.{body}.{b64url(signature)}"


def signature_of(token: str) -> bytes:
    """The decoded signature of ``token``."""
    return unb64url(token.split(".")[2])


def flip_bit(data: bytes, index: int, bit: int = 0) -> bytes:
    """``data`` with one bit flipped."""
    out = bytearray(data)
    out[index] ^= 1 << bit
    return bytes(out)


def tamper(token: str) -> str:
    """``token`` with one bit of its signature flipped (still canonical base64url)."""
    return with_signature(token, flip_bit(signature_of(token), 0))


def generate(alg: str, *, rsa_bits: int = 2048, rsa_exponent: int = 65537) -> Any:
    """A fresh private key (or a fixed HMAC secret of the hash's length) for ``alg``."""
    if alg in HMAC_ALGORITHMS:
        return hashlib.sha512(f"secret for {alg}".encode()).digest()[: int(alg[2:]) // 8]
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa  # noqa: PLC0415

    if alg in RSA_ALGORITHMS:
        return rsa.generate_private_key(public_exponent=rsa_exponent, key_size=rsa_bits)
    if alg in CURVES:
        return ec.generate_private_key(getattr(ec, CURVES[alg].cryptography_name)())
    if alg in EDDSA_ALGORITHMS:
        return ed25519.Ed25519PrivateKey.generate()
    raise ValueError(f"unknown algorithm {alg}")


def public_of(key: Any) -> Any:
    """The public key of a private key; a public key is returned as it is."""
    return key.public_key() if hasattr(key, "public_key") else key


def serialization() -> Any:
    """``cryptography``'s serialization module (imported on first use)."""
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

    return serialization


def public_bytes(key: Any, encoding: str, public_format: str) -> bytes:
    """The public key of ``key`` in ``encoding``/``public_format`` (member names)."""
    ser = serialization()
    return public_of(key).public_bytes(
        getattr(ser.Encoding, encoding), getattr(ser.PublicFormat, public_format)
    )


def spki_pem(key: Any) -> bytes:
    """SubjectPublicKeyInfo PEM (``-----BEGIN PUBLIC KEY-----``) of a private or public key."""
    return public_bytes(key, "PEM", "SubjectPublicKeyInfo")
