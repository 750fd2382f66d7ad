"""The one token forge of the tests, the security suite and the benchmarks.

Compact JWS tokens are built here by hand against RFC 7515 (JWS) and RFC 7518
(JWA): headers and payloads serialised with :mod:`json`, encoded as unpadded
base64url and signed with the standard library (HMAC) or the ``cryptography``
primitives (RSA, ECDSA, EdDSA). Nothing is signed by ``grelmicro`` or by
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

import base64
import dataclasses
import datetime
import functools
import hashlib
import hmac
import json
from dataclasses import dataclass, field
from typing import Any

#: A fixed point in time every test measures against (2023-11-14T22:13:20Z).
NOW = 1_700_000_000

#: A secret nobody would type by accident: tests grep messages and logs for it.
SECRET = b"TOPSECRET-grelmicro-test-hmac-key-0123456789abcdef"

HMAC_ALGORITHMS = ("HS256", "HS384", "HS512")
RSA_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
EC_ALGORITHMS = ("ES256", "ES384", "ES512", "ES256K")
EDDSA_ALGORITHMS = ("EdDSA", "Ed25519")
#: Post-quantum (RFC 9964), opt-in: not in ALGORITHMS (``cryptography`` keys
#: of this module do not sign them; tests/jwt/test_mldsa.py does).
MLDSA_ALGORITHMS = ("ML-DSA-44", "ML-DSA-65", "ML-DSA-87")
#: Every JWS algorithm the verifier supports (design §3).
ALGORITHMS = HMAC_ALGORITHMS + RSA_ALGORITHMS + EC_ALGORITHMS + EDDSA_ALGORITHMS
#: One algorithm per asymmetric family.
ASYMMETRIC = ("RS256", "PS256", "ES256", "EdDSA")

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
_CRV_OF_CURVE_NAME = {curve.cryptography_name.lower(): curve.crv for curve in CURVES.values()}

_HMAC = {"HS256": hashlib.sha256, "HS384": hashlib.sha384, "HS512": hashlib.sha512}


# --- encoding ---------------------------------------------------------------


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


def _int_b64(value: int, size: int | None = None) -> str:
    length = size if size is not None else max(1, (value.bit_length() + 7) // 8)
    return b64url(value.to_bytes(length, "big"))


# --- signatures -------------------------------------------------------------


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
    if alg is None:
        alg = header["alg"]
    assert alg is not None
    message = signing_input(header, payload)
    signature = sign(alg, key, message.encode("ascii"), salt_length=salt_length)
    return message + "." + b64url(signature)


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


# --- keys -------------------------------------------------------------------


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


def ec_key_from_scalar(scalar: int, curve: Any) -> Any:
    """A deterministic EC private key (for fixed fuzz seeds)."""
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415

    return ec.derive_private_key(scalar, curve)


def public_of(key: Any) -> Any:
    """The public key of a private key; a public key is returned as it is."""
    return key.public_key() if hasattr(key, "public_key") else key


def _serialization() -> Any:
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

    return serialization


def _public_bytes(key: Any, encoding: str, public_format: str) -> bytes:
    ser = _serialization()
    return public_of(key).public_bytes(
        getattr(ser.Encoding, encoding), getattr(ser.PublicFormat, public_format)
    )


def spki_pem(key: Any) -> bytes:
    """SubjectPublicKeyInfo PEM (``-----BEGIN PUBLIC KEY-----``) of a private or public key."""
    return _public_bytes(key, "PEM", "SubjectPublicKeyInfo")


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
