"""The RFC 9068 access-token profile preset (``access_token_profile``)."""

from __future__ import annotations

from typing import Any

import pytest
from forge import NOW, SECRET, hmac_key

from grelmicro.jwt import (
    ConfigurationError,
    InvalidAudienceError,
    InvalidIssuerError,
    InvalidTokenTypeError,
    JWTVerifier,
    Key,
    MissingClaimError,
    access_token_profile,
)

AUDIENCE = "https://api.example.com"
ISSUER = "https://idp.example.com/"
CLAIMS: dict[str, Any] = {
    "iss": ISSUER,
    "exp": NOW + 300,
    "aud": AUDIENCE,
    "sub": "user-1",
    "client_id": "app-1",
    "iat": NOW,
    "jti": "t-1",
}


def verifier(**settings: Any) -> JWTVerifier:
    config = access_token_profile(audience=AUDIENCE, issuer=ISSUER, **settings)
    return JWTVerifier([Key.secret(SECRET, "HS256")], config=config)


@pytest.mark.parametrize("typ", ["at+jwt", "application/at+jwt", "AT+JWT", "Application/At+Jwt"])
def test_an_access_token_is_accepted(typ: str):
    claims = verifier().verify(hmac_key().mint(CLAIMS, typ=typ), now=NOW)

    assert claims["client_id"] == "app-1"


@pytest.mark.parametrize("typ", ["JWT", "jwt", "dpop+jwt", None])
def test_another_typ_is_refused(typ: str | None):
    with pytest.raises(InvalidTokenTypeError):
        verifier().verify(hmac_key().mint(CLAIMS, typ=typ), now=NOW)


@pytest.mark.parametrize("claim", sorted(CLAIMS))
def test_every_profile_claim_is_required(claim: str):
    claims = {name: value for name, value in CLAIMS.items() if name != claim}

    with pytest.raises(MissingClaimError):
        verifier().verify(hmac_key().mint(claims, typ="at+jwt"), now=NOW)


def test_audience_and_issuer_are_checked():
    with pytest.raises(InvalidAudienceError):
        verifier().verify(hmac_key().mint({**CLAIMS, "aud": "other"}, typ="at+jwt"), now=NOW)
    with pytest.raises(InvalidIssuerError):
        verifier().verify(hmac_key().mint({**CLAIMS, "iss": "https://x/"}, typ="at+jwt"), now=NOW)


@pytest.mark.parametrize("audience", ["", [], [""]])
def test_the_audience_is_mandatory(audience: Any):
    with pytest.raises(ConfigurationError):
        access_token_profile(audience=audience)


@pytest.mark.parametrize("setting", [{"typ": "JWT"}, {"require_exp": False}])
def test_the_profile_fixes_typ_and_exp(setting: dict[str, Any]):
    with pytest.raises(ConfigurationError):
        access_token_profile(audience=AUDIENCE, **setting)


def test_other_settings_and_extra_claims_pass_through():
    config = access_token_profile(audience=[AUDIENCE], required=("scope", "sub"), leeway=30)

    assert config.leeway == 30
    assert config.typ == "at+jwt"
    assert config.audience == (AUDIENCE,)
    assert set(config.required) == {"iss", "exp", "aud", "sub", "client_id", "iat", "jti", "scope"}
    with pytest.raises(MissingClaimError):
        JWTVerifier([Key.secret(SECRET, "HS256")], config=config).verify(
            hmac_key().mint(CLAIMS, typ="at+jwt"), now=NOW
        )
