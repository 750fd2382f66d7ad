"""Independent minting of compact JWS for the core tests.

Tokens are built by hand (base64url, JSON) and signed with the
``cryptography`` package or the standard library's ``hmac``; neither the
core nor PyJWT is involved, so a bug in the core cannot cancel itself out.
Keys are exported in every form the core reads: SPKI PEM, PKCS#1 PEM, an
X.509 certificate PEM and a public JWK.
"""

from __future__ import annotations

import base64
import datetime
import functools
import hashlib
import hmac
import json
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.x509.oid import NameOID

HASHES: dict[str, type[hashes.HashAlgorithm]] = {
    "256": hashes.SHA256,
    "384": hashes.SHA384,
    "512": hashes.SHA512,
}

# ECDSA algorithm -> (curve, JWK crv, coordinate length in bytes).
CURVES: dict[str, tuple[ec.EllipticCurve, str, int]] = {
    "ES256": (ec.SECP256R1(), "P-256", 32),
    "ES384": (ec.SECP384R1(), "P-384", 48),
    "ES512": (ec.SECP521R1(), "P-521", 66),
    "ES256K": (ec.SECP256K1(), "secp256k1", 32),
}

HMAC_ALGORITHMS = ("HS256", "HS384", "HS512")
RSA_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
EC_ALGORITHMS = tuple(CURVES)
EDDSA_ALGORITHMS = ("EdDSA", "Ed25519")
ALL_ALGORITHMS = HMAC_ALGORITHMS + RSA_ALGORITHMS + EC_ALGORITHMS + EDDSA_ALGORITHMS


def b64url(data: bytes) -> str:
    """Unpadded base64url (RFC 7515 §2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def segment(part: Any) -> str:
    """Encodes one token segment.

    A ``dict`` becomes compact JSON; ``str`` is taken as JSON text already
    written (to build duplicates, odd spacing, escapes); ``bytes`` are
    encoded as they are.
    """
    if isinstance(part, bytes):
        return b64url(part)
    if isinstance(part, str):
        return b64url(part.encode("utf-8"))
    return b64url(json.dumps(part, separators=(",", ":")).encode("utf-8"))


def _hash(alg: str) -> hashes.HashAlgorithm:
    return HASHES[alg[-3:]]()


def sign(alg: str, key: Any, data: bytes) -> bytes:
    """Signs ``data`` the way JWS algorithm ``alg`` prescribes (RFC 7518)."""
    if alg in HMAC_ALGORITHMS:
        return hmac.new(key, data, getattr(hashlib, f"sha{alg[2:]}")).digest()
    if alg.startswith("RS"):
        return key.sign(data, padding.PKCS1v15(), _hash(alg))
    if alg.startswith("PS"):
        digest = _hash(alg)
        pss = padding.PSS(mgf=padding.MGF1(_hash(alg)), salt_length=digest.digest_size)
        return key.sign(data, pss, digest)
    if alg in CURVES:
        size = CURVES[alg][2]
        digest = hashes.SHA256() if alg == "ES256K" else _hash(alg)
        r, s = decode_dss_signature(key.sign(data, ec.ECDSA(digest)))
        return r.to_bytes(size, "big") + s.to_bytes(size, "big")
    if alg in EDDSA_ALGORITHMS:
        return key.sign(data)
    raise ValueError(f"unknown algorithm {alg}")


def signed(signing_input: str, alg: str, key: Any) -> str:
    """Appends a valid signature to ``header.payload`` text, whatever it holds."""
    return f"{signing_input}.{b64url(sign(alg, key, signing_input.encode('ascii')))}"


def mint(
    alg: str,
    key: Any,
    payload: Any,
    /,
    *,
    header: Any = None,
    kid: str | None = None,
    **members: Any,
) -> str:
    """A compact JWS over ``payload``.

    ``header`` replaces the whole header (a dict, JSON text or raw bytes);
    otherwise it is ``{"alg": alg}`` plus ``kid`` and any extra members (an
    ``alg`` member there overrides the header's alg, not the signing one).
    """
    if header is None:
        header = {"alg": alg}
        if kid is not None:
            header["kid"] = kid
        header.update(members)
    return signed(f"{segment(header)}.{segment(payload)}", alg, key)


# ---------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------


def generate(alg: str, *, rsa_bits: int = 2048, rsa_exponent: int = 65537) -> Any:
    """A fresh private key (or HMAC secret) for ``alg``."""
    if alg in HMAC_ALGORITHMS:
        return hashlib.sha512(f"secret for {alg}".encode()).digest()[: int(alg[2:]) // 8]
    if alg in RSA_ALGORITHMS:
        return rsa.generate_private_key(public_exponent=rsa_exponent, key_size=rsa_bits)
    if alg in CURVES:
        return ec.generate_private_key(CURVES[alg][0])
    if alg in EDDSA_ALGORITHMS:
        return ed25519.Ed25519PrivateKey.generate()
    raise ValueError(f"unknown algorithm {alg}")


def spki_pem(private: Any) -> bytes:
    """The public key as an SPKI ``PUBLIC KEY`` PEM."""
    return private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def spki_der(private: Any) -> bytes:
    return private.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def pkcs1_pem(private: rsa.RSAPrivateKey) -> bytes:
    """An RSA public key as a PKCS#1 ``RSA PUBLIC KEY`` PEM."""
    return private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.PKCS1
    )


