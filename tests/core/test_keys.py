"""Build-time refusals (design §3): a bad key never reaches verification.

Each row builds a key (or key set, or verifier) and names the error kind
the core must raise, or ``"ok"`` for the control cases next to a boundary.
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Callable
from typing import Any

import forge
import grelmicro_core
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from grelmicro_core import Key, KeySet, Policy, Verifier
from support import key_for, kind_of


@functools.cache
def rsa_key(bits: int, exponent: int = 65537) -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=exponent, key_size=bits)


def _secret(length: int, alg: str) -> Callable[[], Key]:
    return lambda: Key.secret(b"k" * length, alg)


SHORT_SECRETS = [
    pytest.param(_secret(31, "HS256"), "weak-key", id="HS256-31-bytes"),
    pytest.param(_secret(32, "HS256"), "ok", id="HS256-32-bytes"),
    pytest.param(_secret(47, "HS384"), "weak-key", id="HS384-47-bytes"),
    pytest.param(_secret(48, "HS384"), "ok", id="HS384-48-bytes"),
    pytest.param(_secret(63, "HS512"), "weak-key", id="HS512-63-bytes"),
    pytest.param(_secret(64, "HS512"), "ok", id="HS512-64-bytes"),
    pytest.param(_secret(0, "HS256"), "weak-key", id="HS256-empty"),
    pytest.param(lambda: Key.secret("a" * 31, "HS256"), "weak-key", id="str-31-chars"),
    # A str secret is measured in UTF-8 bytes: 16 x "é" is 32 bytes.
    pytest.param(lambda: Key.secret("é" * 16, "HS256"), "ok", id="str-32-utf8-bytes"),
]


def _rsa_pem(
    bits: int, exponent: int, export: Callable[[Any], bytes], alg: str = "RS256"
) -> Callable[[], Key]:
    return lambda: Key.pem(export(rsa_key(bits, exponent)), alg)


def _rsa_jwk(bits: int, exponent: int) -> Callable[[], Key]:
    return lambda: Key.jwk(json.dumps(forge.jwk(rsa_key(bits, exponent))))


RSA_SIZES = [
    pytest.param(_rsa_pem(1024, 65537, forge.spki_pem), "weak-key", id="1024-spki"),
    pytest.param(_rsa_pem(1024, 65537, forge.pkcs1_pem), "weak-key", id="1024-pkcs1"),
    pytest.param(_rsa_pem(1024, 65537, forge.certificate_pem), "weak-key", id="1024-certificate"),
    pytest.param(_rsa_jwk(1024, 65537), "weak-key", id="1024-jwk"),
    pytest.param(_rsa_pem(2047, 65537, forge.spki_pem), "weak-key", id="2047-spki"),
    pytest.param(_rsa_pem(2047, 65537, forge.spki_pem, "PS256"), "weak-key", id="2047-spki-PS256"),
    pytest.param(_rsa_jwk(2047, 65537), "weak-key", id="2047-jwk"),
    pytest.param(_rsa_pem(2048, 3, forge.spki_pem), "weak-key", id="e3-spki"),
    pytest.param(_rsa_pem(2048, 3, forge.pkcs1_pem), "weak-key", id="e3-pkcs1"),
    pytest.param(_rsa_jwk(2048, 3), "weak-key", id="e3-jwk"),
    pytest.param(_rsa_pem(2048, 65537, forge.spki_pem), "ok", id="2048-spki"),
    pytest.param(_rsa_jwk(2048, 65537), "ok", id="2048-jwk"),
]


@pytest.mark.parametrize(("build", "expected"), SHORT_SECRETS + RSA_SIZES)
def test_weak_keys(build: Callable[[], Key], expected: str) -> None:
    assert kind_of(build) == expected


def _off_curve_jwk(alg: str) -> str:
    jwk = forge.signer(alg).jwk()
    y = bytearray(base64.urlsafe_b64decode(jwk["y"] + "=="))
    y[-1] ^= 0x01
    jwk["y"] = forge.b64url(bytes(y))
    return json.dumps(jwk)


def _off_curve_pem(alg: str) -> bytes:
    der = bytearray(forge.spki_der(forge.signer(alg).private))
    der[-1] ^= 0x01  # last byte of the point's y coordinate
    body = base64.encodebytes(bytes(der)).decode("ascii")
    return f"-----BEGIN PUBLIC KEY-----\n{body}-----END PUBLIC KEY-----\n".encode("ascii")


@pytest.mark.parametrize("alg", forge.EC_ALGORITHMS)
def test_ec_point_off_curve_is_refused(alg: str) -> None:
    assert kind_of(Key.jwk, _off_curve_jwk(alg)) == "invalid-key"
    assert kind_of(Key.pem, _off_curve_pem(alg), alg) == "invalid-key"
    # Control: the untouched key builds.
    assert kind_of(Key.pem, forge.spki_pem(forge.signer(alg).private), alg) == "ok"


PRIVATE_PEMS = [
    pytest.param(lambda: forge.private_pem(forge.signer("RS256").private), "RS256", id="rsa-pkcs8"),
    pytest.param(
        lambda: forge.private_pem(forge.signer("RS256").private, traditional=True),
        "RS256",
        id="rsa-traditional",
    ),
    pytest.param(lambda: forge.private_pem(forge.signer("ES256").private), "ES256", id="ec-pkcs8"),
    pytest.param(
        lambda: forge.private_pem(forge.signer("ES384").private, traditional=True),
        "ES384",
        id="ec-traditional",
    ),
    pytest.param(
        lambda: forge.private_pem(forge.signer("EdDSA").private), "EdDSA", id="ed25519-pkcs8"
    ),
]


@pytest.mark.parametrize(("pem", "alg"), PRIVATE_PEMS)
def test_private_key_pem_is_refused(pem: Callable[[], bytes], alg: str) -> None:
    assert kind_of(Key.pem, pem(), alg) == "invalid-key"


@pytest.mark.parametrize("alg", ["RS256", "PS512", "ES256", "ES512", "ES256K", "EdDSA"])
def test_jwk_with_private_members_is_refused(alg: str) -> None:
    jwk = forge.private_jwk(forge.signer(alg).private)

    assert "d" in jwk
    assert kind_of(Key.jwk, json.dumps(jwk), alg) == "invalid-key"
    assert kind_of(Key.jwk, json.dumps(forge.signer(alg).jwk()), alg) == "ok"


def _jwk(alg: str, /, **members: Any) -> Callable[[], Key]:
    return lambda: Key.jwk(forge.signer(alg).jwk_text(**members), alg)


JWK_RULES = [
    pytest.param(_jwk("ES256", use="enc"), "invalid-key", id="use-enc"),
    pytest.param(_jwk("RS256", use="ENC"), "invalid-key", id="use-ENC"),
    pytest.param(_jwk("ES256", use="sig"), "ok", id="use-sig"),
    pytest.param(_jwk("ES256", key_ops=["sign"]), "invalid-key", id="key_ops-sign"),
    pytest.param(
        _jwk("ES256", key_ops=["encrypt", "decrypt"]), "invalid-key", id="key_ops-encrypt"
    ),
    pytest.param(_jwk("ES256", key_ops=[]), "invalid-key", id="key_ops-empty"),
    pytest.param(_jwk("ES256", key_ops="verify"), "invalid-key", id="key_ops-not-array"),
    pytest.param(_jwk("ES256", key_ops=["verify"]), "ok", id="key_ops-verify"),
    pytest.param(_jwk("EdDSA", key_ops=["sign", "verify"]), "ok", id="key_ops-sign-verify"),
    pytest.param(_jwk("RS256", alg="PS256"), "invalid-key", id="jwk-alg-differs"),
    pytest.param(_jwk("RS256", alg="none"), "invalid-key", id="jwk-alg-none"),
    pytest.param(_jwk("RS256", kid=""), "invalid-key", id="empty-kid"),
    pytest.param(_jwk("RS256", kid=7), "invalid-key", id="kid-not-string"),
    pytest.param(lambda: Key.jwk("{not json"), "invalid-key", id="not-json"),
    pytest.param(lambda: Key.jwk("[]"), "invalid-key", id="not-object"),
    pytest.param(lambda: Key.jwk('{"kty":"XYZ"}'), "invalid-key", id="unknown-kty"),
    pytest.param(
        lambda: Key.jwk('{"kty":"OKP","crv":"X25519","x":"AA"}'), "invalid-key", id="x25519"
    ),
]


@pytest.mark.parametrize(("build", "expected"), JWK_RULES)
def test_jwk_rules(build: Callable[[], Key], expected: str) -> None:
    assert kind_of(build) == expected


OCT = forge.oct_jwk(b"s" * 32)


@pytest.mark.parametrize(
    ("jwk", "allow", "expected"),
    [
        (OCT, False, "invalid-key"),
        (OCT, True, "ok"),
        ({**OCT, "alg": "HS512"}, True, "weak-key"),
        # No alg: bound to the HMAC family (HS256 unless algorithms= choose).
        ({k: v for k, v in OCT.items() if k != "alg"}, True, "ok"),
        ({k: v for k, v in OCT.items() if k != "alg"}, False, "invalid-key"),
        ({**OCT, "alg": "RS256"}, True, "invalid-key"),
        ({**OCT, "k": "not base64!"}, True, "invalid-key"),
    ],
)
def test_oct_jwk_needs_opt_in(jwk: dict[str, Any], allow: bool, expected: str) -> None:
    assert kind_of(Key.jwk, json.dumps(jwk), allow_symmetric=allow) == expected


def _pem_as(key_alg: str, alg: str) -> Callable[[], Key]:
    return lambda: Key.pem(forge.spki_pem(forge.signer(key_alg).private), alg)


WRONG_TYPE = [
    pytest.param(_pem_as("RS256", "ES256"), id="rsa-as-ES256"),
    pytest.param(_pem_as("RS256", "EdDSA"), id="rsa-as-EdDSA"),
    pytest.param(_pem_as("ES256", "RS256"), id="ec-as-RS256"),
    pytest.param(_pem_as("ES256", "PS256"), id="ec-as-PS256"),
    pytest.param(_pem_as("ES256", "EdDSA"), id="ec-as-EdDSA"),
    pytest.param(_pem_as("EdDSA", "ES256"), id="ed25519-as-ES256"),
    pytest.param(_pem_as("EdDSA", "RS256"), id="ed25519-as-RS256"),
    pytest.param(_pem_as("RS256", "HS256"), id="pem-as-HS256"),
    # ES256 never with a P-384 key (and the other curves likewise).
    pytest.param(_pem_as("ES384", "ES256"), id="P-384-as-ES256"),
    pytest.param(_pem_as("ES256", "ES384"), id="P-256-as-ES384"),
    pytest.param(_pem_as("ES256", "ES256K"), id="P-256-as-ES256K"),
    pytest.param(_pem_as("ES256K", "ES256"), id="secp256k1-as-ES256"),
    pytest.param(_pem_as("ES512", "ES384"), id="P-521-as-ES384"),
    pytest.param(
        lambda: Key.jwk(forge.signer("ES384").jwk_text(), "ES256"), id="jwk-P-384-as-ES256"
    ),
    pytest.param(
        lambda: Key.jwk(forge.signer("ES384").jwk_text(alg="ES256")), id="jwk-P-384-alg-ES256"
    ),
    pytest.param(lambda: Key.jwk(forge.signer("RS256").jwk_text(), "ES256"), id="jwk-rsa-as-ES256"),
    pytest.param(lambda: Key.jwk(forge.signer("ES256").jwk_text(), "RS256"), id="jwk-ec-as-RS256"),
    pytest.param(
        lambda: Key.jwk(forge.signer("EdDSA").jwk_text(kty="EC"), "EdDSA"), id="jwk-okp-as-ec"
    ),
    pytest.param(lambda: Key.jwk(forge.signer("ES256").jwk_text(), "HS256"), id="jwk-ec-as-HS256"),
    # A secret only serves HMAC; a public key is never a secret.
    pytest.param(lambda: Key.secret(b"k" * 64, "RS256"), id="secret-as-RS256"),
    pytest.param(lambda: Key.secret(b"k" * 64, "ES256"), id="secret-as-ES256"),
    pytest.param(
        lambda: Key.secret(forge.spki_pem(forge.signer("RS256").private), "HS256"),
        id="pem-as-secret",
    ),
    pytest.param(
        lambda: Key.secret(forge.certificate_pem(forge.signer("ES256").private), "HS512"),
        id="cert-as-secret",
    ),
    pytest.param(lambda: Key.secret(forge.signer("RS256").jwk_text(), "HS256"), id="jwk-as-secret"),
    pytest.param(
        lambda: Key.secret(b"  " + forge.spki_pem(forge.signer("RS256").private), "HS256"),
        id="pem-after-spaces",
    ),
    pytest.param(lambda: Key.pem(b"not a pem at all", "RS256"), id="not-pem"),
    pytest.param(
        lambda: Key.pem(b"-----BEGIN FOO-----\nAAAA\n-----END FOO-----\n", "RS256"),
        id="unknown-pem-label",
    ),
    pytest.param(
        lambda: Key.pem(forge.spki_pem(forge.signer("RS256").private), "RS256", ""), id="empty-kid"
    ),
]


@pytest.mark.parametrize("build", WRONG_TYPE)
def test_wrong_key_type_for_algorithm(build: Callable[[], Key]) -> None:
    assert kind_of(build) == "invalid-key"


@pytest.mark.parametrize("name", ["none", "None", "HS1", "hs256", "RSA1_5", "ES521", "", "A256GCM"])
def test_unknown_algorithm_names(name: str) -> None:
    assert kind_of(Key.secret, b"k" * 64, name) == "invalid-config"
    assert kind_of(Key.pem, forge.spki_pem(forge.signer("RS256").private), name) == "invalid-config"
    assert kind_of(Key.jwk, forge.signer("RS256").jwk_text(), name) == "invalid-config"
    assert kind_of(Policy, algorithms=[name]) == "invalid-config"


def test_key_set_refusals() -> None:
    one = Key.secret(b"1" * 32, "HS256", "k")
    other = Key.secret(b"2" * 32, "HS256", "k")

    assert kind_of(KeySet, []) == "invalid-config"
    assert kind_of(KeySet, [one, other]) == "invalid-config"
    # The same key given twice is one key.
    assert len(KeySet([one, Key.secret(b"1" * 32, "HS256", "k")])) == 1


def test_verifier_needs_an_allowed_algorithm() -> None:
    keys = KeySet([key_for(forge.signer("HS256"))])

    assert kind_of(Verifier, keys, Policy(algorithms=["HS384"])) == "invalid-config"
    assert Verifier(keys, Policy(algorithms=["RS256", "HS256"])).algorithms == ["HS256"]


def _jwks(*keys: dict[str, Any]) -> str:
    return json.dumps({"keys": list(keys)})


def test_jwks_skips_unusable_keys_and_says_why() -> None:
    good = forge.signer("ES256").jwk(kid="good")
    document = _jwks(
        good,
        forge.signer("RS256").jwk(kid="enc", use="enc"),
        forge.private_jwk(forge.signer("ES384").private) | {"kid": "private"},
        forge.jwk(rsa_key(1024)) | {"kid": "small"},
        OCT | {"kid": "secret"},
        {"kty": "EC", "crv": "P-256", "kid": "broken", "x": "AA", "y": "AA"},
    )

    keys = KeySet.from_jwks(document)

    assert [key.kid for key in keys.keys] == ["good"]
    assert {kid: code for kid, code, _ in keys.skipped} == {
        "enc": "invalid-key",
        "private": "private-key",
        "small": "weak-key",
        "secret": "invalid-key",
        "broken": "invalid-key",
    }
    reasons = {kid: reason for kid, _, reason in keys.skipped}
    assert all(isinstance(reason, str) and reason for reason in reasons.values())
    assert "2048" in reasons["small"]
    # With the opt-in, the oct key is kept.
    assert "secret" in [key.kid for key in KeySet.from_jwks(document, allow_symmetric=True).keys]


def _skips_of(*entries: dict[str, Any]) -> list[tuple[str | None, str, str]]:
    """The skips of a JWKS (symmetric keys allowed) holding a good key and ``entries``."""
    good = forge.signer("ES256").jwk(kid="good")
    return KeySet.from_jwks(_jwks(good, *entries), allow_symmetric=True).skipped


def _exposed_secret_skips() -> list[tuple[str | None, str, str]]:
    """An HMAC secret that is the text of a public key's ``x``, beside that key."""
    public = forge.signer("EdDSA").jwk(kid="ed")
    secret = Key.secret(public["x"], "HS256", kid="x")
    return KeySet([Key.jwk(json.dumps(public)), secret]).skipped


