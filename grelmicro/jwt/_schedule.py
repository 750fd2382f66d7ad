"""When keys are fetched: a pure schedule, time in and decisions out.

:class:`Schedule` holds the timing state of one key source and nothing else:
no clock, no I/O, no lock, no randomness (its owner,
:class:`~grelmicro.jwt._jwks.KeySource`, reads the monotonic clock, draws
the jitter, holds the lock and does the fetching). Every method takes
``now``, in seconds of a monotonic clock: a step of the wall clock, or of a
verifier's ``clock=``, changes nothing here.

Why a fetch starts, and what paces it:

- **load** (no keys held: start-up, or after a withdrawal): about once a
  second, with jitter. The service answers nothing anyway; one request a
  second per process costs a provider nothing, and the first request after
  the provider returns gets keys.
- **refresh** (keys held, their time is up): on schedule; after a failure,
  the **backoff** waits 1 s, 2 s, 4 s... up to ``cooldown`` (keys are held:
  nobody waits for this fetch).
- **unknown-kid** (a token names a ``kid`` the keys lack): at most one per
  ``unknown_kid_interval / unknown_kid_budget`` seconds for each source (the
  pace: about one a second by default), and at most ``unknown_kid_budget``
  successful ones per ``unknown_kid_interval``. A failed fetch never spends
  the budget; while the provider fails, an unknown-kid fetch never follows
  a failed fetch back to back: it waits one load pace (about a second,
  with jitter) from the failure's end, not the doubling backoff of
  refreshes, so a key published during an outage is fetched about a second
  after the provider returns while a flood of invented kids adds at most
  one fetch a second to a provider in trouble.

A provider's ``Retry-After`` (on a 429 or 503) holds every kind of fetch
back, within ``cooldown``.

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

__all__ = ["FIRST_RETRY", "LOAD_PACE", "Decision", "Schedule", "Why"]

#: The first pause after a failed refresh; each further failure doubles it,
#: up to the ``cooldown``.
FIRST_RETRY = 1.0
#: Seconds between two loads while no keys are held (``spread`` moves each
#: by up to a quarter either way).
LOAD_PACE = 1.0
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
    "backoff",  # the last fetch failed (or the provider asked to wait); wait
    "budget",  # unknown-kid fetches paced or spent for this interval
    "no-sync-client",  # nothing here can fetch (a sync caller, only an AsyncClient)
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

    Attributes (seconds on a monotonic clock, ``-inf``: never):
        fetched_at: when the fetch of the document held now started.
        expires_at: when the keys held expire (refresh due before).
        stale_until: when they stop serving, refreshed or not.
        refresh_at: the next scheduled refresh.
        retry_at: no refresh or load starts before this (backoff, pace).
        provider_wait: no fetch at all before this (the provider's Retry-After).
        failures: failed fetches in a row.
        empty_seen: empty key lists in a row.
        has_keys: keys are held (possibly past their bound).
    """

    __slots__ = (
        "_kid_last",
        "_kid_retry_at",
        "_kid_spent",
        "empty_seen",
        "expires_at",
        "failures",
        "fetched_at",
        "has_keys",
        "options",
        "provider_wait",
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
        self.provider_wait = -math.inf
        self.failures = 0
        self.empty_seen = 0
        self.has_keys = False
        # Starts of successful unknown-kid fetches in the window (the budget).
        self._kid_spent: collections.deque[float] = collections.deque()
        # The start of the last unknown-kid fetch, failed or not (the pace).
        self._kid_last = -math.inf
        # After a failed fetch, no unknown-kid fetch before this (one load pace).
        self._kid_retry_at = -math.inf

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

    def may_fetch(self, now: float, *, unknown_kid: bool = False) -> Decision:  # noqa: PLR0911
        """Whether a fetch may start now (and why, or when one may).

        ``unknown_kid``: asked for by a token naming a kid the keys lack;
        otherwise to load or refresh the keys.
        """
        if now < self.provider_wait:
            return Decision(fetch=False, why="backoff", at=self.provider_wait)
        if unknown_kid and self.has_keys:
            if self.failures and now < self._kid_retry_at:
                # The provider fails: no unknown-kid fetch back to back with a
                # failed one (one load pace after it ended, not the doubling
                # backoff of refreshes: a 503 is answered meanwhile).
                return Decision(fetch=False, why="backoff", at=self._kid_retry_at)
            return self._kid_budget(now)
        if now < self.retry_at:
            return Decision(fetch=False, why="backoff", at=self.retry_at)
        if not self.has_keys:
            return Decision(fetch=True, why="load", at=now)
        if now >= self.refresh_at:
            return Decision(fetch=True, why="refresh", at=now)
        return Decision(fetch=False, why="fresh", at=self.refresh_at)

    def _kid_budget(self, now: float) -> Decision:
        """An unknown-kid fetch: paced, and within the budget of successful ones."""
        window = self.options.unknown_kid_window
        budget = self.options.unknown_kid_budget
        spent = self._kid_spent
        while spent and now - spent[0] >= window:
            spent.popleft()
        paced = self._kid_last + window / budget
        if len(spent) >= budget:
            # Spent: the next one when the oldest leaves the window, and not
            # before the pace allows it either.
            return Decision(fetch=False, why="budget", at=max(spent[0] + window, paced))
        if now < paced:
            return Decision(fetch=False, why="budget", at=paced)
        return Decision(fetch=True, why="unknown-kid", at=now)

    def next_attempt(self, now: float) -> float:
        """Seconds from ``now`` until the next load or refresh may start (0: now)."""
        return max(self.provider_wait, self.retry_at, self.refresh_at, now) - now

    # -- events ---------------------------------------------------------------

    def started(self, now: float, decision: Decision) -> None:
        """A fetch allowed by ``decision`` starts now."""
        if decision.why == "unknown-kid":
            self._kid_last = now

    def abandoned(self, started: float, why: str) -> None:
        """A fetch that started at ``started`` never ended (its runner is gone): pace given back."""
        if why == "unknown-kid" and self._kid_last == started:
            self._kid_last = -math.inf

    def succeeded(
        self,
        *,
        started: float,
        now: float,
        ttl: float,
        spread: float,
        empty: bool = False,
        why: Why = "refresh",
    ) -> Outcome:
        """A fetch started at ``started`` brought a usable document at ``now``.

        ``ttl`` is how long it may be kept; ``spread`` (0 to 1, random) brings
        the refresh up to ``jitter`` of the TTL earlier. An empty key list
        keeps the keys held the first time (and asks again soon); seen
        :data:`EMPTY_TO_WITHDRAW` times in a row, it withdraws them.
        """
        if why == "unknown-kid":
            self._kid_spent.append(started)
        self.failures = 0
        self.retry_at = -math.inf
        if empty:
            self.empty_seen += 1
            if self.has_keys and self.empty_seen < EMPTY_TO_WITHDRAW:
                self.refresh_at = now + min(FIRST_RETRY, self.options.cooldown)
                return "empty-kept"
            # No keys: the next load waits like after a failure with keys
            # held (a provider that publishes nothing is not down).
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

    def failed(
        self,
        now: float,
        retry_after: float | None = None,
        *,
        spread: float = 0.5,
    ) -> float:
        """A fetch failed at ``now``; returns the pause before the next load or refresh.

        With keys held, the pause doubles from :data:`FIRST_RETRY` with each
        failure in a row, up to ``cooldown``. With none, it stays about
        :data:`LOAD_PACE` (``spread``, 0 to 1, moves it by up to a quarter).
        A provider's ``Retry-After`` lengthens it, within ``cooldown``, and
        holds unknown-kid fetches back too.
        """
        self.failures += 1
        cap = self.options.cooldown
        if self.has_keys:
            pause = min(cap, FIRST_RETRY * 2.0 ** min(self.failures - 1, 30))
        else:
            pause = min(cap, LOAD_PACE * (0.75 + 0.5 * spread))
        if retry_after is not None and retry_after > 0:
            asked = min(retry_after, cap)
            self.provider_wait = now + asked
            pause = max(pause, asked)
        self.retry_at = now + pause
        self._kid_retry_at = now + LOAD_PACE * (0.75 + 0.5 * spread)
        if retry_after is not None and retry_after > 0:
            self._kid_retry_at = max(self._kid_retry_at, self.provider_wait)
        if self.has_keys:
            # Look again after the pause, and at the bound at the latest.
            self.refresh_at = min(max(self.refresh_at, self.retry_at), self.stale_until)
        else:
            self.refresh_at = self.retry_at
        return pause

    def withdrawn(self) -> None:
        """The keys went past their bound and were withdrawn: load from now on."""
        self.has_keys = False
        self.failures = 0
        self.retry_at = -math.inf
        self.refresh_at = -math.inf
