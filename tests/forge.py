"""The one token forge of the tests, the security suite and the benchmarks.

Compact JWS tokens are built by hand against RFC 7515 (JWS) and RFC 7518
(JWA) with the primitives of ``scripts/jws.py`` (re-exported here): headers
and payloads serialised with :mod:`json`, encoded as unpadded base64url and
signed with the standard library (HMAC) or the ``cryptography`` primitives
(RSA, ECDSA, EdDSA). Nothing is signed by ``grelmicro`` or by
another JWT library, so a bug in the code under test cannot cancel itself out,
and a hostile token is expressible byte for byte (wrong ``alg``, bad base64,
DER signatures, duplicate members, invalid UTF-8...).

This module imports no product code, and ``cryptography`` only when an
asymmetric key is used: the free-threaded 3.13t interpreter has no
``cryptography``, and its child script mints HMAC tokens with this module too.
It is imported as ``import forge`` from ``tests/`` (on ``sys.path`` under
pytest), from ``security-tests/`` (its conftest appends ``tests/`` to
``sys.path``) and from ``bench/`` (``bench/fixtures.py`` does the same).

One argument order everywhere: :func:`mint` takes ``header, payload, key``
(and ``alg`` when the signature maths differ from the header's claim);
:class:`Signer` binds a key to its algorithm (and ``kid``, ``typ``) and mints
``payload`` with a header it derives.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import hashlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The minting primitives live with the build tooling that also needs them
# (scripts/jws.py, the PGO trainer's workload); tests import from there, never
# the other way round.
_SCRIPTS = str(Path(__file__).resolve().parents[1] / "scripts")
if _SCRIPTS not in sys.path:
    sys.path.append(_SCRIPTS)

import jws  # noqa: E402  (scripts/, appended just above)

# Re-exported: every caller keeps writing ``forge.mint``, ``forge.CURVES``...
ALGORITHMS = jws.ALGORITHMS
CURVES = jws.CURVES
EC_ALGORITHMS = jws.EC_ALGORITHMS
EC_ORDER = jws.EC_ORDER
EC_SIZE = jws.EC_SIZE
ED25519_L = jws.ED25519_L
EDDSA_ALGORITHMS = jws.EDDSA_ALGORITHMS
HMAC_ALGORITHMS = jws.HMAC_ALGORITHMS
P256_N = jws.P256_N
P384_N = jws.P384_N
P521_N = jws.P521_N
RSA_ALGORITHMS = jws.RSA_ALGORITHMS
SECP256K1_N = jws.SECP256K1_N
Curve = jws.Curve
b64url = jws.b64url
ecdsa_raw = jws.ecdsa_raw
flip_bit = jws.flip_bit
generate = jws.generate
json_bytes = jws.json_bytes
mint = jws.mint
public_of = jws.public_of
segment = jws.segment
sha = jws.sha
sign = jws.sign
signature_of = jws.signature_of
signing_input = jws.signing_input
spki_pem = jws.spki_pem
tamper = jws.tamper
unb64url = jws.unb64url
with_signature = jws.with_signature
_public_bytes = jws.public_bytes
_serialization = jws.serialization

#: A fixed point in time every test measures against (2023-11-14T22:13:20Z).
NOW = 1_700_000_000

#: A secret nobody would type by accident: tests grep messages and logs for it.
SECRET = b"TOPSECRET-grelmicro-test-hmac-key-0123456789abcdef"

#: Post-quantum (RFC 9964), opt-in: not in ALGORITHMS (``cryptography`` keys
#: of this module do not sign them; tests/jwt/test_mldsa.py does).
MLDSA_ALGORITHMS = ("ML-DSA-44", "ML-DSA-65", "ML-DSA-87")
#: One algorithm per asymmetric family.
ASYMMETRIC = ("RS256", "PS256", "ES256", "EdDSA")

_CRV_OF_CURVE_NAME = {curve.cryptography_name.lower(): curve.crv for curve in CURVES.values()}

# --- encoding ---------------------------------------------------------------


def canonical(segment: str) -> bool:
    """Whether ``segment`` is the one canonical base64url text of its bytes."""
    if len(segment) % 4 == 1 or not segment.isascii():
        return False
    try:
        return b64url(unb64url(segment)) == segment
    except ValueError:
        return False


def _int_b64(value: int, size: int | None = None) -> str:
    length = size if size is not None else max(1, (value.bit_length() + 7) // 8)
    return b64url(value.to_bytes(length, "big"))


# --- signatures -------------------------------------------------------------


def ecdsa_der(raw: bytes) -> bytes:
    """JWS r‖s -> DER (the wrong encoding for JWS)."""
    from cryptography.hazmat.primitives.asymmetric.utils import (  # noqa: PLC0415
        encode_dss_signature,
    )

    half = len(raw) // 2
    return encode_dss_signature(
        int.from_bytes(raw[:half], "big"), int.from_bytes(raw[half:], "big")
    )


def rs(r: int, s: int, size: int) -> bytes:
    """An r‖s ECDSA signature from two integers (each truncated to ``size`` bytes)."""
    mask = (1 << (8 * size)) - 1
    return (r & mask).to_bytes(size, "big") + (s & mask).to_bytes(size, "big")


def signed(text: str, key: Any, alg: str) -> str:
    """``text`` (``header.payload`` as written, canonical or not) with its signature appended."""
    return f"{text}.{b64url(sign(alg, key, text.encode('ascii')))}"


def unsigned(header: Any, payload: Any, signature: bytes | str = b"") -> str:
    """A token whose signature segment is given verbatim (``bytes`` are encoded)."""
    tail = signature if isinstance(signature, str) else b64url(signature)
    return signing_input(header, payload) + "." + tail


def parts(token: str) -> list[str]:
    """The dot-separated segments of ``token``."""
    return token.split(".")


# --- keys -------------------------------------------------------------------


def ec_key_from_scalar(scalar: int, curve: Any) -> Any:
    """A deterministic EC private key (for fixed fuzz seeds)."""
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415

    return ec.derive_private_key(scalar, curve)


def spki_der(key: Any) -> bytes:
    """SubjectPublicKeyInfo DER of a private or public key."""
    return _public_bytes(key, "DER", "SubjectPublicKeyInfo")


def pkcs1_pem(key: Any) -> bytes:
    """PKCS#1 PEM (``-----BEGIN RSA PUBLIC KEY-----``) of an RSA key."""
    return _public_bytes(key, "PEM", "PKCS1")