def private_pem(private: Any, *, traditional: bool = False) -> bytes:
    """The private key itself (PKCS#8, or the traditional OpenSSL form)."""
    fmt = (
        serialization.PrivateFormat.TraditionalOpenSSL
        if traditional
        else serialization.PrivateFormat.PKCS8
    )
    return private.private_bytes(serialization.Encoding.PEM, fmt, serialization.NoEncryption())


def certificate_pem(private: Any) -> bytes:
    """A self-signed X.509 certificate for the key (made with cryptography.x509)."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "grelmicro core test")])
    start = datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc)
    digest = None if isinstance(private, ed25519.Ed25519PrivateKey) else hashes.SHA256()
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + datetime.timedelta(days=3650))
        .sign(private, digest)
    )
    return certificate.public_bytes(serialization.Encoding.PEM)


def _unsigned(value: int, size: int | None = None) -> str:
    length = size if size is not None else max(1, (value.bit_length() + 7) // 8)
    return b64url(value.to_bytes(length, "big"))


def public_jwk(alg: str, private: Any, /, **members: Any) -> dict[str, Any]:
    """The public JWK of a key (``oct`` JWKs carry the secret as ``k``)."""
    if alg in HMAC_ALGORITHMS:
        jwk: dict[str, Any] = {"kty": "oct", "k": b64url(private), "alg": alg}
    elif alg in RSA_ALGORITHMS:
        numbers = private.public_key().public_numbers()
        jwk = {"kty": "RSA", "n": _unsigned(numbers.n), "e": _unsigned(numbers.e)}
    elif alg in CURVES:
        _, crv, size = CURVES[alg]
        numbers = private.public_key().public_numbers()
        jwk = {
            "kty": "EC",
            "crv": crv,
            "x": _unsigned(numbers.x, size),
            "y": _unsigned(numbers.y, size),
        }
    else:
        raw = private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        jwk = {"kty": "OKP", "crv": "Ed25519", "x": b64url(raw)}
    jwk.update(members)
    return jwk


def private_jwk(alg: str, private: Any) -> dict[str, Any]:
    """A JWK that wrongly carries private members next to the public ones."""
    jwk = public_jwk(alg, private)
    if alg in RSA_ALGORITHMS:
        numbers = private.private_numbers()
        jwk.update(d=_unsigned(numbers.d), p=_unsigned(numbers.p), q=_unsigned(numbers.q))
    elif alg in CURVES:
        jwk["d"] = _unsigned(private.private_numbers().private_value, CURVES[alg][2])
    else:
        raw = private.private_bytes(
            serialization.Encoding.Raw,
            serialization.PrivateFormat.Raw,
            serialization.NoEncryption(),
        )
        jwk["d"] = b64url(raw)
    return jwk


@dataclass(frozen=True)
class Signer:
    """A private key (or secret) with the algorithm it signs under."""

    alg: str
    private: Any = field(repr=False)

    def mint(self, payload: Any, /, **options: Any) -> str:
        return mint(self.alg, self.private, payload, **options)

    def jwk(self, **members: Any) -> dict[str, Any]:
        return public_jwk(self.alg, self.private, **members)

    def jwk_text(self, **members: Any) -> str:
        return json.dumps(self.jwk(**members))


@functools.cache
def _shared_private(family: str) -> Any:
    return generate({"RSA": "RS256", "OKP": "EdDSA"}.get(family, family))


def signer(alg: str) -> Signer:
    """A signer for ``alg``, cached for the session.

    RS*/PS* share one RSA-2048 key and EdDSA/Ed25519 one Ed25519 key, as a
    real issuer might; every other algorithm has its own key.
    """
    if alg in RSA_ALGORITHMS:
        return Signer(alg, _shared_private("RSA"))
    if alg in EDDSA_ALGORITHMS:
        return Signer(alg, _shared_private("OKP"))
    return Signer(alg, _shared_private(alg))
