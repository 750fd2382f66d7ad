"""Configuration (``_config.py``): invalid settings, ``JWTConfig``, ``from_env``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from forge import NOW, SECRET, hmac_key, private_key
from servers import DocumentServer, jwks_of
from support import FakeClock

from grelmicro.jwt import (
    ConfigurationError,
    FetchOptions,
    InvalidIssuerError,
    JWTConfig,
    JWTVerifier,
    Key,
)

# -- configuration ---------------------------------------------------------------------

BAD_SETTINGS = [
    pytest.param({"audience": ""}, "audience", id="audience-empty"),
    pytest.param({"audience": [""]}, "audience", id="audience-empty-item"),
    pytest.param({"audience": 5}, "audience", id="audience-int"),
    pytest.param({"issuer": [1]}, "issuer", id="issuer-int"),
    pytest.param({"algorithms": ["none"]}, "algorithms", id="algorithms-none"),
    pytest.param({"algorithms": "HS999"}, "algorithms", id="algorithms-unknown"),
    pytest.param({"algorithms": []}, "algorithms", id="algorithms-empty"),
    pytest.param({"algorithms": ["RS256"]}, "algorithms", id="algorithms-no-key-serves"),
    pytest.param({"leeway": -1}, "leeway", id="leeway-negative"),
    pytest.param({"leeway": float("nan")}, "leeway", id="leeway-nan"),
    pytest.param({"leeway": 10**9}, "leeway", id="leeway-huge"),
    pytest.param({"leeway": "soon"}, "leeway", id="leeway-text"),
    pytest.param({"required": [""]}, "required", id="required-empty-name"),
    pytest.param({"typ": ""}, "typ", id="typ-empty"),
    pytest.param({"max_age": 0}, "max_age", id="max-age-zero"),
    pytest.param({"max_age": -5}, "max_age", id="max-age-negative"),
    pytest.param({"max_token_size": 15}, "max_token_size", id="max-token-size-tiny"),
    pytest.param({"max_token_size": (1 << 20) + 1}, "max_token_size", id="max-token-size-huge"),
    pytest.param({"max_depth": 1}, "max_depth", id="max-depth-one"),
    pytest.param({"max_depth": 513}, "max_depth", id="max-depth-huge"),
    pytest.param({"cache_size": -1}, "cache_size", id="cache-size-negative"),
    pytest.param({"cache_size": 1.5}, "cache_size", id="cache-size-fraction"),
    pytest.param({"cache_ttl": 0}, "cache_ttl", id="cache-ttl-zero"),
    pytest.param({"cache_ttl": float("inf")}, "cache_ttl", id="cache-ttl-inf"),
    pytest.param({"cache_key": "sha1"}, "cache_key", id="cache-key-unknown"),
    pytest.param({"clock": 5}, "clock", id="clock-not-callable"),
    pytest.param({"on_reject": "log"}, "on_reject", id="on-reject-not-callable"),
]


@pytest.mark.parametrize(("settings", "field"), BAD_SETTINGS)
def test_invalid_configuration_names_the_field(
    settings: dict[str, Any], field: str, make_verifier: Callable[..., JWTVerifier]
):
    with pytest.raises(ConfigurationError) as caught:
        make_verifier(**settings)

    assert field in str(caught.value)
    assert caught.value.reason == "invalid-config"


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        pytest.param({"leeway": SECRET.decode()}, "leeway", id="leeway"),
        pytest.param({"cache_key": SECRET.decode()}, "cache_key", id="cache_key"),
        pytest.param({"audience": [SECRET.decode(), 3]}, "audience", id="audience"),
        pytest.param({"max_age": SECRET.decode()}, "max_age", id="max_age"),
        pytest.param({"typ": SECRET}, "typ", id="typ-bytes"),
    ],
)
def test_configuration_error_never_echoes_the_value(
    settings: dict[str, Any], field: str, make_verifier: Callable[..., JWTVerifier]
):
    with pytest.raises(ConfigurationError) as caught:
        make_verifier(**settings)

    assert field in str(caught.value)
    assert "TOPSECRET" not in str(caught.value)
    assert "TOPSECRET" not in repr(caught.value)


def test_config_and_settings_are_exclusive():
    with pytest.raises(ConfigurationError, match="leeway"):
        JWTVerifier([Key.secret(SECRET)], config=JWTConfig(), leeway=3)


def test_config_object_is_used(token: Callable[..., str]):
    verifier = JWTVerifier([Key.secret(SECRET)], config=JWTConfig.build(audience="api"))

    assert verifier.config.audience == ("api",)
    assert verifier.verify(token(aud="api"), now=NOW).audience == ("api",)


# -- from_env --------------------------------------------------------------------------


def test_from_env_reads_the_policy(token: Callable[..., str]):
    environ = {
        "GRELMICRO_JWT_AUDIENCE": "api, admin",
        "GRELMICRO_JWT_ISSUER": "https://idp/",
        "GRELMICRO_JWT_LEEWAY": "5",
        "GRELMICRO_JWT_LEEWAY_AHEAD": "30",
        "GRELMICRO_JWT_ALGORITHMS": "HS256",
        "GRELMICRO_JWT_REQUIRED": "exp,sub",
        "GRELMICRO_JWT_TYP": "at+jwt",
        "GRELMICRO_JWT_MAX_AGE": "600",
        "GRELMICRO_JWT_MAX_TOKEN_SIZE": "4096",
        "GRELMICRO_JWT_MAX_DEPTH": "16",
        "GRELMICRO_JWT_CACHE_SIZE": "7",
        "GRELMICRO_JWT_CACHE_TTL": "30",
        "GRELMICRO_JWT_CACHE_KEY": "token",
        "UNRELATED": "ignored",
    }

    verifier = JWTVerifier.from_env([Key.secret(SECRET)], environ=environ)

    assert verifier.config == JWTConfig(
        audience=("api", "admin"),
        issuer=("https://idp/",),
        algorithms=("HS256",),
        leeway=5.0,
        leeway_ahead=30.0,
        required=("exp", "sub"),
        typ="at+jwt",
        max_age=600.0,
        max_token_size=4096,
        max_depth=16,
        cache_size=7,
        cache_ttl=30.0,
        cache_key="token",
    )
    assert verifier.cache_info().max_size == 7


def test_from_env_with_an_empty_environment_gives_the_defaults():
    verifier = JWTVerifier.from_env([Key.secret(SECRET)], environ={})

    assert verifier.config == JWTConfig()


def test_from_env_overrides_and_prefix(clock: FakeClock, token: Callable[..., str]):
    verifier = JWTVerifier.from_env(
        [Key.secret(SECRET)],
        environ={"APP_LEEWAY": "5", "GRELMICRO_JWT_LEEWAY": "9", "APP_AUDIENCE": "api"},
        prefix="APP_",
        leeway=7,
        clock=clock,
        cache_stats=True,
    )

    assert verifier.config.leeway == 7.0
    assert verifier.config.audience == ("api",)
    assert verifier.verify(token(aud="api")).audience == ("api",)  # the clock was passed on
    assert verifier.cache_info().misses == 1


@pytest.mark.parametrize("variable", ["SECRET", "PUBLIC_KEY", "JWKS"])
def test_from_env_refuses_key_material_unless_allowed(variable: str):
    environ = {f"GRELMICRO_JWT_{variable}": SECRET.decode()}

    with pytest.raises(ConfigurationError) as caught:
        JWTVerifier.from_env([Key.secret(SECRET)], environ=environ)

    assert f"GRELMICRO_JWT_{variable}" in str(caught.value)
    assert "allow_key_material_from_env" in str(caught.value)
    assert "TOPSECRET" not in str(caught.value)


def test_from_env_secret_when_allowed():
    signer = hmac_key("HS384", secret=SECRET, kid="env")
    environ = {
        "GRELMICRO_JWT_SECRET": SECRET.decode(),
        "GRELMICRO_JWT_SECRET_ALGORITHM": "HS384",
        "GRELMICRO_JWT_SECRET_KID": "env",
    }

    verifier = JWTVerifier.from_env(environ=environ, allow_key_material_from_env=True)

    assert verifier.algorithms == ("HS384",)
    assert verifier.verify(signer.mint({"exp": NOW + 1}), now=NOW)["exp"] == NOW + 1


def test_from_env_public_key_when_allowed():
    signer = private_key("ES256")
    environ = {
        "GRELMICRO_JWT_PUBLIC_KEY": signer.public_pem().decode(),
        "GRELMICRO_JWT_PUBLIC_KEY_ALGORITHM": "ES256",
    }

    verifier = JWTVerifier.from_env(environ=environ, allow_key_material_from_env=True)

    assert verifier.verify(signer.mint({"exp": NOW + 1}), now=NOW)["exp"] == NOW + 1
    with pytest.raises(ConfigurationError, match="PUBLIC_KEY_ALGORITHM"):
        JWTVerifier.from_env(
            environ={"GRELMICRO_JWT_PUBLIC_KEY": signer.public_pem().decode()},
            allow_key_material_from_env=True,
        )


def test_from_env_jwks_when_allowed():
    signer = private_key("RS256", kid="r1")
    environ = {"GRELMICRO_JWT_JWKS": json.dumps({"keys": [signer.public_jwk()]})}

    verifier = JWTVerifier.from_env(environ=environ, allow_key_material_from_env=True)

    assert verifier.verify(signer.mint({"exp": NOW + 1}), now=NOW)["exp"] == NOW + 1


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("GRELMICRO_JWT_LEEWAY", "TOPSECRET"),
        ("GRELMICRO_JWT_CACHE_SIZE", "TOPSECRET"),
        ("GRELMICRO_JWT_CACHE_KEY", "TOPSECRET"),
        ("GRELMICRO_JWT_MAX_AGE", "-1"),
    ],
)
def test_from_env_invalid_value_names_the_setting(variable: str, value: str):
    with pytest.raises(ConfigurationError) as caught:
        JWTVerifier.from_env([Key.secret(SECRET)], environ={variable: value})

    assert variable.removeprefix("GRELMICRO_JWT_").lower() in str(caught.value)
    assert "TOPSECRET" not in str(caught.value)


def test_from_env_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GRELMICRO_JWT_LEEWAY", "12")

    assert JWTVerifier.from_env([Key.secret(SECRET)]).config.leeway == 12.0


#: An environment value for every setting, and what it reads as.
ENV_VALUES: dict[str, tuple[str, Any]] = {
    "audience": ("api, admin", ("api", "admin")),
    "azp": ("app-1,app-2", ("app-1", "app-2")),
    "algorithms": ("HS256", ("HS256",)),
    "leeway": ("5", 5.0),
    "leeway_ahead": ("30", 30.0),
    "require_exp": ("false", False),
    "required": ("sub", ("exp", "sub")),
    "typ": ("at+jwt", "at+jwt"),
    "max_age": ("600", 600.0),
    "issuer": ("https://idp/", ("https://idp/",)),
    "max_token_size": ("4096", 4096),
    "max_depth": ("16", 16),
    "cache_size": ("7", 7),
    "cache_ttl": ("30.5", 30.5),
    "cache_key": ("token", "token"),
}


@pytest.mark.parametrize("name", list(ENV_VALUES))
def test_from_env_reads_each_setting_by_its_annotation(name: str):
    text, expected = ENV_VALUES[name]

    config = JWTConfig.from_env({f"GRELMICRO_JWT_{name.upper()}": text})

    assert getattr(config, name) == expected


def test_every_setting_has_an_environment_example():
    # A new field is read from the environment by its type; this table makes
    # its test one more line.
    assert set(ENV_VALUES) == set(JWTConfig.model_fields)


# -- from_env: keys from the network -----------------------------------------------------

FAST = FetchOptions(connect_timeout=1, read_timeout=0.5, total_timeout=1.5, jitter=0)
ISS = "https://idp.example.com/"


def test_from_env_fetches_keys_from_jwks_url(server: DocumentServer):
    """Issue 22: JWKS_URL was an unknown variable (a ConfigurationError)."""
    signer = private_key("ES256", kid="e1", seed=61)
    server.set("/keys", jwks_of(signer))
    environ = {
        "GRELMICRO_JWT_JWKS_URL": server.url("/keys"),
        "GRELMICRO_JWT_ALLOW_INSECURE_LOOPBACK": "true",
        "GRELMICRO_JWT_ISSUER": ISS,
    }

    # URLs are not key material: no allow_key_material_from_env needed.
    verifier = JWTVerifier.from_env(environ=environ, fetch=FAST, clock=FakeClock())

    assert verifier.verify(signer.mint({"iss": ISS, "exp": NOW + 60}))["iss"] == ISS
    with pytest.raises(InvalidIssuerError):
        verifier.verify(signer.mint({"iss": "https://other/", "exp": NOW + 60}))
    assert server.count("/keys") == 1
    assert verifier.health().url == server.url("/keys")
    verifier.close()


def test_from_env_discovers_the_issuer(server: DocumentServer):
    signer = private_key("RS256", kid="r1", seed=62)
    issuer = server.url("/")
    server.set(
        "/.well-known/openid-configuration", {"issuer": issuer, "jwks_uri": server.url("/k")}
    )
    server.set("/k", jwks_of(signer))
    environ = {
        "GRELMICRO_JWT_DISCOVER": issuer,
        "GRELMICRO_JWT_ALLOW_INSECURE_LOOPBACK": "yes",
    }

    verifier = JWTVerifier.from_env(environ=environ, fetch=FAST, clock=FakeClock())

    assert verifier.config.issuer == (issuer,)
    assert verifier.verify(signer.mint({"iss": issuer, "exp": NOW + 60}))["iss"] == issuer
    verifier.close()


@pytest.mark.parametrize("flag", [None, "false", "0"])
def test_from_env_plain_http_needs_the_loopback_flag(server: DocumentServer, flag: str | None):
    environ = {"GRELMICRO_JWT_JWKS_URL": server.url("/keys"), "GRELMICRO_JWT_ISSUER": ISS}
    if flag is not None:
        environ["GRELMICRO_JWT_ALLOW_INSECURE_LOOPBACK"] = flag

    with pytest.raises(ConfigurationError, match="jwks_url"):
        JWTVerifier.from_env(environ=environ)
    assert server.count("/keys") == 0


def test_from_env_keywords_win_over_the_network_variables(server: DocumentServer):
    environ = {
        "GRELMICRO_JWT_JWKS_URL": "https://idp.example.com/unused",
        "GRELMICRO_JWT_ALLOW_INSECURE_LOOPBACK": "false",
        "GRELMICRO_JWT_ISSUER": ISS,
    }

    verifier = JWTVerifier.from_env(
        environ=environ, jwks_url=server.url("/keys"), allow_insecure_loopback=True
    )

    assert verifier.health().url == server.url("/keys")
    verifier.close()


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("ALLOW_INSECURE_LOOPBACK", "sure", "GRELMICRO_JWT_ALLOW_INSECURE_LOOPBACK must be true"),
        ("JWKS_URL", " ", "GRELMICRO_JWT_JWKS_URL is empty"),
        ("DISCOVER", "", "GRELMICRO_JWT_DISCOVER is empty"),
    ],
)
def test_from_env_bad_network_values_name_the_variable(variable: str, value: str, message: str):
    with pytest.raises(ConfigurationError, match=message):
        JWTVerifier.from_env(environ={f"GRELMICRO_JWT_{variable}": value})


def test_from_env_one_key_source_only():
    environ = {
        "GRELMICRO_JWT_JWKS_URL": "https://idp.example.com/keys",
        "GRELMICRO_JWT_SECRET": SECRET.decode(),
    }

    with pytest.raises(ConfigurationError, match="one key source"):
        JWTVerifier.from_env(environ=environ, allow_key_material_from_env=True)


@pytest.mark.parametrize(
    ("variable", "closest"),
    [
        ("JWKS_URI", "JWKS_URL"),
        ("JWKSURL", "JWKS_URL"),
        ("JWK_URL", "JWKS_URL"),
        ("DISCOVERY", "DISCOVER"),
        ("OIDC_DISCOVER", "DISCOVER"),
        ("INSECURE_LOOPBACK", "ALLOW_INSECURE_LOOPBACK"),
        ("ALLOW_INSECURE", "ALLOW_INSECURE_LOOPBACK"),
        # The other names keep their own matches.
        ("ISSUERS", "ISSUER"),
        ("JWK", "JWKS"),
        ("SECRET_KEY", "SECRET_KID"),
    ],
)
def test_from_env_near_miss_is_matched_to_the_network_variables_first(variable: str, closest: str):
    with pytest.raises(ConfigurationError) as caught:
        JWTVerifier.from_env(environ={f"GRELMICRO_JWT_{variable}": "https://idp.example.com/"})

    assert f"did you mean GRELMICRO_JWT_{closest}?" in str(caught.value)
