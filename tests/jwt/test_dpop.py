"""DPoP proofs (RFC 9449): the core's proof check, the binding rules, replay and nonces.

Proofs and access tokens are minted by :mod:`dpop_proofs` with
``cryptography``; time is pinned to :data:`forge.NOW`.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from dpop_proofs import PROOF_ALGORITHMS, URI, ProofSigner, access_token, present
from forge import NOW, SECRET, ath, b64url, hmac_key, json_bytes, nested_array, private_key

from grelmicro.jwt import (
    ConfigurationError,
    DPoPBindingError,
    DPoPNonces,
    DPoPProofError,
    DPoPReplayError,
    DPoPVerifier,
    InvalidKeyError,
    JWTVerifier,
    Key,
    ReplayStore,
    _core,
    jwk_thumbprint,
)

pytest.importorskip("cryptography", reason="DPoP proofs are signed with cryptography")


@pytest.fixture(scope="module")
def client() -> ProofSigner:
    return ProofSigner("ES256")


@pytest.fixture
def tokens() -> JWTVerifier:
    return JWTVerifier([Key.secret(SECRET, "HS256")])


def check(dpop: DPoPVerifier, token: str, proof: str | None, **request: Any) -> None:
    """Verify the access token, then apply the DPoP rules, as the FastAPI glue does."""
    present(dpop, JWTVerifier([Key.secret(SECRET, "HS256")]), token, proof, **request)


# -- accepted proofs --------------------------------------------------------------


@pytest.mark.parametrize("algorithm", [*PROOF_ALGORITHMS, "ES512", "PS384", "Ed25519"])
def test_a_proof_by_the_bound_key_is_accepted(algorithm: str):
    signer = ProofSigner(algorithm)
    token = access_token(signer.jkt)

    check(DPoPVerifier(), token, signer.proof(access_token=token))


def test_the_core_thumbprint_matches_an_independent_one(client: ProofSigner):
    assert jwk_thumbprint(client.jwk) == client.jkt
    assert jwk_thumbprint(json.dumps(client.jwk)) == client.jkt


def test_rfc7638_example_thumbprint():
    # RFC 7638 §3.1: the RSA key of RFC 7517 appendix A.1 and its thumbprint.
    jwk = {
        "kty": "RSA",
        "n": (
            "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1"
            "L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4"
            "QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbO"
            "pbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csF"
            "Cur-kEgU8awapJzKnqDKgw"
        ),
        "e": "AQAB",
        "alg": "RS256",
        "kid": "2011-04-29",
    }

    assert jwk_thumbprint(jwk) == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"


def test_a_jwk_that_is_not_json_has_no_thumbprint():
    with pytest.raises(InvalidKeyError):
        jwk_thumbprint({"kty": "EC", "x": object()})


def test_a_private_jwk_has_no_thumbprint(client: ProofSigner):
    with pytest.raises(InvalidKeyError):
        jwk_thumbprint({**client.jwk, "d": b64url(b"\x01" * 32)})


# -- every rule, broken one at a time ---------------------------------------------

ES = ProofSigner("ES256")
OTHER = ProofSigner("ES256", seed=1)
TOKEN = access_token(ES.jkt)
WEAK_RSA = {
    "kty": "RSA",
    # A 1024-bit modulus (odd, top bit set): refused like a configured key.
    "n": b64url(b"\xc1" + b"\x11" * 126 + b"\x01"),
    "e": "AQAB",
}
SMALL_ORDER_ED25519 = {"kty": "OKP", "crv": "Ed25519", "x": b64url(b"\x01" + b"\x00" * 31)}
OFF_CURVE_P256 = {**ES.jwk, "y": b64url(b"\x01" * 32)}


def _hmac_proof() -> str:
    """A proof signed with HMAC, its secret in the header as an ``oct`` JWK."""
    secret = b"s" * 32
    head = {"typ": "dpop+jwt", "alg": "HS256", "jwk": {"kty": "oct", "k": b64url(secret)}}
    body = {"jti": "h", "htm": "GET", "htu": URI, "iat": NOW, "ath": ath(TOKEN)}
    return hmac_key(secret=secret).mint(body, header=head)


def _signed_by_other() -> str:
    """A proof whose header names the bound key but whose signature is another key's."""
    head = {"typ": "dpop+jwt", "alg": "ES256", "jwk": ES.jwk}
    body = {"jti": "o", "htm": "GET", "htu": URI, "iat": NOW, "ath": ath(TOKEN)}
    return OTHER.key.mint(body, header=head)


