"""``Claims.require``: a claim the route cannot do without, typed, or a refusal.

And ``ExpiredTokenError.expires_at``, which is always a datetime.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

import pytest
from forge import NOW, SECRET, hmac_key

from grelmicro.jwt import (
    Claims,
    ConfigurationError,
    ExpiredTokenError,
    InvalidClaimError,
    JWTVerifier,
    Key,
    MissingClaimError,
    TokenRejectedError,
)

PAYLOAD = {
    "sub": "user-1",
    "exp": NOW + 60,
    "n": 3,
    "ratio": 0.5,
    "admin": True,
    "roles": ["a", "b"],
    "profile": {"city": "Lyon"},
    "nothing": None,
}


@pytest.fixture
def claims() -> Claims:
    verifier = JWTVerifier([Key.secret(SECRET)])
    return verifier.verify(hmac_key().mint(PAYLOAD), now=NOW)


@pytest.mark.parametrize(
    ("name", "kind", "expected"),
    [
        ("sub", None, "user-1"),
        ("sub", str, "user-1"),
        ("n", int, 3),
        ("n", float, 3),  # a JSON integer is a number
        ("ratio", float, 0.5),
        ("admin", bool, True),
        ("roles", tuple, ("a", "b")),
        ("profile", Mapping, {"city": "Lyon"}),
    ],
)
def test_require_gives_the_value(claims: Claims, name: str, kind: Any, expected: Any) -> None:
    value = claims.require(name) if kind is None else claims.require(name, kind)

    assert value == expected


def test_a_missing_claim_is_a_missing_claim_refusal(claims: Claims) -> None:
    with pytest.raises(MissingClaimError) as refused:
        claims.require("tenant")

    assert refused.value.claim == "tenant"
    assert isinstance(refused.value, TokenRejectedError)  # 401 under JWTBearer.install
    assert refused.value.reason == "missing-claim"


@pytest.mark.parametrize(
    ("name", "kind", "found"),
    [
        ("nothing", None, "null"),
        ("nothing", str, "null"),
        ("n", str, "int"),
        ("admin", int, "bool"),  # a JSON boolean is not a number
        ("sub", int, "str"),
        ("ratio", int, "float"),
    ],
)
def test_a_claim_of_another_type_is_an_invalid_claim_refusal(
    claims: Claims, name: str, kind: Any, found: str
) -> None:
    with pytest.raises(InvalidClaimError, match=f"is {found}, not") as refused:
        claims.require(name) if kind is None else claims.require(name, kind)

    assert refused.value.claim == name


def test_the_claim_name_is_shown_escaped_and_capped() -> None:
    with pytest.raises(MissingClaimError) as refused:
        Claims({}).require("\n" + "x" * 500)

    assert "\n" not in str(refused.value)
    assert len(str(refused.value)) < 120


@pytest.mark.parametrize("kind", ["str", 3, str | int])
def test_kind_must_be_a_class(claims: Claims, kind: Any) -> None:
    with pytest.raises(ConfigurationError, match="takes a class"):
        claims.require("sub", kind)


# -- ExpiredTokenError.expires_at ---------------------------------------------------


@pytest.mark.parametrize(
    ("exp", "expires_at"),
    [
        (NOW - 1, datetime.fromtimestamp(NOW - 1, tz=timezone.utc)),
        (-1e300, datetime.min.replace(tzinfo=timezone.utc)),  # before year 1
    ],
)
def test_expired_always_carries_expires_at(exp: float, expires_at: datetime) -> None:
    verifier = JWTVerifier([Key.secret(SECRET)], cache_size=0)

    with pytest.raises(ExpiredTokenError) as refused:
        verifier.verify(hmac_key().mint({"exp": exp}), now=NOW)

    assert refused.value.expires_at == expires_at
