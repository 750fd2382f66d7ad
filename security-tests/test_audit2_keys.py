"""Attack class: a public key pasted as an HMAC secret, slightly mangled.

Issue 24, finding 7 (an earlier finding still open): ``Key.secret`` refused
public-key text in its usual forms (``test_key_confusion.py``) but took it
when slightly mangled: base64 SPKI with one more character (``:``, ``.``,
``,``, a leading ``-``, quotes), PEM armour in lower or mixed case, PKCS#1.
With such a secret configured, anyone holding the public key forges
tokens. The rule chosen: ``Key.secret`` refuses public-key text in every
form a user can paste (base64 that decodes to SPKI/PKCS#1 once punctuation
is stripped, armour of any case, anything that parses as a public key once
trimmed), with ``invalid-key``; a test per form, as ``bytes`` and ``str``.

19 of the 24 forms (all but PKCS#1 as PEM, base64 and DER, the PEM in
quotes and base64 with trailing newlines) were accepted before the fix
(2a6a77e); they were kept as strict xfails until it landed.

A verifier configured with the real public key refuses an HS256 token
HMAC'd with any of these texts (``algorithm``): that part held already.

References: RFC 8725 §2.1 §3.1 §3.2, CVE-2015-9235, CVE-2016-10555,
CVE-2022-29217, CVE-2024-33663, RFC 7468 §2 §3, RFC 8017 Appendix A.1.1,
RFC 5280 §4.1.2.7.
"""

from __future__ import annotations

import base64
from collections.abc import Callable

import forge
import pytest
from support import accept, key_for, mint, payload, reject

from grelmicro.jwt import InvalidKeyError, JWTVerifier, Key

RING = forge.KeyRing()
FAMILIES = {
    "rsa": (RING.rsa, "RS256"),
    "p256": (RING.p256, "ES256"),
    "ed25519": (RING.ed25519, "EdDSA"),
}


def _pkcs1_der(public: object) -> bytes:
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

    return public.public_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.DER, serialization.PublicFormat.PKCS1
    )


def _spki_b64(family: str) -> bytes:
    return base64.b64encode(forge.spki_der(FAMILIES[family][0].public_key()))


def _armour(pem: bytes, case: Callable[[bytes], bytes]) -> bytes:
    lines = pem.splitlines(keepends=True)
    return b"".join(case(line) if line.startswith(b"-----") else line for line in lines)


def _lower(line: bytes) -> bytes:
    return line.lower()


def _title(line: bytes) -> bytes:
    return line.title()


def _spki_pem(family: str) -> bytes:
    return forge.spki_pem(FAMILIES[family][0].public_key())


RSA_PUBLIC = RING.rsa.public_key()

#: form -> how to make it from the suite's keys.
FORMS: dict[str, Callable[[], bytes]] = {
    # base64 SPKI with one more character
    "rsa-b64-colon": lambda: _spki_b64("rsa") + b":",
    "rsa-b64-dot": lambda: _spki_b64("rsa") + b".",
    "rsa-b64-comma": lambda: _spki_b64("rsa") + b",",
    "rsa-b64-semicolon": lambda: _spki_b64("rsa") + b";",
    "rsa-b64-leading-dash": lambda: b"-" + _spki_b64("rsa"),
    "rsa-b64-double-quotes": lambda: b'"' + _spki_b64("rsa") + b'"',
    "rsa-b64-single-quotes": lambda: b"'" + _spki_b64("rsa") + b"'",
    "rsa-b64-backticks": lambda: b"`" + _spki_b64("rsa") + b"`",
    "p256-b64-colon": lambda: _spki_b64("p256") + b":",
    "p256-b64-double-quotes": lambda: b'"' + _spki_b64("p256") + b'"',
    "ed25519-b64-leading-dash": lambda: b"-" + _spki_b64("ed25519"),
    "ed25519-b64-dot": lambda: _spki_b64("ed25519") + b".",
    # PEM armour of another case
    "rsa-pem-lower-armour": lambda: _armour(_spki_pem("rsa"), _lower),
    "rsa-pem-title-armour": lambda: _armour(_spki_pem("rsa"), _title),
    "p256-pem-lower-armour": lambda: _armour(_spki_pem("p256"), _lower),
    "ed25519-pem-lower-armour": lambda: _armour(_spki_pem("ed25519"), _lower),
    # PKCS#1
    "rsa-pkcs1-pem": lambda: forge.pkcs1_pem(RSA_PUBLIC),
    "rsa-pkcs1-pem-lower-armour": lambda: _armour(forge.pkcs1_pem(RSA_PUBLIC), _lower),
    "rsa-pkcs1-b64": lambda: base64.b64encode(_pkcs1_der(RSA_PUBLIC)),
    "rsa-pkcs1-b64-colon": lambda: base64.b64encode(_pkcs1_der(RSA_PUBLIC)) + b":",
    "rsa-pkcs1-b64-quotes": lambda: b'"' + base64.b64encode(_pkcs1_der(RSA_PUBLIC)) + b'"',
    "rsa-pkcs1-der": lambda: _pkcs1_der(RSA_PUBLIC),
    # trimmed, it parses as a public key
    "rsa-pem-in-quotes-with-spaces": lambda: b'  "' + _spki_pem("rsa").strip() + b'"  ',
    "rsa-b64-with-trailing-newlines": lambda: _spki_b64("rsa") + b"\n\n",
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_mangled_public_key_text_is_never_an_hmac_secret(form: str):
    text = FORMS[form]()
    values: list[bytes | str] = [text]
    if text.isascii():
        values.append(text.decode("ascii"))
    for value in values:
        with pytest.raises(InvalidKeyError) as caught:
            Key.secret(value, "HS256")
        assert type(caught.value) is InvalidKeyError
        assert caught.value.reason == "invalid-key"


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("hmac_alg", ["HS256", "HS512"])
def test_a_token_hmacd_with_the_mangled_text_is_refused(form: str, hmac_alg: str):
    """The verifier holds the real public key: the forgery is refused on its algorithm."""
    family = form.split("-", 1)[0]
    alg = FAMILIES[family][1]
    verifier = JWTVerifier(keys=[_real_key(family)], cache_size=0)
    accept(verifier, _signed_by(family))
    forged = forge.mint({"alg": hmac_alg, "typ": "JWT"}, payload(sub="admin"), FORMS[form]())
    reject(verifier, forged, "algorithm")
    assert alg != hmac_alg


def _real_key(family: str) -> Key:
    private, alg = FAMILIES[family]
    return Key.pem(forge.spki_pem(private.public_key()), alg)


def _signed_by(family: str) -> str:
    private, alg = FAMILIES[family]
    return forge.mint({"alg": alg, "typ": "JWT"}, payload(), private, alg)


def test_a_real_secret_with_the_same_punctuation_is_still_a_secret():
    """The control: punctuation around random bytes does not make a public key."""
    for secret in (
        base64.b64encode(bytes(range(48))) + b":",
        b'"' + base64.b64encode(b"\x8a" * 40) + b'"',
    ):
        Key.secret(secret, "HS256")
    verifier = JWTVerifier(keys=[key_for(RING, "HS256")], cache_size=0)
    accept(verifier, mint(RING, "HS256"))
