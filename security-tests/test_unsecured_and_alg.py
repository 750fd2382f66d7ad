"""Unsecured tokens and algorithm tricks.

Attack class: a token that names no algorithm, ``none`` in some spelling, an
unknown or differently-cased algorithm, or one outside the verifier's
allow-list, hoping the signature check is skipped or done with weaker maths.

References:
- RFC 7515 §4.1.1 (``alg`` is case-sensitive) and §5.2 (validation);
- RFC 7518 §3.6 (the ``none`` algorithm: "MUST NOT be accepted" unless the
  application explicitly wants unsecured JWS);
- RFC 8725 §2.1 (weak signatures and insufficient signature validation) and
  §3.1 (perform algorithm verification);
- T. McLean, "Critical vulnerabilities in JSON Web Token libraries" (Auth0,
  2015): ``alg: none`` accepted by several libraries;
- RFC 9864 (fully-specified ``Ed25519``; ``EdDSA`` kept as its alias here).
"""

from __future__ import annotations

import forge
import pytest
from support import accept, key_for, mint, payload, reject, verifier_for

from grelmicro.jwt import ConfigurationError, JWTVerifier, Key


def reject_header(verifier: JWTVerifier, ring: forge.KeyRing, header: object) -> None:
    """A token under ``header``, MACed with the real HMAC secret, is refused: ``algorithm``."""
    reject(verifier, forge.mint(header, payload(), ring.hs256, "HS256"), "algorithm")


NONE_SPELLINGS = [
    "none",
    "None",
    "NONE",
    "nOnE",
    "NoNe",
    "none ",
    " none",
    "none\u0000",
    "none\n",
    "\u006eone",
    "\uff4e\uff4f\uff4e\uff45",  # fullwidth "none"
    "",
]


@pytest.mark.parametrize("spelling", NONE_SPELLINGS)
def test_alg_none_with_empty_signature(ring: forge.KeyRing, spelling: str) -> None:
    verifier = verifier_for(ring, "HS256")
    token = forge.unsigned({"alg": spelling, "typ": "JWT"}, payload(), b"")
    reject(verifier, token, "malformed")


@pytest.mark.parametrize("spelling", NONE_SPELLINGS)
def test_alg_none_with_a_valid_mac_still_refused(ring: forge.KeyRing, spelling: str) -> None:
    # Even the right HMAC under the real secret does not make "none" a name.
    reject_header(verifier_for(ring, "HS256"), ring, {"alg": spelling})


@pytest.mark.parametrize(
    "header",
    [
        b'{"alg":"\\u006eone"}',
        b'{"alg":"\\u004eONE"}',
        b'{"alg":"n\\u006f\\u006ee"}',
    ],
    ids=["escaped-n", "escaped-N", "escaped-middle"],
)
def test_alg_none_spelled_with_json_escapes(ring: forge.KeyRing, header: bytes) -> None:
    reject_header(verifier_for(ring, "HS256"), ring, header)


@pytest.mark.parametrize(
    "header",
    [{}, {"typ": "JWT"}, {"kid": "k1"}, {"x": {"alg": "HS256"}}, {"ALG": "HS256"}],
    ids=["empty", "typ-only", "kid-only", "nested-alg", "uppercase-member"],
)
def test_missing_alg(ring: forge.KeyRing, header: dict[str, object]) -> None:
    reject_header(verifier_for(ring, "HS256"), ring, header)


@pytest.mark.parametrize(
    "value",
    [None, 1, 0, 256, 256.0, True, False, [], ["HS256"], {}, {"alg": "HS256"}],
    ids=repr,
)
def test_non_string_alg(ring: forge.KeyRing, value: object) -> None:
    reject_header(verifier_for(ring, "HS256"), ring, {"alg": value})


UNKNOWN = [
    "HS1",
    "HS128",
    "HS256K",
    "HS257",
    "RS1",
    "RS128",
    "PS1",
    "ES256X",
    "ES521",
    "ES256P",
    "EdDSA25519",
    "Ed448",
    "ML-DSA-44",
    "dir",
    "RSA-OAEP",
    "RSA1_5",
    "A128KW",
    "A256GCM",
    "ECDH-ES",
    "HS256 ",
    " HS256",
    "HS256\u0000",
    "HS256\n",
    "HS256\u200b",
    "\uff28\uff33\uff12\uff15\uff16",  # fullwidth "HS256"
    "\u041dS256",
    "HS256,RS256",
    "HS 256",
    "HS-256",
]


@pytest.mark.parametrize("name", UNKNOWN, ids=repr)
def test_unknown_alg(ring: forge.KeyRing, name: str) -> None:
    reject_header(verifier_for(ring, "HS256"), ring, {"alg": name})


