"""Attack class: sender-constrained tokens (DPoP, RFC 9449) and how to get around them.

A DPoP proof carries its own public key, so every proof is attacker-chosen
key material: key confusion through the ``jwk`` header, HMAC proofs keyed
with something public, private keys in the header, weak keys. Then the
binding: a stolen token without its key, a proof replayed, a proof for
another token (``ath``), another method or another URI, a bound token
downgraded to a bearer token.

References: RFC 9449 §4.2 §4.3 §7 §11.1 §11.4 §11.7, RFC 7638 §3, RFC 8725
§2.1 §3.1 §3.2, CVE-2018-0114 (key from the ``jwk`` header trusted for the
token itself), CVE-2015-9235 (HS/RS confusion).
"""

from __future__ import annotations

import hashlib
from typing import Any

import dpop_proofs
import forge
import pytest
import support
from hypothesis import assume, given
from hypothesis import strategies as st

from grelmicro.jwt import (
    ConfigurationError,
    DPoPBindingError,
    DPoPProofError,
    DPoPReplayError,
    DPoPVerifier,
    JWTVerifier,
    Key,
    ReplayStore,
    TokenRejectedError,
)

NOW = forge.NOW
URI = "https://api.example.com/items"
ISSUER_SECRET = b"security-suite-dpop-issuer-secret-0001"

RING = forge.KeyRing()
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_."


CLIENT_JWK = forge.jwk(RING.p256.public_key())
TOKEN = forge.mint(
    {"alg": "HS256", "typ": "at+jwt"},
    support.payload(cnf={"jkt": forge.thumbprint(CLIENT_JWK)}),
    ISSUER_SECRET,
)


def proof(
    header: dict[str, Any] | None = None,
    body: dict[str, Any] | None = None,
    *,
    key: Any = None,
    alg: str | None = None,
) -> str:
    """A proof signed with ``key`` (the client's P-256 key by default)."""
    head: dict[str, Any] = {"typ": "dpop+jwt", "alg": "ES256", "jwk": CLIENT_JWK}
    head.update(header or {})
    claims: dict[str, Any] = {
        "jti": "j-1",
        "htm": "GET",
        "htu": URI,
        "iat": NOW,
        "ath": forge.ath(TOKEN),
    }
    claims.update(body or {})
    head = {name: value for name, value in head.items() if value is not None}
    claims = {name: value for name, value in claims.items() if value is not None}
    return forge.mint(head, claims, RING.p256 if key is None else key, alg or head.get("alg"))


def present(dpop: DPoPVerifier, token: str, proof_text: str | None, **request: Any) -> None:
    """The resource server's path: verify the token, then apply the DPoP rules."""
    verifier = JWTVerifier([Key.secret(ISSUER_SECRET, "HS256")], cache_size=0)
    dpop_proofs.present(dpop, verifier, token, proof_text, **request)


def refused(
    proof_text: str | None, cls: type[TokenRejectedError], check: str | None, **kw: Any
) -> TokenRejectedError:
    with pytest.raises(TokenRejectedError) as caught:
        present(DPoPVerifier(), kw.pop("token", TOKEN), proof_text, **kw)
    error = caught.value
    assert type(error) is cls, f"{type(error).__name__}: {error}"
    assert error.reason == cls.reason
    if check is not None:
        assert getattr(error, "check", None) == check, error
    text = str(error)
    assert TOKEN not in text
    signature = (proof_text or "").rsplit(".", 1)[-1]
    assert len(signature) < 16 or signature not in text
    return error


def test_positive_control():
    present(DPoPVerifier(), TOKEN, proof())


# -- key confusion through the jwk header -------------------------------------------


def test_hs256_proof_keyed_with_the_servers_public_key_text():
    """CVE-2015-9235 shape: HMAC keyed with a public key the attacker can read."""
    public_pem = forge.spki_pem(RING.rsa.public_key())
    header = {"alg": "HS256", "jwk": forge.jwk(RING.rsa.public_key())}
    refused(proof(header, key=public_pem, alg="HS256"), DPoPProofError, "alg")


@pytest.mark.parametrize("alg", ["HS256", "HS384", "HS512"])
def test_hmac_proofs_with_an_oct_jwk(alg: str):
    secret = b"k" * 64
    header = {"alg": alg, "jwk": forge.oct_jwk(secret, alg)}
    refused(proof(header, key=secret, alg=alg), DPoPProofError, "alg")