def _other_key_garbage_signature() -> str:
    """A proof under another key's header whose signature verifies under no key."""
    head, body, _ = OTHER.proof(access_token=TOKEN).split(".")
    garbage = b64url(bytes(range(64)))
    return f"{head}.{body}.{garbage}"


def _tampered() -> str:
    head, body, signature = ES.proof(access_token=TOKEN).split(".")
    flipped = "A" if signature[0] != "A" else "B"
    return f"{head}.{body}.{flipped}{signature[1:]}"


def _raw(header: bytes, payload: bytes) -> str:
    return ES.key.mint(payload, header=header)


_GOOD_HEADER = {"typ": "dpop+jwt", "alg": "ES256", "jwk": ES.jwk}


def _body(**claims: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"jti": "x", "htm": "GET", "htu": URI, "iat": NOW, "ath": ath(TOKEN)}
    body.update(claims)
    return body


#: (case, proof, expected error class, expected check)
BROKEN: list[tuple[str, str, type[Exception], str]] = [
    ("typ-jwt", ES.proof(access_token=TOKEN, header={"typ": "JWT"}), DPoPProofError, "typ"),
    ("typ-missing", ES.proof(access_token=TOKEN, drop=("typ",)), DPoPProofError, "typ"),
    ("alg-hmac", _hmac_proof(), DPoPProofError, "alg"),
    (
        "alg-none",
        _raw(json_bytes({**_GOOD_HEADER, "alg": "none"}), json_bytes(_body())),
        DPoPProofError,
        "alg",
    ),
    ("alg-unknown", ES.proof(access_token=TOKEN, header={"alg": "ES999"}), DPoPProofError, "alg"),
    (
        "alg-other-curve",
        ES.proof(access_token=TOKEN, header={"alg": "ES384"}),
        DPoPProofError,
        "jwk",
    ),
    ("alg-rsa-key", ES.proof(access_token=TOKEN, header={"alg": "RS256"}), DPoPProofError, "jwk"),
    ("jwk-missing", ES.proof(access_token=TOKEN, drop=("jwk",)), DPoPProofError, "jwk"),
    ("jwk-not-object", ES.proof(access_token=TOKEN, header={"jwk": "key"}), DPoPProofError, "jwk"),
    (
        "jwk-private",
        ES.proof(access_token=TOKEN, header={"jwk": {**ES.jwk, "d": b64url(b"\x07" * 32)}}),
        DPoPProofError,
        "jwk",
    ),
    (
        "jwk-weak-rsa",
        ES.proof(access_token=TOKEN, header={"alg": "RS256", "jwk": WEAK_RSA}),
        DPoPProofError,
        "jwk",
    ),
    (
        "jwk-off-curve",
        ES.proof(access_token=TOKEN, header={"jwk": OFF_CURVE_P256}),
        DPoPProofError,
        "jwk",
    ),
    (
        "jwk-small-order",
        ES.proof(access_token=TOKEN, header={"alg": "EdDSA", "jwk": SMALL_ORDER_ED25519}),
        DPoPProofError,
        "jwk",
    ),
    (
        "jwk-use-enc",
        ES.proof(access_token=TOKEN, header={"jwk": {**ES.jwk, "use": "enc"}}),
        DPoPProofError,
        "jwk",
    ),
    ("crit", ES.proof(access_token=TOKEN, header={"crit": ["exp"]}), DPoPProofError, "structure"),
    (
        "duplicate-member",
        _raw(
            b'{"typ":"dpop+jwt","typ":"dpop+jwt","alg":"ES256","jwk":' + json_bytes(ES.jwk) + b"}",
            json_bytes(_body()),
        ),
        DPoPProofError,
        "structure",
    ),
    ("payload-not-object", _raw(json_bytes(_GOOD_HEADER), b"[1]"), DPoPProofError, "structure"),
    ("payload-not-json", _raw(json_bytes(_GOOD_HEADER), b"{jti}"), DPoPProofError, "structure"),
    (
        "too-deep",
        ES.proof(access_token=TOKEN, claims={"x": nested_array(70)}),
        DPoPProofError,
        "structure",
    ),
    (
        "too-large",
        ES.proof(access_token=TOKEN, claims={"pad": "p" * 9000}),
        DPoPProofError,
        "structure",
    ),
    ("signature-tampered", _tampered(), DPoPProofError, "signature"),
    ("signature-other-key", _signed_by_other(), DPoPProofError, "signature"),
    ("jti-missing", ES.proof(access_token=TOKEN, drop=("jti",)), DPoPProofError, "jti"),
    ("jti-number", ES.proof(access_token=TOKEN, claims={"jti": 7}), DPoPProofError, "jti"),
    ("jti-empty", ES.proof(access_token=TOKEN, claims={"jti": ""}), DPoPProofError, "jti"),
    ("jti-huge", ES.proof(access_token=TOKEN, claims={"jti": "j" * 257}), DPoPProofError, "jti"),
    ("htm-other", ES.proof("POST", access_token=TOKEN), DPoPProofError, "htm"),
    ("htm-lowercase", ES.proof("get", access_token=TOKEN), DPoPProofError, "htm"),
    ("htm-missing", ES.proof(access_token=TOKEN, drop=("htm",)), DPoPProofError, "htm"),
    (
        "htu-other-path",
        ES.proof(uri="https://api.example.com/admin", access_token=TOKEN),
        DPoPProofError,
        "htu",
    ),
    (
        "htu-other-host",
        ES.proof(uri="https://evil.example.com/items", access_token=TOKEN),
        DPoPProofError,
        "htu",
    ),
    (
        "htu-http",
        ES.proof(uri="http://api.example.com/items", access_token=TOKEN),
        DPoPProofError,
        "htu",
    ),
    ("htu-relative", ES.proof(uri="/items", access_token=TOKEN), DPoPProofError, "htu"),
    ("htu-missing", ES.proof(access_token=TOKEN, drop=("htu",)), DPoPProofError, "htu"),
    ("iat-future", ES.proof(access_token=TOKEN, iat=NOW + 6), DPoPProofError, "iat"),
    ("iat-old", ES.proof(access_token=TOKEN, iat=NOW - 66), DPoPProofError, "iat"),
    ("iat-string", ES.proof(access_token=TOKEN, claims={"iat": str(NOW)}), DPoPProofError, "iat"),
    ("iat-bool", ES.proof(access_token=TOKEN, claims={"iat": True}), DPoPProofError, "iat"),
    ("iat-huge", ES.proof(access_token=TOKEN, claims={"iat": 10**30}), DPoPProofError, "iat"),
    ("iat-missing", ES.proof(access_token=TOKEN, drop=("iat",)), DPoPProofError, "iat"),
    (
        "ath-other-token",
        ES.proof(access_token=access_token(ES.jkt, sub="other")),
        DPoPProofError,
        "ath",
    ),
    ("ath-missing", ES.proof(), DPoPProofError, "ath"),
    ("ath-number", ES.proof(access_token=TOKEN, claims={"ath": 1}), DPoPProofError, "ath"),
    ("nonce-number", ES.proof(access_token=TOKEN, claims={"nonce": 1}), DPoPProofError, "nonce"),
    ("key-not-bound", OTHER.proof(access_token=TOKEN), DPoPBindingError, "jkt"),
    # The binding is checked before the signature (a hash, not a key's work).
    ("key-not-bound-bad-signature", _other_key_garbage_signature(), DPoPBindingError, "jkt"),
    ("not-a-jws", "not-a-proof", DPoPProofError, "structure"),
    ("jwe", "a.b.c.d.e", DPoPProofError, "structure"),
    ("lone-surrogate", "\ud800.x.y", DPoPProofError, "structure"),
]


