"""What changes the keys of a source: fetch outcomes, the staleness bound, and what a 503 says.

:class:`KeyState` is a value a :class:`~grelmicro.jwt._jwks.KeySource`
holds: the current :class:`~grelmicro.jwt._snapshot.Snapshot` (published
with the next generation under the one lock), the schedule, the counters
health reads, and every transition with the events it emits. It does no I/O
and starts nothing: the source fetches and hands each outcome here. Who it
speaks for (``name``, ``source``, ``discover``) comes from a :class:`Named`
(the source's fetcher); what to do when keys arrive (watch their bound) is
the ``on_keys`` the source gives it.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

from grelmicro.jwt import _core, _lifecycle
from grelmicro.jwt._events import Event, Observers
from grelmicro.jwt._fetch import Fetched, NoClientError
from grelmicro.jwt._health import Waiting
from grelmicro.jwt._http import ConfigFaultError, FetchError, FetchOptions, ttl_of
from grelmicro.jwt._schedule import FIRST_RETRY, Decision, Schedule
from grelmicro.jwt._snapshot import EMPTY, Flight, Snapshot
from grelmicro.jwt.errors import KeyPendingError, KeysUnavailableError

__all__ = ["PATIENCE_FACTOR", "PATIENCE_FLOOR", "KeyState", "Named"]

Timer = Callable[[], float]

#: A fetch running this many times longer than the slowest recent good one is
#: presumed hung: request threads stop waiting for it (tasks wait on).
PATIENCE_FACTOR = 4.0
#: ... but never sooner than this many seconds into it (a new connection, a
#: thread switch or two: a fast provider's fetch may take that much more).
PATIENCE_FLOOR = 0.25
#: How many recent good fetches the patience is taken from.
PATIENCE_MEMORY = 8


class Named(Protocol):
    """Who a key state speaks for (the source's fetcher)."""

    @property
    def name(self) -> str:
        """The URL for messages."""
        ...

    @property
    def source(self) -> str:
        """The stable name of the source (the ``jwt_source`` of its events)."""
        ...

    @property
    def discover(self) -> str | None:
        """The issuer being discovered, if any."""
        ...


class KeyState:
    """The state of one key source and its transitions (see the module docstring).

    ``timer`` is the monotonic clock every decision runs on; ``wall`` (the
    verifier's clock) only dates what health shows people.
    """

    def __init__(
        self,
        options: FetchOptions,
        *,
        named: Named,
        observers: Observers,
        on_keys: Callable[[Snapshot], None],
        timer: Timer,
        wall: Timer,
    ) -> None:
        self.observers = observers
        self._named = named
        self._on_keys = on_keys
        self.options = options
        self.schedule = Schedule(options)
        self.timer = timer
        self.wall = wall
        self.snapshot: Snapshot = EMPTY
        self._subscribers: list[Callable[[], None]] = []
        self.lock = threading.Lock()  # the source's one lock: snapshot, schedule, flight
        self.closed = False
        self.waiting = Waiting(self.observers.emit, options.log_interval)
        self._failing = False
        self._good_durations: deque[float] = deque(maxlen=PATIENCE_MEMORY)
        self._slowest_good: float | None = None  # of those: read without the lock
        self._fail_logged_at = -math.inf
        self._fail_unlogged = 0
        self._stale_logged_at = -math.inf
        self._stale_unlogged = 0
        self.failure_count = 0
        self.stale_uses = 0
        self.last_success: float | None = None
        self.last_failure: float | None = None
        self.last_error: str | None = None
        self.config_error: str | None = None

    @property
    def name(self) -> str:
        """The URL for messages (the source's own)."""
        return self._named.name

    @property
    def source(self) -> str:
        """The stable name of this source (the ``jwt_source`` of its events)."""
        return self._named.source

    @property
    def discover(self) -> str | None:
        """The issuer being discovered, if any."""
        return self._named.discover

    @property
    def failing(self) -> bool:
        """Whether the last fetch failed (until one succeeds)."""
        return self._failing

    def patience(self, key_wait: float) -> float:
        """Seconds into a fetch after which request threads stop waiting for it.

        :data:`PATIENCE_FACTOR` times the slowest of the last good fetches, at
        least :data:`PATIENCE_FLOOR`, at most ``key_wait`` (``key_wait``
        until a fetch has succeeded: there is nothing to compare with).
        """
        slowest = self._slowest_good
        if slowest is None:
            return key_wait
        return min(key_wait, max(PATIENCE_FLOOR, PATIENCE_FACTOR * slowest))

    def _good_fetch(self, flight: Flight, now: float) -> None:
        """Remember how long a good fetch took (call holding the lock)."""
        self._good_durations.append(max(now - flight.started, 0.0))
        # One float for readers: iterating the deque while another thread
        # appends would raise on a free-threaded build.
        self._slowest_good = max(self._good_durations)

    def after_fork(self) -> None:
        """In a forked child: a fresh lock and rate limits (a parent's thread may have held it)."""
        self.lock = threading.Lock()
        self.waiting = Waiting(self.observers.emit, self.options.log_interval)

    def on_publish(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` after each new snapshot, holding no lock (the route rebuilds).

        It runs before the events that tell of the change: a log handler or
        an observer never stands between a fetch and what serves.
        """
        self._subscribers.append(callback)

    def _published(self) -> None:
        for callback in self._subscribers:
            try:
                callback()
            except Exception as exc:  # noqa: BLE001, PERF203 - the next miss rebuilds; said here
                self._emit(
                    "keys.internal_error",
                    logging.ERROR,
                    "JWKS %s: installing new keys failed (%s); the next request retries",
                    self.name,
                    type(exc).__name__,
                    error=type(exc).__name__,
                )

    def _emit(self, name: str, level: int, message: str, *args: object, **fields: object) -> None:
        self.observers.emit(Event(name, self.source, level, message, args, fields))

    # -- what a fetch's outcome changes -----------------------------------------------

    def _outcome(self, flight: Flight, fetched: Fetched | FetchError) -> None:
        if _lifecycle.closing() or self.closed:
            return  # the interpreter or the verifier is closing: install nothing
        if isinstance(fetched, NoClientError):
            return  # not the provider's failure: no backoff, no event
        if isinstance(fetched, FetchError):
            self._fetch_event(flight, fetched)
            self._failed(fetched)
            return
        now = self.timer()
        ttl = ttl_of(fetched.headers, self.options, time.time())
        spread = random.random()  # noqa: S311 - spread, not secrecy
        if fetched.key_set is None:
            self._empty(flight, fetched, now, ttl, spread)
            return
        key_set = fetched.key_set
        with self.lock:
            held = self.snapshot.key_set
            self.schedule.succeeded(
                started=flight.started,
                now=now,
                ttl=ttl,
                spread=spread,
                why=flight.why,  # type: ignore[arg-type]
            )
            snapshot = self._publish(key_set, None)
            self._good_fetch(flight, now)
            recovered, self._failing = self._failing, False
            self._fail_unlogged = 0
            self._stale_logged_at, self._stale_unlogged = -math.inf, 0
            config_fixed, self.config_error = self.config_error, None
        self.last_success = self.wall()
        self._published()  # the route first: events come after what they tell of serves
        self._on_keys(snapshot)
        self._fetch_event(flight, fetched)
        kids = {(key.fingerprint, key.kid) for key in key_set.keys}
        before = set() if held is None else {(k.fingerprint, k.kid) for k in held.keys}
        changed = kids != before
        level = logging.DEBUG
        if recovered or config_fixed:
            level = logging.WARNING
        elif changed:
            level = logging.INFO
        self._emit(
            "keys.loaded" if held is None else "keys.refreshed",
            level,
            "JWKS %s: %d key%s (%d new, %d withdrawn), kept for %.0f s%s",
            self.name,
            len(kids),
            "" if len(kids) == 1 else "s",
            len(kids - before),
            len(before - kids),
            ttl,
            "; fetched again after failures" if recovered else "",
            keys=len(key_set),
            keys_before=len(before),
            kids_added=_kids(kids - before),
            kids_removed=_kids(before - kids),
            ttl=ttl,
            recovered=recovered,
            not_modified=fetched.not_modified,
            generation=snapshot.generation,
        )

    def _fetch_event(self, flight: Flight, fetched: Fetched | FetchError) -> None:
        """One event per fetch (DEBUG): its result and duration, for metrics and traces."""
        if isinstance(fetched, FetchError):
            result = "error" if str(fetched).startswith("internal error") else "failure"
        else:
            result = "not-modified" if fetched.not_modified else "success"
        self._emit(
            "keys.fetch",
            logging.DEBUG,
            "JWKS %s: fetch (%s) ended: %s",
            self.name,
            flight.why,
            result,
            result=result,
            why=flight.why,
            duration=max(self.timer() - flight.started, 0.0),
            started_ns=flight.started_ns,
            discovery=self.discover is not None,
            error=str(fetched) if isinstance(fetched, FetchError) else None,
        )

    def _publish(self, key_set: _core.KeySet | None, cause: str | None) -> Snapshot:
        """The next snapshot, from the schedule's times (call holding the lock)."""
        schedule = self.schedule
        snapshot = Snapshot(
            self.snapshot.generation + 1,
            key_set,
            schedule.fetched_at if key_set is not None else -math.inf,
            schedule.expires_at,
            schedule.stale_until,
            cause,
        )
        self.snapshot = snapshot
        return snapshot

    def _empty(
        self, flight: Flight, fetched: Fetched, now: float, ttl: float, spread: float
    ) -> None:
        """A well-formed empty key list: withdraws the keys when seen twice in a row."""
        with self.lock:
            outcome = self.schedule.succeeded(
                started=flight.started, now=now, ttl=ttl, spread=spread, empty=True
            )
            self._failing = False
            self._good_fetch(flight, now)
            held = self.snapshot.key_set
            # Withdrawn: a snapshot without keys, unless it says so already.
            publish = outcome == "withdrawn" and (
                held is not None or self.snapshot.cause != "empty-key-list"
            )
            snapshot = self._publish(None, "empty-key-list") if publish else None
        self.last_success = self.wall()
        if snapshot is not None:
            self._published()
        self._fetch_event(flight, fetched)
        if snapshot is None or held is None:
            kept = outcome == "empty-kept"
            self._emit(
                "keys.empty",
                logging.WARNING if kept else logging.ERROR,
                "JWKS %s: the provider publishes an empty key list; %s",
                self.name,
                "keys kept until it is seen again" if kept else "no keys",
                keys=len(held) if kept and held is not None else 0,
            )
        if snapshot is not None and held is not None:  # nothing to withdraw otherwise
            self._withdrawn_event(snapshot, "empty-key-list", len(held))

    def _failed(self, error: FetchError) -> None:
        now = self.timer()
        reason = str(error)
        config = isinstance(error, ConfigFaultError)
        with self.lock:
            self.failure_count += 1
            self.last_error = reason
            pause = self.schedule.failed(now, error.retry_after, spread=random.random())  # noqa: S311
            first = not self._failing
            self._failing = True
            new_config = config and reason != self.config_error
            if config:
                self.config_error = reason
            due = now - self._fail_logged_at >= self.options.log_interval
            if first or due:
                self._fail_logged_at = now
                unlogged, self._fail_unlogged = self._fail_unlogged, 0
            else:
                self._fail_unlogged += 1
            held = self.snapshot.key_set
        self.last_failure = self.wall()
        if new_config:
            # A configuration fault is said at ERROR once per change, not as an outage.
            self._emit(
                "keys.config_error",
                logging.ERROR,
                "JWKS %s: %s; fix the configuration (retrying every %.3g s meanwhile)",
                self.name,
                reason,
                pause,
                error=reason,
                retry_in=pause,
            )
            return
        if config or not (first or due):
            return
        self._emit(
            "keys.fetch_failed",
            logging.WARNING,
            "JWKS %s: fetch failed (%s); %s; next attempt in %.3g s (%d failures so far)",
            self.name,
            reason,
            "no keys held" if held is None else "keeping the last good keys",
            pause,
            self.failure_count,
            error=reason,
            failures=self.failure_count,
            retry_in=pause,
            keys=0 if held is None else len(held),
            suppressed=unlogged,
        )

    # -- the staleness bound ----------------------------------------------------------

    def check_bound(self) -> None:
        """Past the bound, withdraw the last good keys (a new snapshot without keys).

        Decided and published under the lock: a refresh that installed keys
        meanwhile makes this a no-op, never the other way round.
        """
        now = self.timer()
        with self.lock:
            held = self.snapshot
            if held.key_set is None or now < held.stale_until:
                return
            self.schedule.withdrawn()
            snapshot = self._publish(None, "max-stale")
        self._published()
        self._withdrawn_event(snapshot, "max-stale", len(held.key_set))

    def _withdrawn_event(self, snapshot: Snapshot, cause: str, keys_before: int) -> None:
        self._emit(
            "keys.withdrawn",
            logging.ERROR,
            "JWKS %s: %s; verification answers 503",
            self.name,
            "keys past their staleness bound"
            if cause == "max-stale"
            else "empty key list seen again; keys withdrawn",
            cause=cause,
            keys_before=keys_before,
            last_error=self.last_error,
            generation=snapshot.generation,
        )

    def note_stale_use(self, now: float) -> None:
        """A verification served by keys past their expiry: counted, logged once per interval."""
        snapshot = self.snapshot
        with self.lock:
            self.stale_uses += 1
            if now - self._stale_logged_at < self.options.log_interval:
                self._stale_unlogged += 1
                return
            self._stale_logged_at = now
            unlogged, self._stale_unlogged = self._stale_unlogged, 0
        self._emit(
            "keys.stale_use",
            logging.WARNING,
            "JWKS %s: serving keys %.0f s past their expiry (withdrawn in %.0f s)",
            self.name,
            now - snapshot.expires_at,
            snapshot.stale_until - now,
            stale_for=now - snapshot.expires_at,
            withdrawn_in=snapshot.stale_until - now,
            stale_uses=self.stale_uses,
            suppressed=unlogged,
        )

    # -- 503s -------------------------------------------------------------------------

    def unavailable(  # noqa: PLR0912 - one branch per wait and per detail
        self, decision: Decision | None, *, unknown_kid: bool, full: bool = False
    ) -> KeysUnavailableError:
        """The 503 for a token that cannot be answered now, saying why and when to retry.

        ``decision`` is the schedule's refusal (None: a fetch runs and did not
        answer within ``key_wait``; ``full``: too many requests wait for it
        already). A token naming a kid the keys lack, while keys are held
        and the provider is not failing, gets :class:`KeyPendingError`
        (``key-pending``): junk traffic, not an outage.
        """
        now = self.timer()
        snapshot = self.snapshot
        wait = FIRST_RETRY if decision is None else max(decision.wait(now), 0.0)
        if self.closed:
            why = "closed"
        elif self.config_error is not None:
            why = "config"
        elif full:
            why = "waiters"
        elif decision is None:
            why = "fetch-in-flight"
        elif decision.why == "no-sync-client":
            why = "no-sync-client"
            wait = FIRST_RETRY
        elif self._failing:
            why = "provider-failing"
        elif decision.why == "budget":
            why = "budget"
        else:
            why = "backoff"
        pending = (
            unknown_kid and snapshot.key_set is not None and why in ("budget", "fetch-in-flight")
        )
        if self.config_error is not None:
            detail = self.config_error
        elif why == "no-sync-client":
            detail = (
                "only an AsyncClient was given and no event loop of this verifier runs"
                " (await verifier.start() in the app's lifespan, or use verify_async)"
            )
        elif why == "waiters":
            detail = "too many requests wait for the keys already"
        elif snapshot.cause == "empty-key-list":
            detail = "the provider publishes no keys"
        elif pending:
            detail = "the token names a key not seen yet; the keys are refetched shortly"
        elif unknown_kid:
            detail = "the token names a key not seen yet and the keys cannot be refetched now"
        elif snapshot.cause == "max-stale":
            detail = "the last good keys are past their staleness bound"
        else:
            detail = "no keys loaded yet"
        if self.last_error and self.config_error is None:
            detail += f"; last fetch: {self.last_error}"
        cls = KeyPendingError if pending else KeysUnavailableError
        error = cls(f"keys from {self.name} are unavailable: {detail}")
        error.retry_after = max(wait, 0.1) if math.isfinite(wait) else None
        error.wait = why
        self.waiting.note(self.source, self.name, why, wait)
        return error


def _kids(pairs: set[tuple[str, str | None]]) -> list[str | None]:
    """The kids of ``(fingerprint, kid)`` pairs, sorted (kid-less keys last, as None)."""
    return sorted((kid for _, kid in pairs), key=lambda kid: (kid is None, kid or ""))
