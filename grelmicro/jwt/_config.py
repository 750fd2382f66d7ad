"""Verifier configuration: one frozen pydantic model, validated once.

:class:`JWTConfig` holds the policy and cache settings. It can be read from
environment variables (prefix ``GRELMICRO_JWT_``) with
:meth:`JWTConfig.from_env`; key material is never read from the environment
unless the caller asks for it explicitly (see ``JWTVerifier.from_env``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictStr,
    ValidationError,
    field_validator,
)

from grelmicro.jwt import _core
from grelmicro.jwt.errors import ConfigurationError

__all__ = ["ENV_PREFIX", "JWTConfig"]

ENV_PREFIX = "GRELMICRO_JWT_"

NonEmpty = Annotated[StrictStr, Field(min_length=1)]


def _as_tuple(value: object) -> object:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return value


class JWTConfig(BaseModel):
    """Policy and cache settings of a :class:`~grelmicro.jwt.JWTVerifier`."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=False)

    audience: tuple[NonEmpty, ...] = ()
    """Accepted audiences; any one matching is enough. Empty: tokens carrying
    ``aud`` are rejected (RFC 7519 §4.1.3)."""
    issuer: tuple[NonEmpty, ...] = ()
    """Accepted issuers (exact match). Empty: ``iss`` is not checked."""
    algorithms: tuple[NonEmpty, ...] | None = None
    """Allowed algorithms. ``None``: the configured keys' own."""
    leeway: float = Field(default=0.0, ge=0.0, le=3600.0, allow_inf_nan=False)
    """Clock skew tolerated on ``exp``, ``nbf`` and ``iat``, in seconds."""
    required: tuple[NonEmpty, ...] = ("exp",)
    """Claims that must be present."""
    typ: NonEmpty | None = None
    """Required ``typ`` header (e.g. ``at+jwt``, RFC 9068), compared as a media type."""
    max_age: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)
    """Maximum token age in seconds, counted from ``iat`` (makes ``iat`` required)."""
    max_token_size: int = Field(default=8192, ge=16, le=1 << 20)
    """Tokens longer than this many bytes are refused before any work."""
    max_depth: int = Field(default=64, ge=2, le=512)
    """Maximum JSON nesting depth in header and payload."""
    cache_size: int = Field(default=1024, ge=0, le=10_000_000)
    """Verified tokens kept; 0 disables the cache (no digest is computed)."""
    cache_ttl: float = Field(default=300.0, gt=0.0, le=86_400.0, allow_inf_nan=False)
    """Longest time a verified token is served from the cache, in seconds."""
    cache_key: Literal["digest", "token"] = "digest"
    """``digest``: key entries by SHA-256 of the token (no bearer token kept in
    memory); ``token``: by the token itself (faster hits)."""

    _normalise = field_validator("audience", "issuer", "required", mode="before")(_as_tuple)

    @field_validator(
        "leeway", "max_age", "max_token_size", "max_depth", "cache_size", "cache_ttl", mode="before"
    )
    @classmethod
    def _no_booleans(cls, value: object) -> object:
        if isinstance(value, bool):
            raise ValueError("must be a number, not a boolean")  # noqa: TRY004 - pydantic wants ValueError
        return value

    @field_validator("algorithms", mode="before")
    @classmethod
    def _algorithms(cls, value: object) -> object:
        value = None if value is None else _as_tuple(value)
        if value is not None:
            known = set(_core.algorithms())
            for name in value:  # type: ignore[attr-defined]
                if name not in known:
                    # The value is not echoed: a secret passed by mistake must not leak.
                    expected = ", ".join(sorted(known))
                    raise ValueError(f"unknown or unsupported algorithm; expected {expected}")
        return value

    @classmethod
    def build(cls, **values: object) -> JWTConfig:
        """Validate ``values``; errors become :class:`ConfigurationError` naming the field."""
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            message = _describe(exc)
        # Raised outside the handler: pydantic's error holds the input values
        # (a secret passed by mistake) and must not ride along as __context__.
        raise ConfigurationError(message)

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        prefix: str = ENV_PREFIX,
        **overrides: object,
    ) -> JWTConfig:
        """Read settings from ``{prefix}AUDIENCE``, ``{prefix}LEEWAY``, ...

        List settings take comma-separated values. ``overrides`` win over the
        environment.
        """
        source = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for name, field in cls.model_fields.items():
            raw = source.get(prefix + name.upper())
            if raw is None:
                continue
            annotation = str(field.annotation)
            if "tuple" in annotation:
                values[name] = tuple(part.strip() for part in raw.split(",") if part.strip())
            else:
                values[name] = raw
        values.update(overrides)
        return cls.build(**values)

    def policy(self) -> _core.Policy:
        """The core policy object for these settings."""
        try:
            return _core.Policy(
                audience=self.audience,
                issuer=self.issuer,
                algorithms=self.algorithms,
                leeway=self.leeway,
                required=self.required,
                typ=self.typ,
                max_age=self.max_age,
                max_token_size=self.max_token_size,
                max_depth=self.max_depth,
            )
        except _core.CoreError as exc:
            _core.raise_translated(exc)


def _describe(exc: ValidationError) -> str:
    """Name each failing field without echoing its input value."""
    parts = []
    for error in exc.errors(include_input=False, include_url=False):
        where = ".".join(str(p) for p in error["loc"]) or "config"
        parts.append(f"{where}: {error['msg']}")
    return "invalid JWT configuration: " + "; ".join(parts)


def as_names(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """Normalise a ``str | list[str] | None`` option."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(value)
