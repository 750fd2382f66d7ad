"""Compiled verification core of ``grelmicro[jwt]``.

Applications use :mod:`grelmicro.jwt`; this package is its engine. Every
object here is immutable once built, and verification never reads the clock:
the caller passes ``now``.
"""

# The compiled module's names, listed once: in its ``__all__`` (the stub
# ``_core.pyi`` states the same list, checked against the module by stubtest).
from grelmicro_core._core import *  # noqa: F403
from grelmicro_core._core import __all__ as __all__