CASE_VARIANTS = [
    "hs256",
    "Hs256",
    "hS256",
    "rs256",
    "Rs256",
    "ps256",
    "es256",
    "Es256",
    "es256k",
    "ES256k",
    "eddsa",
    "EDDSA",
    "Eddsa",
    "EdDsa",
    "ed25519",
    "ED25519",
]


@pytest.mark.parametrize("name", CASE_VARIANTS)
def test_case_variants_are_other_names(ring: forge.KeyRing, name: str) -> None:
    # RFC 7515 §4.1.1: alg is a case-sensitive string. A verifier holding a
    # key of every family must still refuse each case variant.
    verifier = JWTVerifier(
        keys=[
            key_for(ring, "HS256", "h"),
            key_for(ring, "RS256", "r"),
            key_for(ring, "PS256", "p"),
            key_for(ring, "ES256", "e"),
            key_for(ring, "ES256K", "k"),
            key_for(ring, "EdDSA", "d"),
        ],
        cache_size=0,
    )
    reject_header(verifier, ring, {"alg": name})


def test_allow_list_refuses_a_served_algorithm(ring: forge.KeyRing) -> None:
    # The verifier holds an HMAC key, but the policy allows RS256 only.
    verifier = JWTVerifier(
        keys=[key_for(ring, "RS256", "r"), key_for(ring, "HS256", "h")],
        algorithms=["RS256"],
        cache_size=0,
    )
    accept(verifier, mint(ring, "RS256", {"alg": "RS256", "kid": "r"}))
    reject(verifier, mint(ring, "HS256", {"alg": "HS256", "kid": "h"}), "algorithm")
    reject(verifier, mint(ring, "HS256", {"alg": "HS256"}), "algorithm")
    assert verifier.algorithms == ("RS256",)


@pytest.mark.parametrize("alg", [a for a in forge.ALGORITHMS if a != "RS256"])
def test_only_the_keys_own_algorithms_by_default(ring: forge.KeyRing, alg: str) -> None:
    # No allow-list given: the verifier accepts its keys' algorithms, nothing else,
    # even when the token is correctly signed for the algorithm it names.
    verifier = verifier_for(ring, "RS256")
    reject(verifier, mint(ring, alg, {"alg": alg}), "algorithm")


def test_allow_list_cannot_add_an_algorithm_no_key_serves(ring: forge.KeyRing) -> None:
    verifier = JWTVerifier(
        keys=[key_for(ring, "RS256")], algorithms=["RS256", "HS256"], cache_size=0
    )
    assert verifier.algorithms == ("RS256",)
    public_pem = forge.spki_pem(ring.rsa.public_key())
    reject(verifier, forge.mint({"alg": "HS256"}, payload(), public_pem, "HS256"), "algorithm")


def test_algorithm_must_match_the_key_its_kid_names(ring: forge.KeyRing) -> None:
    verifier = JWTVerifier(
        keys=[key_for(ring, "HS256", "h"), key_for(ring, "HS512", "h5")], cache_size=0
    )
    # Signed with the HS512 secret, but labelled HS512 under the HS256 key's kid.
    token = forge.mint({"alg": "HS512", "kid": "h"}, payload(), ring.hs512, "HS512")
    reject(verifier, token, "algorithm")


@pytest.mark.parametrize(
    "algorithms",
    [["none"], ["None"], ["NONE"], ["hs256"], ["HS256", "none"], [""], []],
    ids=repr,
)
def test_configuration_never_allows_none_or_unknown(
    ring: forge.KeyRing, algorithms: list[str]
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        JWTVerifier(keys=[key_for(ring, "HS256")], algorithms=algorithms)
    assert caught.value.reason == "invalid-config"


def test_allow_list_that_no_key_serves_is_a_build_error(ring: forge.KeyRing) -> None:
    with pytest.raises(ConfigurationError) as caught:
        JWTVerifier(keys=[key_for(ring, "HS256")], algorithms=["RS256"])
    assert caught.value.reason == "invalid-config"


@pytest.mark.parametrize("name", ["none", "None", "HS1", "hs256"])
def test_key_constructors_refuse_unknown_algorithms(ring: forge.KeyRing, name: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Key.secret(ring.hs256, name)
    assert caught.value.reason == "invalid-config"


@pytest.mark.parametrize(("key_alg", "token_alg"), [("EdDSA", "Ed25519"), ("Ed25519", "EdDSA")])
def test_ed25519_names_are_aliases_and_nothing_else(
    ring: forge.KeyRing, key_alg: str, token_alg: str
) -> None:
    # RFC 9864: "Ed25519" is the fully-specified name of EdDSA over Ed25519.
    verifier = verifier_for(ring, key_alg)
    accept(verifier, mint(ring, token_alg, {"alg": token_alg}))
    reject(verifier, mint(ring, "ES256", {"alg": "ES256"}), "algorithm")
