"""DPoP (RFC 9449) for FastAPI: ``DPoPBearer`` and ``DPoPBinding``.

They live in :mod:`grelmicro.jwt.fastapi` beside ``JWTBearer`` and the other
bindings (``from grelmicro.jwt.fastapi import DPoPBearer``); this module
re-exports the same objects, so code written against it keeps working.

Example:
    >>> from grelmicro.jwt.fastapi_dpop import DPoPBearer  # doctest: +SKIP
"""

from grelmicro.jwt.fastapi._dpop import DPoPBearer, DPoPBinding

__all__ = ["DPoPBearer", "DPoPBinding"]
