"""grelmicro: a Python microservice toolkit.

This distribution carries the ``jwt`` extra: :mod:`grelmicro.jwt`.
"""

__all__: list[str] = []
