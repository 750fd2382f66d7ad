"""Registered claims: type confusion, time boundaries, audience, issuer, type.

Attack class: a correctly signed token whose claims exploit a loose check:
``exp`` as a string or a bool (compared as text, or truthy), ``aud`` as an
object, off-by-one and leeway boundaries, an audience-less verifier taking a
token meant for another service, substring or case matches on ``iss`` and
``aud``, a token of another type (an ID token used as an access token).

References:
- RFC 7519 §4.1.1 (``iss``), §4.1.3 (``aud``: reject when the verifier does
  not identify itself with a value in it), §4.1.4-4.1.6 (``exp``, ``nbf``,
  ``iat`` are NumericDate: JSON numbers), §2 (NumericDate);
- RFC 8725 §3.8 (validate issuer and subject), §3.9 (use and validate
  audience), §3.11 (explicit typing), §2.7 / §2.8 (substitution and
  cross-JWT confusion);
- RFC 9068 §2.1 and §4 (``typ: at+jwt`` for access tokens, media type
  comparison with an optional ``application/`` prefix);
- RFC 7515 §4.1.9 (``typ`` is a media type, compared case-insensitively).
"""

from __future__ import annotations

from typing import Any

import forge
import pytest
from support import NOW, accept, key_for, mint, payload, reject, verifier_for

from grelmicro.jwt import ConfigurationError, JWTVerifier, Key

AUDIENCE = "https://api.example.com"
ISSUER = "https://idp.example.com/"

NOT_NUMBERS = [
    str(NOW + 3600),
    "tomorrow",
    "",
    True,
    False,
    None,
    [NOW + 3600],
    {},
    {"$numberLong": str(NOW + 3600)},
]


@pytest.mark.parametrize("value", NOT_NUMBERS, ids=repr)
@pytest.mark.parametrize("claim", ["exp", "nbf", "iat"])
def test_time_claims_must_be_numbers(ring: forge.KeyRing, claim: str, value: Any) -> None:
    body = payload(**{claim: value})
    reject(verifier_for(ring, "HS256"), mint(ring, "HS256", body=body), "invalid-claim")


AUD_NOT_STRINGS = [1, True, None, {}, {"aud": AUDIENCE}, [1], [AUDIENCE, None], [[AUDIENCE]], [{}]]


@pytest.mark.parametrize("value", AUD_NOT_STRINGS, ids=repr)
def test_aud_type_confusion(ring: forge.KeyRing, value: Any) -> None:
    verifier = verifier_for(ring, "HS256", audience=AUDIENCE)
    reject(verifier, mint(ring, "HS256", body=payload(aud=value)), "invalid-claim")


@pytest.mark.parametrize("value", [1, True, None, [], [ISSUER], {}, {"iss": ISSUER}], ids=repr)
@pytest.mark.parametrize("configured", [True, False], ids=["issuer-set", "no-issuer"])
def test_iss_type_confusion(ring: forge.KeyRing, value: Any, configured: bool) -> None:
    options = {"issuer": ISSUER} if configured else {}
    verifier = verifier_for(ring, "HS256", **options)
    reject(verifier, mint(ring, "HS256", body=payload(iss=value)), "invalid-claim")


@pytest.mark.parametrize("claim", ["sub", "jti"])
@pytest.mark.parametrize("value", [1, None, ["user-1"], {"id": 1}], ids=repr)
def test_sub_and_jti_must_be_strings(ring: forge.KeyRing, claim: str, value: Any) -> None:
    body = payload(**{claim: value})
    reject(verifier_for(ring, "HS256"), mint(ring, "HS256", body=body), "invalid-claim")


