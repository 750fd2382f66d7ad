"""Compiled verification core of ``grelmicro[jwt]``.

Applications use :mod:`grelmicro.jwt`; this package is its engine. Every
object here is immutable once built, and verification never reads the clock:
the caller passes ``now``.
"""

from grelmicro_core._core import (
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

__all__ = [
    "SOURCE_HASH",
    "CoreError",
    "Key",
    "KeySet",
    "Policy",
    "Verifier",
    "__version__",
    "algorithms",
    "error_kinds",
    "sha256_digest",
    "unverified_header",
]
