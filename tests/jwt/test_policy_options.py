"""Each policy option has one source of truth (issue 12).

The config model lists the options and their Python types; ``JWTSettings``
(the keywords of ``JWTVerifier``) mirrors it exactly; the core owns the
ranges and the algorithm names. Security flags take ``True`` or ``False``
only, everywhere they exist.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from grelmicro.jwt import (
    ConfigurationError,
    Issuer,
    JWTConfig,
    JWTSettings,
    JWTVerifier,
    Key,
    _core,
)
from grelmicro.jwt._config import AlgorithmName

SECRET = b"s" * 32

# -- one list of options -----------------------------------------------------------


def test_jwtsettings_keys_are_exactly_the_config_fields_in_order():
    assert list(JWTSettings.__annotations__) == list(JWTConfig.model_fields)


def test_algorithm_name_literal_is_the_core_list():
    assert list(typing.get_args(AlgorithmName)) == list(_core.algorithms())


def test_every_policy_field_reaches_the_core_policy():
    # A field the core does not take would fail every build; a core option
    # the config lacks would be unreachable from Python.
    options = JWTConfig()._policy_options()

    _core.Policy(**options)
    assert set(options) == set(JWTConfig.model_fields) - {
        "require_exp",
        "cache_size",
        "cache_ttl",
        "cache_key",
    }


def test_the_core_policy_refuses_an_unknown_option():
    with pytest.raises(TypeError, match="leewy"):
        _core.Policy(leewy=5)


def test_a_misspelt_verifier_keyword_names_the_setting():
    with pytest.raises(ConfigurationError, match="leewy: not a setting; did you mean leeway"):
        JWTVerifier([Key.secret(SECRET)], leewy=5)  # type: ignore[call-arg]


def test_settings_keywords_and_config_are_exclusive():
    with pytest.raises(ConfigurationError, match="not both: leeway"):
        JWTVerifier([Key.secret(SECRET)], config=JWTConfig(), leeway=5)


def test_keywords_build_the_same_config_as_the_model():
    settings: JWTSettings = {
        "audience": "api",
        "leeway": timedelta(seconds=5),
        "max_depth": 8,
        "cache_key": "token",
    }

    verifier = JWTVerifier([Key.secret(SECRET)], **settings)

    assert verifier.config == JWTConfig(**settings)
    assert verifier.config.leeway == 5.0


# -- the core owns the ranges ---------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("leeway", 3600.5),
        ("leeway", 1e9),
        ("leeway", -1),
        ("leeway", math.inf),
        ("leeway", math.nan),
        ("leeway", timedelta(hours=2)),
        ("max_age", 0),
        ("max_age", -5.5),
        ("max_age", math.inf),
        ("max_age", math.nan),
        ("max_token_size", 15),
        ("max_token_size", (1 << 20) + 1),
        ("max_token_size", 2**80),
        ("max_token_size", -(2**80)),
        ("max_depth", 1),
        ("max_depth", 513),
        ("max_depth", -3),
    ],
)
def test_out_of_range_values_are_refused_naming_the_field_not_the_value(field: str, value: Any):
    with pytest.raises(ConfigurationError, match=f"^invalid JWT configuration: {field} must be"):
        JWTConfig(**{field: value})
    with pytest.raises(ConfigurationError, match=field) as caught:
        JWTVerifier([Key.secret(SECRET)], **{field: value})
    if not isinstance(value, timedelta) and len(repr(value)) > 3:  # "1" is in "1048576"
        assert repr(value) not in str(caught.value)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("leeway", 0),
        ("leeway", 3600),
        ("leeway", timedelta(hours=1)),
        ("max_age", 0.001),
        ("max_age", 10**9),
        ("max_token_size", 16),
        ("max_token_size", 1 << 20),
        ("max_depth", 2),
        ("max_depth", 512),
    ],
)
def test_values_at_the_bounds_are_accepted(field: str, value: Any):
    config = JWTConfig(**{field: value})

    assert config.policy() is not None
    expected = value.total_seconds() if isinstance(value, timedelta) else value
    assert getattr(config, field) == expected


def test_a_range_error_comes_from_the_same_table_for_the_env_and_model_validate():
    with pytest.raises(ConfigurationError, match="leeway must be"):
        JWTConfig.from_env({"GRELMICRO_JWT_LEEWAY": "4000"})
    with pytest.raises(ConfigurationError, match="max_depth must be"):
        JWTConfig.model_validate({"max_depth": 1000})


def test_types_are_still_checked_before_ranges():
    with pytest.raises(ConfigurationError, match=r"leeway: .*must be a number of seconds"):
        JWTConfig(leeway="5")
    with pytest.raises(ConfigurationError, match=r"max_depth: .*must be an integer"):
        JWTConfig(max_depth=True)


@pytest.mark.parametrize(("given", "right"), [("hs256", "HS256"), ("eddsa", "EdDSA")])
def test_an_unknown_algorithm_is_refused_once_by_the_core_with_the_right_case(
    given: str, right: str
):
    with pytest.raises(ConfigurationError, match=f"did you mean {right}") as caught:
        JWTConfig(algorithms=[given])
    assert given not in str(caught.value)
    assert str(caught.value).startswith("invalid JWT configuration: algorithms ")


def test_an_unknown_algorithm_is_not_echoed():
    with pytest.raises(ConfigurationError, match="unknown or unsupported") as caught:
        JWTConfig(algorithms=["TOPSECRET-value"])
    assert "TOPSECRET" not in str(caught.value)
    assert "did you mean" not in str(caught.value)


def test_a_copied_config_builds_its_own_policy():
    # model_copy(update=...) skips validation; the policy is built from the
    # copy's settings, never kept from the original.
    config = JWTConfig(issuer="https://a/")
    copy = config.model_copy(update={"issuer": ("https://b/",)})

    assert copy.policy() is not config.policy()
    assert copy.issuer == ("https://b/",)


# -- security flags: True or False, nothing that looks like it ------------------------


NOT_BOOLS = ["no", "False", "", 0, 1, None, [], "true"]


def _flag_builds(value: Any) -> list[Callable[[], object]]:
    return [
        lambda: JWTVerifier([Key.secret(SECRET)], allow_symmetric=value),
        lambda: JWTVerifier([Key.secret(SECRET)], allow_insecure_loopback=value),
        lambda: JWTVerifier([Key.secret(SECRET)], cache_stats=value),
        lambda: Issuer("https://idp/", keys=[Key.secret(SECRET)], allow_symmetric=value),
        lambda: Issuer("https://idp/", keys=[Key.secret(SECRET)], allow_insecure_loopback=value),
        lambda: Key.jwk({"kty": "oct", "k": "c2VjcmV0"}, "HS256", allow_symmetric=value),
    ]


@pytest.mark.parametrize("value", NOT_BOOLS)
def test_security_flags_refuse_non_bool_values(value: Any):
    for build in _flag_builds(value):
        with pytest.raises(ConfigurationError, match="must be True or False"):
            build()


@pytest.mark.parametrize("value", [v for v in NOT_BOOLS if v is not None])
def test_issuer_discover_is_true_or_a_url(value: Any):
    # discover= also takes the metadata URL (B2C: the policy's, not the issuer's).
    with pytest.raises(ConfigurationError, match="discover"):
        Issuer("https://idp/", discover=value)


@pytest.mark.parametrize("value", [v for v in NOT_BOOLS if v is not None])
def test_require_exp_refuses_non_bool_values(value: Any):
    # None is "not given" (the default, True) for every setting keyword.
    with pytest.raises(ConfigurationError, match="require_exp"):
        JWTVerifier([Key.secret(SECRET)], require_exp=value)


@pytest.mark.parametrize("value", NOT_BOOLS)
def test_bearer_flags_refuse_non_bool_values(value: Any):
    pytest.importorskip("fastapi")
    from grelmicro.jwt.fastapi import JWTBearer  # noqa: PLC0415 - optional dependency
    from grelmicro.jwt.fastapi_dpop import DPoPBearer  # noqa: PLC0415

    verifier = JWTVerifier([Key.secret(SECRET)])
    for bearer in (JWTBearer, DPoPBearer):
        for flag in ("permissions", "auto_error"):
            with pytest.raises(ConfigurationError, match=f"{flag} must be True or False"):
                bearer(verifier, **{flag: value})


def test_issuer_keeps_real_bools():
    issuer = Issuer("https://idp/", discover=True, allow_insecure_loopback=False)

    assert issuer.discover is True
    assert issuer.allow_insecure_loopback is False