def test_the_good_proof_of_the_table_is_accepted():
    check(DPoPVerifier(), TOKEN, ES.proof(access_token=TOKEN))


@pytest.mark.parametrize(
    ("proof", "error", "rule"), [case[1:] for case in BROKEN], ids=[case[0] for case in BROKEN]
)
def test_each_broken_rule_is_refused(proof: str, error: type[Exception], rule: str):
    with pytest.raises(error) as caught:
        check(DPoPVerifier(), TOKEN, proof)

    assert caught.value.check == rule  # type: ignore[attr-defined]
    # Refusals never quote the proof, the token or key material.
    message = str(caught.value)
    for secret in (proof, TOKEN, ES.jwk["x"], proof.rsplit(".", maxsplit=1)[-1]):
        assert len(secret) < 16 or secret not in message


@pytest.mark.parametrize("iat", [NOW + 5, NOW - 65, NOW + 4.5])
def test_the_iat_window_holds_leeway_on_both_sides(iat: float):
    check(DPoPVerifier(max_age=60, leeway=5), TOKEN, ES.proof(access_token=TOKEN, iat=iat))


def test_the_window_is_configurable():
    proof = ES.proof(access_token=TOKEN, iat=NOW - 100)
    with pytest.raises(DPoPProofError):
        check(DPoPVerifier(), TOKEN, proof)

    check(DPoPVerifier(max_age=120), TOKEN, proof)


