"""Post-quantum tokens: ML-DSA-44/65/87 (RFC 9964) with ``AKP`` keys.

Tokens are minted by two implementations independent of the core's aws-lc:
``dilithium-py`` (pure Python FIPS 204) and ``cryptography`` (its OpenSSL
backend). Then the attack suite: signatures of the wrong size, the wrong
parameter set, key-type confusion both ways, ``AKP`` JWKs with private
members or without ``alg``, and ML-DSA never allowed unless named.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from forge import NOW, b64url, hmac_key, private_key, signing_input
from servers import DocumentServer
from support import FakeClock, timed

from grelmicro.jwt import (
    AlgorithmNotAllowedError,
    ConfigurationError,
    DPoPProofError,
    DPoPVerifier,
    InvalidKeyError,
    InvalidSignatureError,
    JWTVerifier,
    Key,
    UnknownKeyError,
    jwk_thumbprint,
)

dilithium = pytest.importorskip("dilithium_py.ml_dsa")

SETS = ("ML-DSA-44", "ML-DSA-65", "ML-DSA-87")
#: FIPS 204 Table 2: public key and signature bytes.
PUBLIC_BYTES = {"ML-DSA-44": 1312, "ML-DSA-65": 1952, "ML-DSA-87": 2592}
SIGNATURE_BYTES = {"ML-DSA-44": 2420, "ML-DSA-65": 3309, "ML-DSA-87": 4627}
#: id-ml-dsa-* (2.16.840.1.101.3.4.3.17-19), DER content bytes.
OID = {
    "ML-DSA-44": bytes.fromhex("608648016503040311"),
    "ML-DSA-65": bytes.fromhex("608648016503040312"),
    "ML-DSA-87": bytes.fromhex("608648016503040313"),
}
CLAIMS = {"sub": "pq-user", "exp": NOW + 60}


@dataclass(frozen=True)
class PQSigner:
    """An ML-DSA key from an implementation other than the core's."""

    alg: str
    public: bytes
    sign: Callable[[bytes], bytes]
    kid: str | None = None

    def jwk(self, **members: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"kty": "AKP", "alg": self.alg, "pub": b64url(self.public)}
        if self.kid is not None:
            out["kid"] = self.kid
        out.update(members)
        return {name: value for name, value in out.items() if value is not None}

    def mint(self, payload: Any = None, **header: Any) -> str:
        head = {"alg": self.alg, "typ": "JWT", **header}
        if self.kid is not None:
            head.setdefault("kid", self.kid)
        message = signing_input(head, CLAIMS if payload is None else payload)
        return f"{message}.{b64url(self.sign(message.encode('ascii')))}"

    def spki_pem(self) -> bytes:
        """SubjectPublicKeyInfo PEM, DER built here (RFC 9881: no parameters)."""

        def tlv(tag: int, body: bytes) -> bytes:
            size = len(body)
            length = bytes([size]) if size < 128 else b"\x82" + size.to_bytes(2, "big")
            return bytes([tag]) + length + body

        der = tlv(0x30, tlv(0x30, tlv(0x06, OID[self.alg])) + tlv(0x03, b"\x00" + self.public))
        text = base64.b64encode(der).decode()
        lines = "".join(text[i : i + 64] + "\n" for i in range(0, len(text), 64))
        return f"-----BEGIN PUBLIC KEY-----\n{lines}-----END PUBLIC KEY-----\n".encode()


def dilithium_signer(alg: str, kid: str | None = None) -> PQSigner:
    scheme = getattr(dilithium, alg.replace("-", "_"))
    public, secret = scheme.keygen()
    return PQSigner(alg, public, lambda data: scheme.sign(secret, data), kid)


def openssl_signer(alg: str, kid: str | None = None) -> PQSigner:
    from cryptography.exceptions import UnsupportedAlgorithm  # noqa: PLC0415

    mldsa = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.mldsa")
    try:
        private = getattr(mldsa, alg.replace("-", "") + "PrivateKey").generate()
    except UnsupportedAlgorithm:
        pytest.skip(f"this cryptography's backend cannot sign {alg}")
    return PQSigner(alg, private.public_key().public_bytes_raw(), private.sign, kid)


MINTERS = {"dilithium-py": dilithium_signer, "cryptography": openssl_signer}
_SIGNERS: dict[tuple[str, str, str | None], PQSigner] = {}


