"""An issuer's own policy settings (``Issuer(..., **policy)``).

An issuer's settings start from the verifier's: ``required`` adds claims,
other settings may tighten a check, and loosening one (a profile's claims, a
longer ``max_age``, another ``typ``...) needs ``allow_weaker`` naming it.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from forge import NOW, SECRET, hmac_key

from grelmicro.jwt import (
    ConfigurationError,
    InvalidClaimError,
    Issuer,
    IssuerSettings,
    JWTConfig,
    JWTSettings,
    JWTVerifier,
    Key,
    MissingClaimError,
    access_token_profile,
)
from grelmicro.jwt._config import Scope

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


# -- one declaration: the per-issuer settings are the config's token checks ----------


def per_issuer_fields() -> list[str]:
    """The JWTConfig fields whose annotation names ``Scope.ISSUER``."""
    return [
        name for name, field in JWTConfig.model_fields.items() if Scope.ISSUER in field.metadata
    ]


def test_issuer_settings_are_exactly_the_per_issuer_fields():
    """Issue 27: Issuer took 6 of the policy fields by hand and missed ``azp``."""
    assert list(IssuerSettings.__annotations__) == per_issuer_fields()
    assert set(per_issuer_fields()) >= {"audience", "azp", "required", "typ", "max_age"}


def test_issuer_settings_types_are_the_verifiers():
    # One declaration: JWTSettings extends IssuerSettings, never retypes a key.
    for name, annotation in IssuerSettings.__annotations__.items():
        assert JWTSettings.__annotations__[name] is annotation


#: A value for every per-issuer setting (a new one must be added here).
OWN_VALUES: dict[str, Any] = {
    "audience": "api://own",
    "azp": "app-1",
    "algorithms": ["HS256"],
    "leeway": 0,
    "leeway_ahead": 30,
    "require_exp": True,
    "required": ["sub"],
    "typ": "JWT",
    "max_age": 60,
}


def test_an_issuer_takes_every_per_issuer_setting():
    assert set(OWN_VALUES) == set(IssuerSettings.__annotations__)
    for name, value in OWN_VALUES.items():
        built = issuer(**{name: value})
        assert built.policy == {name: value}
        JWTVerifier(issuers=[built])


def test_an_issuer_azp_is_checked():
    verifier = JWTVerifier(issuers=[issuer(azp="app-1")], audience=AUD)

    assert verifier.verify(hmac_key().mint({**ACCESS, "azp": "app-1"}), now=NOW)
    with pytest.raises(InvalidClaimError):
        verifier.verify(hmac_key().mint({**ACCESS, "azp": "app-2"}), now=NOW)
    with pytest.raises(MissingClaimError):
        verifier.verify(hmac_key().mint(ACCESS), now=NOW)


@pytest.mark.parametrize(
    # ``issuer`` is the Issuer's own first argument.
    "setting",
    [name for name in JWTConfig.model_fields if name not in OWN_VALUES and name != "issuer"],
)
def test_a_verifier_wide_setting_is_refused_on_an_issuer(setting: str):
    with pytest.raises(ConfigurationError, match=f"{setting} applies to the whole verifier"):
        issuer(**{setting: 1})


def test_a_misspelt_issuer_setting_names_the_closest():
    with pytest.raises(ConfigurationError, match="did you mean max_age"):
        issuer(max_ag=60)


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


def test_require_exp_false_for_one_issuer_drops_exp_only():
    verifier = JWTVerifier(
        issuers=[issuer(require_exp=False, allow_weaker=["require_exp"])],
        required=["sub"],
        audience=AUD,
    )

    assert verifier.verify(hmac_key().mint({"iss": ISS, "aud": AUD, "sub": "u"}), now=NOW)
    with pytest.raises(MissingClaimError):
        verifier.verify(hmac_key().mint({"iss": ISS, "aud": AUD}), now=NOW)


# -- loosening a check needs allow_weaker ------------------------------------------

LOOSER = [
    pytest.param({}, {"require_exp": False}, "require_exp", id="require-exp"),
    pytest.param({"typ": "at+jwt"}, {"typ": "JWT"}, "typ", id="typ"),
    pytest.param({"max_age": 60}, {"max_age": 3600}, "max_age", id="max-age"),
    pytest.param({"leeway": 5}, {"leeway": 60}, "leeway", id="leeway"),
    pytest.param({}, {"leeway_ahead": 300}, "leeway_ahead", id="leeway-ahead"),
    pytest.param({"audience": AUD}, {"audience": []}, "audience", id="audience"),
    pytest.param({"azp": "app-1"}, {"azp": []}, "azp", id="azp"),
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
        ({}, {"leeway_ahead": 0}),
        ({}, {"typ": "at+jwt"}),
        ({}, {"max_age": 60}),
        ({"audience": AUD}, {"audience": "api://other"}),
        ({}, {"azp": "app-1"}),
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


# -- network keys without an issuer check --------------------------------------------

URL = "https://idp.example.com/keys"


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "grelmicro.jwt" and record.levelno == logging.WARNING
    ]


def test_jwks_url_without_issuer_warns_when_built(caplog: pytest.LogCaptureFixture):
    """Issue 24 (info): ``jwks_url=`` without ``issuer=`` built without a word."""
    with caplog.at_level(logging.WARNING, logger="grelmicro.jwt"):
        JWTVerifier(jwks_url=URL, audience=AUD).close()

    (message,) = warnings_of(caplog)
    assert "without issuer=" in message
    assert "iss is not checked" in message


@pytest.mark.parametrize(
    "settings",
    [
        {"jwks_url": URL, "issuer": ISS},
        {"jwks_url": URL, "issuer": [ISS, "idp.example.com"]},
        {"discover": ISS},  # discovery binds the issuer
        {"issuers": [Issuer(ISS, jwks_url=URL)]},
        {"jwks_url": URL, "config": access_token_profile(audience=AUD, issuer=ISS)},
        {"keys": [Key.secret(SECRET)]},  # keys you hold: your choice, no network
    ],
)
def test_network_keys_with_an_issuer_check_build_quietly(
    settings: dict[str, Any], caplog: pytest.LogCaptureFixture
):
    with caplog.at_level(logging.WARNING, logger="grelmicro.jwt"):
        JWTVerifier(**settings).close()

    assert warnings_of(caplog) == []