def test_hmac_can_never_be_allowed_for_proofs():
    with pytest.raises(ConfigurationError):
        DPoPVerifier(algorithms=["ES256", "HS256"])


@pytest.mark.parametrize(
    ("alg", "jwk"),
    [
        ("ES256", forge.jwk(RING.rsa.public_key())),  # RSA key under an EC alg
        ("RS256", CLIENT_JWK),  # EC key under an RSA alg
        ("ES384", CLIENT_JWK),  # P-256 key under ES384
        ("ES256K", CLIENT_JWK),  # P-256 key under secp256k1
        ("EdDSA", CLIENT_JWK),
        ("ES256", {**CLIENT_JWK, "alg": "ES384"}),  # the jwk's own alg disagrees
        ("ES256", {**CLIENT_JWK, "use": "enc"}),
        ("ES256", {**CLIENT_JWK, "key_ops": ["encrypt"]}),
        ("ES256", {**CLIENT_JWK, "crv": "P-384"}),  # coordinates of the wrong size
        ("ES256", {"kty": "EC", "crv": "P-256", "x": CLIENT_JWK["x"]}),  # no y
        ("ES256", "not a key"),
        ("ES256", [CLIENT_JWK]),
    ],
)
def test_a_jwk_that_does_not_fit_the_alg(alg: str, jwk: Any):
    # Signed with the client key as ES256: the refusal must come from the key rules.
    refused(proof({"alg": alg, "jwk": jwk}, alg="ES256"), DPoPProofError, None)


@pytest.mark.parametrize(
    "member",
    [
        {"jku": "https://attacker.example/jwks.json"},
        {"x5u": "https://attacker.example/cert.pem"},
        {"x5c": ["MIIB"]},
        {"kid": "server-key-1"},
    ],
)
def test_only_the_jwk_header_names_the_proof_key(member: dict[str, Any]):
    """CVE-2018-0114 in reverse: no other header may supply or select the key."""
    refused(proof({"jwk": None, **member}), DPoPProofError, "jwk")


def test_the_jwk_header_key_never_verifies_the_access_token():
    """An access token carrying its own jwk header is not trusted for it (CVE-2018-0114)."""
    forged = forge.mint(
        {"alg": "ES256", "typ": "at+jwt", "jwk": CLIENT_JWK},
        support.payload(cnf={"jkt": forge.thumbprint(CLIENT_JWK)}),
        RING.p256,
    )
    verifier = JWTVerifier([Key.secret(ISSUER_SECRET, "HS256")], cache_size=0)
    with pytest.raises(TokenRejectedError):
        verifier.verify(forged, now=NOW)


# -- private, weak and degenerate keys in the header ------------------------------------


@pytest.mark.parametrize(
    ("alg", "private"),
    [("ES256", RING.p256), ("RS256", RING.rsa), ("EdDSA", RING.ed25519), ("ES384", RING.p384)],
)
def test_a_private_key_in_the_header_is_refused(alg: str, private: Any):
    header = {"alg": alg, "jwk": forge.private_jwk(private)}
    refused(proof(header, key=private, alg=alg), DPoPProofError, "jwk")


def test_weak_and_degenerate_keys():
    small_order = {"kty": "OKP", "crv": "Ed25519", "x": forge.b64url(b"\x01" + bytes(31))}
    off_curve = {**CLIENT_JWK, "y": forge.b64url(b"\x02" * 32)}
    weak_rsa = {"kty": "RSA", "n": forge.b64url(b"\xc5" + b"\x37" * 126 + b"\x01"), "e": "AQAB"}
    even_exponent = {**forge.jwk(RING.rsa.public_key()), "e": forge.b64url(b"\x01\x00\x00")}
    for alg, jwk in [
        ("EdDSA", small_order),
        ("ES256", off_curve),
        ("RS256", weak_rsa),
        ("RS256", even_exponent),
    ]:
        refused(proof({"alg": alg, "jwk": jwk}, alg="ES256"), DPoPProofError, "jwk")


