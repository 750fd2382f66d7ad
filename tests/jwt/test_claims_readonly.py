"""Nothing reachable from ``Claims`` can change what another request sees.

The cache hands one verified payload to every later hit of the same token, in
this thread and (wrapped in claims of their own) in the others; so its top
level is a read-only mapping proxy like its nested objects, and claims built in
Python freeze a copy of what they are given (issue 24, info item).
"""

from __future__ import annotations

import copy
import pickle
from types import MappingProxyType
from typing import Any

import pytest
from forge import NOW, SECRET, hmac_key
from pydantic import BaseModel
from support import in_thread

from grelmicro.jwt import Claims, JWTVerifier, Key, _core

PAYLOAD = {"exp": NOW + 60, "sub": "u1", "roles": ["a", "b"], "ctx": {"org": 7}}


def write_sub(claims: Claims) -> None:
    claims._data["sub"] = "x"  # type: ignore[index]


@pytest.mark.parametrize("cache_size", [0, 8])
def test_the_payload_a_verification_stores_is_read_only(cache_size: int):
    verifier = JWTVerifier([Key.secret(SECRET)], cache_size=cache_size)
    claims = verifier.verify(hmac_key().mint(PAYLOAD), now=NOW)

    assert type(claims._data) is MappingProxyType
    with pytest.raises(TypeError):
        write_sub(claims)
    with pytest.raises(TypeError):
        del claims._data["sub"]  # type: ignore[attr-defined]
    assert claims.subject == "u1"


def test_a_write_attempt_leaves_later_hits_and_other_threads_unchanged():
    verifier = JWTVerifier([Key.secret(SECRET)], cache_stats=True)
    token = hmac_key().mint(PAYLOAD)
    first = verifier.verify(token, now=NOW)

    with pytest.raises(TypeError):
        write_sub(first)
    hit = verifier.verify(token, now=NOW + 1)
    other = in_thread(lambda: verifier.verify(token, now=NOW + 2))

    assert hit.subject == "u1"
    assert other.subject == "u1"
    assert other is not first  # the other thread's own claims, same payload
    info = verifier.cache_info()
    assert (info.hits, info.misses) == (2, 1)  # both were hits, not fresh verifications


def test_the_core_verifier_returns_a_read_only_top_level():
    key = _core.Key.secret(SECRET, "HS256")
    engine = _core.Verifier(_core.KeySet([key]), _core.Policy())

    payload, valid_until = engine.verify_until(hmac_key().mint(PAYLOAD), NOW)

    assert type(payload) is MappingProxyType
    assert valid_until == NOW + 60
    assert payload == {"exp": NOW + 60, "sub": "u1", "roles": ("a", "b"), "ctx": {"org": 7}}
    with pytest.raises(TypeError):
        payload["sub"] = "x"  # type: ignore[index]


def test_claims_built_in_python_do_not_share_the_given_dict():
    given: dict[str, Any] = {"sub": "u1", "roles": ["a"], "ctx": {"org": 7}}
    claims = Claims(given)

    given["sub"] = "x"
    given["roles"].append("b")
    given["ctx"]["org"] = 8

    assert claims.subject == "u1"
    assert claims["roles"] == ("a",)
    assert claims["ctx"] == {"org": 7}
    assert type(claims._data) is MappingProxyType
    assert type(claims["ctx"]) is MappingProxyType


def test_to_dict_is_a_deep_mutable_copy():
    verifier = JWTVerifier([Key.secret(SECRET)])
    token = hmac_key().mint(PAYLOAD)
    claims = verifier.verify(token, now=NOW)

    plain = claims.to_dict()
    plain["sub"] = "x"
    plain["roles"].append("c")
    plain["ctx"]["org"] = 8

    assert plain == {"exp": NOW + 60, "sub": "x", "roles": ["a", "b", "c"], "ctx": {"org": 8}}
    assert verifier.verify(token, now=NOW + 1).to_dict() == PAYLOAD


def test_the_mapping_api_reads_through_the_proxy():
    claims = JWTVerifier([Key.secret(SECRET)]).verify(hmac_key().mint(PAYLOAD), now=NOW)

    assert claims == PAYLOAD  # a mapping with lists compares thawed
    assert claims == Claims(PAYLOAD)
    assert claims.get("sub") == "u1"
    assert claims.get("absent", 3) == 3
    assert "ctx" in claims
    assert list(claims.keys()) == ["exp", "sub", "roles", "ctx"]
    assert dict(claims.items())["roles"] == ("a", "b")
    assert len(claims) == 4


def test_pickles_copies_and_models_stay_read_only():
    class Model(BaseModel):
        sub: str
        roles: list[str]

    class Holder(BaseModel):
        claims: Claims

    claims = JWTVerifier([Key.secret(SECRET)]).verify(hmac_key().mint(PAYLOAD), now=NOW)

    for clone in (
        pickle.loads(pickle.dumps(claims)),
        copy.deepcopy(claims),
        Holder.model_validate({"claims": dict(PAYLOAD)}).claims,
    ):
        assert clone == claims
        assert type(clone._data) is MappingProxyType
        with pytest.raises(TypeError):
            write_sub(clone)
    assert claims.to_model(Model) == Model(sub="u1", roles=["a", "b"])


# -- issue 33, N24: claims cannot be re-initialised or re-pointed --------------------------


@pytest.mark.parametrize("cache_size", [0, 8])
def test_a_cached_claims_cannot_be_reinitialised_or_repointed(cache_size: int):
    verifier = JWTVerifier([Key.secret(SECRET)], cache_size=cache_size)
    token = hmac_key().mint(PAYLOAD)
    claims = verifier.verify(token, now=NOW)

    with pytest.raises(AttributeError, match="immutable"):
        claims.__init__({"sub": "admin"})  # type: ignore[misc]
    with pytest.raises(AttributeError):
        object.__setattr__(claims, "_data", MappingProxyType({"sub": "admin"}))
    with pytest.raises(AttributeError, match="immutable"):
        claims._data = MappingProxyType({"sub": "admin"})  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        del claims._data

    again = verifier.verify(token, now=NOW)
    assert again.subject == "u1"
    assert claims.subject == "u1"
    assert in_thread(lambda: verifier.verify(token, now=NOW).subject) == "u1"


def test_claims_built_in_python_init_once():
    claims = Claims({"sub": "u1"})
    with pytest.raises(AttributeError, match="immutable"):
        Claims.__init__(claims, {"sub": "admin"})
    assert claims.subject == "u1"
