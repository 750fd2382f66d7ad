"""The verified-token cache.

The table lives in the core (``TokenCache``): a map from the cache key (the
SHA-256 digest of the token by default, or the token itself) to the verified
claims, with a deadline per entry and a first-in first-out order. A hit is
one call, ``get(token, now)``: the core computes the key, reads the entry
under a read lock that hits share (a hit never waits for another hit) and
returns the claims while ``stored_at <= now < deadline`` (a clock that goes
back, or a ``now=`` from the past, misses and lets the core decide). Stores
evict oldest-first, draining entries whose deadline has passed before
evicting live ones. Nothing ever walks the table.

Why not a ``dict``: on free-threaded CPython 3.13 a ``dict`` lookup from a
thread other than the one that stored the key falls back to the dict's lock
on every call (~20 µs with ``dict.get``); see ``docs/design-notes.md``.

The deadline is the earliest of the token's ``exp``, insertion plus the
TTL and, under a ``max_age`` policy, ``iat + max_age``: a cached token is
never served past a moment the core would refuse it. Tokens without ``exp``
and rejected tokens are never stored. Key rotation replaces the whole cache
unless only keys were added.
"""

from __future__ import annotations

from typing import Any

from grelmicro.jwt import _core

__all__ = ["TokenCache"]


class TokenCache:
    """A bounded map of verified tokens to their claims."""

    __slots__ = ("_max_age", "_table", "_ttl", "get", "max_size")

    def __init__(
        self,
        max_size: int,
        ttl: float,
        max_age: float | None = None,
        *,
        key: str = "digest",
        max_token_size: int = 8192,
    ) -> None:
        self.max_size = max_size
        self._ttl = ttl
        self._max_age = max_age
        self._table = _core.TokenCache(
            max_size, digest_key=key == "digest", max_token_size=max_token_size
        )
        #: ``get(token, now) -> claims | None``: the whole cache hit, one core call.
        #: Raises ``CoreError`` for a token over the size cap or not str/bytes.
        self.get = self._table.get

    def __len__(self) -> int:
        return len(self._table)

    @property
    def order_length(self) -> int:
        """Length of the insertion order (bounded like the entries)."""
        return self._table.order_length

    def store(self, token: str | bytes, claims: Any, payload: dict[str, Any], now: float) -> None:
        """Remember verified ``claims`` (of ``payload``) for ``token`` until their deadline."""
        exp = payload.get("exp")
        if type(exp) is not int and type(exp) is not float:
            return  # no exp: never cached
        deadline = now + self._ttl
        if exp < deadline:
            deadline = float(exp)
        if self._max_age is not None:
            iat = payload.get("iat")
            if type(iat) is not int and type(iat) is not float:
                return
            if iat + self._max_age < deadline:
                deadline = float(iat + self._max_age)
        if deadline > now:
            self._table.store(token, claims, deadline, now)

    def clear(self) -> None:
        """Drop every entry."""
        self._table.clear()
