"""The core's ML-DSA (RFC 9964) keys with keys and tokens from ``cryptography`` (OpenSSL).

The SPKI PEM here is OpenSSL's own encoding (tests/jwt/test_mldsa.py builds
one by hand and uses a pure-Python signer); the core must read both forms of
one key as the same key, and never allow ML-DSA unless a policy names it.
"""

from __future__ import annotations

import json

import pytest
from forge import NOW, b64url, signing_input, spki_pem
from grelmicro_core import Key, KeySet
from support import FRESH, kind_of, rejection, verifier

mldsa = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.mldsa")

SETS = ("ML-DSA-44", "ML-DSA-65", "ML-DSA-87")


def generate(alg: str) -> object:
    from cryptography.exceptions import UnsupportedAlgorithm  # noqa: PLC0415

    try:
        return getattr(mldsa, alg.replace("-", "") + "PrivateKey").generate()
    except UnsupportedAlgorithm:
        pytest.skip(f"this cryptography's backend cannot sign {alg}")


def akp(alg: str, private: object, **members: object) -> str:
    raw = private.public_key().public_bytes_raw()
    return json.dumps({"kty": "AKP", "alg": alg, "pub": b64url(raw), **members})


def mint(alg: str, private: object, payload: object = FRESH) -> str:
    message = signing_input({"alg": alg}, payload)
    signature = private.sign(message.encode())
    return f"{message}.{b64url(signature)}"


@pytest.mark.parametrize("alg", SETS)
def test_spki_and_akp_forms_are_one_key(alg: str) -> None:
    private = generate(alg)
    from_pem = Key.pem(spki_pem(private), alg)
    from_jwk = Key.jwk(akp(alg, private))
    assert (from_pem.kty, from_jwk.kty) == ("AKP", "AKP")
    assert from_pem.fingerprint == from_jwk.fingerprint
    token = mint(alg, private)
    for key in (from_pem, from_jwk):
        assert rejection(verifier(key, algorithms=[alg]), token) == "ok"
    # Another parameter set's name: refused for both forms.
    for other in SETS:
        if other != alg:
            assert kind_of(Key.pem, spki_pem(private), other) == "invalid-key"
            assert kind_of(Key.jwk, akp(alg, private), other) == "invalid-key"


def test_policy_must_name_mldsa() -> None:
    private = generate("ML-DSA-44")
    key = Key.jwk(akp("ML-DSA-44", private))
    assert kind_of(verifier, key) == "invalid-config"
    assert kind_of(verifier, key, algorithms=["ES256"]) == "invalid-config"
    named = verifier(key, algorithms=["ML-DSA-44"])
    assert named.algorithms == ["ML-DSA-44"]
    assert rejection(named, mint("ML-DSA-44", private), NOW) == "ok"


def test_jwks_skips_unusable_akp_keys() -> None:
    private = generate("ML-DSA-65")
    good = json.loads(akp("ML-DSA-65", private, kid="good"))
    document = json.dumps(
        {
            "keys": [
                good,
                {**good, "kid": "private", "priv": b64url(b"\x01" * 32)},
                {key: value for key, value in good.items() if key != "alg"} | {"kid": "no-alg"},
                {**good, "kid": "short", "pub": good["pub"][:-4]},
            ]
        }
    )
    keys = KeySet.from_jwks(document)
    assert [key.kid for key in keys.keys] == ["good"]
    assert [(kid, code) for kid, code, _ in keys.skipped] == [
        ("private", "private-key"),
        ("no-alg", "invalid-key"),
        ("short", "invalid-key"),
    ]