def openssh(key: Any) -> bytes:
    """OpenSSH ``authorized_keys`` text (``ssh-rsa AAAA...``)."""
    return _public_bytes(key, "OpenSSH", "OpenSSH")


def private_pem(private: Any, *, traditional: bool = False) -> bytes:
    """Unencrypted private key PEM (PKCS#8, or the traditional per-type format)."""
    ser = _serialization()
    fmt = ser.PrivateFormat.TraditionalOpenSSL if traditional else ser.PrivateFormat.PKCS8
    return private.private_bytes(ser.Encoding.PEM, fmt, ser.NoEncryption())


def certificate_builder(
    subject: str,
    public_key: Any,
    *,
    not_before: datetime.datetime,
    not_after: datetime.datetime,
    issuer: str | None = None,
) -> Any:
    """An X.509 certificate builder for ``public_key``, named by common names.

    ``issuer`` defaults to ``subject`` (self-signed); add extensions, then sign.
    """
    from cryptography import x509  # noqa: PLC0415
    from cryptography.x509.oid import NameOID  # noqa: PLC0415

    def name(common_name: str) -> Any:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])

    return (
        x509.CertificateBuilder()
        .subject_name(name(subject))
        .issuer_name(name(issuer or subject))
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
    )


def certificate_pem(private: Any, common_name: str = "grelmicro test") -> bytes:
    """A self-signed X.509 certificate for ``private``'s public key."""
    from cryptography.hazmat.primitives import hashes  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import ed25519  # noqa: PLC0415

    start = datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc)
    builder = certificate_builder(
        common_name,
        private.public_key(),
        not_before=start,
        not_after=start + datetime.timedelta(days=3650),
    )
    digest = None if isinstance(private, ed25519.Ed25519PrivateKey) else hashes.SHA256()
    return builder.sign(private, digest).public_bytes(_serialization().Encoding.PEM)


