"""Key installation: references to ``verify`` follow rotation; what the cache keeps.

``_install(key_set)`` compares keys by fingerprint and kid: the same keys
change nothing, added keys keep the cache when no cached answer can change,
a removal drops every cached result.
"""

from __future__ import annotations

import pydoc
import threading
from collections.abc import Callable
from typing import Any

import pytest
from forge import NOW, Signer, hmac_key, private_key
from support import outcome, rejected

from grelmicro.jwt import (
    ConfigurationError,
    InvalidKeyError,
    InvalidSignatureError,
    JWTVerifier,
    Key,
    TokenRejectedError,
    UnknownKeyError,
)
from grelmicro.jwt import _core as core_bridge

OLD = hmac_key(kid="old", secret=b"old-secret-of-a-sufficient-length-0123456789")
NEW = hmac_key(kid="new", secret=b"new-secret-of-a-sufficient-length-0123456789")


def key_of(signer: Signer) -> Key:
    return Key.secret(signer.private, signer.alg, kid=signer.kid)  # type: ignore[arg-type]


def key_set(*signers: Signer) -> core_bridge.KeySet:
    return core_bridge.KeySet([key_of(s)._inner for s in signers])


def reason(verify: object, token: str) -> str | None:
    try:
        verify(token, now=NOW)  # type: ignore[operator]
    except TokenRejectedError as exc:
        return exc.reason
    return None


# -- a reference to verify follows rotation --------------------------------------------


@pytest.mark.parametrize(
    "settings",
    [{}, {"cache_size": 0}, {"cache_key": "token"}, {"cache_stats": True}],
    ids=["digest-key", "cache-off", "token-key", "counted"],
)
def test_a_reference_taken_before_rotate_follows_it(settings: dict[str, object]):
    verifier = JWTVerifier([key_of(OLD)], **settings)  # type: ignore[arg-type]
    check = verifier.verify  # taken once, as a framework dependency would
    old_token = OLD.mint({"exp": NOW + 60})
    check(old_token, now=NOW)

    verifier.rotate([key_of(NEW)])

    assert reason(check, old_token) == "unknown-key"  # not served from the old cache
    assert check(NEW.mint({"exp": NOW + 60, "sub": "n"}), now=NOW)["sub"] == "n"


def test_a_reference_held_by_a_pool_thread_follows_rotate():
    verifier = JWTVerifier([key_of(OLD)])
    check = verifier.verify
    old_token = OLD.mint({"exp": NOW + 60})
    seen: list[str | None] = []
    rotated = threading.Event()

    def worker() -> None:
        seen.append(reason(check, old_token))
        rotated.wait(10)
        seen.append(reason(check, old_token))

    thread = threading.Thread(target=worker)
    thread.start()
    while not seen:
        thread.join(0.001)
    verifier.rotate([key_of(NEW)])
    rotated.set()
    thread.join(10)

    assert seen == [None, "unknown-key"]


def test_help_shows_the_verify_docstring():
    verifier = JWTVerifier([key_of(OLD)])

    text = pydoc.render_doc(verifier.verify, renderer=pydoc.plaintext)

    assert "Verify ``token`` and return its claims." in text
    assert "TokenRejectedError" in text
    assert "now" in text


# -- _install: same keys, added keys, removed keys ----------------------------------------


def test_install_of_the_same_keys_changes_nothing():
    verifier = JWTVerifier([key_of(OLD)])
    first = verifier.verify(OLD.mint({"exp": NOW + 60}), now=NOW)
    engine, cache = verifier._engine, verifier._cache

    verifier._install(key_set(OLD))  # new objects, same fingerprint and kid

    assert verifier._engine is engine
    assert verifier._cache is cache
    assert verifier.cache_info().size == 1
    assert first is not None


THIRD = hmac_key(kid="third", secret=b"third-secret-of-a-sufficient-length-01234")
OTHER_ALG = hmac_key("HS384", kid="384", secret=b"x" * 48)


@pytest.mark.parametrize(
    ("before", "added"),
    [
        pytest.param([OLD], OTHER_ALG, id="first key of another algorithm"),
        pytest.param([OLD, NEW], THIRD, id="third key of an algorithm"),
    ],
)
def test_install_with_added_keys_keeps_the_cache(before: list[Signer], added: Signer):
    verifier = JWTVerifier([key_of(s) for s in before], cache_stats=True)
    old_token = OLD.mint({"exp": NOW + 60})
    first = verifier.verify(old_token, now=NOW)
    engine = verifier._engine

    verifier._install(key_set(*before, added))

    assert verifier._engine is not engine  # the new key is usable...
    assert verifier.verify(added.mint({"exp": NOW + 60, "sub": "n"}), now=NOW)["sub"] == "n"
    assert verifier.cache_info().size == 2  # ...and what was verified stays cached
    assert verifier.verify(old_token, now=NOW) is first
    assert verifier.cache_info().hits == 1


def test_install_with_a_removed_key_drops_what_it_verified():
    verifier = JWTVerifier([key_of(OLD), key_of(NEW)])
    old_token = OLD.mint({"exp": NOW + 60})
    verifier.verify(old_token, now=NOW)
    cache = verifier._cache

    verifier._install(key_set(NEW))

    assert verifier._cache is not cache
    assert verifier.cache_info().size == 0
    with pytest.raises(UnknownKeyError):
        verifier.verify(old_token, now=NOW)


