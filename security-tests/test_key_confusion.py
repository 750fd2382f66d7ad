"""Key confusion: one key, two algorithm families.

Attack class: the verifier holds a public key; the attacker signs an HS256
token using that public key's text as the HMAC secret and hopes the verifier
feeds its key to HMAC. Also: a JWK whose ``alg`` disagrees with the requested
one, an EC key on the wrong curve, RSA PKCS#1 v1.5 versus PSS.

References:
- RFC 8725 §2.1, §3.1 (algorithm verification), §3.2 (use appropriate
  algorithms);
- CVE-2015-9235 (jsonwebtoken: HS256 verified with an RSA public key),
  CVE-2016-10555 (jwt-simple, same class);
- CVE-2017-11424 (PyJWT: PKCS#1 ``RSA PUBLIC KEY`` PEM not recognised as a
  public key, usable as an HMAC secret);
- CVE-2022-29217 (PyJWT) and CVE-2024-33663 (python-jose): OpenSSH public
  keys usable as HMAC secrets;
- RFC 7517 §4.4 (JWK ``alg``), RFC 7518 §3.4 (ES256 is P-256 only), §3.3 and
  §3.5 (RS* and PS* are distinct algorithms).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import forge
import pytest
from support import accept, key_for, mint, payload, reject, verifier_for

from grelmicro.jwt import InvalidKeyError, JWTVerifier, Key

# (family, format) -> how to render the verifier's public key as text.
Render = Callable[[forge.KeyRing], bytes]


def _private(ring: forge.KeyRing, family: str) -> Any:
    return {
        "RSA": ring.rsa,
        "P-256": ring.p256,
        "P-384": ring.p384,
        "secp256k1": ring.k256,
        "Ed25519": ring.ed25519,
    }[family]


def _public(ring: forge.KeyRing, family: str) -> Any:
    return _private(ring, family).public_key()


ALG_OF = {"RSA": "RS256", "P-256": "ES256", "Ed25519": "EdDSA"}


def render(ring: forge.KeyRing, family: str, fmt: str) -> bytes:
    """The public key of ``family`` in the text form ``fmt``."""
    public = _public(ring, family)
    if fmt == "spki-pem":
        return forge.spki_pem(public)
    if fmt == "pkcs1-pem":
        return forge.pkcs1_pem(public)
    if fmt == "certificate":
        return forge.certificate_pem(_private(ring, family))
    if fmt == "jwk":
        return json.dumps(forge.jwk(public)).encode()
    if fmt == "jwk-pretty":
        return ("\n  " + json.dumps(forge.jwk(public), indent=2)).encode()
    if fmt == "openssh":
        return forge.openssh(public)
    if fmt == "pem-crlf":
        return forge.spki_pem(public).replace(b"\n", b"\r\n")
    if fmt == "pem-with-preamble":
        return b"Issuer public key:\n" + forge.spki_pem(public)
    raise AssertionError(fmt)


CASES = [
    ("RSA", "spki-pem"),
    ("RSA", "pkcs1-pem"),
    ("RSA", "certificate"),
    ("RSA", "jwk"),
    ("RSA", "jwk-pretty"),
    ("RSA", "openssh"),
    ("RSA", "pem-crlf"),
    ("RSA", "pem-with-preamble"),
    ("P-256", "spki-pem"),
    ("P-256", "certificate"),
    ("P-256", "jwk"),
    ("P-256", "openssh"),
    ("Ed25519", "spki-pem"),
    ("Ed25519", "certificate"),
    ("Ed25519", "jwk"),
    ("Ed25519", "openssh"),
]
IDS = [f"{family}-{fmt}" for family, fmt in CASES]


@pytest.mark.parametrize(("family", "fmt"), CASES, ids=IDS)
@pytest.mark.parametrize("hmac_alg", ["HS256", "HS512"])
def test_hmac_token_signed_with_the_public_key_text(
    ring: forge.KeyRing, family: str, fmt: str, hmac_alg: str
) -> None:
    # The classic attack: the verifier is configured correctly with its
    # public key; the attacker HMACs with the (public) key text.
    alg = ALG_OF[family]
    verifier = JWTVerifier(keys=[key_for(ring, alg)], cache_size=0)
    accept(verifier, mint(ring, alg, {"alg": alg}))
    secret = render(ring, family, fmt)
    token = forge.mint({"alg": hmac_alg, "typ": "JWT"}, payload(sub="admin"), secret, hmac_alg)
    reject(verifier, token, "algorithm")


@pytest.mark.parametrize(("family", "fmt"), CASES, ids=IDS)
def test_public_key_text_is_never_an_hmac_secret(
    ring: forge.KeyRing, family: str, fmt: str
) -> None:
    # The operator's mistake: the public key text configured as a shared secret.
    text = render(ring, family, fmt)
    for value in (text, text.decode("ascii")):
        with pytest.raises(InvalidKeyError) as caught:
            Key.secret(value, "HS256")
        assert caught.value.reason == "invalid-key"


def _jwks_text(ring: forge.KeyRing) -> bytes:
    return json.dumps({"keys": [forge.jwk(ring.rsa.public_key(), kid="r1", alg="RS256")]}).encode()


def _bare_spki_base64(ring: forge.KeyRing) -> bytes:
    # How several identity providers display a realm's public key: the PEM
    # body on one line, without the BEGIN/END lines.
    return base64.b64encode(forge.spki_der(ring.rsa.public_key()))


def _spki_der(ring: forge.KeyRing) -> bytes:
    return forge.spki_der(ring.rsa.public_key())


@pytest.mark.parametrize(
    "render_key",
    [_jwks_text, _bare_spki_base64, _spki_der],
    ids=["jwks-document", "bare-base64-spki", "der-spki"],
)
def test_other_public_key_forms_are_not_hmac_secrets(
    ring: forge.KeyRing, render_key: Callable[[forge.KeyRing], bytes]
) -> None:
    with pytest.raises(InvalidKeyError) as caught:
        Key.secret(render_key(ring), "HS256")
    assert caught.value.reason == "invalid-key"


def test_hmac_key_beside_a_public_key_never_uses_the_public_key(ring: forge.KeyRing) -> None:
    # Two kid-less keys: an RSA key and a genuine HMAC secret. An HS256 token
    # MACed with the RSA key's PEM is checked against the real secret.
    verifier = JWTVerifier(keys=[key_for(ring, "RS256"), key_for(ring, "HS256")], cache_size=0)
    accept(verifier, mint(ring, "HS256", {"alg": "HS256"}))
    pem = forge.spki_pem(ring.rsa.public_key())
    reject(verifier, forge.mint({"alg": "HS256"}, payload(), pem, "HS256"), "signature")


def test_kid_of_a_public_key_with_an_hmac_alg(ring: forge.KeyRing) -> None:
    verifier = JWTVerifier(keys=[key_for(ring, "RS256", "rsa-1")], cache_size=0)
    pem = forge.spki_pem(ring.rsa.public_key())
    token = forge.mint({"alg": "HS256", "kid": "rsa-1"}, payload(), pem, "HS256")
    reject(verifier, token, "algorithm")


JWK_MISMATCH = [
    ("RSA", {"alg": "RS256"}, "PS256"),
    ("RSA", {"alg": "PS256"}, "RS256"),
    ("RSA", {"alg": "RS256"}, "RS512"),
    ("RSA", {"alg": "HS256"}, None),
    ("RSA", {"alg": "ES256"}, None),
    ("RSA", {}, "HS256"),
    ("RSA", {}, "ES256"),
    ("P-256", {"alg": "ES384"}, None),
    ("P-256", {"alg": "ES256K"}, None),
    ("P-256", {"alg": "RS256"}, None),
    ("P-256", {"alg": "HS256"}, None),
    ("P-256", {}, "ES384"),
    ("P-256", {}, "EdDSA"),
    ("P-384", {"alg": "ES256"}, None),
    ("P-384", {}, "ES256"),
    ("secp256k1", {"alg": "ES256"}, None),
    ("Ed25519", {"alg": "ES256"}, None),
    ("Ed25519", {}, "RS256"),
]


@pytest.mark.parametrize(
    ("family", "extra", "requested"),
    JWK_MISMATCH,
    ids=[f"{f}-{e.get('alg', 'noalg')}-as-{r}" for f, e, r in JWK_MISMATCH],
)
def test_jwk_bound_to_another_algorithm(
    ring: forge.KeyRing, family: str, extra: dict[str, str], requested: str | None
) -> None:
    document = forge.jwk(_public(ring, family), **extra)
    with pytest.raises(InvalidKeyError) as caught:
        Key.jwk(document, requested)
    assert caught.value.reason == "invalid-key"


def test_jwk_with_kty_and_crv_disagreeing(ring: forge.KeyRing) -> None:
    # An Ed25519 public key labelled as an EC key (and the other way round).
    ed = forge.jwk(ring.ed25519.public_key())
    ec_doc = forge.jwk(ring.p256.public_key())
    for document in ({**ed, "kty": "EC"}, {**ec_doc, "kty": "OKP"}):
        with pytest.raises(InvalidKeyError) as caught:
            Key.jwk(document)
        assert caught.value.reason == "invalid-key"


def test_oct_jwk_with_a_public_key_algorithm(ring: forge.KeyRing) -> None:
    with pytest.raises(InvalidKeyError) as caught:
        Key.jwk(forge.oct_jwk(ring.hs256, "RS256"), allow_symmetric=True)
    assert caught.value.reason == "invalid-key"


PEM_MISMATCH = [
    ("P-384", "ES256"),
    ("P-256", "ES384"),
    ("P-256", "ES512"),
    ("secp256k1", "ES256"),
    ("P-256", "ES256K"),
    ("RSA", "ES256"),
    ("P-256", "RS256"),
    ("P-256", "PS256"),
    ("Ed25519", "ES256"),
    ("RSA", "EdDSA"),
    ("P-256", "EdDSA"),
    ("RSA", "HS256"),
    ("P-256", "HS256"),
]


@pytest.mark.parametrize(
    ("family", "alg"), PEM_MISMATCH, ids=[f"{f}-as-{a}" for f, a in PEM_MISMATCH]
)
def test_pem_key_on_the_wrong_curve_or_family(ring: forge.KeyRing, family: str, alg: str) -> None:
    with pytest.raises(InvalidKeyError) as caught:
        Key.pem(forge.spki_pem(_public(ring, family)), alg)
    assert caught.value.reason == "invalid-key"


def test_es384_token_for_an_es256_key(ring: forge.KeyRing) -> None:
    verifier = verifier_for(ring, "ES256")
    reject(verifier, mint(ring, "ES384", {"alg": "ES384"}), "algorithm")


def test_es256_header_signed_by_a_p384_key(ring: forge.KeyRing) -> None:
    # Header says ES256 (the key's algorithm), signature made on P-384.
    verifier = verifier_for(ring, "ES256")
    token = forge.mint({"alg": "ES256"}, payload(), ring.p384, "ES384")
    reject(verifier, token, "signature")


def test_es256k_token_for_an_es256_key(ring: forge.KeyRing) -> None:
    verifier = verifier_for(ring, "ES256")
    reject(verifier, mint(ring, "ES256K", {"alg": "ES256K"}), "algorithm")
    token = forge.mint({"alg": "ES256"}, payload(), ring.k256, "ES256K")
    reject(verifier, token, "signature")


@pytest.mark.parametrize(
    ("key_alg", "token_alg"),
    [("RS256", "PS256"), ("PS256", "RS256"), ("RS256", "RS384"), ("PS256", "PS512")],
)
def test_rsa_padding_and_hash_are_part_of_the_algorithm(
    ring: forge.KeyRing, key_alg: str, token_alg: str
) -> None:
    # Same RSA key pair: the token is validly signed under token_alg.
    verifier = verifier_for(ring, key_alg, kid="r")
    reject(verifier, mint(ring, token_alg, {"alg": token_alg, "kid": "r"}), "algorithm")


def test_pss_signature_under_an_rs256_label(ring: forge.KeyRing) -> None:
    verifier = verifier_for(ring, "RS256")
    token = forge.mint({"alg": "RS256"}, payload(), ring.rsa, "PS256")
    reject(verifier, token, "signature")


def test_jwks_key_alg_is_binding(ring: forge.KeyRing) -> None:
    document = {"keys": [forge.jwk(ring.rsa.public_key(), kid="r", alg="RS256", use="sig")]}
    verifier = JWTVerifier(jwks=document, cache_size=0)
    accept(verifier, mint(ring, "RS256", {"alg": "RS256", "kid": "r"}))
    reject(verifier, mint(ring, "PS256", {"alg": "PS256", "kid": "r"}), "algorithm")
    pem = forge.spki_pem(ring.rsa.public_key())
    reject(verifier, forge.mint({"alg": "HS256", "kid": "r"}, payload(), pem, "HS256"), "algorithm")


# -- issue 10: the forms a first pass missed -----------------------------------------
# Each of these, accepted as an HMAC secret, lets anyone holding the public key
# forge tokens. They are refused when the key is built.


def _jwk_text(ring: forge.KeyRing) -> str:
    return json.dumps(forge.jwk(ring.rsa.public_key()))


def _ssh_certificate(ring: forge.KeyRing) -> bytes:
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

    builder = getattr(serialization, "SSHCertificateBuilder", None)
    if builder is None:
        pytest.skip("this cryptography cannot build OpenSSH certificates")
    certificate = (
        builder()
        .public_key(ring.ed25519.public_key())
        .serial(7)
        .type(serialization.SSHCertificateType.USER)
        .key_id(b"deploy")
        .valid_principals([b"deploy"])
        .valid_after(0)
        .valid_before(2**32)
        .sign(ring.ed25519)
    )
    return certificate.public_bytes() + b" deploy@ci"


def _ec_point(ring: forge.KeyRing) -> bytes:
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

    return ring.p256.public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )


ISSUE10_FORMS: dict[str, Callable[[forge.KeyRing], bytes | str]] = {
    "jwk-after-utf8-bom-bytes": lambda r: b"\xef\xbb\xbf" + _jwk_text(r).encode(),
    "jwk-after-bom-str": lambda r: "\ufeff" + _jwk_text(r),
    "jwk-duplicate-member": lambda r: _jwk_text(r)[:-1] + ',"kty":"RSA"}',
    "jwk-escaped-member-name": lambda r: _jwk_text(r).replace('"kty"', '"k\\u0074y"'),
    "jwks-nested-12-deep": lambda r: "[" * 12 + '{"keys":[' + _jwk_text(r) + "]}" + "]" * 12,
    "jwk-python-repr": lambda r: repr(forge.jwk(r.rsa.public_key())),
    "hex-der-spki": lambda r: forge.spki_der(r.rsa.public_key()).hex(),
    "hex-der-spki-upper-colons": lambda r: ":".join(
        f"{b:02X}" for b in forge.spki_der(r.p256.public_key())
    ),
    "openssh-authorized-keys-with-options": lambda r: (
        b'from="10.0.0.0/8",no-pty ' + forge.openssh(r.rsa.public_key()) + b" ops@bastion"
    ),
    "openssh-known-hosts": lambda r: (
        b"git.example.com,10.0.0.1 " + forge.openssh(r.p256.public_key())
    ),
    "openssh-blob-alone": lambda r: forge.openssh(r.ed25519.public_key()).split()[1],
    "openssh-certificate": _ssh_certificate,
    "rfc4716-ssh2-block": lambda r: (
        b"---- BEGIN SSH2 PUBLIC KEY ----\n"
        + forge.openssh(r.rsa.public_key()).split()[1]
        + b"\n---- END SSH2 PUBLIC KEY ----\n"
    ),
    "raw-ec-point": _ec_point,
    "raw-ec-point-x-y": lambda r: _ec_point(r)[1:],
    "raw-ec-point-base64url": lambda r: forge.b64url(_ec_point(r)),
    "raw-ec-point-hex": lambda r: _ec_point(r).hex(),
}


@pytest.mark.parametrize("form", sorted(ISSUE10_FORMS))
def test_more_public_key_forms_are_not_hmac_secrets(ring: forge.KeyRing, form: str) -> None:
    value = ISSUE10_FORMS[form](ring)

    with pytest.raises(InvalidKeyError) as caught:
        Key.secret(value, "HS256")

    assert caught.value.reason == "invalid-key"
    assert "public key" in str(caught.value)