# (claim, its refusal, policy, claim - now offsets accepted, offsets refused)
TIME_BOUNDARIES = [
    # RFC 7519 §4.1.4: the token MUST NOT be accepted on or after exp.
    ("exp", "expired", {}, [1, 0.001], [0, -0.001, -1]),
    ("exp", "expired", {"leeway": 30}, [1, 0, -29, -29.999], [-30, -31]),
    # The allowance ahead never reaches exp.
    ("exp", "expired", {"leeway_ahead": 300}, [1, 0.001], [0, -0.001, -1]),
    ("nbf", "not-yet-valid", {"leeway_ahead": 0}, [0, -1, -0.5], [1, 0.001]),
    ("nbf", "not-yet-valid", {"leeway": 30, "leeway_ahead": 0}, [30, 29.5, 0], [30.001, 31]),
    # By default nbf and iat may be 60 s ahead of now (leeway_ahead).
    ("nbf", "not-yet-valid", {}, [60, 59.5, 1, 0], [60.001, 61]),
    ("iat", "issued-in-future", {"leeway_ahead": 0}, [0, -1, -86400], [1, 0.001]),
    ("iat", "issued-in-future", {"leeway": 30, "leeway_ahead": 0}, [30, 29.5], [30.001, 31]),
    ("iat", "issued-in-future", {}, [60, 59.5, 1, -86400], [60.001, 61]),
]


@pytest.mark.parametrize(("claim", "reason", "policy", "ok", "bad"), TIME_BOUNDARIES)
def test_time_claim_boundary(
    ring: forge.KeyRing,
    claim: str,
    reason: str,
    policy: dict[str, float],
    ok: list[float],
    bad: list[float],
) -> None:
    verifier = verifier_for(ring, "HS256", **policy)
    for offset in ok:
        accept(verifier, mint(ring, "HS256", body=payload(**{claim: NOW + offset})))
    for offset in bad:
        reject(verifier, mint(ring, "HS256", body=payload(**{claim: NOW + offset})), reason)


@pytest.mark.parametrize(("leeway", "limit"), [(0, 600), (30, 630)])
def test_max_age_boundary(ring: forge.KeyRing, leeway: float, limit: float) -> None:
    verifier = verifier_for(ring, "HS256", max_age=600, leeway=leeway)
    accept(verifier, mint(ring, "HS256", body=payload(iat=NOW - limit)))
    reject(verifier, mint(ring, "HS256", body=payload(iat=NOW - limit - 0.5)), "too-old")
    reject(verifier, mint(ring, "HS256", body=payload()), "missing-claim")


def test_exp_is_required_by_default(ring: forge.KeyRing) -> None:
    verifier = verifier_for(ring, "HS256")
    reject(verifier, mint(ring, "HS256", body={"sub": "user-1"}), "missing-claim")
    reject(verifier, mint(ring, "HS256", body={}), "missing-claim")


@pytest.mark.parametrize(
    "settings",
    [
        {"required": []},
        {"required": ["sub"]},
        {"required": "tenant"},
        {"required": ()},
        {"leeway": 5, "required": ["jti", "sub"]},
    ],
    ids=["required-empty", "required-sub", "required-str", "required-tuple", "required-two"],
)
def test_required_never_drops_exp(ring: forge.KeyRing, settings: dict[str, Any]) -> None:
    # Issue 10: required= used to replace ("exp",), so a token that never
    # expires was accepted. It adds to exp; only require_exp=False drops it.
    verifier = verifier_for(ring, "HS256", **settings)
    body = {"sub": "user-1", "jti": "j", "tenant": "t"}
    reject(verifier, mint(ring, "HS256", body=body), "missing-claim")


@pytest.mark.parametrize("variable", ["REQUIRED", "ISSUER", "AUDIENCE", "ALGORITHMS"])
@pytest.mark.parametrize("value", ["", "  ", " , "])
def test_blank_environment_values_are_configuration_errors(variable: str, value: str) -> None:
    # Issue 10: GRELMICRO_JWT_ISSUER="" meant "no issuer check".
    with pytest.raises(ConfigurationError):
        JWTVerifier.from_env(
            keys=[Key.secret(b"s" * 32)], environ={f"GRELMICRO_JWT_{variable}": value}
        )