def test_an_algorithm_outside_the_allow_list_is_refused():
    signer = ProofSigner("PS256")
    token = access_token(signer.jkt)

    with pytest.raises(DPoPProofError) as caught:
        check(DPoPVerifier(algorithms=["ES256"]), token, signer.proof(access_token=token))

    assert caught.value.check == "alg"


@pytest.mark.parametrize("algorithms", [["HS256"], ["ES256", "HS512"], ["none"], []])
def test_hmac_and_none_cannot_be_allowed(algorithms: list[str]):
    with pytest.raises(ConfigurationError):
        DPoPVerifier(algorithms=algorithms)


def test_the_challenge_lists_the_allowed_algorithms():
    assert DPoPVerifier(algorithms=["ES256", "EdDSA"]).algorithms == ["ES256", "EdDSA"]
    default = DPoPVerifier().algorithms
    assert "ES256" in default
    assert "RS256" in default
    assert not [name for name in default if name.startswith("HS")]


@pytest.mark.parametrize(
    "settings",
    [
        {"mode": "sometimes"},
        {"max_age": 0},
        {"max_age": float("nan")},
        {"leeway": -1},
        {"max_proof_size": 0},
        {"max_age": "60"},
        {"algorithms": [256]},
        {"nonces": "yes"},
        {"replay_store": {}},
        {"clock": 5},
    ],
)
def test_bad_settings_are_configuration_errors(settings: dict[str, Any]):
    with pytest.raises(ConfigurationError):
        DPoPVerifier(**settings)


# -- htu normalisation (RFC 9449 §4.3, RFC 3986 §6.2.2-6.2.3) -----------------------

SAME_URI = [
    ("https://api.example.com/items", "https://api.example.com/items"),
    ("HTTPS://API.Example.COM/items", "https://api.example.com/items"),
    ("https://api.example.com:443/items", "https://api.example.com/items"),
    ("https://api.example.com/items?page=2", "https://api.example.com/items"),
    ("https://api.example.com/items#top", "https://api.example.com/items"),
    ("https://api.example.com/a/../items", "https://api.example.com/items"),
    ("https://api.example.com/./items", "https://api.example.com/items"),
    ("https://api.example.com/%69tems", "https://api.example.com/items"),
    ("http://api.example.com:80", "http://api.example.com/"),
    ("https://api.example.com/a%2fb", "https://api.example.com/a%2Fb"),
]


@pytest.mark.parametrize(("given", "normal"), SAME_URI)
def test_htu_normalisation(given: str, normal: str):
    assert _core.normalize_htu(given) == normal


@pytest.mark.parametrize(("htu", "request_uri"), SAME_URI)
def test_a_normalised_htu_matches_end_to_end(htu: str, request_uri: str):
    proof = ES.proof(uri=htu, access_token=TOKEN)

    check(DPoPVerifier(), TOKEN, proof, uri=request_uri)
    # And the other way round: the request URI is normalised too.
    check(DPoPVerifier(), TOKEN, ES.proof(uri=request_uri, access_token=TOKEN), uri=htu)


@pytest.mark.parametrize(
    ("htu", "request_uri"),
    [
        ("https://api.example.com/Items", "https://api.example.com/items"),
        ("https://api.example.com:8443/items", "https://api.example.com/items"),
        ("http://api.example.com/items", "https://api.example.com/items"),
        ("https://api.example.com/items/", "https://api.example.com/items"),
        ("https://user@api.example.com/items", "https://api.example.com/items"),
    ],
)
def test_different_uris_do_not_match(htu: str, request_uri: str):
    with pytest.raises(DPoPProofError) as caught:
        check(DPoPVerifier(), TOKEN, ES.proof(uri=htu, access_token=TOKEN), uri=request_uri)

    assert caught.value.check == "htu"


# -- binding rules and modes ------------------------------------------------------


@pytest.mark.parametrize("mode", ["required", "accepted", "off"])
def test_a_bound_token_is_never_a_bearer_token(mode: str):
    with pytest.raises(DPoPBindingError) as caught:
        check(DPoPVerifier(mode), TOKEN, None, scheme="Bearer")  # type: ignore[arg-type]

    assert caught.value.check in {"bearer", "scheme"}


