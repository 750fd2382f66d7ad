"""``Key.secret`` refuses public-key text in every form a user can paste.

A public key taken as an HMAC secret lets anyone holding it forge tokens
(the HS/RS confusion). Each form below is a real public key (made by
``cryptography``) mangled the way copy and paste mangles it; each is
refused at build time, so no verifier, and no forged token, can use it.
Ordinary secrets of the same shapes still work.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable

import jwt as pyjwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from forge import NOW

from grelmicro.jwt import InvalidKeyError, Issuer, JWTVerifier, Key, WeakKeyError, _core

_RSA = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key()
_EC = ec.generate_private_key(ec.SECP256R1()).public_key()


def der(key: object, public_format: serialization.PublicFormat) -> bytes:
    return key.public_bytes(serialization.Encoding.DER, public_format)  # type: ignore[attr-defined,no-any-return]


def pem(key: object, public_format: serialization.PublicFormat) -> str:
    return key.public_bytes(serialization.Encoding.PEM, public_format).decode()  # type: ignore[attr-defined,no-any-return]


SPKI = serialization.PublicFormat.SubjectPublicKeyInfo
PKCS1 = serialization.PublicFormat.PKCS1

#: The public key bodies a user might copy: SPKI (RSA and EC) and PKCS#1 RSA.
BODIES = {
    "rsa-spki": base64.b64encode(der(_RSA, SPKI)).decode(),
    "rsa-pkcs1": base64.b64encode(der(_RSA, PKCS1)).decode(),
    "ec-spki": base64.b64encode(der(_EC, SPKI)).decode(),
}

#: How copy and paste mangles base64 text.
MANGLINGS: dict[str, Callable[[str], str]] = {
    "colon-inside": lambda b: b[: len(b) // 2] + ":" + b[len(b) // 2 :],
    "dot-inside": lambda b: b[: len(b) // 2] + "." + b[len(b) // 2 :],
    "trailing-dot": lambda b: b + ".",
    "trailing-colon": lambda b: b + ":",
    "leading-dash": lambda b: "-" + b,
    "double-quotes": lambda b: f'"{b}"',
    "single-quotes": lambda b: f"'{b}'",
    "backticks": lambda b: f"`{b}`",
    "url-alphabet-leading-dash": lambda b: "-" + b.replace("+", "-").replace("/", "_").rstrip("="),
    "json-string-with-escaped-newlines": lambda b: json.dumps(b[:64] + "\n" + b[64:]),
    "wrapped-lines-and-spaces": lambda b: (
        "  " + "\n".join(b[i : i + 64] for i in range(0, len(b), 64)) + " \n"
    ),
}


def forged(secret: bytes) -> str:
    """An HS256 token signed with ``secret`` (the attacker's forgery)."""
    return pyjwt.encode({"sub": "admin", "exp": NOW + 60}, secret, algorithm="HS256")


@pytest.mark.parametrize("body", list(BODIES))
@pytest.mark.parametrize("mangling", list(MANGLINGS))
def test_mangled_base64_public_key_is_refused(body: str, mangling: str) -> None:
    text = MANGLINGS[mangling](BODIES[body])
    with pytest.raises(InvalidKeyError, match="public key"):
        Key.secret(text, "HS256")
    with pytest.raises(InvalidKeyError, match="public key"):
        Key.secret(text.encode(), "HS512")


@pytest.mark.parametrize(
    "armour",
    [
        "-----begin public key-----\n{body}\n-----end public key-----\n",
        "-----Begin Public Key-----\n{body}\n-----End Public Key-----",
        "----BEGIN PUBLIC KEY----\n{body}\n----END PUBLIC KEY----",
        "-- begin rsa public key --\n{body}\n-- end rsa public key --",
        '"-----begin public key-----\\n{body}\\n-----end public key-----"',
    ],
)
def test_pem_armour_in_any_case_is_refused(armour: str) -> None:
    with pytest.raises(InvalidKeyError, match="public key"):
        Key.secret(armour.format(body=BODIES["rsa-spki"]), "HS256")


@pytest.mark.parametrize(
    "text",
    [
        pem(_RSA, SPKI),
        "  \n" + pem(_EC, SPKI) + "\n\n",
        '"' + pem(_RSA, PKCS1) + '"',
        "'" + json.dumps(pyjwt.algorithms.RSAAlgorithm.to_jwk(_RSA, as_dict=True)) + "'",
        json.dumps(json.dumps(pyjwt.algorithms.ECAlgorithm.to_jwk(_EC, as_dict=True))),
    ],
    ids=["pem", "pem-padded", "pem-in-quotes", "jwk-in-quotes", "jwk-as-json-string"],
)
def test_public_key_text_after_trimming_is_refused(text: str) -> None:
    with pytest.raises(InvalidKeyError, match="public key"):
        Key.secret(text, "HS256")


def test_der_with_a_stray_trailing_byte_is_refused() -> None:
    with pytest.raises(InvalidKeyError, match="public key"):
        Key.secret(der(_RSA, SPKI) + b"\n", "HS256")


def test_a_forgery_from_mangled_public_text_never_verifies() -> None:
    """The attack end to end: the public text is refused, so the forgery has no key."""
    text = MANGLINGS["leading-dash"](BODIES["rsa-spki"])
    token = forged(text.encode())
    with pytest.raises(InvalidKeyError):
        JWTVerifier(keys=[Key.secret(text, "HS256")]).verify(token, now=NOW)


def random_bytes(seed: str, size: int) -> bytes:
    """Fixed random-looking bytes (the test ids stay the same run to run)."""
    return hashlib.shake_256(seed.encode()).digest(size)


@pytest.mark.parametrize(
    "secret",
    [
        base64.urlsafe_b64encode(random_bytes("a", 48)).decode(),
        "-" + base64.urlsafe_b64encode(random_bytes("b", 48)).decode(),
        '"' + base64.b64encode(random_bytes("c", 48)).decode() + '":',
        base64.b64encode(random_bytes("d", 64)).decode(),
        base64.b64encode(b"0" * 48).decode(),
        random_bytes("e", 32).hex(),
        "my--end-of-key-passphrase-that-is-long-enough",
        "-----this-is-a-long-random-looking-secret-----",
    ],
)
def test_ordinary_secrets_still_work(secret: str) -> None:
    verifier = JWTVerifier(keys=[Key.secret(secret, "HS256")])
    token = pyjwt.encode({"sub": "u", "exp": NOW + 60}, secret.encode(), algorithm="HS256")
    assert verifier.verify(token, now=NOW)["sub"] == "u"


# -- issue 33, D5: the bare text of a public JWK member ---------------------------------


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _public_members() -> dict[str, str]:
    n = _RSA.public_numbers().n
    modulus = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return {
        "rsa-n": _b64url(modulus),
        "rsa-n-quoted": f'"{_b64url(modulus)}",',
        "rsa-n-base64": base64.b64encode(modulus).decode(),
        "rsa-n-hex": modulus.hex(),
        "mldsa44-pub": _b64url(random_bytes("pub44", 1312)),
        "mldsa65-pub": _b64url(random_bytes("pub65", 1952)),
        "mldsa87-pub-hex": random_bytes("pub87", 2592).hex(),
    }


@pytest.mark.parametrize("name", sorted(_public_members()))
def test_a_public_members_text_is_no_secret(name: str) -> None:
    """A token forged with the JWKS's own text must have no key to verify with."""
    text = _public_members()[name]
    token = pyjwt.encode({"sub": "u", "exp": NOW + 60}, text.encode(), algorithm="HS256")
    with pytest.raises(InvalidKeyError, match="public key material") as caught:
        JWTVerifier(keys=[Key.secret(text, "HS256")]).verify(token, now=NOW)
    assert text.strip('",')[:16] not in str(caught.value)


@pytest.mark.parametrize("size", [256, 384, 512])
def test_long_random_text_secrets_are_mostly_kept(size: int) -> None:
    """A random secret takes an RSA modulus's shape about once in 40 (the message says so).

    Over 200 fixed random secrets of ``size`` bytes in base64url, the share
    refused stays near 1/40: far from refusing long secrets as such.
    """
    messages = []
    for index in range(200):
        text = _b64url(random_bytes(f"long-{size}-{index}", size))
        try:
            Key.secret(text, "HS256")
        except InvalidKeyError as exc:
            messages.append(str(exc))
    assert len(messages) <= 20
    assert all("draw a new one" in message for message in messages)


@pytest.mark.parametrize(
    ("alg", "member"),
    [("ES256", "x"), ("ES256", "y"), ("EdDSA", "x"), ("RS256", "n"), ("RS256", "e")],
)
def test_a_secret_equal_to_a_member_of_a_key_beside_it_is_refused(alg: str, member: str) -> None:
    """Issue 33, D5: an EC or Ed25519 ``x`` is any 32 bytes; only the key beside it tells.

    The forgery it closes: an HS256 token keyed with a member's text copied
    from the public JWKS, verified by a verifier holding that text as a
    secret next to the public key it came from. Given in code, the pair is
    refused at build; the core withdraws such a secret from any key set.
    """
    from forge import private_key  # noqa: PLC0415

    jwk = private_key(alg, kid="pub").public_jwk()
    text = jwk[member]
    if member in ("n", "e"):  # refused alone: an RSA modulus's shape, or too short ("AQAB")
        with pytest.raises(InvalidKeyError):
            Key.secret(text, "HS256")
        return
    with pytest.raises(WeakKeyError, match="public key member") as refused:
        JWTVerifier(keys=[Key.secret(text, "HS256", kid="hs"), Key.jwk(jwk)])
    assert text not in str(refused.value)
    withdrawn = _core.KeySet([Key.secret(text, "HS256", kid="hs")._inner, Key.jwk(jwk)._inner])
    assert [(kid, code) for kid, code, _ in withdrawn.skipped] == [("hs", "exposed-secret")]


class _Reworded:
    """A core key set whose skip reasons are worded anew, codes kept."""

    def __init__(self, keys: list[_core.Key], reason: str) -> None:
        self._set = _REAL_KEY_SET(keys)
        self._reason = reason

    @property
    def skipped(self) -> list[tuple[str | None, str, str]]:
        return [(kid, code, self._reason) for kid, code, _ in self._set.skipped]

    def __getattr__(self, name: str) -> object:
        return getattr(self._set, name)


_REAL_KEY_SET = _core.KeySet


def test_the_exposed_secret_refusal_reads_the_code_not_the_words(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 37: the D5 refusal once matched the core's message text.

    With every reason reworded, an exposed secret is still refused (its code
    says what it is), and another skip worded like the old message is not.
    """
    from forge import private_key  # noqa: PLC0415

    from grelmicro.jwt import _verifier  # noqa: PLC0415

    jwk = private_key("EdDSA", kid="pub").public_jwk()
    monkeypatch.setattr(_core, "KeySet", lambda keys: _Reworded(keys, "worded anew"))
    with pytest.raises(WeakKeyError, match="worded anew"):
        JWTVerifier(keys=[Key.secret(jwk["x"], "HS256", kid="hs"), Key.jwk(jwk)])

    old_words = "this HMAC secret is the text of a public key member (n, e, x, y or pub)"
    monkeypatch.setattr(_core, "KeySet", lambda keys: _Reworded(keys, old_words))
    twins = [Key.secret(b"a" * 32, "HS256", kid="twin"), Key.secret(b"b" * 32, "HS256", kid="twin")]
    key_set, reported = _verifier._key_set([*twins, Key.jwk(jwk)], None, allow_symmetric=False)
    assert [(kid, code) for kid, code, _ in key_set.skipped] == [("twin", "kid-conflict")]
    assert reported == (("twin", old_words),)


# -- D5 by meaning (issue 38): public material in other forms, and across issuers ----------

_RSA_NUMBERS = _RSA.public_numbers()  # type: ignore[attr-defined]
_RSA_JWK = {**json.loads(pyjwt.algorithms.RSAAlgorithm.to_jwk(_RSA)), "kid": "rsa-1"}
_EC_JWK = {**json.loads(pyjwt.algorithms.ECAlgorithm.to_jwk(_EC)), "kid": "ec-1"}
_ED = ed25519.Ed25519PrivateKey.generate().public_key()
_ED_JWK = {**json.loads(pyjwt.algorithms.OKPAlgorithm.to_jwk(_ED)), "kid": "ed-1"}


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


#: Each form the fourth audit found accepted as an HMAC secret beside its key.
D5_FORMS: dict[str, Callable[[], str | bytes]] = {
    "n-wrapped-at-64": lambda: "\n".join(
        _RSA_JWK["n"][i : i + 64] for i in range(0, len(_RSA_JWK["n"]), 64)
    ),
    "openssl-modulus-hex": lambda: f"Modulus={_RSA_NUMBERS.n:X}",
    "n-decimal": lambda: str(_RSA_NUMBERS.n),
    "n-raw-bytes": lambda: _RSA_NUMBERS.n.to_bytes(256, "big"),
    "ec-x-raw": lambda: _unb64(_EC_JWK["x"]),
    "ec-x-base64url": lambda: _EC_JWK["x"],
    "ed25519-x-raw": lambda: _unb64(_ED_JWK["x"]),
    "ed25519-x-base64url": lambda: _ED_JWK["x"],
}


def public_keys() -> list[Key]:
    return [Key.jwk(_RSA_JWK), Key.jwk(_EC_JWK), Key.jwk(_ED_JWK)]


@pytest.mark.parametrize("form", list(D5_FORMS))
def test_public_material_in_any_form_is_refused_beside_its_key(form: str) -> None:
    secret = Key.secret(D5_FORMS[form](), "HS256", kid="hmac")
    with pytest.raises(WeakKeyError, match="public key member"):
        JWTVerifier([secret, *public_keys()])


@pytest.mark.parametrize("form", list(D5_FORMS))
def test_public_material_of_another_issuers_key_is_refused(form: str) -> None:
    issuers = [
        Issuer("https://a.example/", keys=[Key.secret(D5_FORMS[form](), "HS256")]),
        Issuer("https://b.example/", keys=public_keys()),
    ]
    with pytest.raises(WeakKeyError, match="public key member"):
        JWTVerifier(issuers=issuers, audience="api")


def test_a_kid_is_no_secret() -> None:
    """A 43-character kid (an RFC 7638 thumbprint) rides in every token header."""
    kid = base64.urlsafe_b64encode(hashlib.sha256(b"thumbprint").digest()).rstrip(b"=").decode()
    assert len(kid) == 43
    with pytest.raises(WeakKeyError):
        JWTVerifier([Key.secret(kid, "HS256"), Key.jwk({**_RSA_JWK, "kid": kid})])
    with pytest.raises(WeakKeyError):
        JWTVerifier([Key.secret(kid, "HS256", kid=kid)])


def test_ordinary_secrets_of_the_same_shapes_still_build() -> None:
    for secret in (
        "\n".join(["a" * 64, "b" * 64]),
        f"Modulus={'AB' * 40}",
        "9" * 80,
        bytes(range(64)),
    ):
        JWTVerifier([Key.secret(secret, "HS256", kid="hmac"), *public_keys()])
