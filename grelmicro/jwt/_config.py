"""Verifier configuration: one frozen pydantic model, validated once.

:class:`JWTConfig` holds the policy and cache settings. It can be read from
environment variables (prefix ``GRELMICRO_JWT_``) with
:meth:`JWTConfig.from_env`; key material is never read from the environment
unless the caller asks for it explicitly (see ``JWTVerifier.from_env``).

Checks never switch off silently: ``exp`` is required unless
``require_exp=False`` says otherwise (``required`` adds to it), an empty or
blank environment value is an error, and so is an unknown
``GRELMICRO_JWT_*`` variable (a misspelt ``ISSUERS`` would otherwise leave
the issuer unchecked). Errors name the setting, never its value.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Collection, Mapping, Sequence
from datetime import timedelta
from typing import Annotated, Any, Literal, TypedDict

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from grelmicro.jwt import _core
from grelmicro.jwt.errors import ConfigurationError

__all__ = ["ENV_PREFIX", "JWTConfig", "JWTSettings"]

ENV_PREFIX = "GRELMICRO_JWT_"

#: Every algorithm name the verifier knows (``tests/jwt/test_fail_closed.py``
#: proves the list matches the core's). A ``Literal`` so that type checkers
#: catch ``"RS257"``.
AlgorithmName = Literal[
    "HS256",
    "HS384",
    "HS512",
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "ES256K",
    "EdDSA",
    "Ed25519",
    "ML-DSA-44",
    "ML-DSA-65",
    "ML-DSA-87",
]

#: How the verified-token cache keys its entries.
CacheKey = Literal["digest", "token"]

NonEmpty = Annotated[StrictStr, Field(min_length=1)]

#: Settings given in seconds; a ``datetime.timedelta`` is accepted too.
_SECONDS = ("leeway", "max_age", "cache_ttl")
_INTEGERS = ("max_token_size", "max_depth", "cache_size")
_LISTS = ("audience", "issuer", "azp", "algorithms", "required")
_BOOLEANS = ("require_exp",)
#: Fields that configure the cache, not the core policy (``require_exp`` is
#: folded into ``required``).
_NOT_POLICY = frozenset({"require_exp", "cache_size", "cache_ttl", "cache_key"})
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _as_tuple(value: object) -> object:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple, set, frozenset)):
        return tuple(value)
    return value


def _describe_type(value: object) -> str:
    return type(value).__name__


class JWTConfig(BaseModel):
    """Policy and cache settings of a :class:`~grelmicro.jwt.JWTVerifier`."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=False)

    audience: tuple[NonEmpty, ...] = ()
    """Accepted audiences; any one matching is enough. Empty: tokens carrying
    ``aud`` are rejected (RFC 7519 §4.1.3)."""
    issuer: tuple[NonEmpty, ...] = ()
    """Accepted issuers (exact match). Empty: ``iss`` is not checked."""
    azp: tuple[NonEmpty, ...] = ()
    """Accepted authorized parties (OIDC Core §2): when set, the token's
    ``azp`` must be present and equal one of them. Empty: not checked."""
    algorithms: tuple[NonEmpty, ...] | None = None
    """Allowed algorithms. ``None``: the configured keys' own."""
    leeway: float = 0.0
    """Clock skew tolerated on ``exp``, ``nbf`` and ``iat``, in seconds (or a timedelta)."""
    require_exp: StrictBool = True
    """``exp`` is required unless this is ``False`` (the only way to accept
    tokens that never expire)."""
    required: tuple[NonEmpty, ...] = ("exp",)
    """Claims that must be present: ``exp`` (unless ``require_exp=False``)
    plus any listed here."""
    typ: NonEmpty | None = None
    """Required ``typ`` header (e.g. ``at+jwt``, RFC 9068), compared as a media type."""
    max_age: float | None = None
    """Maximum token age in seconds, counted from ``iat`` (makes ``iat`` required)."""
    max_token_size: int = 8192
    """Tokens longer than this many bytes are refused before any work."""
    max_depth: int = 64
    """Maximum JSON nesting depth in header and payload."""
    cache_size: int = Field(default=1024, ge=0, le=10_000_000)
    """Verified tokens kept; 0 disables the cache (no digest is computed)."""
    cache_ttl: float = Field(default=300.0, gt=0.0, le=86_400.0, allow_inf_nan=False)
    """Longest time a verified token is served from the cache, in seconds."""
    cache_key: CacheKey = "digest"
    """``digest``: key entries by SHA-256 of the token (no bearer token kept in
    memory); ``token``: by the token itself (faster hits)."""

    def __init__(self, **values: Any) -> None:
        # Direct construction gets the same treatment as build(): errors name
        # the field, never echo its value (a secret passed by mistake).
        try:
            super().__init__(**values)
        except ValidationError as exc:
            message = _describe(exc)
        else:
            return
        raise ConfigurationError(message)

    @model_validator(mode="before")
    @classmethod
    def _exp_is_required(cls, data: Any) -> Any:
        """``required`` adds to ``exp``; only ``require_exp=False`` drops it."""
        if not isinstance(data, dict):
            return data
        required = _as_tuple(data.get("required", ()))
        wants_exp = data.get("require_exp", True) is True
        if wants_exp and isinstance(required, tuple) and "exp" not in required:
            required = ("exp", *required)
        return {**data, "required": required}

    @field_validator("audience", "issuer", "azp", "required", "algorithms", mode="before")
    @classmethod
    def _names(cls, value: object, info: ValidationInfo) -> object:
        # Types only: which algorithm names exist is the core's answer (one
        # list, one check, in the core's policy; see _policy_is_valid).
        if value is None and info.field_name == "algorithms":
            return None  # the configured keys' own
        value = _as_tuple(value)
        if not isinstance(value, tuple):
            raise ValueError(  # noqa: TRY004 - pydantic wants ValueError
                f"must be a string or a list of strings, not {_describe_type(value)}"
            )
        for item in value:
            if not isinstance(item, str):
                raise ValueError(  # noqa: TRY004
                    f"must hold strings, not {_describe_type(item)}"
                )
        return value

    @field_validator(*_SECONDS, mode="before")
    @classmethod
    def _seconds(cls, value: object) -> object:
        if isinstance(value, timedelta):
            return value.total_seconds()
        return _number(value, "a number of seconds (int, float or datetime.timedelta)")

    @field_validator(*_INTEGERS, mode="before")
    @classmethod
    def _integers(cls, value: object) -> object:
        return _number(value, "an integer")

    @model_validator(mode="after")
    def _policy_is_valid(self) -> JWTConfig:
        """The ranges and names are checked once, by the core building its policy.

        The policy is built again by :meth:`policy` rather than kept: a
        ``model_copy(update=...)`` skips validation, and a kept policy would
        then disagree with the settings it was copied with.
        """
        try:
            _core.Policy(**self._policy_options())
        except _core.CoreError as exc:
            raise PydanticCustomError(
                "invalid_config", "{reason}", {"reason": exc.args[1]}
            ) from None
        return self

    def _policy_options(self) -> dict[str, object]:
        """The settings the core policy takes: every field but the cache's."""
        return {
            name: getattr(self, name) for name in type(self).model_fields if name not in _NOT_POLICY
        }

    @classmethod
    def build(cls, **values: object) -> JWTConfig:
        """Validate ``values``; errors become :class:`ConfigurationError` naming the field."""
        return cls(**values)

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> JWTConfig:
        """Validate a mapping; errors become :class:`ConfigurationError` naming the field."""
        try:
            return super().model_validate(obj, **kwargs)
        except ValidationError as exc:
            message = _describe(exc)
        raise ConfigurationError(message)

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        prefix: str = ENV_PREFIX,
        known: Collection[str] = (),
        **overrides: object,
    ) -> JWTConfig:
        """Read settings from ``{prefix}AUDIENCE``, ``{prefix}LEEWAY``, ...

        List settings take comma-separated values; ``REQUIRE_EXP`` takes
        ``true``/``false``. ``overrides`` win over the environment.

        Raises:
            ConfigurationError: a variable is empty or blank, holds a value
                of the wrong type, or is not a known setting (the message
                names the closest valid one). ``known`` lists further
                ``{prefix}*`` names the caller reads itself.
        """
        if not isinstance(prefix, str) or not prefix:
            raise ConfigurationError("prefix must be a non-empty string such as 'GRELMICRO_JWT_'")
        source = os.environ if environ is None else environ
        fields = {prefix + name.upper(): name for name in cls.model_fields}
        allowed = [*fields, *(prefix + name for name in known)]
        values: dict[str, object] = {}
        for variable in sorted(source):
            if not variable.startswith(prefix):
                continue
            if variable not in allowed:
                close = difflib.get_close_matches(variable, allowed, n=1, cutoff=0.6)
                hint = f"; did you mean {close[0]}?" if close else ""
                raise ConfigurationError(f"unknown setting {variable}{hint}")
            name = fields.get(variable)
            if name is None:
                continue  # read by the caller (key material, ...)
            values[name] = _from_text(variable, name, source[variable])
        values.update(overrides)
        return cls.build(**values)

    def policy(self) -> _core.Policy:
        """The core policy object for these settings."""
        return _core.call(_core.Policy, **self._policy_options())


