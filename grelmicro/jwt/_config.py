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
import enum
import os
import types
import typing
from collections.abc import Collection, Mapping, Sequence
from datetime import timedelta
from typing import Annotated, Any, Literal, TypedDict

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from grelmicro.jwt import _core
from grelmicro.jwt.errors import ConfigurationError

__all__ = ["ENV_PREFIX", "IssuerSettings", "JWTConfig", "JWTSettings"]

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

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class Scope(enum.Enum):
    """Where a setting applies: each field of :class:`JWTConfig` names one.

    The scope decides which settings an :class:`~grelmicro.jwt.Issuer` may
    set for itself (:data:`ISSUER_SETTINGS`) and which reach the core
    policy; ``tests/jwt/test_issuer_policy.py`` holds the typed keywords to
    these sets.
    """

    #: A check on the token: an Issuer may set its own.
    ISSUER = "issuer"
    #: One value for the whole verifier: the issuer list that routes tokens,
    #: and the parse limits, applied before the token's issuer is known.
    VERIFIER = "verifier"
    #: The verified-token cache, not the core policy.
    CACHE = "cache"


def as_names(value: object) -> object:
    """A list setting as a tuple (a bare string is one name, None none); else unchanged."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple, set, frozenset)):
        return tuple(value)
    return value


def _describe_type(value: object) -> str:
    return type(value).__name__


def _number(value: object, expected: str) -> object:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"must be {expected}, not {_describe_type(value)}")  # noqa: TRY004
    return value


def _names(value: object) -> object:
    # Types only: which algorithm names exist is the core's answer (one
    # list, one check, in the core's policy; see _policy_is_valid).
    value = as_names(value)
    if not isinstance(value, tuple):
        raise ValueError(  # noqa: TRY004 - pydantic wants ValueError
            f"must be a string or a list of strings, not {_describe_type(value)}"
        )
    for item in value:
        if not isinstance(item, str):
            raise ValueError(f"must hold strings, not {_describe_type(item)}")  # noqa: TRY004
    return value


def _seconds(value: object) -> object:
    if isinstance(value, timedelta):
        return value.total_seconds()
    return _number(value, "a number of seconds (int, float or datetime.timedelta)")


def _integer(value: object) -> object:
    return _number(value, "an integer")


#: A string or a list of strings, kept as a tuple (environment: comma-separated).
Names = Annotated[tuple[NonEmpty, ...], BeforeValidator(_names)]
#: Seconds as an int, float or ``timedelta`` (environment: a number).
Seconds = Annotated[float, BeforeValidator(_seconds)]
#: An integer, not a bool or a float (environment: an integer).
Integer = Annotated[int, BeforeValidator(_integer)]


class JWTConfig(BaseModel):
    """Policy and cache settings of a :class:`~grelmicro.jwt.JWTVerifier`."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=False)

    # -- checks on the token: an Issuer may set its own (Scope.ISSUER) --
    audience: Annotated[Names, Scope.ISSUER] = ()
    """Accepted audiences; any one matching is enough. Empty: tokens carrying
    ``aud`` are rejected (RFC 7519 §4.1.3)."""
    azp: Annotated[Names, Scope.ISSUER] = ()
    """Accepted authorized parties (OIDC Core §2): when set, the token's
    ``azp`` must be present and equal one of them. Empty: not checked."""
    algorithms: Annotated[Names | None, Scope.ISSUER] = None
    """Allowed algorithms. ``None``: the configured keys' own."""
    leeway: Annotated[Seconds, Scope.ISSUER] = 0.0
    """Clock skew tolerated on every time rule, in seconds (or a timedelta): ``exp``
    and ``max_age`` (this server's clock ahead of the issuer's) and, at least,
    ``nbf`` and ``iat``."""
    leeway_ahead: Annotated[Seconds, Scope.ISSUER] = 60.0
    """Clock skew tolerated on ``nbf`` and ``iat`` (the issuer's clock ahead of this
    server's), in seconds (or a timedelta): a token minted a moment ago by an
    issuer whose clock runs fast is accepted. The rule applies the larger of
    ``leeway`` and ``leeway_ahead``; ``exp`` never gets it. 0 with
    ``leeway=0``: no skew either way."""
    require_exp: Annotated[StrictBool, Scope.ISSUER] = True
    """``exp`` is required unless this is ``False`` (the only way to accept
    tokens that never expire)."""
    required: Annotated[Names, Scope.ISSUER] = ("exp",)
    """Claims that must be present: ``exp`` (unless ``require_exp=False``)
    plus any listed here."""
    typ: Annotated[NonEmpty | None, Scope.ISSUER] = None
    """Required ``typ`` header (e.g. ``at+jwt``, RFC 9068), compared as a media type."""
    max_age: Annotated[Seconds | None, Scope.ISSUER] = None
    """Maximum token age in seconds, counted from ``iat`` (makes ``iat`` required)."""
    # -- the whole verifier (Scope.VERIFIER) --
    issuer: Annotated[Names, Scope.VERIFIER] = ()
    """Accepted issuers (exact match). Empty: ``iss`` is not checked."""
    max_token_size: Annotated[Integer, Scope.VERIFIER] = 8192
    """Tokens longer than this many bytes are refused before any work."""
    max_depth: Annotated[Integer, Scope.VERIFIER] = 64
    """Maximum JSON nesting depth in header and payload."""
    # -- the cache (Scope.CACHE) --
    cache_size: Annotated[Integer, Scope.CACHE, Field(ge=0, le=10_000_000)] = 1024
    """Verified tokens kept; 0 disables the cache (no digest is computed).

    The bound holds for the shared table and, again, for the view each
    verifying thread keeps of it (its own claims objects around the shared
    payloads, under the same keys): up to ``cache_size`` entries per thread
    that verifies, plus the table."""
    cache_ttl: Annotated[Seconds, Scope.CACHE, Field(gt=0.0, le=86_400.0, allow_inf_nan=False)] = (
        300.0
    )
    """Longest time a verified token is served from the cache, in seconds."""
    cache_key: Annotated[CacheKey, Scope.CACHE] = "digest"
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
        required = as_names(data.get("required", ()))
        wants_exp = data.get("require_exp", True) is True
        if wants_exp and isinstance(required, tuple) and "exp" not in required:
            required = ("exp", *required)
        return {**data, "required": required}

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
        preferred: Collection[str] = (),
        **overrides: object,
    ) -> JWTConfig:
        """Read settings from ``{prefix}AUDIENCE``, ``{prefix}LEEWAY``, ...

        List settings take comma-separated values; ``REQUIRE_EXP`` takes
        ``true``/``false``. ``overrides`` win over the environment.

        Raises:
            ConfigurationError: a variable is empty or blank, holds a value
                of the wrong type, or is not a known setting (the message
                names the closest valid one, looked for among ``preferred``
                first). ``known`` lists further ``{prefix}*`` names the caller
                reads itself.
        """
        if not isinstance(prefix, str) or not prefix:
            raise ConfigurationError("prefix must be a non-empty string such as 'GRELMICRO_JWT_'")
        source = os.environ if environ is None else environ
        fields = {name.upper(): name for name in cls.model_fields}
        allowed = [*fields, *known]
        values: dict[str, object] = {}
        for variable in sorted(source):
            if not variable.startswith(prefix):
                continue
            suffix = variable[len(prefix) :]
            if suffix not in allowed:
                raise ConfigurationError(
                    f"unknown setting {variable}{_near_miss(suffix, prefix, preferred, allowed)}"
                )
            name = fields.get(suffix)
            if name is None:
                continue  # read by the caller (key material, ...)
            values[name] = _from_text(variable, name, source[variable])
        values.update(overrides)
        return cls.build(**values)

    def policy(self) -> _core.Policy:
        """The core policy object for these settings."""
        return _core.call(_core.Policy, **self._policy_options())