def test_the_small_order_ed25519_forgery_does_not_verify():
    """With the identity point as key, an all-zero-ish signature would verify anything."""
    identity = {"kty": "OKP", "crv": "Ed25519", "x": forge.b64url(b"\x01" + bytes(31))}
    text = forge.unsigned(
        {"typ": "dpop+jwt", "alg": "EdDSA", "jwk": identity},
        {"jti": "z", "htm": "GET", "htu": URI, "iat": NOW, "ath": forge.ath(TOKEN)},
        b"\x01" + bytes(63),
    )
    token = forge.mint(
        {"alg": "HS256"}, support.payload(cnf={"jkt": forge.thumbprint(identity)}), ISSUER_SECRET
    )
    refused(text, DPoPProofError, "jwk", token=token)


# -- unsecured, unsigned and mistyped proofs ---------------------------------------------


@pytest.mark.parametrize("alg", ["none", "None", "NONE", ""])
def test_unsecured_proofs(alg: str):
    text = forge.unsigned(
        {"typ": "dpop+jwt", "alg": alg, "jwk": CLIENT_JWK},
        {"jti": "n", "htm": "GET", "htu": URI, "iat": NOW, "ath": forge.ath(TOKEN)},
    )
    refused(text, DPoPProofError, None)


def test_a_proof_signed_by_another_key_than_its_header_names():
    refused(proof(key=RING.other_p256), DPoPProofError, "signature")


@pytest.mark.parametrize("typ", ["JWT", "at+jwt", "dpop", None, "dpop+jwt+x"])
def test_a_token_is_not_a_proof(typ: str | None):
    refused(proof({"typ": typ}), DPoPProofError, "typ")


def test_the_access_token_is_not_a_proof():
    refused(TOKEN, DPoPProofError, None)


# -- the binding: stolen tokens, downgrades, replay -----------------------------------------


def test_a_stolen_token_without_a_proof():
    refused(None, DPoPProofError, "missing")


@pytest.mark.parametrize("mode", ["required", "accepted", "off"])
def test_a_stolen_token_downgraded_to_bearer(mode: str):
    with pytest.raises(DPoPBindingError):
        present(DPoPVerifier(mode), TOKEN, None, scheme="Bearer")  # type: ignore[arg-type]


def test_a_stolen_token_with_the_attackers_own_proof():
    attacker_jwk = forge.jwk(RING.other_p256.public_key())
    text = proof({"jwk": attacker_jwk}, key=RING.other_p256)
    refused(text, DPoPBindingError, "jkt")


def test_a_replayed_proof():
    dpop = DPoPVerifier()
    text = proof({}, {"jti": "replay-me"})
    present(dpop, TOKEN, text)
    with pytest.raises(DPoPReplayError):
        present(dpop, TOKEN, text, now=NOW + 1)


def test_a_replay_to_another_instance_sharing_the_store():
    store = ReplayStore()
    text = proof({}, {"jti": "shared"})
    present(DPoPVerifier(replay_store=store), TOKEN, text)
    with pytest.raises(DPoPReplayError):
        present(DPoPVerifier(replay_store=store), TOKEN, text)


def test_a_replay_after_the_window_is_refused_by_its_age():
    dpop = DPoPVerifier(max_age=60, leeway=5)
    text = proof({}, {"jti": "old"})
    present(dpop, TOKEN, text)
    with pytest.raises(DPoPProofError):
        present(dpop, TOKEN, text, now=NOW + 3600)


@pytest.mark.parametrize(
    "value",
    [
        forge.ath(TOKEN) + "=",  # padded
        hashlib.sha256(TOKEN.encode()).hexdigest(),  # hex, not base64url
        forge.b64url(hashlib.sha256(("Bearer " + TOKEN).encode()).digest()),
        forge.b64url(hashlib.sha384(TOKEN.encode()).digest()),
        forge.ath(TOKEN).upper(),
        "",
        None,
    ],
)
def test_ath_mismatch(value: str | None):
    refused(proof({}, {"ath": value}), DPoPProofError, "ath")


def test_a_proof_for_another_token_of_the_same_key():
    other = forge.mint(
        {"alg": "HS256"},
        support.payload(sub="user-2", cnf={"jkt": forge.thumbprint(CLIENT_JWK)}),
        ISSUER_SECRET,
    )
    refused(proof(), DPoPProofError, "ath", token=other)