@pytest.mark.parametrize("variable", ["ISSUERS", "AUDIENCES", "REQUIRE", "ISSUER_URL"])
def test_unknown_environment_variables_are_configuration_errors(variable: str) -> None:
    # Issue 10: a misspelt ISSUERS was ignored and any issuer accepted.
    with pytest.raises(ConfigurationError, match="did you mean"):
        JWTVerifier.from_env(
            keys=[Key.secret(b"s" * 32)], environ={f"GRELMICRO_JWT_{variable}": "x"}
        )


@pytest.mark.parametrize(
    "scope",
    ["read:items\u00a0admin", "read:items\tadmin", "read:items\u2003admin", "read:items\nadmin"],
    ids=["no-break-space", "tab", "em-space", "newline"],
)
def test_scope_splits_on_space_only(ring: forge.KeyRing, scope: str) -> None:
    # RFC 6749 §3.3: scopes are separated by U+0020; "admin" is not granted.
    claims = accept(verifier_for(ring, "HS256"), mint(ring, "HS256", body=payload(scope=scope)))
    assert "admin" not in claims.scopes
    assert not claims.has_scopes("admin")


@pytest.mark.parametrize("claim", ["sub", "jti", "iat", "nbf", "tenant"])
def test_configured_required_claims(ring: forge.KeyRing, claim: str) -> None:
    verifier = verifier_for(ring, "HS256", required=["exp", claim])
    present = "x" if claim in {"sub", "jti", "tenant"} else NOW - 1
    accept(verifier, mint(ring, "HS256", body={"exp": NOW + 60, claim: present}))
    reject(verifier, mint(ring, "HS256", body={"exp": NOW + 60}), "missing-claim")


@pytest.mark.parametrize("aud", [AUDIENCE, [AUDIENCE], "other", [], ["a", "b"]], ids=repr)
def test_aud_present_with_no_audience_configured(ring: forge.KeyRing, aud: Any) -> None:
    # RFC 7519 §4.1.3: a token meant for an audience is for that audience only.
    verifier = verifier_for(ring, "HS256")
    reject(verifier, mint(ring, "HS256", body=payload(aud=aud)), "audience")


def test_aud_missing_when_configured(ring: forge.KeyRing) -> None:
    verifier = verifier_for(ring, "HS256", audience=AUDIENCE)
    reject(verifier, mint(ring, "HS256", body=payload()), "missing-claim")


AUD_TRICKS = [
    "https://api.example.com.attacker.net",
    "https://api.example.co",
    "https://api.example.com/",
    "HTTPS://API.EXAMPLE.COM",
    "https://API.example.com",
    " https://api.example.com",
    "https://api.example.com ",
    "https://api.example.com\u0000",
    "https://api.example.com%00",
    "https://api.example.com#",
    "https://api.\u0435xample.com",  # Cyrillic e
    "api.example.com",
    "*",
    "",
    ["https://api.example.co", "https://attacker.net"],
    [],
    [f"{AUDIENCE}x"],
]


@pytest.mark.parametrize("aud", AUD_TRICKS, ids=repr)
def test_audience_substring_and_case_tricks(ring: forge.KeyRing, aud: Any) -> None:
    verifier = verifier_for(ring, "HS256", audience=AUDIENCE)
    reject(verifier, mint(ring, "HS256", body=payload(aud=aud)), "audience")


def test_any_configured_audience_in_a_list_matches(ring: forge.KeyRing) -> None:
    verifier = verifier_for(ring, "HS256", audience=[AUDIENCE, "https://other.example.com"])
    accept(verifier, mint(ring, "HS256", body=payload(aud=["x", "https://other.example.com"])))
    accept(verifier, mint(ring, "HS256", body=payload(aud=AUDIENCE)))