def test_an_unbound_token_with_the_dpop_scheme_is_refused():
    plain = access_token(None)

    with pytest.raises(DPoPBindingError) as caught:
        check(DPoPVerifier(), plain, ES.proof(access_token=plain))

    assert caught.value.check == "unbound"


def test_accepted_mode_takes_unbound_bearer_tokens():
    check(DPoPVerifier("accepted"), access_token(None), None, scheme="Bearer")
    check(DPoPVerifier("off"), access_token(None), None, scheme="bearer")


def test_required_mode_refuses_bearer_tokens():
    with pytest.raises(DPoPBindingError) as caught:
        check(DPoPVerifier("required"), access_token(None), None, scheme="Bearer")

    assert caught.value.check == "scheme"


def test_off_mode_refuses_the_dpop_scheme():
    with pytest.raises(DPoPBindingError) as caught:
        check(DPoPVerifier("off"), TOKEN, ES.proof(access_token=TOKEN))

    assert caught.value.check == "scheme"


def test_a_dpop_token_without_a_proof_is_refused():
    with pytest.raises(DPoPProofError) as caught:
        check(DPoPVerifier(), TOKEN, None)

    assert caught.value.check == "missing"


@pytest.mark.parametrize("cnf", [{"jkt": 5}, {"jkt": ""}, "jkt", ["x"]])
def test_a_malformed_cnf_is_a_binding_error(cnf: object):
    token = access_token(None, cnf=cnf)

    with pytest.raises(DPoPBindingError):
        check(DPoPVerifier(), token, ES.proof(access_token=token))


# -- replay ------------------------------------------------------------------------


def test_a_proof_is_accepted_once():
    dpop = DPoPVerifier()
    proof = ES.proof(access_token=TOKEN)
    check(dpop, TOKEN, proof)

    with pytest.raises(DPoPReplayError) as caught:
        check(dpop, TOKEN, proof, now=NOW + 30)

    assert not caught.value.store_full


def test_a_reused_jti_is_a_replay_even_in_a_new_proof():
    dpop = DPoPVerifier()
    check(dpop, TOKEN, ES.proof(access_token=TOKEN, jti="same"))

    with pytest.raises(DPoPReplayError):
        check(dpop, TOKEN, ES.proof(access_token=TOKEN, jti="same", iat=NOW + 1))


def test_another_keys_jti_does_not_collide():
    dpop = DPoPVerifier()
    other_token = access_token(OTHER.jkt)
    check(dpop, TOKEN, ES.proof(access_token=TOKEN, jti="same"))

    check(dpop, other_token, OTHER.proof(access_token=other_token, jti="same"))


def test_a_refused_proof_is_not_remembered():
    dpop = DPoPVerifier()
    proof = ES.proof(access_token=TOKEN, jti="later")
    with pytest.raises(DPoPProofError):
        check(dpop, TOKEN, proof, uri="https://api.example.com/other")

    check(dpop, TOKEN, proof)
    assert len(dpop.replay_store) == 1


def test_an_entry_lives_exactly_as_long_as_its_proof_could_be_accepted():
    dpop = DPoPVerifier(max_age=60, leeway=5)
    # Accepted at the earliest moment, iat at the leeway's edge in the future.
    proof = ES.proof(access_token=TOKEN, iat=NOW + 5)
    check(dpop, TOKEN, proof, now=NOW)

    # Its last acceptable moment: still remembered.
    with pytest.raises(DPoPReplayError):
        check(dpop, TOKEN, proof, now=NOW + 70)
    # Past the window the core refuses it by its iat; the store forgets it.
    with pytest.raises(DPoPProofError) as caught:
        check(dpop, TOKEN, proof, now=NOW + 70.5)
    assert caught.value.check == "iat"


def test_the_store_drains_expired_entries_and_never_evicts_live_ones():
    store = ReplayStore(4, shards=1, max_per_key=4)
    for index in range(4):  # four keys, one proof each, fill it
        assert store.record(bytes([index]) * 32, f"k{index}", now=NOW, until=NOW + 10)

    with pytest.raises(DPoPReplayError) as caught:
        store.record(b"\x09" * 32, "other", now=NOW + 5, until=NOW + 15)
    assert caught.value.store_full
    assert not caught.value.over_quota
    assert caught.value.retry_after == 5  # the oldest entry's deadline, NOW + 10
    assert len(store) == 4
    # The live entries are all still there.
    assert not store.record(b"\x00" * 32, "k0", now=NOW + 5, until=NOW + 15)

    # Alive through their deadline, drained after it.
    assert not store.record(b"\x03" * 32, "k3", now=NOW + 10, until=NOW + 20)
    assert store.record(b"\x09" * 32, "other", now=NOW + 10.5, until=NOW + 20)
    assert len(store) == 1
    assert store.live_for("k0") == 0
    assert store.keys == 1