def test_a_removed_key_whose_kid_returns_with_other_bytes_never_verifies():
    replaced = hmac_key(kid="old", secret=b"replacement-secret-of-sufficient-length-00")
    verifier = JWTVerifier([key_of(OLD)])
    old_token = OLD.mint({"exp": NOW + 60})
    verifier.verify(old_token, now=NOW)

    verifier._install(key_set(replaced))

    with pytest.raises(InvalidSignatureError):
        verifier.verify(old_token, now=NOW)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param([OLD], [OLD, hmac_key(secret=NEW.private)], id="kid-less key added"),
        pytest.param(
            [OLD, NEW],
            [OLD, NEW, hmac_key(kid="old", secret=b"third-secret-of-a-sufficient-length-01234")],
            id="kid reused by another key",
        ),
        pytest.param([hmac_key()], [hmac_key(), NEW], id="old key without kid"),
        pytest.param([OLD], [OLD, NEW], id="second key of an algorithm"),
    ],
)
def test_additions_that_change_key_selection_drop_the_cache(
    before: list[Signer], after: list[Signer]
):
    """A cached answer must be what the new keys would answer: here it may not be."""
    verifier = JWTVerifier([key_of(s) for s in before])
    verifier.verify(before[0].mint({"exp": NOW + 60}), now=NOW)
    cache = verifier._cache

    verifier._install(key_set(*after))

    assert verifier._cache is not cache
    assert verifier.cache_info().size == 0


def test_a_kidless_token_cached_under_one_key_is_not_served_once_ambiguous():
    """A token without kid is accepted only while one key could verify it."""
    verifier = JWTVerifier([key_of(OLD)])
    kidless = hmac_key(secret=OLD.private).mint({"exp": NOW + 60})
    verifier.verify(kidless, now=NOW)

    verifier._install(key_set(OLD, NEW))

    with pytest.raises(TokenRejectedError):
        verifier.verify(kidless, now=NOW)


def test_an_ed25519_key_added_under_its_other_name_drops_a_cached_kidless_token():
    """``EdDSA`` and ``Ed25519`` name one kind of key, so both count as candidates.

    The survival rule once had a Python copy that compared algorithm names:
    after a second Ed25519 key published as ``Ed25519`` beside an ``EdDSA``
    one, a cached kid-less token was still served while a fresh verify
    refused it as ambiguous.
    """
    first = private_key("EdDSA", kid="one", seed=1)
    second = private_key("Ed25519", kid="two", seed=2)
    keys = [Key.pem(first.public_pem(), "EdDSA", kid="one")]
    rotated = [*keys, Key.pem(second.public_pem(), "Ed25519", kid="two")]
    verifier = JWTVerifier(keys)
    kidless = first.with_kid(None).mint({"exp": NOW + 60})
    verifier.verify(kidless, now=NOW)

    verifier.rotate(rotated)

    assert reason(JWTVerifier(rotated, cache_size=0).verify, kidless) == "unknown-key"
    assert reason(verifier.verify, kidless) == "unknown-key"
    assert verifier.cache_info().size == 0


def test_install_from_another_thread_while_verifying():
    verifier = JWTVerifier([key_of(OLD)])
    new_token = NEW.mint({"exp": NOW + 60})
    errors: list[BaseException] = []

    def install() -> None:
        try:
            verifier._install(key_set(OLD, NEW))
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=install)
    thread.start()
    thread.join(10)

    assert errors == []
    assert verifier.verify(new_token, now=NOW)["exp"] == NOW + 60


# -- rotation -------------------------------------------------------------------------


def test_rotate_swaps_keys_and_clears_the_cache(cache_mode: dict[str, Any]):
    old = private_key("ES256", kid="old")
    new = private_key("ES256", kid="new", seed=1)
    verifier = JWTVerifier([Key.pem(old.public_pem(), "ES256", kid="old")], **cache_mode)
    old_token = old.mint({"exp": NOW + 60})
    verifier.verify(old_token, now=NOW)
    config = verifier.config

    verifier.rotate([Key.pem(new.public_pem(), "ES256", kid="new")])

    assert verifier.cache_info().size == 0
    assert outcome(verifier, old_token) == rejected(UnknownKeyError, "unknown-key")
    assert verifier.verify(new.mint({"exp": NOW + 60}), now=NOW)["exp"] == NOW + 60
    assert verifier.config is config  # the policy stays


def test_rotate_same_kid_new_key_never_serves_the_old_tokens_claims():
    # Same kid before and after: only a cleared cache stops the old token.
    old = private_key("EdDSA", kid="k")
    new = private_key("EdDSA", kid="k", seed=1)
    verifier = JWTVerifier([Key.pem(old.public_pem(), "EdDSA", kid="k")])
    old_token = old.mint({"exp": NOW + 60})
    verifier.verify(old_token, now=NOW)

    verifier.rotate(jwks={"keys": [new.public_jwk()]})

    assert outcome(verifier, old_token) == rejected(InvalidSignatureError, "signature")


def test_rotate_with_bad_keys_keeps_the_old_ones(
    make_verifier: Callable[..., JWTVerifier], token: Callable[..., str]
):
    verifier = make_verifier()
    text = token()

    with pytest.raises(ConfigurationError):
        verifier.rotate([])
    with pytest.raises(InvalidKeyError):
        verifier.rotate(jwks="{not json")

    assert verifier.verify(text, now=NOW)["exp"] == NOW + 3600


def test_rotate_to_a_symmetric_jwks_needs_allow_symmetric(
    make_verifier: Callable[..., JWTVerifier],
):
    verifier = make_verifier()
    fresh = hmac_key(secret=b"z" * 40, kid="z")
    jwks = {"keys": [fresh.public_jwk()]}

    with pytest.raises(InvalidKeyError):
        verifier.rotate(jwks=jwks)
    verifier.rotate(jwks=jwks, allow_symmetric=True)

    assert verifier.verify(fresh.mint({"exp": NOW + 5}), now=NOW)["exp"] == NOW + 5
