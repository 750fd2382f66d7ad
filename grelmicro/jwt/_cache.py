"""The verified-token cache.

The table lives in the core (``TokenCache``): a map from the cache key (the
SHA-256 digest of the token by default, or the token itself) to the verified
claims, with a deadline per entry and a first-in first-out order. A hit is
one call, ``verify(token, now)``: the core computes the key, reads the entry
under a read lock that hits share (a hit never waits for another hit) and
returns the claims while ``stored_at <= now < deadline`` (a clock that goes
back, or a ``now=`` from the past, misses and lets the core decide). A miss
is the same call: it runs the engine's ``verify_until(token, now)`` and the
claims type, and stores the result with the key already computed. Stores evict
oldest-first, draining entries whose deadline has passed before evicting
live ones. Nothing ever walks the table.

Why not a ``dict``: on free-threaded CPython 3.13 a ``dict`` lookup from a
thread other than the one that stored the key falls back to the dict's lock
on every call, so the pool threads of a server would pay it on every hit
(``docs/design-notes.md``, ``grelmicro.jwt._cache``).

The engine that verified a token says until when its answer holds (its
``valid_until``: ``exp`` and, under the ``max_age`` of the policy that
token was checked against, ``iat + max_age``); the deadline is that or
insertion plus the TTL, whichever comes first, so a cached token is never
served past a moment its engine would refuse it. Tokens without ``exp``
(no ``valid_until``) and rejected tokens are never stored. Key rotation replaces the whole cache
unless only keys were added.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from grelmicro.jwt import _core
from grelmicro.jwt._claims import PAYLOAD_SLOT, Claims

__all__ = ["Engine", "TokenCache"]

#: An engine's ``verify_until(token, now) -> (payload, valid_until)``.
#: The payload is read-only (the core's mapping proxies): the cache shares it
#: between requests and threads.
Engine = Callable[[str | bytes, float], tuple[Mapping[str, Any], float | None]]


class TokenCache:
    """A bounded map of verified tokens to their claims."""

    __slots__ = ("_table", "get", "max_size", "verify")

    def __init__(
        self,
        max_size: int,
        ttl: float,
        *,
        key: str = "digest",
        max_token_size: int = 8192,
        verify: Engine | None = None,
        claims: Callable[[Mapping[str, Any]], Any] | None = None,
        claims_slot: str | None = None,
        clock: Callable[[], float] | None = None,
        count: bool = False,
    ) -> None:
        self.max_size = max_size
        self._table = _core.TokenCache(
            max_size,
            digest_key=key == "digest",
            max_token_size=max_token_size,
            ttl=ttl,
            verify=verify,
            claims=claims,
            # The core stores the payload in one slot of a new instance
            # without running its __init__ (Claims: its payload slot; the
            # core's payload is already the read-only mapping __init__ would make).
            claims_slot=PAYLOAD_SLOT if claims is Claims else claims_slot,
            clock=clock,
            count=count,
        )
        #: ``verify(token, now=None) -> claims``: a hit, or the engine's
        #: ``verify`` then ``claims`` and a store; one core call either way (``now`` defaults
        #: to ``clock()``). Raises ``CoreError`` (and
        #: whatever ``verify`` raises); ``TypeError`` when built without them.
        self.verify = self._table.verify
        #: ``get(token, now) -> claims | None``: a hit or None.
        self.get = self._table.get

    def __len__(self) -> int:
        return len(self._table)

    def rebind(self, verify: Engine) -> TokenCache:
        """The same entries (and counts), served by another engine's ``verify``."""
        other = object.__new__(TokenCache)
        other.max_size = self.max_size
        other._table = self._table.rebind(verify)
        other.verify = other._table.verify
        other.get = other._table.get
        return other

    @property
    def counts(self) -> tuple[int, int] | None:
        """``(hits, misses)`` of :attr:`verify` when built with ``count=True``."""
        return self._table.counts

    def store(
        self,
        token: str | bytes,
        claims: Any,
        payload: Mapping[str, Any],
        valid_until: float | None,
        now: float,
    ) -> None:
        """Remember verified ``claims`` (of ``payload``) for ``token`` until their deadline.

        ``valid_until`` is what the engine said of them (None: never stored).
        """
        self._table.store(token, claims, payload, valid_until, now)

    def clear(self) -> None:
        """Drop every entry."""
        self._table.clear()
