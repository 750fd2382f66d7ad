"""The only importer of ``grelmicro_core``, and the error-kind table.

Every error kind the compiled core can raise maps to exactly one class of
:mod:`grelmicro.jwt.errors`; ``tests/jwt/test_core_bridge.py`` proves the
table is complete.
"""

from __future__ import annotations

from typing import NoReturn

from grelmicro.jwt import errors

try:
    from grelmicro_core import (
        SOURCE_HASH,
        CoreError,
        Key,
        KeySet,
        Policy,
        Verifier,
        __version__,
        algorithms,
        error_kinds,
        sha256_digest,
        unverified_header,
    )
    from grelmicro_core._core import _cache_key as cache_key
    from grelmicro_core._core import unverified_issuer
except ImportError as exc:  # pragma: no cover - exercised by hand only
    msg = (
        "grelmicro.jwt needs its compiled core, the 'grelmicro-core' package built "
        "for this interpreter. Install it with: pip install 'grelmicro[jwt]'"
    )
    raise ImportError(msg) from exc

__all__ = [
    "KIND_TO_ERROR",
    "SOURCE_HASH",
    "CoreError",
    "Key",
    "KeySet",
    "Policy",
    "Verifier",
    "__version__",
    "algorithms",
    "cache_key",
    "error_kinds",
    "raise_translated",
    "sha256_digest",
    "translate",
    "unverified_header",
    "unverified_issuer",
]

KIND_TO_ERROR: dict[str, type[errors.JWTError]] = {
    "malformed": errors.MalformedTokenError,
    "too-large": errors.TokenTooLargeError,
    "unsupported": errors.UnsupportedTokenError,
    "algorithm": errors.AlgorithmNotAllowedError,
    "unknown-key": errors.UnknownKeyError,
    "signature": errors.InvalidSignatureError,
    "expired": errors.ExpiredTokenError,
    "not-yet-valid": errors.TokenNotYetValidError,
    "issued-in-future": errors.TokenIssuedInFutureError,
    "too-old": errors.TokenTooOldError,
    "audience": errors.InvalidAudienceError,
    "issuer": errors.InvalidIssuerError,
    "missing-claim": errors.MissingClaimError,
    "invalid-claim": errors.InvalidClaimError,
    "type": errors.InvalidTokenTypeError,
    "invalid-key": errors.InvalidKeyError,
    "weak-key": errors.WeakKeyError,
    "invalid-config": errors.ConfigurationError,
}


def translate(exc: CoreError) -> errors.JWTError:
    """Turn a core error into the matching ``grelmicro.jwt`` error."""
    kind, message = exc.args
    return KIND_TO_ERROR[kind](message)


def raise_translated(exc: CoreError) -> NoReturn:
    """Raise the translated error without chaining the core one."""
    raise translate(exc) from None