def _scope(name: str, metadata: Sequence[object]) -> Scope:
    scopes = [item for item in metadata if isinstance(item, Scope)]
    if len(scopes) != 1:
        raise TypeError(f"JWTConfig.{name} must name exactly one Scope in its annotation")
    return scopes[0]


def _env_kind(name: str, annotation: object) -> type:
    """How an environment value is read, from the field's type alone.

    ``tuple`` (comma-separated names), ``bool``, ``int``, ``float`` (seconds)
    or ``str``; ``Annotated`` and ``| None`` are looked through.
    """
    while True:
        origin = typing.get_origin(annotation)
        if origin is Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin is typing.Union or origin is types.UnionType:
            (annotation,) = [a for a in typing.get_args(annotation) if a is not type(None)]
        else:
            break
    if origin is tuple:
        return tuple
    if origin is Literal:
        return str
    if annotation in (bool, int, float, str):
        return typing.cast("type", annotation)
    raise TypeError(f"JWTConfig.{name}: no environment reading for {annotation!r}")


#: Each field's :class:`Scope`, read from its annotation (a field without
#: exactly one fails at import).
SCOPES: dict[str, Scope] = {
    name: _scope(name, field.metadata) for name, field in JWTConfig.model_fields.items()
}
#: The settings an Issuer may set for itself, in the model's order.
ISSUER_SETTINGS: tuple[str, ...] = tuple(
    name for name, scope in SCOPES.items() if scope is Scope.ISSUER
)
#: The fields the core policy does not take: the cache's, and ``require_exp``
#: (folded into ``required`` by the model).
_NOT_POLICY = frozenset({name for name, scope in SCOPES.items() if scope is Scope.CACHE}) | {
    "require_exp"
}
#: How each field is read from the environment, from its annotation.
_ENV_KINDS: dict[str, type] = {
    name: _env_kind(name, field.annotation) for name, field in JWTConfig.model_fields.items()
}


