"""An issuer's own policy settings (``Issuer(..., **policy)``).

An issuer's settings start from the verifier's: ``required`` adds claims,
other settings may tighten a check, and loosening one (a profile's claims, a
longer ``max_age``, another ``typ``...) needs ``allow_weaker`` naming it.
"""

from __future__ import annotations

from typing import Any

import pytest
from forge import NOW, SECRET, hmac_key

from grelmicro.jwt import (
    ConfigurationError,
    Issuer,
    JWTConfig,
    JWTVerifier,
    Key,
    MissingClaimError,
    access_token_profile,
)

ISS = "https://idp.example.com/"
AUD = "https://api.example.com"
#: Every claim an RFC 9068 access token carries, and a scope.
ACCESS: dict[str, Any] = {
    "iss": ISS,
    "exp": NOW + 300,
    "aud": AUD,
    "sub": "user-1",
    "client_id": "app-1",
    "iat": NOW,
    "jti": "t-1",
    "scope": "read",
}


def issuer(**policy: Any) -> Issuer:
    return Issuer(ISS, keys=[Key.secret(SECRET, "HS256")], **policy)


def access_token(*missing: str) -> str:
    claims = {name: value for name, value in ACCESS.items() if name not in missing}
    return hmac_key().mint(claims, typ="at+jwt")


# -- required adds to the verifier's claims ----------------------------------------


@pytest.mark.parametrize("claim", ["sub", "client_id", "iat", "jti", "scope"])
def test_issuer_required_adds_to_the_profile_claims(claim: str):
    """Issue 24: ``required=["scope"]`` used to replace the profile's claims."""
    verifier = JWTVerifier(
        issuers=[issuer(required=["scope"])], config=access_token_profile(audience=AUD)
    )

    assert verifier.verify(access_token(), now=NOW)["scope"] == "read"
    with pytest.raises(MissingClaimError):
        verifier.verify(access_token(claim), now=NOW)


def test_issuer_required_adds_to_the_verifiers_required():
    verifier = JWTVerifier(issuers=[issuer(required="jti")], required=["sub"], audience=AUD)

    assert verifier.verify(hmac_key().mint(ACCESS), now=NOW)["jti"] == "t-1"
    for claim in ("exp", "sub", "jti"):
        token = hmac_key().mint({k: v for k, v in ACCESS.items() if k != claim})
        with pytest.raises(MissingClaimError):
            verifier.verify(token, now=NOW)


def test_allow_weaker_required_replaces_the_verifiers_claims():
    verifier = JWTVerifier(
        issuers=[issuer(required=["sub"], allow_weaker=["required"])],
        config=access_token_profile(audience=AUD),
    )

    # Named explicitly: client_id, iat and jti are no longer required.
    assert verifier.verify(access_token("client_id", "iat", "jti"), now=NOW)["sub"] == "user-1"
    for claim in ("exp", "sub"):  # exp stays require_exp's; sub is the issuer's own
        with pytest.raises(MissingClaimError):
            verifier.verify(access_token(claim), now=NOW)


# -- loosening a check needs allow_weaker ------------------------------------------

LOOSER = [
    pytest.param({"typ": "at+jwt"}, {"typ": "JWT"}, "typ", id="typ"),
    pytest.param({"max_age": 60}, {"max_age": 3600}, "max_age", id="max-age"),
    pytest.param({"leeway": 5}, {"leeway": 60}, "leeway", id="leeway"),
    pytest.param({"audience": AUD}, {"audience": []}, "audience", id="audience"),
]


@pytest.mark.parametrize(("verifier_policy", "issuer_policy", "setting"), LOOSER)
def test_a_looser_issuer_setting_is_refused_unless_named(
    verifier_policy: dict[str, Any], issuer_policy: dict[str, Any], setting: str
):
    with pytest.raises(ConfigurationError) as caught:
        JWTVerifier(issuers=[issuer(**issuer_policy)], **verifier_policy)
    message = str(caught.value)
    assert setting in message
    assert "allow_weaker" in message

    JWTVerifier(issuers=[issuer(**issuer_policy, allow_weaker=[setting])], **verifier_policy)


def test_a_profile_typ_cannot_be_replaced_silently():
    with pytest.raises(ConfigurationError, match="typ"):
        JWTVerifier(issuers=[issuer(typ="JWT")], config=access_token_profile(audience=AUD))


@pytest.mark.parametrize(
    ("verifier_policy", "issuer_policy"),
    [
        ({"max_age": 3600}, {"max_age": 60}),
        ({"leeway": 60}, {"leeway": 5}),
        ({}, {"typ": "at+jwt"}),
        ({}, {"max_age": 60}),
        ({"audience": AUD}, {"audience": "api://other"}),
        ({}, {"required": ["sub"]}),
    ],
)
def test_a_stricter_or_own_issuer_setting_needs_no_opt_out(
    verifier_policy: dict[str, Any], issuer_policy: dict[str, Any]
):
    JWTVerifier(issuers=[issuer(**issuer_policy)], **verifier_policy)


def test_allow_weaker_names_only_per_issuer_settings():
    with pytest.raises(ConfigurationError, match="did you mean required"):
        issuer(allow_weaker=["requird"])
    with pytest.raises(ConfigurationError, match="allow_weaker"):
        issuer(allow_weaker=[5])


def test_the_verifier_config_is_not_changed_by_an_issuer():
    base = access_token_profile(audience=AUD)
    verifier = JWTVerifier(issuers=[issuer(required=["scope"])], config=base)

    assert verifier.config == base
    assert isinstance(verifier.config, JWTConfig)
