"""The ``azp`` (authorized party) check, OIDC Core §2.

Added as the proof that a policy option is a change to three product files:
``grelmicro-core/src/policy/mod.rs`` (the option and its validation),
``grelmicro-core/src/claims.rs`` (the check in the payload walk) and
``grelmicro/jwt/_config.py`` (the field and its keyword type).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from forge import NOW, hmac_key

from grelmicro.jwt import (
    ConfigurationError,
    InvalidClaimError,
    JWTConfig,
    JWTVerifier,
    MissingClaimError,
)

Build = Callable[..., JWTVerifier]
Mint = Callable[..., str]


@pytest.mark.parametrize(
    ("setting", "party"),
    [("web", "web"), (["web", "cli"], "cli"), (("web", "cli"), "web")],
)
def test_a_listed_party_is_accepted(make_verifier: Build, token: Mint, setting: Any, party: str):
    claims = make_verifier(azp=setting).verify(token(azp=party), now=NOW)

    assert claims["azp"] == party


def test_a_missing_azp_is_a_missing_claim(make_verifier: Build, token: Mint):
    with pytest.raises(MissingClaimError, match="azp") as caught:
        make_verifier(azp="web").verify(token(), now=NOW)

    assert caught.value.reason == "missing-claim"
    assert caught.value.claim == "azp"  # type: ignore[attr-defined]


@pytest.mark.parametrize("party", ["mobile", "WEB", "web ", ""])
def test_another_party_is_an_invalid_claim_without_echo(
    make_verifier: Build, token: Mint, party: str
):
    with pytest.raises(InvalidClaimError, match="azp") as caught:
        make_verifier(azp=["web", "cli"]).verify(token(azp=party), now=NOW)

    assert caught.value.reason == "invalid-claim"
    assert caught.value.claim == "azp"  # type: ignore[attr-defined]
    assert caught.value.expected == ("web", "cli")  # type: ignore[attr-defined]
    if party.strip():
        assert party not in str(caught.value).replace("web", "")


@pytest.mark.parametrize("value", [["web"], 5, None, {"web": True}, True])
def test_a_non_string_azp_is_an_invalid_claim(make_verifier: Build, value: Any):
    raw = hmac_key().mint({"exp": NOW + 3600, "azp": value})

    with pytest.raises(InvalidClaimError, match="azp must be a string"):
        make_verifier(azp="web").verify(raw, now=NOW)


def test_without_the_setting_azp_is_an_ordinary_claim(make_verifier: Build, token: Mint):
    verifier = make_verifier()

    assert verifier.verify(token(azp=["any", 1]), now=NOW)["azp"] == (
        "any",
        1,
    )  # arrays read as tuples
    assert "azp" not in verifier.verify(token(), now=NOW)


def test_a_cached_token_is_still_checked_once_per_verifier(make_verifier: Build, token: Mint):
    strict = make_verifier(azp="web")
    raw = token(azp="mobile")

    for _ in range(2):  # a refusal is never cached into an acceptance
        with pytest.raises(InvalidClaimError):
            strict.verify(raw, now=NOW)
    assert make_verifier().verify(raw, now=NOW)["azp"] == "mobile"


@pytest.mark.parametrize("setting", [[""], "", [5], 5, {"web": 1}])
def test_a_bad_setting_is_a_configuration_error_naming_azp(setting: Any):
    with pytest.raises(ConfigurationError, match="azp"):
        JWTConfig(azp=setting)


def test_azp_reads_from_the_environment_as_a_list():
    config = JWTConfig.from_env({"GRELMICRO_JWT_AZP": "web, cli"})

    assert config.azp == ("web", "cli")