#: One input per skip code, and the code it must be named with.
SKIPS: list[tuple[str, Callable[[], list[tuple[str | None, str, str]]]]] = [
    ("invalid-key", lambda: _skips_of({"kty": "EC", "crv": "P-256", "kid": "x", "x": "AA"})),
    ("invalid-key", lambda: _skips_of(forge.signer("RS256").jwk(kid="x", use="enc"))),
    ("weak-key", lambda: _skips_of(forge.jwk(rsa_key(1024)) | {"kid": "x"})),
    ("weak-key", lambda: _skips_of(forge.oct_jwk(b"s" * 8) | {"kid": "x"})),
    (
        "private-key",
        lambda: _skips_of(forge.private_jwk(forge.signer("ES384").private) | {"kid": "x"}),
    ),
    # Refused for its use too: the private member names the skip.
    (
        "private-key",
        lambda: _skips_of(
            forge.private_jwk(forge.signer("ES384").private) | {"kid": "x", "use": "enc"}
        ),
    ),
    (
        "kid-conflict",
        lambda: _skips_of(
            forge.oct_jwk(b"a" * 32) | {"kid": "x"}, forge.oct_jwk(b"b" * 32) | {"kid": "x"}
        ),
    ),
    ("exposed-secret", _exposed_secret_skips),
]