def _fill(store: ReplayStore, owner: str, count: int, *, start: int, now: float) -> list[str]:
    """Record ``count`` fresh keys of ``owner``; the outcome of each."""
    outcomes = []
    for index in range(start, start + count):
        try:
            recorded = store.record(index.to_bytes(32, "big"), owner, now=now, until=now + 70)
            outcomes.append("recorded" if recorded else "replayed")
        except DPoPReplayError as exc:
            outcomes.append("full" if exc.store_full else "quota" if exc.over_quota else "?")
    return outcomes


def test_a_key_over_its_quota_is_refused_alone():
    store = ReplayStore(1024, max_per_key=16)

    attacker = _fill(store, "attacker", 1000, start=0, now=NOW)

    assert attacker == ["recorded"] * 16 + ["quota"] * 984
    assert store.live_for("attacker") == 16
    # Every other key is served, not one refusal, while shares are large.
    for client in range(20):
        outcomes = _fill(store, f"client-{client}", 16, start=10_000 + 100 * client, now=NOW)
        assert outcomes == ["recorded"] * 16, client
    # Newcomers are let in while there is any room: only they can fill it.
    for client in range(1024 - 16 - 20 * 16):
        assert _fill(store, f"new-{client}", 1, start=100_000 + client, now=NOW) == ["recorded"]
    assert len(store) == 1024
    # Full now, for everyone: fail closed, no live entry evicted.
    assert _fill(store, "latecomer", 1, start=50_000, now=NOW) == ["full"]
    assert _fill(store, "attacker", 1, start=60_000, now=NOW) == ["full"]  # full answers first
    assert not store.record((10_000).to_bytes(32, "big"), "client-0", now=NOW, until=NOW + 70)


def test_a_keys_share_shrinks_as_keys_arrive():
    """Issue 33, N22: no set of keys can leave a newcomer without room."""
    store = ReplayStore(1024, max_per_key=1024)
    # One key alone takes half the store, not all of it.
    assert _fill(store, "first", 1024, start=0, now=NOW).count("recorded") == 512
    # Each new key takes less: a share of the free room divided among the keys.
    second = _fill(store, "second", 512, start=2_000, now=NOW).count("recorded")
    assert second == 171  # 171 * 2 < 512 - 171, not 172 * 2 < 512 - 172
    # However many keys came, the next newcomer still gets in.
    for client in range(50):
        taken = _fill(store, f"client-{client}", 64, start=10_000 + 100 * client, now=NOW)
        assert taken[0] == "recorded", client
    assert _fill(store, "newcomer", 1, start=90_000, now=NOW) == ["recorded"]
    assert len(store) < 1024


def test_the_quota_frees_as_the_keys_proofs_expire():
    store = ReplayStore(1024, max_per_key=4)
    assert _fill(store, "busy", 4, start=0, now=NOW) == ["recorded"] * 4
    assert _fill(store, "busy", 1, start=4, now=NOW + 70) == ["quota"]

    assert _fill(store, "busy", 4, start=5, now=NOW + 70.5) == ["recorded"] * 4
    assert store.live_for("busy") == 4
    assert len(store) == 4


def test_keys_sharing_a_shard_have_a_quota_each():
    store = ReplayStore(64, shards=1, max_per_key=8)

    assert _fill(store, "one", 9, start=0, now=NOW) == ["recorded"] * 8 + ["quota"]
    assert _fill(store, "two", 9, start=100, now=NOW) == ["recorded"] * 8 + ["quota"]


def test_expired_entries_in_other_shards_make_room():
    store = ReplayStore(8, shards=2, max_per_key=1)
    owners = [f"owner-{index}" for index in range(200)]
    first = [name for name in owners if hash(name) & 1 == 0][:8]
    late = next(name for name in owners if hash(name) & 1 == 1)
    for index, owner in enumerate(first):
        assert store.record(index.to_bytes(32, "big"), owner, now=NOW, until=NOW + 70)
    assert _fill(store, late, 1, start=100, now=NOW + 70) == ["full"]

    # Only the other shard holds entries, all expired: they do not count.
    assert _fill(store, late, 1, start=101, now=NOW + 71) == ["recorded"]
    assert len(store) == 1


