"""Every algorithm round-trips from every key form the core reads.

Tokens are signed by ``cryptography`` (see ``forge.py``); the core only
verifies.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import forge
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from grelmicro_core import Key
from support import FRESH, NOW, rejection, verifier

ASYMMETRIC = forge.RSA_ALGORITHMS + forge.EC_ALGORITHMS + forge.EDDSA_ALGORITHMS


def _from_spki(alg: str) -> Key:
    return Key.pem(forge.spki_pem(forge.signer(alg).private), alg)


def _from_spki_text(alg: str) -> Key:
    return Key.pem(forge.spki_pem(forge.signer(alg).private).decode("ascii"), alg)


def _from_pkcs1(alg: str) -> Key:
    return Key.pem(forge.pkcs1_pem(forge.signer(alg).private), alg)


def _from_certificate(alg: str) -> Key:
    return Key.pem(forge.certificate_pem(forge.signer(alg).private), alg)


def _from_jwk(alg: str) -> Key:
    return Key.jwk(forge.signer(alg).jwk_text(), alg)


def _from_jwk_with_own_alg(alg: str) -> Key:
    return Key.jwk(forge.signer(alg).jwk_text(alg=alg))


def _from_secret(alg: str) -> Key:
    return Key.secret(forge.signer(alg).private, alg)


def _from_oct_jwk(alg: str) -> Key:
    return Key.jwk(forge.signer(alg).jwk_text(), allow_symmetric=True)


FORMS: dict[str, Callable[[str], Key]] = {
    "spki-pem": _from_spki,
    "spki-pem-text": _from_spki_text,
    "certificate-pem": _from_certificate,
    "jwk": _from_jwk,
    "jwk-own-alg": _from_jwk_with_own_alg,
}

CASES = (
    [(alg, form) for alg in ASYMMETRIC for form in FORMS]
    + [(alg, "pkcs1-pem") for alg in forge.RSA_ALGORITHMS]
    + [(alg, "secret") for alg in forge.HMAC_ALGORITHMS]
    + [(alg, "oct-jwk") for alg in forge.HMAC_ALGORITHMS]
)

BUILDERS: dict[str, Callable[[str], Key]] = {
    **FORMS,
    "pkcs1-pem": _from_pkcs1,
    "secret": _from_secret,
    "oct-jwk": _from_oct_jwk,
}

PAYLOAD: dict[str, Any] = {**FRESH, "scope": "read write", "n": 7}


def _flip_last_bit(token: str) -> str:
    head, _, sig = token.rpartition(".")
    raw = bytearray(base64.urlsafe_b64decode(sig + "=" * (-len(sig) % 4)))
    raw[-1] ^= 0x01
    return f"{head}.{forge.b64url(bytes(raw))}"


@pytest.mark.parametrize(("alg", "form"), CASES)
def test_round_trip(alg: str, form: str) -> None:
    key = BUILDERS[form](alg)
    check = verifier(key)
    token = forge.signer(alg).mint(PAYLOAD)

    claims = check.verify(token, NOW)

    assert claims == PAYLOAD
    assert key.algorithm == alg
    assert check.algorithms == (["EdDSA", "Ed25519"] if alg in forge.EDDSA_ALGORITHMS else [alg])


@pytest.mark.parametrize("alg", forge.ALGORITHMS)
def test_tampered_signature_is_refused(alg: str) -> None:
    check = verifier(BUILDERS["secret" if alg in forge.HMAC_ALGORITHMS else "spki-pem"](alg))
    token = forge.signer(alg).mint(PAYLOAD)

    assert rejection(check, token) == "ok"
    assert rejection(check, _flip_last_bit(token)) == "signature"


@pytest.mark.parametrize("alg", forge.ALGORITHMS)
def test_tampered_payload_is_refused(alg: str) -> None:
    check = verifier(BUILDERS["secret" if alg in forge.HMAC_ALGORITHMS else "spki-pem"](alg))
    header, _, sig = forge.signer(alg).mint(PAYLOAD).split(".")
    forged = f"{header}.{forge.segment({**PAYLOAD, 'sub': 'admin'})}.{sig}"

    assert rejection(check, forged) == "signature"


@pytest.mark.parametrize("alg", forge.EC_ALGORITHMS)
def test_ecdsa_der_signature_is_refused(alg: str) -> None:
    """JWS carries r||s (RFC 7518 §3.4); the DER form must not verify."""
    sig = forge.signer(alg)
    check = verifier(_from_spki(alg))
    signing_input = f"{forge.segment({'alg': alg})}.{forge.segment(PAYLOAD)}"
    digest = hashes.SHA256() if alg == "ES256K" else forge.sha(alg[-3:])
    der = sig.private.sign(signing_input.encode(), ec.ECDSA(digest))

    assert rejection(check, f"{signing_input}.{forge.b64url(der)}") == "signature"


@pytest.mark.parametrize(
    ("key_alg", "token_alg", "expected"),
    [
        # Same RSA material, other algorithm: a key serves one algorithm only.
        ("RS256", "RS384", "algorithm"),
        ("RS256", "PS256", "algorithm"),
        ("PS256", "RS256", "algorithm"),
        ("PS512", "PS256", "algorithm"),
        ("HS256", "HS512", "algorithm"),
        ("ES256", "ES256K", "algorithm"),
        # The two names of Ed25519 are one algorithm (RFC 9864).
        ("EdDSA", "Ed25519", "ok"),
        ("Ed25519", "EdDSA", "ok"),
    ],
)
def test_key_serves_only_its_algorithm(key_alg: str, token_alg: str, expected: str) -> None:
    check = verifier(
        BUILDERS["secret" if key_alg in forge.HMAC_ALGORITHMS else "spki-pem"](key_alg)
    )
    token = forge.signer(token_alg).mint(PAYLOAD)

    assert rejection(check, token) == expected


def test_public_key_used_as_hmac_secret_is_refused() -> None:
    """HS/RS confusion: HS256 signed with the RSA key's PEM as the secret."""
    pem = forge.spki_pem(forge.signer("RS256").private)
    check = verifier(Key.pem(pem, "RS256"))
    forged = forge.mint({"alg": "HS256"}, PAYLOAD, pem)

    assert rejection(check, forged) == "algorithm"


def test_key_properties() -> None:
    rsa_key = Key.pem(forge.spki_pem(forge.signer("PS384").private), "PS384", kid="r1")
    ec_key = _from_jwk("ES256K")
    ed_key = _from_certificate("Ed25519")
    hs_key = Key.secret(forge.signer("HS512").private, "HS512")

    assert (rsa_key.algorithm, rsa_key.kid, rsa_key.kty) == ("PS384", "r1", "RSA")
    assert (ec_key.algorithm, ec_key.kid, ec_key.kty) == ("ES256K", None, "EC")
    assert (ed_key.algorithm, ed_key.kty) == ("Ed25519", "OKP")
    assert (hs_key.algorithm, hs_key.kty) == ("HS512", "oct")
    # The same key material from SPKI, certificate and JWK has one fingerprint.
    fingerprints = {BUILDERS[form]("ES384").fingerprint for form in FORMS}
    assert len(fingerprints) == 1
    assert len(next(iter(fingerprints))) == 64


def test_jwk_kid_is_read() -> None:
    key = Key.jwk(json.dumps(forge.signer("ES256").jwk(kid="from-jwk")))

    assert key.kid == "from-jwk"