@pytest.mark.parametrize(("code", "build"), SKIPS)
def test_each_skip_code_is_produced_by_its_input(
    code: str, build: Callable[[], list[tuple[str | None, str, str]]]
) -> None:
    skipped = build()

    assert [(kid, got) for kid, got, _ in skipped] == [("x", code)]
    assert skipped[0][2]  # a reason for people beside the code


def test_every_skip_code_has_an_input() -> None:
    codes = grelmicro_core.skip_codes()

    assert sorted({code for code, _ in SKIPS}) == sorted(codes)
    assert len(set(codes)) == len(codes)
    assert all(code.replace("-", "").isalpha() and code.islower() for code in codes)


@pytest.mark.parametrize(
    ("document", "options"),
    [
        ("{}", {}),
        ('{"keys": {}}', {}),
        ('{"keys": []}', {}),
        ("not json", {}),
        (_jwks(OCT), {}),
        (_jwks(forge.signer("ES256").jwk(use="enc")), {}),
        (_jwks(*[forge.signer("ES256").jwk(kid=str(i)) for i in range(4)]), {"max_keys": 3}),
    ],
)
def test_jwks_without_a_usable_key_is_refused(document: str, options: dict[str, Any]) -> None:
    assert kind_of(KeySet.from_jwks, document, **options) == "invalid-key"


def test_jwks_key_cap_allows_the_limit() -> None:
    keys = [forge.signer("ES256").jwk(kid=str(i)) for i in range(3)]

    assert len(KeySet.from_jwks(_jwks(*keys), max_keys=3)) == 3


def test_ec_curve_object_is_checked_not_only_the_point_length() -> None:
    """A P-256 point labelled secp256k1 has the right length but the wrong curve."""
    jwk = forge.signer("ES256").jwk(crv="secp256k1")

    assert kind_of(Key.jwk, json.dumps(jwk)) == "invalid-key"