def test_a_replay_is_refused_even_over_quota_or_full():
    store = ReplayStore(2, shards=1, max_per_key=1)
    store.record(b"a" * 32, "k", now=NOW, until=NOW + 70)
    store.record(b"b" * 32, "j", now=NOW, until=NOW + 70)

    assert not store.record(b"a" * 32, "k", now=NOW + 1, until=NOW + 71)
    assert not store.record(b"b" * 32, "j", now=NOW + 1, until=NOW + 71)


def test_one_client_over_quota_does_not_refuse_others_end_to_end():
    store = ReplayStore(64, max_per_key=4)
    dpop = DPoPVerifier(replay_store=store)
    refusals: list[DPoPReplayError] = []
    for _ in range(12):
        try:
            check(dpop, TOKEN, ES.proof(access_token=TOKEN))
        except DPoPReplayError as exc:
            refusals.append(exc)
    assert len(refusals) == 8
    assert all(exc.over_quota and not exc.store_full for exc in refusals)

    # Seven other clients, four proofs each: no refusal.
    for seed in range(2, 9):
        client = ProofSigner("ES256", seed=seed)
        token = access_token(client.jkt)
        for _ in range(4):
            check(dpop, token, client.proof(access_token=token))
    assert len(store) == 32


class SharedStore:
    """A replay memory two verifiers share, as two workers would share Redis."""

    def __init__(self) -> None:
        self.entries: dict[bytes, float] = {}

    def record(self, key: bytes, owner: str, *, now: float, until: float) -> bool:
        del owner
        if self.entries.get(key, -1.0) >= now:
            return False
        self.entries[key] = until
        return True


def test_a_pluggable_store_is_shared_between_verifiers():
    shared = SharedStore()
    one, two = DPoPVerifier(replay_store=shared), DPoPVerifier(replay_store=shared)
    proof = ES.proof(access_token=TOKEN)
    check(one, TOKEN, proof)

    with pytest.raises(DPoPReplayError):
        check(two, TOKEN, proof)
    assert len(shared.entries) == 1


class AsyncStore(SharedStore):
    """A shared store with ``record_async``, as :class:`RedisReplayStore` has: says which ran."""

    def __init__(self, refusal: Exception | None = None) -> None:
        super().__init__()
        self.calls: list[str] = []
        self.refusal = refusal

    def record(self, key: bytes, owner: str, *, now: float, until: float) -> bool:
        self.calls.append("record")
        return super().record(key, owner, now=now, until=until)

    async def record_async(self, key: bytes, owner: str, *, now: float, until: float) -> bool:
        self.calls.append("record_async")
        if self.refusal is not None:
            raise self.refusal
        return super().record(key, owner, now=now, until=until)


def check_async(dpop: DPoPVerifier, token: str, proof: str) -> None:
    claims = JWTVerifier([Key.secret(SECRET, "HS256")]).verify(token, now=NOW)
    request = {"access_token": token, "claims": claims, "proof": proof, "method": "GET"}
    asyncio.run(dpop.check_async(scheme="DPoP", uri=URI, now=NOW, **request))


def test_the_async_check_awaits_the_stores_record_async_and_the_sync_one_records():
    store = AsyncStore()
    dpop = DPoPVerifier(replay_store=store)
    proof = ES.proof(access_token=TOKEN)

    check_async(dpop, TOKEN, proof)
    with pytest.raises(DPoPReplayError, match="used before"):
        check(dpop, TOKEN, proof)
    with pytest.raises(DPoPReplayError, match="used before"):
        check_async(dpop, TOKEN, proof)
    assert store.calls == ["record_async", "record", "record_async"]


def test_the_async_check_records_with_a_store_that_has_no_record_async():
    dpop = DPoPVerifier(replay_store=SharedStore())
    proof = ES.proof(access_token=TOKEN)

    check_async(dpop, TOKEN, proof)
    with pytest.raises(DPoPReplayError, match="used before"):
        check_async(dpop, TOKEN, proof)


def test_a_stores_async_refusal_reaches_the_caller():
    refusal = DPoPReplayError("the replay store cannot be reached")
    dpop = DPoPVerifier(replay_store=AsyncStore(refusal))

    with pytest.raises(DPoPReplayError) as caught:
        check_async(dpop, TOKEN, ES.proof(access_token=TOKEN))
    assert caught.value is refusal


def test_without_a_shared_store_each_process_accepts_a_proof_once():
    one, two = DPoPVerifier(), DPoPVerifier()
    proof = ES.proof(access_token=TOKEN)

    check(one, TOKEN, proof)
    check(two, TOKEN, proof)  # a second worker's own store has not seen it