def jwk(key: Any, **extra: Any) -> dict[str, Any]:
    """The public JWK (RFC 7517, RFC 7518 §6, RFC 8037) of a key, plus ``extra`` members.

    ``key`` is a ``cryptography`` private or public key, or ``bytes`` (an
    ``oct`` JWK carrying the secret as ``k``).
    """
    if isinstance(key, bytes):
        out: dict[str, Any] = {"kty": "oct", "k": b64url(key)}
        out.update(extra)
        return out
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa  # noqa: PLC0415

    public = public_of(key)
    if isinstance(public, rsa.RSAPublicKey):
        numbers = public.public_numbers()
        out = {"kty": "RSA", "n": _int_b64(numbers.n), "e": _int_b64(numbers.e)}
    elif isinstance(public, ec.EllipticCurvePublicKey):
        size = (public.curve.key_size + 7) // 8
        point = public.public_numbers()
        out = {
            "kty": "EC",
            "crv": _CRV_OF_CURVE_NAME.get(public.curve.name, public.curve.name),
            "x": _int_b64(point.x, size),
            "y": _int_b64(point.y, size),
        }
    elif isinstance(public, ed25519.Ed25519PublicKey):
        ser = _serialization()
        raw = public.public_bytes(ser.Encoding.Raw, ser.PublicFormat.Raw)
        out = {"kty": "OKP", "crv": "Ed25519", "x": b64url(raw)}
    else:
        raise TypeError(f"no JWK form for {type(public).__name__}")
    out.update(extra)
    return out


def oct_jwk(secret: bytes, alg: str = "HS256", **extra: Any) -> dict[str, Any]:
    """A symmetric JWK with its ``alg``."""
    return jwk(secret, alg=alg, **extra)


def private_jwk(private: Any, **extra: Any) -> dict[str, Any]:
    """A JWK that also carries the private members (must never be accepted)."""
    from cryptography.hazmat.primitives.asymmetric import ec, rsa  # noqa: PLC0415

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
            out[name] = _int_b64(value)
    elif isinstance(private, ec.EllipticCurvePrivateKey):
        size = (private.curve.key_size + 7) // 8
        out["d"] = _int_b64(private.private_numbers().private_value, size)
    else:
        ser = _serialization()
        raw = private.private_bytes(ser.Encoding.Raw, ser.PrivateFormat.Raw, ser.NoEncryption())
        out["d"] = b64url(raw)
    return out


#: Members of a JWK that its RFC 7638 thumbprint covers.
_THUMBPRINT_MEMBERS = {
    "RSA": ("e", "kty", "n"),
    "EC": ("crv", "kty", "x", "y"),
    "OKP": ("crv", "kty", "x"),
}


def thumbprint(public_jwk: dict[str, Any]) -> str:
    """RFC 7638 §3, written out: required members, sorted, no whitespace, SHA-256."""
    members = {name: public_jwk[name] for name in _THUMBPRINT_MEMBERS[public_jwk["kty"]]}
    text = json.dumps(members, sort_keys=True, separators=(",", ":"))
    return b64url(hashlib.sha256(text.encode()).digest())


def ath(access_token: str) -> str:
    """DPoP ``ath`` (RFC 9449 §4.2): base64url of the SHA-256 of the access token."""
    return b64url(hashlib.sha256(access_token.encode("ascii")).digest())


# --- signers ----------------------------------------------------------------


@dataclass(frozen=True)
class Signer:
    """A private key (or HMAC secret) bound to the algorithm it signs under.

    Tokens get the header ``{"alg", "typ", "kid"}`` (``typ`` and ``kid``
    left out when ``None``: the core tests' bare ``{"alg"}`` by default).
    """

    alg: str
    private: Any = field(repr=False)
    kid: str | None = None
    typ: str | None = None

    def sign(self, data: bytes) -> bytes:
        """The JWS signature of ``data`` for :attr:`alg`."""
        return sign(self.alg, self.private, data)

    def mint(self, payload: Any, /, *, header: Any = None, **members: Any) -> str:
        """A compact JWS over ``payload`` (a dict, JSON text or raw bytes).

        ``header`` replaces the whole header (a dict, JSON text or raw bytes);
        otherwise it is derived and ``members`` add or override members (a
        member set to ``None`` is left out; an ``alg`` member overrides the
        header's alg, not the signing one).
        """
        if header is None:
            header = {"alg": self.alg, "typ": self.typ, "kid": self.kid, **members}
            header = {name: value for name, value in header.items() if value is not None}
        return mint(header, payload, self.private, self.alg)

    def with_kid(self, kid: str | None) -> Signer:
        """The same key and algorithm under another ``kid`` (``None``: none)."""
        return dataclasses.replace(self, kid=kid)

    def jwk(self, **members: Any) -> dict[str, Any]:
        """The bare public JWK (``oct`` JWKs carry the secret as ``k`` and the ``alg``)."""
        if isinstance(self.private, bytes):
            return jwk(self.private, **{"alg": self.alg, **members})
        return jwk(self.private, **members)

    def jwk_text(self, **members: Any) -> str:
        """:meth:`jwk` as JSON text."""
        return json.dumps(self.jwk(**members))

    def public_jwk(self) -> dict[str, Any]:
        """The JWK as a JWKS publishes it: with ``alg``, ``use`` and ``kid``."""
        published = {"alg": self.alg, "use": "sig", "kid": self.kid}
        return self.jwk(**{name: value for name, value in published.items() if value is not None})

    def public_pem(self) -> bytes:
        """The public key as SPKI PEM (asymmetric keys only)."""
        return spki_pem(self.private)