@pytest.mark.parametrize(
    ("claims", "method", "uri"),
    [
        ({"htm": "POST"}, "GET", URI),
        ({"htm": "GET"}, "DELETE", URI),
        ({"htm": "get"}, "GET", URI),
        ({"htu": "https://api.example.com/admin"}, "GET", URI),
        ({"htu": "https://api.example.com/items/../admin"}, "GET", URI),
        ({"htu": "https://api.example.com.attacker.example/items"}, "GET", URI),
        ({"htu": "https://api.example.com@attacker.example/items"}, "GET", URI),
        ({"htu": "https://api.example.com:444/items"}, "GET", URI),
        ({"htu": "http://api.example.com/items"}, "GET", URI),
        ({"htu": "//api.example.com/items"}, "GET", URI),
        ({"htu": "https://api.example.com/items%2F..%2Fadmin"}, "GET", URI),
        ({"htu": URI}, "GET", "https://api.example.com/admin"),
    ],
)
def test_a_proof_for_another_method_or_uri(claims: dict[str, Any], method: str, uri: str):
    check = "htm" if "htm" in claims else "htu"
    refused(proof({}, claims), DPoPProofError, check, method=method, uri=uri)


@pytest.mark.parametrize("iat", [NOW + 3600, NOW - 3600, 0, -1, 2**63, 1e300])
def test_proofs_outside_their_window(iat: float):
    refused(proof({}, {"iat": iat}), DPoPProofError, "iat")


@pytest.mark.parametrize(
    "cnf",
    [None, {"x5t#S256": forge.b64url(hashlib.sha256(b"client certificate").digest())}],
    ids=["no-cnf", "certificate-bound"],
)
def test_an_unbound_token_cannot_ride_on_a_proof(cnf: dict[str, Any] | None):
    body = support.payload() if cnf is None else support.payload(cnf=cnf)
    token = forge.mint({"alg": "HS256"}, body, ISSUER_SECRET)
    text = proof({}, {"ath": forge.ath(token)})
    refused(text, DPoPBindingError, "unbound", token=token)


@pytest.mark.parametrize(
    "cnf",
    [{"jkt": None}, {}, {"x5t#S256": "abc"}, {"jkt": 7}, "jkt"],
    ids=["null-jkt", "empty", "short-x5t", "numeric-jkt", "not-an-object"],
)
def test_a_token_whose_cnf_cannot_be_read_cannot_ride_on_a_proof(cnf: Any):
    """Issue 24: ``cnf`` is read by one reader; bound to nothing readable is refused."""
    token = forge.mint({"alg": "HS256"}, support.payload(cnf=cnf), ISSUER_SECRET)
    text = proof({}, {"ath": forge.ath(token)})
    refused(text, DPoPBindingError, "jkt", token=token)


def test_hostile_proof_shapes_raise_only_our_errors():
    shapes = [
        "",
        ".",
        "..",
        "a.b.c",
        "x" * 100_000,
        proof() + ".x.y",
        proof().replace(".", ". ", 1),
        "\u00e9.\u00e9.\u00e9",
        "\ud800.\udc00.x",  # not Unicode: cannot even be read
        b"\xff.\xfe.\xfd",
    ]
    for text in shapes:
        with pytest.raises(DPoPProofError):
            present(DPoPVerifier(), TOKEN, text)


# -- properties ----------------------------------------------------------------------------

GOOD = proof({}, {"jti": "property"})


@given(index=st.integers(0, len(GOOD) - 1), replacement=st.sampled_from(ALPHABET))
def test_any_changed_character_is_refused(index: int, replacement: str):
    """RFC 7515 §5.2: every byte of header, payload and signature is covered."""
    assume(GOOD[index] != replacement)
    changed = GOOD[:index] + replacement + GOOD[index + 1 :]
    with pytest.raises((DPoPProofError, DPoPBindingError)):
        present(DPoPVerifier(), TOKEN, changed)


@given(st.one_of(st.text(max_size=600), st.binary(max_size=600)))
def test_arbitrary_input_raises_only_our_errors(data: str | bytes):
    with pytest.raises(DPoPProofError):
        present(DPoPVerifier(), TOKEN, data)  # type: ignore[arg-type]
