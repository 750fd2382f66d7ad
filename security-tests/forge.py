"""Hand-built compact JWS tokens for the attack suite.

Everything here is written against RFC 7515 (JWS) and RFC 7518 (JWA) with the
``cryptography`` package doing the raw signature maths. Nothing is signed by
``grelmicro`` itself or by another JWT library: a hostile token must be
expressible byte for byte, including shapes no well-behaved signer would emit
(wrong alg, bad base64, DER signatures, duplicate members, ...).

Building blocks:

- :func:`b64url` / :func:`unb64url`: unpadded base64url (RFC 7515 §2).
- :func:`segment`: a header or payload segment from a dict (compact JSON),
  ``str`` or raw ``bytes`` (so invalid JSON or invalid UTF-8 can be sent).
- :func:`sign`: the JWA signature of ``alg`` over a message with a given key,
  regardless of what the token header claims.
- :func:`mint`: header + payload + key -> compact token.
- :class:`KeyRing`: the keys the suite signs with (and their public forms as
  PEM, PKCS#1, certificate, OpenSSH and JWK).
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import json
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)
from cryptography.x509.oid import NameOID

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

#: Byte width of one ECDSA coordinate (r or s) per JWS algorithm (RFC 7518 §3.4).
EC_SIZE = {"ES256": 32, "ES256K": 32, "ES384": 48, "ES512": 66}
EC_ORDER = {"ES256": P256_N, "ES256K": SECP256K1_N, "ES384": P384_N, "ES512": P521_N}

_HASH = {"256": hashes.SHA256, "384": hashes.SHA384, "512": hashes.SHA512}
_HMAC = {"HS256": hashlib.sha256, "HS384": hashlib.sha384, "HS512": hashlib.sha512}

#: A fixed point in time every test measures against (2023-11-14T22:13:20Z).
NOW = 1_700_000_000


def b64url(data: bytes) -> str:
    """Unpadded base64url (RFC 7515 §2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64url(text: str | bytes) -> bytes:
    """Inverse of :func:`b64url` (tolerant: for reading our own tokens only)."""
    if isinstance(text, str):
        text = text.encode("ascii")
    return base64.urlsafe_b64decode(text + b"=" * (-len(text) % 4))


def canonical(segment: str) -> bool:
    """Whether ``segment`` is the one canonical base64url text of its bytes."""
    if len(segment) % 4 == 1 or not segment.isascii():
        return False
    try:
        return b64url(unb64url(segment)) == segment
    except ValueError:
        return False


def json_bytes(value: Any) -> bytes:
    """Compact JSON for dicts and lists; ``bytes`` pass through, ``str`` is UTF-8."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def segment(value: Any) -> str:
    """A base64url segment from a dict/list (JSON), ``str`` or raw ``bytes``."""
    return b64url(json_bytes(value))


def ecdsa_raw(der: bytes, size: int) -> bytes:
    """DER ECDSA signature -> the JWS form r‖s, each ``size`` bytes (RFC 7518 §3.4)."""
    r, s = decode_dss_signature(der)
    return r.to_bytes(size, "big") + s.to_bytes(size, "big")


def ecdsa_der(raw: bytes) -> bytes:
    """JWS r‖s -> DER (the wrong encoding for JWS)."""
    half = len(raw) // 2
    return encode_dss_signature(
        int.from_bytes(raw[:half], "big"), int.from_bytes(raw[half:], "big")
    )


def rs(r: int, s: int, size: int) -> bytes:
    """An r‖s ECDSA signature from two integers (each truncated to ``size`` bytes)."""
    mask = (1 << (8 * size)) - 1
    return (r & mask).to_bytes(size, "big") + (s & mask).to_bytes(size, "big")


def sign(alg: str, key: Any, message: bytes, *, salt_length: int | None = None) -> bytes:
    """The JWA signature of ``alg`` over ``message`` with ``key``.

    ``key`` is ``bytes`` for HS*, else a ``cryptography`` private key.
    ``salt_length`` overrides the PSS salt (JWA mandates the hash length).
    """
    if alg in _HMAC:
        return hmac.new(bytes(key), message, _HMAC[alg]).digest()
    if alg.startswith(("RS", "PS")):
        algorithm = _HASH[alg[2:]]()
        if alg.startswith("RS"):
            return key.sign(message, padding.PKCS1v15(), algorithm)
        salt = algorithm.digest_size if salt_length is None else salt_length
        return key.sign(message, padding.PSS(padding.MGF1(algorithm), salt), algorithm)
    if alg in EC_SIZE:
        algorithm = hashes.SHA256() if alg == "ES256K" else _HASH[alg[2:]]()
        return ecdsa_raw(key.sign(message, ec.ECDSA(algorithm)), EC_SIZE[alg])
    if alg in ("EdDSA", "Ed25519"):
        return key.sign(message)
    raise ValueError(f"forge cannot sign {alg!r}")


def signing_input(header: Any, payload: Any) -> str:
    """``b64url(header) "." b64url(payload)`` (RFC 7515 §5.1)."""
    return segment(header) + "." + segment(payload)


def mint(
    header: Any,
    payload: Any,
    key: Any,
    alg: str | None = None,
    *,
    salt_length: int | None = None,
) -> str:
    """A compact JWS. ``alg`` picks the signature maths (default: the header's ``alg``)."""
    if alg is None:
        alg = header["alg"]
    assert alg is not None
    message = signing_input(header, payload)
    signature = sign(alg, key, message.encode("ascii"), salt_length=salt_length)
    return message + "." + b64url(signature)


def parts(token: str) -> list[str]:
    """The dot-separated segments of ``token``."""
    return token.split(".")


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


def unsigned(header: Any, payload: Any, signature: bytes | str = b"") -> str:
    """A token whose signature segment is given verbatim (``bytes`` are encoded)."""
    tail = signature if isinstance(signature, str) else b64url(signature)
    return signing_input(header, payload) + "." + tail


# --- keys -----------------------------------------------------------------


def spki_pem(public: Any) -> bytes:
    """SubjectPublicKeyInfo PEM (``-----BEGIN PUBLIC KEY-----``)."""
    return public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def spki_der(public: Any) -> bytes:
    """SubjectPublicKeyInfo DER."""
    return public.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def pkcs1_pem(public: rsa.RSAPublicKey) -> bytes:
    """PKCS#1 PEM (``-----BEGIN RSA PUBLIC KEY-----``)."""
    return public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.PKCS1)


def openssh(public: Any) -> bytes:
    """OpenSSH ``authorized_keys`` text (``ssh-rsa AAAA...``)."""
    return public.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)


