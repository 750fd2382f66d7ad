"""Registered-claim rules at their boundaries (design §4).

``now < exp + leeway``, ``now >= nbf - ahead``, ``iat <= now + ahead`` with
``ahead = max(leeway, leeway_ahead)`` (``leeway_ahead`` 60 s by default),
``now - iat <= max_age + leeway``; audience, issuer, typ and required claims.
Each row gives the policy, the token and the expected kind_of.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import forge
import pytest
from grelmicro_core import Policy
from support import NOW, error_of, hs256, key_for, kind_of, rejection, verifier

STRICT: dict[str, Any] = {"required": [], "leeway_ahead": 0}
NO_REQUIRED: dict[str, Any] = {"required": []}


@pytest.mark.parametrize(
    ("policy", "payload", "now", "expected"),
    [
        # exp: exclusive upper bound.
        ({}, {"exp": NOW + 1}, NOW, "ok"),
        ({}, {"exp": NOW}, NOW, "expired"),
        ({}, {"exp": NOW - 1}, NOW, "expired"),
        ({}, {"exp": NOW + 0.5}, NOW + 0.25, "ok"),
        ({}, {"exp": NOW + 0.5}, NOW + 0.5, "expired"),
        ({}, {"exp": float(NOW)}, NOW - 0.001, "ok"),
        ({"leeway": 10}, {"exp": NOW}, NOW + 9.999, "ok"),
        ({"leeway": 10}, {"exp": NOW}, NOW + 10, "expired"),
        ({}, {"exp": 2**70}, NOW, "ok"),
        ({}, {"exp": -(2**70)}, NOW, "expired"),
        ({}, {"exp": 0}, NOW, "expired"),
        # nbf: inclusive lower bound, leeway_ahead (default 60 s) ahead of now.
        (STRICT, {"nbf": NOW}, NOW, "ok"),
        (STRICT, {"nbf": NOW + 1}, NOW, "not-yet-valid"),
        (STRICT, {"nbf": NOW + 0.001}, NOW, "not-yet-valid"),
        (NO_REQUIRED, {"nbf": NOW + 60}, NOW, "ok"),
        (NO_REQUIRED, {"nbf": NOW + 61}, NOW, "not-yet-valid"),
        (NO_REQUIRED, {"nbf": NOW + 60.001}, NOW, "not-yet-valid"),
        ({"leeway": 5, "leeway_ahead": 0, "required": []}, {"nbf": NOW + 5}, NOW, "ok"),
        (
            {"leeway": 5, "leeway_ahead": 0, "required": []},
            {"nbf": NOW + 5.001},
            NOW,
            "not-yet-valid",
        ),
        # The larger of leeway and leeway_ahead applies.
        ({"leeway": 90, "required": []}, {"nbf": NOW + 90}, NOW, "ok"),
        ({"leeway": 90, "required": []}, {"nbf": NOW + 91}, NOW, "not-yet-valid"),
        # iat: not in the future, beyond the same allowance.
        (STRICT, {"iat": NOW}, NOW, "ok"),
        (STRICT, {"iat": NOW + 1}, NOW, "issued-in-future"),
        (NO_REQUIRED, {"iat": NOW + 60}, NOW, "ok"),
        (NO_REQUIRED, {"iat": NOW + 61}, NOW, "issued-in-future"),
        ({"leeway": 5, "leeway_ahead": 0, "required": []}, {"iat": NOW + 5}, NOW, "ok"),
        (
            {"leeway": 5, "leeway_ahead": 0, "required": []},
            {"iat": NOW + 5.5},
            NOW,
            "issued-in-future",
        ),
        ({"leeway_ahead": 120, "required": []}, {"iat": NOW + 120}, NOW, "ok"),
        ({"leeway_ahead": 120, "required": []}, {"iat": NOW + 121}, NOW, "issued-in-future"),
        # exp never gets the allowance ahead.
        ({"leeway_ahead": 120}, {"exp": NOW}, NOW, "expired"),
        # max_age: measured from iat, leeway added; it makes iat required.
        ({"max_age": 60, "required": []}, {"iat": NOW - 60}, NOW, "ok"),
        ({"max_age": 60, "required": []}, {"iat": NOW - 60.5}, NOW, "too-old"),
        ({"max_age": 60, "leeway": 5, "required": []}, {"iat": NOW - 65}, NOW, "ok"),
        ({"max_age": 60, "leeway": 5, "required": []}, {"iat": NOW - 65.5}, NOW, "too-old"),
        ({"max_age": 60, "required": []}, {"sub": "u"}, NOW, "missing-claim"),
        # Every time claim is checked, not only the first failing one.
        ({}, {"exp": NOW + 100, "nbf": NOW + 65}, NOW, "not-yet-valid"),
        ({}, {"exp": NOW + 100, "iat": NOW + 65}, NOW, "issued-in-future"),
    ],
)
def test_time_claims(
    policy: dict[str, Any], payload: dict[str, Any], now: float, expected: str
) -> None:
    sig, check = hs256(**policy)

    assert rejection(check, sig.mint(payload), now) == expected


AUD = {"audience": ["https://api.example.com", "urn:other"], "required": []}


@pytest.mark.parametrize(
    ("policy", "payload", "expected"),
    [
        (AUD, {"aud": "https://api.example.com"}, "ok"),
        (AUD, {"aud": "urn:other"}, "ok"),
        (AUD, {"aud": ["x", "urn:other"]}, "ok"),
        (AUD, {"aud": ["https://api.example.com"]}, "ok"),
        (AUD, {"aud": "https://API.example.com"}, "audience"),
        (AUD, {"aud": "https://api.example.com/"}, "audience"),
        (AUD, {"aud": ["x", "y"]}, "audience"),
        (AUD, {"aud": []}, "audience"),
        (AUD, {}, "missing-claim"),
        (AUD, {"aud": None}, "invalid-claim"),
        (AUD, {"aud": 1}, "invalid-claim"),
        (AUD, {"aud": {"a": "urn:other"}}, "invalid-claim"),
        (AUD, {"aud": ["urn:other", 1]}, "invalid-claim"),
        (AUD, {"aud": [["urn:other"]]}, "invalid-claim"),
        # No audience configured: a token naming one is refused (RFC 7519 §4.1.3).
        ({"required": []}, {"aud": "https://api.example.com"}, "audience"),
        ({"required": []}, {"aud": []}, "audience"),
        ({"required": []}, {"sub": "u"}, "ok"),
    ],
)
def test_audience(policy: dict[str, Any], payload: dict[str, Any], expected: str) -> None:
    sig, check = hs256(**policy)

    assert rejection(check, sig.mint(payload)) == expected


ONE_ISSUER = {"issuer": ["https://idp.example.com/"], "required": []}
TWO_ISSUERS = {"issuer": ["https://a.example/", "https://b.example/"], "required": []}


@pytest.mark.parametrize(
    ("policy", "payload", "expected"),
    [
        (ONE_ISSUER, {"iss": "https://idp.example.com/"}, "ok"),
        (ONE_ISSUER, {"iss": "https://idp.example.com"}, "issuer"),
        (ONE_ISSUER, {"iss": "HTTPS://IDP.EXAMPLE.COM/"}, "issuer"),
        (ONE_ISSUER, {"iss": "https://idp.example.com/ "}, "issuer"),
        (ONE_ISSUER, {}, "missing-claim"),
        (ONE_ISSUER, {"iss": ["https://idp.example.com/"]}, "invalid-claim"),
        (ONE_ISSUER, {"iss": None}, "invalid-claim"),
        (TWO_ISSUERS, {"iss": "https://a.example/"}, "ok"),
        (TWO_ISSUERS, {"iss": "https://b.example/"}, "ok"),
        (TWO_ISSUERS, {"iss": "https://c.example/"}, "issuer"),
        # No issuer configured: any issuer passes, a wrong type still does not.
        ({"required": []}, {"iss": "anyone"}, "ok"),
        ({"required": []}, {"iss": 5}, "invalid-claim"),
    ],
)
def test_issuer(policy: dict[str, Any], payload: dict[str, Any], expected: str) -> None:
    sig, check = hs256(**policy)

    assert rejection(check, sig.mint(payload)) == expected


@pytest.mark.parametrize(
    ("policy_typ", "header_typ", "expected"),
    [
        ("at+jwt", "at+jwt", "ok"),
        ("at+jwt", "AT+JWT", "ok"),
        ("at+jwt", "application/at+jwt", "ok"),
        ("at+jwt", "Application/At+JWT", "ok"),
        ("application/at+jwt", "at+jwt", "ok"),
        ("AT+JWT", "at+jwt", "ok"),
        ("at+jwt", "JWT", "type"),
        ("at+jwt", "jwt", "type"),
        ("at+jwt", "application/jwt", "type"),
        ("at+jwt", "text/at+jwt", "type"),
        ("at+jwt", "at+jwt ", "type"),
        ("at+jwt", None, "type"),
        ("JWT", "jwt", "ok"),
        # No typ policy: any typ, or none, passes.
        (None, None, "ok"),
        (None, "anything/at-all", "ok"),
    ],
)
def test_typ(policy_typ: str | None, header_typ: str | None, expected: str) -> None:
    sig, check = hs256(typ=policy_typ)
    members = {} if header_typ is None else {"typ": header_typ}

    assert rejection(check, sig.mint({"exp": NOW + 60}, **members)) == expected


def test_typ_must_be_a_string() -> None:
    sig, check = hs256(typ="at+jwt")

    assert rejection(check, sig.mint({"exp": NOW + 60}, typ=["at+jwt"])) == "malformed"


@pytest.mark.parametrize(
    ("required", "payload", "expected"),
    [
        (None, {"exp": NOW + 1}, "ok"),
        (None, {"sub": "u"}, "missing-claim"),
        ([], {}, "ok"),
        (["sub"], {"sub": "u"}, "ok"),
        (["sub"], {"exp": NOW + 1}, "missing-claim"),
        (["exp", "sub", "jti"], {"exp": NOW + 1, "sub": "u", "jti": "j"}, "ok"),
        (["exp", "sub", "jti"], {"exp": NOW + 1, "sub": "u"}, "missing-claim"),
        (["tenant"], {"tenant": None}, "ok"),
        (["tenant"], {"tenant": {"id": 1}}, "ok"),
        (["tenant"], {"Tenant": "x"}, "missing-claim"),
        (["tenant", "scope"], {"scope": "a"}, "missing-claim"),
        (["nbf", "iat"], {"nbf": NOW, "iat": NOW}, "ok"),
        (["nbf", "iat"], {"nbf": NOW}, "missing-claim"),
        (["aud"], {"sub": "u"}, "missing-claim"),
        (["iss"], {"iss": "x"}, "ok"),
    ],
)
def test_required_claims(
    required: list[str] | None, payload: dict[str, Any], expected: str
) -> None:
    policy = {} if required is None else {"required": required}
    sig, check = hs256(**policy)

    assert rejection(check, sig.mint(payload)) == expected


def test_missing_claim_message_names_the_claim() -> None:
    sig, check = hs256(required=["exp", "tenant"])

    kind, message = error_of(check.verify, sig.mint({"exp": NOW + 5}), NOW).args

    assert kind == "missing-claim"
    assert "tenant" in message


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ({"exp": str(NOW + 60)}, "invalid-claim"),
        ({"exp": True}, "invalid-claim"),
        ({"exp": None}, "invalid-claim"),
        ({"exp": [NOW + 60]}, "invalid-claim"),
        ({"exp": {"t": NOW + 60}}, "invalid-claim"),
        ({"exp": NOW + 60, "nbf": "0"}, "invalid-claim"),
        ({"exp": NOW + 60, "nbf": False}, "invalid-claim"),
        ({"exp": NOW + 60, "iat": str(NOW)}, "invalid-claim"),
        ({"exp": NOW + 60, "sub": 1}, "invalid-claim"),
        ({"exp": NOW + 60, "sub": None}, "invalid-claim"),
        ({"exp": NOW + 60, "jti": 123}, "invalid-claim"),
        ({"exp": NOW + 60, "iss": {"x": 1}}, "invalid-claim"),
        ({"exp": float(NOW + 60), "nbf": float(NOW), "iat": NOW - 0.5}, "ok"),
        ({"exp": NOW + 60, "sub": "", "jti": ""}, "ok"),
    ],
)
def test_claim_types(payload: dict[str, Any], expected: str) -> None:
    sig, check = hs256()

    assert rejection(check, sig.mint(payload)) == expected


def test_times_inside_raw_json_keep_their_form() -> None:
    """exp written as 1.7e9 (a float in exponent form) is a number like any other."""
    sig, check = hs256()
    token = sig.mint('{"exp":1.7000006e9}')

    assert check.verify(token, NOW)["exp"] == 1.7000006e9
    assert rejection(check, token, 1.7000006e9) == "expired"


def test_claim_failures_carry_the_times() -> None:
    sig, check = hs256(leeway=3)

    kind, message = error_of(check.verify, sig.mint({"exp": NOW - 100}), NOW).args

    assert kind == "expired"
    assert str(NOW - 100) in message
    assert str(NOW) in message


def test_payload_shape() -> None:
    """Arrays come back as tuples, nested objects as read-only mappings."""
    sig, check = hs256()
    payload = {
        "exp": NOW + 9,
        "roles": ["a", "b"],
        "ctx": {"org": {"id": 7}, "tags": [1, {"x": None}]},
    }

    claims = check.verify(sig.mint(payload), NOW)

    assert type(claims) is MappingProxyType  # the top level too: a cache shares it
    assert claims["roles"] == ("a", "b")
    assert isinstance(claims["ctx"], MappingProxyType)
    assert isinstance(claims["ctx"]["org"], MappingProxyType)
    assert claims["ctx"]["org"]["id"] == 7
    assert claims["ctx"]["tags"][0] == 1
    assert claims["ctx"]["tags"][1]["x"] is None
    with pytest.raises(TypeError):
        claims["ctx"]["org"]["id"] = 8  # type: ignore[index]
    with pytest.raises(TypeError):
        claims["exp"] = 0  # type: ignore[index]


def test_policy_refusals() -> None:
    """A policy is validated once, at build time."""
    cases: list[dict[str, Any]] = [
        {"leeway": -1},
        {"leeway": float("nan")},
        {"leeway": float("inf")},
        {"max_age": 0},
        {"max_age": -5},
        {"algorithms": []},
        {"algorithms": ["none"]},
        {"algorithms": ["hs256"]},
        {"audience": [""]},
        {"issuer": [""]},
        {"required": [""]},
        {"typ": ""},
        {"max_token_size": 1},
        {"max_depth": 1},
    ]
    for options in cases:
        assert kind_of(Policy, **options) == "invalid-config", options


def test_claim_rules_do_not_depend_on_the_algorithm() -> None:
    """The same expired payload is refused the same way under ES256."""
    sig = forge.signer("ES256")
    check = verifier(key_for(sig))

    assert rejection(check, sig.mint({"exp": NOW})) == "expired"
    assert rejection(check, sig.mint({"exp": NOW + 1})) == "ok"


def test_required_claims_past_64_are_refused_at_build() -> None:
    """Regression: names past the 64th used to share one presence bit, so one
    of them present hid the others missing. The policy now refuses them."""
    names = [f"c{i}" for i in range(65)]

    assert kind_of(Policy, required=names) == "invalid-config"
    # Registered names do not count towards the 64.
    assert kind_of(Policy, required=[*names[:64], "exp", "sub", "iat"]) == "ok"


@pytest.mark.parametrize("missing", [0, 31, 62, 63])
def test_each_of_64_required_claims_is_checked(missing: int) -> None:
    names = [f"c{i}" for i in range(64)]
    sig, check = hs256(required=names)
    present = dict.fromkeys(names, 1) | {"exp": NOW + 60}

    assert rejection(check, sig.mint(present)) == "ok"
    del present[names[missing]]
    assert rejection(check, sig.mint(present)) == "missing-claim"