@functools.cache
def _private(family: str, seed: int) -> Any:
    """One private key per (algorithm family, seed), generated once per session."""
    del seed
    return generate(family)


def _family(alg: str) -> str:
    if alg in RSA_ALGORITHMS:
        return "RS256"
    if alg in EDDSA_ALGORITHMS:
        return "EdDSA"
    return alg


def signer(alg: str) -> Signer:
    """The session's signer for ``alg``, with the bare header ``{"alg"}`` (core tests).

    RS*/PS* share one RSA-2048 key and EdDSA/Ed25519 one Ed25519 key, as a
    real issuer might; every other algorithm has its own key (HMAC: the
    secret of :func:`generate`).
    """
    return Signer(alg, _private(_family(alg), 0))


def hmac_key(alg: str = "HS256", *, secret: bytes = SECRET, kid: str | None = None) -> Signer:
    """An HMAC signer (header ``typ`` ``JWT``); the default secret is :data:`SECRET`."""
    return Signer(alg, secret, kid, "JWT")


def private_key(alg: str, *, kid: str | None = None, seed: int = 0) -> Signer:
    """A signer for ``alg`` (header ``{"alg", "typ": "JWT", "kid"}``); same seed, same key.

    HMAC secrets are :data:`SECRET` for seed 0. Asymmetric keys need
    ``cryptography``; without it the calling test is skipped.
    """
    if alg in HMAC_ALGORITHMS:
        secret = SECRET if seed == 0 else hashlib.sha512(b"seed%d" % seed).digest()
        return hmac_key(alg, secret=secret, kid=kid)
    import pytest  # noqa: PLC0415

    pytest.importorskip("cryptography", reason="asymmetric test keys need cryptography")
    if alg not in ALGORITHMS:
        raise ValueError(f"no key for {alg}")
    return Signer(alg, _private(_family(alg), seed), kid, "JWT")


@dataclass
class KeyRing:
    """Fresh keys of every kind (the security suite's); ``other_*`` are an attacker's."""

    hs256: bytes = b"security-suite-hs256-secret-0001"
    hs384: bytes = b"security-suite-hs384-secret-00000000000000000001"
    hs512: bytes = b"security-suite-hs512-secret-0000000000000000000000000000000000001"
    rsa: Any = field(default_factory=functools.partial(generate, "RS256"))
    p256: Any = field(default_factory=functools.partial(generate, "ES256"))
    p384: Any = field(default_factory=functools.partial(generate, "ES384"))
    p521: Any = field(default_factory=functools.partial(generate, "ES512"))
    k256: Any = field(default_factory=functools.partial(generate, "ES256K"))
    ed25519: Any = field(default_factory=functools.partial(generate, "EdDSA"))
    other_rsa: Any = field(default_factory=functools.partial(generate, "RS256"))
    other_p256: Any = field(default_factory=functools.partial(generate, "ES256"))

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
        if alg in RSA_ALGORITHMS:
            return self.rsa
        raise ValueError(alg)

    def public(self, alg: str) -> Any:
        """The public counterpart of :meth:`private` (the secret for HS*)."""
        return public_of(self.private(alg))


def token_of_size(key: Signer, size: int, claims: dict[str, Any]) -> str:
    """A valid token of exactly ``size`` bytes, padded in a header member and a claim."""
    for header_pad in range(4):
        for claim_pad in range(size):
            token = key.mint({**claims, "pad": "p" * claim_pad}, hp="h" * header_pad)
            if len(token) == size:
                return token
            if len(token) > size:
                break
    raise ValueError(f"cannot mint a token of exactly {size} bytes")


def nested_array(depth: int) -> object:
    """A JSON value ``depth`` arrays deep: ``[[["x"]]]`` for 3."""
    value: object = "x"
    for _ in range(depth):
        value = [value]
    return value