class IssuerSettings(TypedDict, total=False):
    """The settings an :class:`~grelmicro.jwt.Issuer` may set for itself, as keywords.

    The keys are exactly the fields of :class:`JWTConfig` whose scope is
    ``Scope.ISSUER`` (``tests/jwt/test_issuer_policy.py`` holds them equal);
    ``None``: the verifier's.
    """

    audience: str | Sequence[str] | None
    azp: str | Sequence[str] | None
    algorithms: AlgorithmName | Sequence[AlgorithmName] | None
    leeway: float | timedelta | None
    leeway_ahead: float | timedelta | None
    require_exp: bool | None
    required: Sequence[str] | None
    typ: str | None
    max_age: float | timedelta | None


class JWTSettings(IssuerSettings, total=False):
    """The settings of :class:`JWTConfig` as keywords, with the types users pass.

    ``JWTVerifier(**settings)`` takes exactly these (``None``: the default):
    the per-issuer ones of :class:`IssuerSettings`, then the verifier-wide
    ones. ``tests/jwt/test_policy_options.py`` proves the keys are the
    model's fields, so a new field is one more line here and nowhere else
    in the verifier.
    """

    issuer: str | Sequence[str] | None
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


def _near_miss(suffix: str, prefix: str, *groups: Collection[str]) -> str:
    """``; did you mean {prefix}NAME?`` for the closest name, group by group.

    Names are compared without the prefix (a shared prefix would make every
    name look close); the first group with a close name answers.
    """
    for group in groups:
        close = difflib.get_close_matches(suffix, list(group), n=1, cutoff=0.6)
        if close:
            return f"; did you mean {prefix}{close[0]}?"
    return ""


def env_flag(variable: str, raw: str) -> bool:
    """A ``true``/``false`` environment value (``1``/``0``, ``yes``/``no``, ``on``/``off``).

    Raises:
        ConfigurationError: naming the variable, never its value.
    """
    word = raw.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ConfigurationError(f"{variable} must be true or false")


def _from_text(variable: str, name: str, raw: str) -> object:
    """One environment value, parsed for its setting. Never echoes ``raw``."""
    if not raw.strip():
        raise ConfigurationError(
            f"{variable} is empty; unset it to keep the default, or give a value"
        )
    kind = _ENV_KINDS[name]
    if kind is tuple:
        parts = [part.strip() for part in raw.split(",")]
        if not all(parts):
            raise ConfigurationError(
                f"{variable} holds an empty item; give comma-separated non-empty values"
            )
        return tuple(parts)
    if kind is bool:
        return env_flag(f"{variable} ({name})", raw)
    if kind is int:
        try:
            return int(raw.strip())
        except ValueError:
            raise ConfigurationError(f"{variable} ({name}) must be an integer") from None
    if kind is float:
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