class JWTSettings(TypedDict, total=False):
    """The settings of :class:`JWTConfig` as keywords, with the types users pass.

    ``JWTVerifier(**settings)`` takes exactly these (``None``: the default);
    ``tests/jwt/test_policy_options.py`` proves the keys are the model's
    fields, so a new field is one more line here and nowhere else in the
    verifier.
    """

    audience: str | Sequence[str] | None
    issuer: str | Sequence[str] | None
    azp: str | Sequence[str] | None
    algorithms: AlgorithmName | Sequence[AlgorithmName] | None
    leeway: float | timedelta | None
    require_exp: bool | None
    required: Sequence[str] | None
    typ: str | None
    max_age: float | timedelta | None
    max_token_size: int | None
    max_depth: int | None
    cache_size: int | None
    cache_ttl: float | timedelta | None
    cache_key: CacheKey | None


def check_flags(**flags: object) -> None:
    """Security switches take ``True`` or ``False`` only (``"no"`` is not false).

    Raises:
        ConfigurationError: naming the first switch given anything else.
    """
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise ConfigurationError(f"{name} must be True or False, not {type(value).__name__}")


def _number(value: object, expected: str) -> object:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"must be {expected}, not {_describe_type(value)}")  # noqa: TRY004
    return value


def _from_text(variable: str, name: str, raw: str) -> object:
    """One environment value, parsed for its setting. Never echoes ``raw``."""
    if not raw.strip():
        raise ConfigurationError(
            f"{variable} is empty; unset it to keep the default, or give a value"
        )
    if name in _LISTS:
        parts = [part.strip() for part in raw.split(",")]
        if not all(parts):
            raise ConfigurationError(
                f"{variable} holds an empty item; give comma-separated non-empty values"
            )
        return tuple(parts)
    if name in _BOOLEANS:
        word = raw.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
        raise ConfigurationError(f"{variable} ({name}) must be true or false")
    if name in _INTEGERS:
        try:
            return int(raw.strip())
        except ValueError:
            raise ConfigurationError(f"{variable} ({name}) must be an integer") from None
    if name in _SECONDS:
        try:
            return float(raw.strip())
        except ValueError:
            raise ConfigurationError(f"{variable} ({name}) must be a number of seconds") from None
    return raw.strip()


def _describe(exc: ValidationError) -> str:
    """Name each failing field without echoing its input value."""
    parts = []
    for error in exc.errors(include_input=False, include_url=False, include_context=False):
        message = error["msg"]
        if not error["loc"]:  # the core's refusal: it names the field itself
            parts.append(message)
            continue
        where = ".".join(str(p) for p in error["loc"])
        if error["type"] == "extra_forbidden":
            close = difflib.get_close_matches(where, list(JWTConfig.model_fields), n=1)
            message = "not a setting" + (f"; did you mean {close[0]}?" if close else "")
        parts.append(f"{where}: {message}")
    return "invalid JWT configuration: " + "; ".join(parts)