ISS_TRICKS = [
    "https://idp.example.com",
    "https://idp.example.com//",
    "https://idp.example.com/.attacker.net",
    "https://idp.example.com.attacker.net/",
    "HTTPS://IDP.EXAMPLE.COM/",
    "https://idp.example.com/\u0000",
    "https://idp.example.com/ ",
    " https://idp.example.com/",
    "https://idp.examp1e.com/",
    "",
]


@pytest.mark.parametrize("iss", ISS_TRICKS, ids=repr)
def test_issuer_exact_match_only(ring: forge.KeyRing, iss: str) -> None:
    verifier = verifier_for(ring, "HS256", issuer=ISSUER)
    accept(verifier, mint(ring, "HS256", body=payload(iss=ISSUER)))
    reject(verifier, mint(ring, "HS256", body=payload(iss=iss)), "issuer")


def test_issuer_missing_when_configured(ring: forge.KeyRing) -> None:
    verifier = verifier_for(ring, "HS256", issuer=[ISSUER, "https://other/"])
    reject(verifier, mint(ring, "HS256", body=payload()), "missing-claim")


TYP_CASES = [
    ("at+jwt", None),
    ("AT+JWT", None),
    ("At+Jwt", None),
    ("application/at+jwt", None),
    ("APPLICATION/at+JWT", None),
    ("JWT", "type"),
    ("jwt", "type"),
    ("application/jwt", "type"),
    ("at+jwt ", "type"),
    (" at+jwt", "type"),
    ("xat+jwt", "type"),
    ("at+jwtx", "type"),
    ("application/application/at+jwt", "type"),
    ("at+jwt; charset=utf-8", "type"),
    ("", "type"),
    (1, "malformed"),
    (None, "malformed"),
    (["at+jwt"], "malformed"),
]


@pytest.mark.parametrize(("typ", "reason"), TYP_CASES, ids=repr)
def test_typ_policy(ring: forge.KeyRing, typ: Any, reason: str | None) -> None:
    verifier = verifier_for(ring, "HS256", typ="at+jwt")
    token = mint(ring, "HS256", {"alg": "HS256", "typ": typ})
    if reason is None:
        accept(verifier, token)
    else:
        reject(verifier, token, reason)


def test_typ_missing_under_a_typ_policy(ring: forge.KeyRing) -> None:
    verifier = verifier_for(ring, "HS256", typ="at+jwt")
    reject(verifier, mint(ring, "HS256", {"alg": "HS256"}), "type")


def test_typ_is_free_without_a_policy(ring: forge.KeyRing) -> None:
    verifier = verifier_for(ring, "HS256")
    for typ in ("JWT", "at+jwt", "anything"):
        accept(verifier, mint(ring, "HS256", {"alg": "HS256", "typ": typ}))


def test_claim_checks_follow_the_signature(ring: forge.KeyRing) -> None:
    # A forged token with bad claims is reported as a forgery, not as "expired":
    # claim errors are only reachable for authentic tokens.
    verifier = verifier_for(ring, "HS256", audience=AUDIENCE, issuer=ISSUER)
    forged = forge.mint({"alg": "HS256"}, payload(exp=1, aud="x"), b"x" * 32, "HS256")
    reject(verifier, forged, "signature")


def test_policy_checks_compose(ring: forge.KeyRing) -> None:
    verifier = JWTVerifier(
        keys=[key_for(ring, "ES256", "e")],
        audience=AUDIENCE,
        issuer=ISSUER,
        typ="at+jwt",
        max_age=3600,
        required=["exp", "sub"],
        cache_size=0,
    )
    good = payload(aud=AUDIENCE, iss=ISSUER, iat=NOW - 10)
    header = {"alg": "ES256", "kid": "e", "typ": "at+jwt"}
    claims = accept(verifier, mint(ring, "ES256", header, good))
    assert claims.subject == "user-1"
    assert claims.audience == (AUDIENCE,)
    reject(verifier, mint(ring, "ES256", header, {**good, "iss": "x"}), "issuer")
    reject(verifier, mint(ring, "ES256", {**header, "typ": "JWT"}, good), "type")