@pytest.mark.parametrize(
    "settings",
    [
        {"max_size": 8, "shards": 3},
        {"max_size": 0},
        {"max_size": True},
        {"max_size": 8, "max_per_key": 9},
        {"max_per_key": 0},
        {"max_per_key": 1.5},
    ],
)
def test_bad_store_settings(settings: dict[str, Any]):
    with pytest.raises(ConfigurationError):
        ReplayStore(**settings)


def test_the_default_quota_is_a_small_share_of_the_store():
    assert ReplayStore().max_per_key == 1024
    assert ReplayStore(64).max_per_key == 1


# -- server nonces -----------------------------------------------------------------


def test_nonces_are_required_when_on():
    nonces = DPoPNonces(lifetime=300)
    dpop = DPoPVerifier(nonces=nonces)

    with pytest.raises(DPoPProofError) as caught:
        check(dpop, TOKEN, ES.proof(access_token=TOKEN))
    assert caught.value.check == "nonce"
    assert caught.value.use_nonce

    check(dpop, TOKEN, ES.proof(access_token=TOKEN, nonce=nonces.current(NOW)))


def test_a_refused_nonce_does_not_use_up_the_proof():
    nonces = DPoPNonces(lifetime=300)
    dpop = DPoPVerifier(nonces=nonces)
    with pytest.raises(DPoPProofError):
        check(dpop, TOKEN, ES.proof(access_token=TOKEN, jti="n", nonce="stale"))

    assert len(dpop.replay_store) == 0


def test_nonces_rotate_and_the_previous_one_still_counts():
    nonces = DPoPNonces(lifetime=100)
    first = nonces.current(NOW)

    assert nonces.current(NOW + 99) == first
    second = nonces.current(NOW + 100)
    assert second != first
    assert nonces.accepts(first, NOW + 100)
    assert nonces.accepts(second, NOW + 100)
    assert not nonces.accepts(first, NOW + 200)
    assert not nonces.accepts("made-up", NOW)
    assert not nonces.accepts(None, NOW)


def test_processes_sharing_a_secret_agree_on_nonces():
    secret = b"k" * 32
    one, two = DPoPNonces(secret=secret), DPoPNonces(secret=secret)

    assert one.current(NOW) == two.current(NOW)
    assert DPoPNonces().current(NOW) != one.current(NOW)


@pytest.mark.parametrize("settings", [{"lifetime": 0}, {"secret": b"short"}, {"secret": "k" * 40}])
def test_bad_nonce_settings(settings: dict[str, Any]):
    with pytest.raises(ConfigurationError):
        DPoPNonces(**settings)


# -- the error taxonomy --------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "cls"),
    [
        ("dpop-proof", DPoPProofError),
        ("dpop-replay", DPoPReplayError),
        ("dpop-binding", DPoPBindingError),
    ],
)
def test_dpop_kinds_map_to_their_classes(kind: str, cls: type[Exception]):
    assert kind in _core.error_kinds()
    assert _core.KIND_TO_ERROR[kind] is cls
    assert cls.reason == kind  # type: ignore[attr-defined]


def test_the_rsa_signer_is_a_real_rsa_key():
    # The table's weak-RSA case must fail for its size, not for its shape.
    signer = private_key("RS256")
    assert signer.private.key_size == 2048


# -- issue 33, N20: one RSA key, one thumbprint ----------------------------------------------


def _zero_padded(value: str) -> str:
    import base64  # noqa: PLC0415

    return b64url(b"\x00" + base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))


@pytest.mark.parametrize("member", ["n", "e"])
def test_rsa_members_with_leading_zeros_have_no_thumbprint(member: str):
    signer = ProofSigner("RS256")
    assert jwk_thumbprint(signer.jwk) == signer.jkt
    padded = {**signer.jwk, member: _zero_padded(signer.jwk[member])}
    with pytest.raises(InvalidKeyError, match="leading zero"):
        jwk_thumbprint(padded)


def test_a_proof_whose_rsa_key_is_zero_padded_is_refused():
    from forge import thumbprint  # noqa: PLC0415

    signer = ProofSigner("PS256")
    padded = {**signer.jwk, "n": _zero_padded(signer.jwk["n"])}
    token = access_token(thumbprint(padded))  # bound to the padded form's thumbprint
    with pytest.raises(DPoPProofError) as caught:
        check(DPoPVerifier(), token, signer.proof(access_token=token, header={"jwk": padded}))
    assert caught.value.check == "jwk"