def private_pem(private: Any, *, traditional: bool = False) -> bytes:
    """Unencrypted private key PEM (PKCS#8, or the traditional per-type format)."""
    return private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL
        if traditional
        else serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def certificate_pem(private: Any, common_name: str = "grelmicro security suite") -> bytes:
    """A self-signed X.509 certificate for ``private``'s public key."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    start = datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private.public_key())
        .serial_number(1)
        .not_valid_before(start)
        .not_valid_after(start + datetime.timedelta(days=3650))
    )
    digest = None if isinstance(private, ed25519.Ed25519PrivateKey) else hashes.SHA256()
    return builder.sign(private, digest).public_bytes(serialization.Encoding.PEM)


_CURVE_NAME = {"secp256r1": "P-256", "secp384r1": "P-384", "secp521r1": "P-521"}


def jwk(public: Any, **extra: Any) -> dict[str, Any]:
    """The public JWK (RFC 7517/7518 §6, RFC 8037) of a ``cryptography`` key."""
    if isinstance(public, rsa.RSAPublicKey):
        numbers = public.public_numbers()
        out: dict[str, Any] = {
            "kty": "RSA",
            "n": b64url(numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")),
            "e": b64url(numbers.e.to_bytes((numbers.e.bit_length() + 7) // 8, "big")),
        }
    elif isinstance(public, ec.EllipticCurvePublicKey):
        size = (public.curve.key_size + 7) // 8
        numbers = public.public_numbers()
        out = {
            "kty": "EC",
            "crv": _CURVE_NAME.get(public.curve.name, public.curve.name),
            "x": b64url(numbers.x.to_bytes(size, "big")),
            "y": b64url(numbers.y.to_bytes(size, "big")),
        }
    elif isinstance(public, ed25519.Ed25519PublicKey):
        raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        out = {"kty": "OKP", "crv": "Ed25519", "x": b64url(raw)}
    else:
        raise TypeError(f"no JWK form for {type(public).__name__}")
    out.update(extra)
    return out


def private_jwk(private: Any, **extra: Any) -> dict[str, Any]:
    """A JWK that also carries the private members (must never be accepted)."""
    out = jwk(private.public_key(), **extra)
    if isinstance(private, rsa.RSAPrivateKey):
        numbers = private.private_numbers()
        for name, value in (
            ("d", numbers.d),
            ("p", numbers.p),
            ("q", numbers.q),
            ("dp", numbers.dmp1),
            ("dq", numbers.dmq1),
            ("qi", numbers.iqmp),
        ):
            out[name] = b64url(value.to_bytes((value.bit_length() + 7) // 8, "big"))
    elif isinstance(private, ec.EllipticCurvePrivateKey):
        size = (private.curve.key_size + 7) // 8
        out["d"] = b64url(private.private_numbers().private_value.to_bytes(size, "big"))
    else:
        out["d"] = b64url(
            private.private_bytes(
                serialization.Encoding.Raw,
                serialization.PrivateFormat.Raw,
                serialization.NoEncryption(),
            )
        )
    return out


def oct_jwk(secret: bytes, alg: str = "HS256", **extra: Any) -> dict[str, Any]:
    """A symmetric JWK."""
    return {"kty": "oct", "k": b64url(secret), "alg": alg, **extra}


def ec_key_from_scalar(scalar: int, curve: ec.EllipticCurve) -> ec.EllipticCurvePrivateKey:
    """A deterministic EC private key (for fixed fuzz seeds)."""
    return ec.derive_private_key(scalar, curve)


@dataclass
class KeyRing:
    """Every key the suite signs with; ``other_*`` are an attacker's own keys."""

    hs256: bytes = b"security-suite-hs256-secret-0001"
    hs384: bytes = b"security-suite-hs384-secret-00000000000000000001"
    hs512: bytes = b"security-suite-hs512-secret-0000000000000000000000000000000000001"
    rsa: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    p256: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )
    p384: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP384R1())
    )
    p521: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP521R1())
    )
    k256: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256K1())
    )
    ed25519: ed25519.Ed25519PrivateKey = field(default_factory=ed25519.Ed25519PrivateKey.generate)
    other_rsa: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    other_p256: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )

    def private(self, alg: str) -> Any:
        """The signing key for ``alg``."""
        table = {
            "HS256": self.hs256,
            "HS384": self.hs384,
            "HS512": self.hs512,
            "ES256": self.p256,
            "ES384": self.p384,
            "ES512": self.p521,
            "ES256K": self.k256,
            "EdDSA": self.ed25519,
            "Ed25519": self.ed25519,
        }
        if alg in table:
            return table[alg]
        if alg[:2] in ("RS", "PS"):
            return self.rsa
        raise ValueError(alg)

    def public(self, alg: str) -> Any:
        """The public counterpart of :meth:`private` (the secret for HS*)."""
        key = self.private(alg)
        return key if isinstance(key, bytes) else key.public_key()


#: Every JWS algorithm the verifier supports (design §3).
ALGORITHMS = (
    "HS256",
    "HS384",
    "HS512",
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "ES256K",
    "EdDSA",
    "Ed25519",
)
