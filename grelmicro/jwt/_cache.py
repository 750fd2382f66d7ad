"""The verified-token cache.

A plain ``dict`` maps a key (the SHA-256 digest of the token by default, or
the token itself) to ``(deadline, claims, stored_at)``, and a ``deque``
remembers the insertion order. A hit is one ``dict.get`` and one chained
compare (``stored_at <= now < deadline``: a clock that goes back, or a
``now=`` from the past, misses and lets the core decide): no lock, no write,
no bookkeeping. Stores take a lock (they follow a full
verification, which costs far more) and evict oldest-first, draining entries
whose deadline has passed before evicting live ones. Nothing ever iterates
the dict, so its size never costs a request anything.

The deadline is the earliest of the token's ``exp``, insertion plus the
TTL and, under a ``max_age`` policy, ``iat + max_age``: a cached token is
never served past a moment the core would refuse it. Tokens without ``exp``
and rejected tokens are never stored. Key
rotation replaces the whole cache.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

__all__ = ["TokenCache"]

#: Expired entries drained from the front per store, at most.
_DRAIN = 8


class TokenCache:
    """A bounded map of verified tokens to their claims."""

    __slots__ = ("_entries", "_lock", "_max_age", "_order", "_ttl", "max_size")

    def __init__(self, max_size: int, ttl: float, max_age: float | None = None) -> None:
        self.max_size = max_size
        self._ttl = ttl
        self._max_age = max_age
        self._entries: dict[Any, tuple[float, Any, float]] = {}
        self._order: deque[Any] = deque()
        self._lock = threading.Lock()

    @property
    def entries(self) -> dict[Any, tuple[float, Any, float]]:
        """The underlying dict (read it, never write it: the hot path does)."""
        return self._entries

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def order_length(self) -> int:
        """Length of the insertion-order deque (bounded like the dict)."""
        return len(self._order)

    def store(self, key: Any, claims: Any, payload: dict[str, Any], now: float) -> None:
        """Remember verified ``claims`` (of ``payload``) under ``key`` until their deadline."""
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
        if deadline <= now:
            return
        entries = self._entries
        order = self._order
        with self._lock:
            for _ in range(_DRAIN):
                if not order:
                    break
                entry = entries.get(order[0])
                if entry is not None and entry[0] > now:
                    break
                entries.pop(order.popleft(), None)
            while len(order) >= self.max_size:
                entries.pop(order.popleft(), None)
            if key in entries:
                # Re-verified after its entry was drained by a racing store:
                # refresh the value, keep one slot in the order.
                entries[key] = (deadline, claims, now)
                return
            entries[key] = (deadline, claims, now)
            order.append(key)

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._entries.clear()
            self._order.clear()