def pq(alg: str, minter: str = "dilithium-py", kid: str | None = None) -> PQSigner:
    """One key per (set, minter, kid) for the session: pure-Python keygen is slow."""
    index = (alg, minter, kid)
    if index not in _SIGNERS:
        _SIGNERS[index] = MINTERS[minter](alg, kid)
    return _SIGNERS[index]


def error_of(verifier: JWTVerifier, token: str) -> type[Exception]:
    with pytest.raises(Exception) as caught:
        verifier.verify(token, now=NOW)
    return caught.type


# -- tokens from independent implementations --------------------------------------------


@pytest.mark.parametrize("minter", sorted(MINTERS))
@pytest.mark.parametrize("alg", SETS)
def test_independent_tokens_verify(alg: str, minter: str) -> None:
    signer = pq(alg, minter)
    token = signer.mint()
    _, _, signature = token.split(".")
    assert (
        len(base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)))
        == (SIGNATURE_BYTES[alg])
    )
    assert len(signer.public) == PUBLIC_BYTES[alg]
    verifier = JWTVerifier([Key.jwk(signer.jwk())], algorithms=[alg])
    assert verifier.verify(token, now=NOW).subject == "pq-user"
    assert tuple(verifier.algorithms) == (alg,)
    key = Key.jwk(signer.jwk())
    assert (key.algorithm, key.kty) == (alg, "AKP")


@pytest.mark.parametrize("alg", SETS)
def test_every_key_source(alg: str, server: DocumentServer) -> None:
    signer = pq(alg, kid="pq-1")
    token = signer.mint()
    jwks = {"keys": [signer.jwk(use="sig")]}
    server.set("/jwks.json", jwks)
    verifiers = {
        "Key.jwk": JWTVerifier([Key.jwk(json.dumps(signer.jwk()))], algorithms=[alg]),
        "Key.pem": JWTVerifier([Key.pem(signer.spki_pem(), alg, kid="pq-1")], algorithms=[alg]),
        "jwks": JWTVerifier(jwks=jwks, algorithms=[alg]),
        "jwks_url": JWTVerifier(
            jwks_url=server.url("/jwks.json"),
            allow_insecure_loopback=True,
            algorithms=[alg],
            fetch=timed(None, FakeClock()),
            clock=FakeClock(),
        ),
    }
    for name, verifier in verifiers.items():
        assert verifier.verify(token, now=NOW).subject == "pq-user", name
        with pytest.raises(InvalidSignatureError):
            verifier.verify(token[:-8] + ("A" if token[-8] != "A" else "B") + token[-7:], now=NOW)
        verifier.close()


# -- allow-lists ----------------------------------------------------------------------------


def test_mldsa_is_never_allowed_unless_named() -> None:
    signer = pq("ML-DSA-44")
    with pytest.raises(ConfigurationError, match="ML-DSA"):
        JWTVerifier([Key.jwk(signer.jwk())])
    # Beside a classical key, the default allow-list is the classical one.
    classical = hmac_key()
    mixed = JWTVerifier([Key.jwk(signer.jwk(kid="pq")), Key.secret(classical.private, "HS256")])
    assert tuple(mixed.algorithms) == ("HS256",)
    assert error_of(mixed, signer.mint(kid="pq")) is AlgorithmNotAllowedError
    # A JWKS document: the same rule.
    jwks = {"keys": [signer.jwk(kid="pq"), {**hmac_key().jwk(), "kid": "h"}]}
    from_jwks = JWTVerifier(jwks=jwks, allow_symmetric=True)
    assert tuple(from_jwks.algorithms) == ("HS256",)
    assert error_of(from_jwks, signer.mint(kid="pq")) is AlgorithmNotAllowedError
    # Named, it is allowed.
    named = JWTVerifier(jwks=jwks, allow_symmetric=True, algorithms=["ML-DSA-44"])
    assert named.verify(signer.mint(kid="pq"), now=NOW).subject == "pq-user"


def test_dpop_default_allows_no_mldsa() -> None:
    assert not set(SETS) & set(DPoPVerifier().algorithms)
    assert tuple(DPoPVerifier(algorithms=["ML-DSA-65"]).algorithms) == ("ML-DSA-65",)


# -- the attack suite -----------------------------------------------------------------------


