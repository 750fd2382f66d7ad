"""When keys are fetched: a pure schedule, time in and decisions out.

:class:`Schedule` holds the timing state of one key source and nothing else:
no clock, no I/O, no lock (its owner, :class:`~grelmicro.jwt._jwks.KeySource`,
reads the clock, holds the lock and does the fetching). Every method takes
``now`` and answers what the source may do:

- :meth:`Schedule.may_fetch`: may a fetch start now, and why (or why not,
  and when one may);
- :meth:`Schedule.succeeded` / :meth:`Schedule.failed`: what a fetch's
  outcome changes;
- :meth:`Schedule.serves`, :meth:`Schedule.stale`: whether the keys held
  still serve, and whether they are past their expiry.

Two pauses, each with one meaning:

- **failure backoff**: after a failed fetch, the next one waits 1 s, then
  2 s, 4 s... up to ``cooldown``; a ``Retry-After`` from the provider is
  honoured within the same cap. It gates every fetch, for any reason.
- **unknown-kid interval**: fetches asked for by tokens naming an unknown
  ``kid`` are at most ``unknown_kid_budget`` per ``unknown_kid_interval``
  seconds, for each source (so one issuer's junk never spends another's).

A token naming an unknown ``kid`` gets its final answer only from a document
whose fetch started when or after it arrived: an older document may predate
the key (design contract: a valid token is never answered 401 because of key
timing).
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass
from typing import Literal

from grelmicro.jwt._http import FetchOptions

__all__ = ["FIRST_RETRY", "Decision", "Schedule"]

#: The first pause after a failed fetch; each further failure doubles it, up
#: to the ``cooldown``.
FIRST_RETRY = 1.0
#: An empty (well-formed) key list withdraws the keys when seen this many
#: times in a row.
EMPTY_TO_WITHDRAW = 2

Why = Literal[
    # a fetch may start:
    "load",  # no keys held
    "refresh",  # the keys' time is up
    "unknown-kid",  # a token names a kid the keys lack
    # no fetch:
    "fresh",  # the keys held are recent enough
    "backoff",  # the last fetch failed; wait
    "budget",  # unknown-kid fetches spent for this interval
]


@dataclass(frozen=True)
class Decision:
    """May a fetch start now? ``why`` says why (not); ``at``: when one may."""

    fetch: bool
    why: Why
    at: float

    def wait(self, now: float) -> float:
        """Seconds from ``now`` until a fetch may start (0 when it may now)."""
        return max(self.at - now, 0.0)


Outcome = Literal["keys", "empty-kept", "withdrawn"]


class Schedule:
    """The refresh schedule of one key source (see the module docstring).

    Attributes (times in seconds on the caller's clock, ``-inf``: never):
        fetched_at: when the fetch of the document held now started.
        expires_at: when the keys held expire (refresh due before).
        stale_until: when they stop serving, refreshed or not.
        refresh_at: the next refresh (the request path calls in past it).
        retry_at: no fetch starts before this (failure backoff).
        failures: failed fetches in a row.
        empty_seen: empty key lists in a row.
        has_keys: keys are held (possibly past their bound).
    """

    __slots__ = (
        "_kid_spaced_from",
        "_kid_starts",
        "empty_seen",
        "expires_at",
        "failures",
        "fetched_at",
        "has_keys",
        "options",
        "refresh_at",
        "retry_at",
        "stale_until",
    )

    def __init__(self, options: FetchOptions) -> None:
        self.options = options
        self.fetched_at = -math.inf
        self.expires_at = -math.inf
        self.stale_until = -math.inf
        self.refresh_at = -math.inf
        self.retry_at = -math.inf
        self.failures = 0
        self.empty_seen = 0
        self.has_keys = False
        self._kid_starts: collections.deque[float] = collections.deque()
        # The start the spreading counts from (a failed fetch leaves the
        # pace of retries to the backoff).
        self._kid_spaced_from = -math.inf

    # -- questions ------------------------------------------------------------

    def serves(self, now: float) -> bool:
        """The keys held may verify tokens now."""
        return self.has_keys and now < self.stale_until

    def stale(self, now: float) -> bool:
        """The keys held are past their expiry (still serving within the bound)."""
        return self.has_keys and now >= self.expires_at

    def answers_for(self, arrived: float) -> bool:
        """Whether the document held answers for a token that arrived at ``arrived``.

        It does when its fetch started when or after the token arrived: a
        kid it lacks is really unknown. Any earlier document may predate the
        token's key, however recent.
        """
        return self.has_keys and self.fetched_at >= arrived

    def may_fetch(self, now: float, *, unknown_kid: bool = False) -> Decision:
        """Whether a fetch may start now (and why, or when one may).

        ``unknown_kid``: asked for by a token naming a kid the keys lack;
        otherwise to load or refresh the keys.
        """
        if now < self.retry_at:
            return Decision(fetch=False, why="backoff", at=self.retry_at)
        if unknown_kid:
            return self._kid_budget(now)
        if not self.has_keys:
            return Decision(fetch=True, why="load", at=now)
        if now >= self.refresh_at:
            return Decision(fetch=True, why="refresh", at=now)
        return Decision(fetch=False, why="fresh", at=self.refresh_at)

    def _kid_budget(self, now: float) -> Decision:
        """An unknown-kid fetch: within ``unknown_kid_budget`` per window, spread.

        Spread over the window, never spent in one burst: under a flood of
        invented kids a real new key still waits at most ``window / budget``
        for its fetch (a 503 meanwhile), not the whole window.
        """
        window = self.options.unknown_kid_window
        budget = self.options.unknown_kid_budget
        starts = self._kid_starts
        while starts and now - starts[0] >= window:
            starts.popleft()
        if len(starts) >= budget:
            return Decision(fetch=False, why="budget", at=starts[0] + window)
        spaced = self._kid_spaced_from + window / budget
        if now < spaced:
            return Decision(fetch=False, why="budget", at=spaced)
        return Decision(fetch=True, why="unknown-kid", at=now)

    # -- events ---------------------------------------------------------------

    def started(self, now: float, decision: Decision) -> None:
        """A fetch allowed by ``decision`` starts now."""
        if decision.why == "unknown-kid":
            self._kid_starts.append(now)
            self._kid_spaced_from = now

    def succeeded(
        self, *, started: float, now: float, ttl: float, spread: float, empty: bool = False
    ) -> Outcome:
        """A fetch started at ``started`` brought a usable document at ``now``.

        ``ttl`` is how long it may be kept; ``spread`` (0 to 1, random) brings
        the refresh up to ``jitter`` of the TTL earlier. An empty key list
        keeps the keys held the first time (and asks again soon, after the
        backoff's first pause); seen :data:`EMPTY_TO_WITHDRAW` times in a
        row, it withdraws them.
        """
        self.failures = 0
        self.retry_at = -math.inf
        if empty:
            self.empty_seen += 1
            if self.has_keys and self.empty_seen < EMPTY_TO_WITHDRAW:
                self.refresh_at = now + min(FIRST_RETRY, self.options.cooldown)
                return "empty-kept"
            # No keys: the request path asks for a load on every call, so the
            # next one waits like after a failure, without counting as one.
            self.has_keys = False
            self.fetched_at = started
            self.expires_at = self.stale_until = -math.inf
            self.retry_at = self.refresh_at = now + self.options.cooldown
            return "withdrawn"
        self.empty_seen = 0
        self.has_keys = True
        self.fetched_at = started
        self.expires_at = now + ttl
        self.stale_until = self.expires_at + self.options.max_stale
        self.refresh_at = now + ttl - ttl * self.options.jitter * spread
        return "keys"

    def failed(self, now: float, retry_after: float | None = None) -> float:
        """A fetch failed at ``now``; returns the pause before the next one.

        The pause doubles from :data:`FIRST_RETRY` with each failure in a
        row, up to ``cooldown``; a provider's ``Retry-After`` lengthens it,
        within the same cap.
        """
        self.failures += 1
        self._kid_spaced_from = -math.inf
        cap = self.options.cooldown
        pause = min(cap, FIRST_RETRY * 2.0 ** min(self.failures - 1, 30))
        if retry_after is not None and retry_after > pause:
            pause = min(retry_after, cap)
        self.retry_at = now + pause
        if self.has_keys:
            # Look again after the pause, not at every call; and at the
            # bound, so the request path sees the keys stop serving.
            self.refresh_at = min(max(self.refresh_at, self.retry_at), self.stale_until)
        else:
            self.refresh_at = self.retry_at
        return pause