@pytest.mark.parametrize("alg", SETS)
def test_signatures_of_the_wrong_size_are_refused(alg: str) -> None:
    signer = pq(alg)
    verifier = JWTVerifier([Key.jwk(signer.jwk())], algorithms=[alg])
    head, body, signature = signer.mint().split(".")
    raw = base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4))
    for bad in (raw[:-1], raw[: len(raw) // 2], raw + b"\x00", raw + raw[:500], b"", raw[:64]):
        token = f"{head}.{body}.{b64url(bad)}" if bad else f"{head}.{body}.AA"
        assert error_of(verifier, token) is InvalidSignatureError, len(bad)
    # The length is measured before decoding: text that is not base64url
    # but has the wrong length is a signature refusal, not a malformed token.
    assert error_of(verifier, f"{head}.{body}.{'!' * (len(signature) + 3)}") is (
        InvalidSignatureError
    )


def test_another_parameter_set_is_refused() -> None:
    key44 = Key.jwk(pq("ML-DSA-44").jwk())
    verifier = JWTVerifier([key44], algorithms=list(SETS))
    # Only ML-DSA-44 is served: an ML-DSA-65 token's alg is refused.
    assert error_of(verifier, pq("ML-DSA-65").mint()) is AlgorithmNotAllowedError
    # Relabelled ML-DSA-44: the signature size gives it away.
    relabelled = pq("ML-DSA-65").mint(alg="ML-DSA-44")
    assert error_of(verifier, relabelled) is InvalidSignatureError
    # A key asked for under another set's name is refused when built.
    for other in ("ML-DSA-65", "ML-DSA-87"):
        with pytest.raises(InvalidKeyError):
            Key.jwk(pq("ML-DSA-44").jwk(), other)
        with pytest.raises(InvalidKeyError):
            Key.jwk(pq("ML-DSA-44").jwk(alg=other))
        with pytest.raises(InvalidKeyError):
            Key.pem(pq("ML-DSA-44").spki_pem(), other)


CLASSICAL = ("HS256", "RS256", "PS256", "ES256", "ES256K", "EdDSA", "Ed25519")


@pytest.mark.parametrize("classical", CLASSICAL)
def test_classical_tokens_against_an_akp_key(classical: str) -> None:
    """A token of every other family, allowed by name, finds no AKP key to verify it."""
    signer = private_key(classical) if classical != "HS256" else hmac_key()
    pq_key = Key.jwk(pq("ML-DSA-44").jwk())
    verifier = JWTVerifier([pq_key], algorithms=["ML-DSA-44", classical])
    assert error_of(verifier, signer.mint(CLAIMS)) in (UnknownKeyError, AlgorithmNotAllowedError)
    # Its alg rewritten to ML-DSA-44: the (short) signature is refused.
    forged = signer.mint(CLAIMS, alg="ML-DSA-44")
    assert error_of(verifier, forged) is InvalidSignatureError


@pytest.mark.parametrize("classical", CLASSICAL)
def test_mldsa_tokens_against_other_keys(classical: str) -> None:
    signer = private_key(classical) if classical != "HS256" else hmac_key()
    if classical == "HS256":
        key = Key.secret(signer.private, "HS256")
    else:
        key = Key.pem(signer.public_pem(), classical)
    verifier = JWTVerifier([key], algorithms=[classical, *SETS])
    assert tuple(verifier.algorithms) == (classical,)
    for alg in SETS:
        assert error_of(verifier, pq(alg).mint()) is AlgorithmNotAllowedError
    # Classical key material can never be loaded under an ML-DSA name.
    for alg in SETS:
        if classical == "HS256":
            with pytest.raises(InvalidKeyError):
                Key.secret(b"s" * 64, alg)
            with pytest.raises(InvalidKeyError):
                Key.jwk(signer.jwk(alg=alg), allow_symmetric=True)
            continue
        with pytest.raises(InvalidKeyError):
            Key.pem(signer.public_pem(), alg)
        with pytest.raises(InvalidKeyError):
            Key.jwk(signer.jwk(), alg)
        with pytest.raises(InvalidKeyError):
            Key.jwk(signer.jwk(alg=alg))


def test_akp_jwk_rules() -> None:
    signer = pq("ML-DSA-65")
    refused = {
        "private member": signer.jwk(priv=b64url(b"\x07" * 32)),
        "no alg": signer.jwk(alg=None),
        "classical alg": signer.jwk(alg="ES256"),
        "unknown alg": signer.jwk(alg="ML-DSA-66"),
        "no pub": signer.jwk(pub=None),
        "pub not base64url": signer.jwk(pub="a+b/"),
        "pub one byte short": signer.jwk(pub=b64url(signer.public[:-1])),
        "pub one byte long": signer.jwk(pub=b64url(signer.public + b"\x00")),
        "pub oversize": signer.jwk(pub=b64url(signer.public * 4)),
        "encryption key": signer.jwk(use="enc"),
    }
    for name, jwk in refused.items():
        with pytest.raises(InvalidKeyError) as caught:
            Key.jwk(jwk)
        assert signer.jwk()["pub"][:40] not in str(caught.value), name
    with pytest.raises(InvalidKeyError, match="private"):
        Key.jwk(refused["private member"])
    # In a JWKS document, a refused key is skipped, never used.
    jwks = {"keys": [refused["private member"], refused["no alg"]]}
    with pytest.raises(ConfigurationError):
        JWTVerifier(jwks=jwks, algorithms=["ML-DSA-65"])


@pytest.mark.parametrize("alg", SETS)
def test_spki_keys_of_the_wrong_size_are_refused(alg: str) -> None:
    signer = pq(alg)
    for public in (signer.public[:-1], signer.public + b"\x00", signer.public * 2, b"\x01" * 32):
        wrong = PQSigner(alg, public, signer.sign)
        with pytest.raises(InvalidKeyError, match=f"{PUBLIC_BYTES[alg]} bytes"):
            Key.pem(wrong.spki_pem(), alg)
    assert Key.pem(signer.spki_pem(), alg).kty == "AKP"


# -- DPoP ---------------------------------------------------------------------------------


def test_akp_thumbprint_is_alg_kty_pub() -> None:
    signer = pq("ML-DSA-44")
    canonical = json.dumps(
        {"alg": "ML-DSA-44", "kty": "AKP", "pub": signer.jwk()["pub"]}, separators=(",", ":")
    )
    expected = b64url(hashlib.sha256(canonical.encode()).digest())
    assert jwk_thumbprint(signer.jwk(kid="x", use="sig")) == expected
    with pytest.raises(InvalidKeyError):
        jwk_thumbprint(signer.jwk(alg=None))


@pytest.mark.parametrize("alg", SETS)
def test_an_mldsa_dpop_proof_verifies_when_named(alg: str) -> None:
    signer = pq(alg)
    access_token = "access-token"
    proof = signer.mint(
        {
            "jti": "p-1",
            "htm": "GET",
            "htu": "https://api.example.com/r",
            "iat": NOW,
            "ath": b64url(hashlib.sha256(access_token.encode()).digest()),
        },
        typ="dpop+jwt",
        jwk=signer.jwk(),
    )
    request = {
        "scheme": "DPoP",
        "access_token": access_token,
        "claims": {"cnf": {"jkt": jwk_thumbprint(signer.jwk())}},
        "proof": proof,
        "method": "GET",
        "uri": "https://api.example.com/r",
        "now": NOW,
    }
    # The proof carries its key: an ML-DSA-87 proof passes the default 8 KiB
    # (ML-DSA-65 ones come close, depending on the claims).
    DPoPVerifier(algorithms=[alg], max_proof_size=16384).check(**request)
    if alg == "ML-DSA-87":
        assert len(proof) > 8192
        with pytest.raises(DPoPProofError) as caught:
            DPoPVerifier(algorithms=[alg]).check(**request)
        assert caught.value.check == "structure"
    with pytest.raises(DPoPProofError) as caught:
        DPoPVerifier(max_proof_size=16384).check(**request)
    assert caught.value.check == "alg"


@pytest.mark.parametrize("alg", SETS)
def test_a_signature_with_a_context_string_is_refused(alg: str) -> None:
    """RFC 9964 signs with the empty context: one made under another context never verifies."""
    scheme = getattr(dilithium, alg.replace("-", "_"))
    public, secret = scheme.keygen()
    signer = PQSigner(alg, public, lambda data: scheme.sign(secret, data, ctx=b"jose"))
    plain = PQSigner(alg, public, lambda data: scheme.sign(secret, data))
    verifier = JWTVerifier([Key.jwk(signer.jwk())], algorithms=[alg])
    assert verifier.verify(plain.mint(), now=NOW).subject == "pq-user"
    assert error_of(verifier, signer.mint()) is InvalidSignatureError
