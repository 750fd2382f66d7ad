"""Keys from the network: one JWKS URL, fetched, kept fresh and kept safe.

A :class:`KeySource` owns one JWKS URL (or an issuer whose OIDC discovery
document names it). It fetches with httpx under strict limits (https only,
no redirects, timeouts, a response-size cap, a key-count cap, no ``oct``
keys), honours ``Cache-Control: max-age`` within bounds, and keeps the last
good keys through provider faults up to a bounded staleness.

When to fetch is not decided here: the pure
:class:`~grelmicro.jwt._schedule.Schedule` answers that (time in, decisions
out). This module does the I/O around it:

- the fetch itself (:class:`~grelmicro.jwt._fetch.Fetcher`: discovery when
  there is one, then the JWKS, written once and run by a sync or an async
  driver) and what its outcome changes;
- single flight: at most one fetch per source is in flight; threads and
  asyncio tasks that need it join that one fetch (a :class:`_Flight`);
- background refresh (a task on the app's event loop, or a thread) and
  throttled logging.

Nothing here runs on the request path unless a fetch is due: the verifier
reads :attr:`KeySource.refresh_at` and calls in only past it.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import math
import random
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import httpx

from grelmicro.jwt import _core
from grelmicro.jwt._fetch import Fetcher, log_event
from grelmicro.jwt._http import Clients, FetchError, FetchOptions, ttl_of
from grelmicro.jwt._schedule import FIRST_RETRY, Schedule
from grelmicro.jwt.errors import KeysUnavailableError

__all__ = ["FetchOptions", "KeySource", "KeySourceHealth"]

logger = logging.getLogger("grelmicro.jwt")

Clock = Callable[[], float]
#: Gets each accepted key set, or None when the keys went past the staleness bound.
Listener = Callable[[_core.KeySet | None], None]


@dataclass(frozen=True)
class KeySourceHealth:
    """The state of network keys, for readiness probes, logs and metrics.

    Static keys are always ready. Times are seconds since the epoch (the
    verifier's clock); counters count since the verifier was built.

    Attributes:
        ready: keys are loaded and not past the staleness bound.
        last_success: when keys were last fetched and accepted.
        last_failure: when a fetch last failed.
        last_error: why it failed (no key or token material, ever).
        key_count: usable keys held now.
        fetch_count: HTTP requests made (discovery included).
        failure_count: fetches that failed.
        stale_uses: verifications served past the keys' expiry.
        expires_at: when the current keys expire (before the grace period).
        url: the JWKS URL of this source (or the issuer being discovered).
        sources: per-URL health, when the verifier has several sources.
        skipped_keys: ``(kid, reason)`` of every key the current JWKS left
            out (unsupported, malformed, weak, private, not for signatures,
            a kid two keys claim); ``len()`` is the count. Never key material.
    """

    ready: bool
    last_success: float | None = None
    last_failure: float | None = None
    last_error: str | None = None
    key_count: int = 0
    fetch_count: int = 0
    failure_count: int = 0
    stale_uses: int = 0
    expires_at: float | None = None
    url: str | None = None
    sources: tuple[KeySourceHealth, ...] = ()
    skipped_keys: tuple[tuple[str | None, str], ...] = ()

    @classmethod
    def combine(cls, parts: list[KeySourceHealth], static_keys: int) -> KeySourceHealth:
        """One health for several sources: ready only when all of them are."""
        if len(parts) == 1 and not static_keys:
            return parts[0]

        def latest(values: list[float | None]) -> float | None:
            known = [v for v in values if v is not None]
            return max(known) if known else None

        errors = [(p.last_failure, p.last_error) for p in parts if p.last_failure is not None]
        return cls(
            ready=all(p.ready for p in parts),
            last_success=latest([p.last_success for p in parts]),
            last_failure=latest([p.last_failure for p in parts]),
            last_error=max(errors, key=lambda e: e[0] or 0.0)[1] if errors else None,
            key_count=static_keys + sum(p.key_count for p in parts),
            fetch_count=sum(p.fetch_count for p in parts),
            failure_count=sum(p.failure_count for p in parts),
            stale_uses=sum(p.stale_uses for p in parts),
            expires_at=min((p.expires_at for p in parts if p.expires_at is not None), default=None),
            sources=tuple(parts),
            skipped_keys=tuple(skip for p in parts for skip in p.skipped_keys),
        )


#: What a token naming an unknown kid gets from its source: ``final`` (the
#: keys held answer for it), ``fetched`` (a fetch ran or was joined here:
#: look again), ``pending`` (a fetch runs on the event loop: await it) or
#: ``unavailable`` (no fetch may start now).
KidStep = Literal["final", "fetched", "pending", "unavailable"]


class _Flight:
    """One fetch in progress; threads and tasks wait on it together."""

    __slots__ = ("done", "rediscover", "started", "waiters")

    def __init__(self, started: float, *, rediscover: bool = True) -> None:
        self.started = started
        # Discovery is read again on the refresh schedule, not for every kid.
        self.rediscover = rediscover
        self.done = threading.Event()
        self.waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class KeySource:
    """Keys from one JWKS URL (or from an issuer's discovery document).

    Listeners (the issuers using these keys) get every new key set; a
    document that fails any check never reaches them.
    """

    def __init__(
        self,
        *,
        jwks_url: str | None,
        discover: str | None,
        options: FetchOptions,
        clients: Clients,
        clock: Clock,
        allow_insecure_loopback: bool,
    ) -> None:
        self.fetcher = Fetcher(
            jwks_url=jwks_url,
            discover=discover,
            options=options,
            clients=clients,
            allow_insecure_loopback=allow_insecure_loopback,
        )
        self.options = options
        self.schedule = Schedule(options)
        self._clock = clock
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()
        self._withdrawing = threading.Lock()
        self._flight: _Flight | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._threads: set[threading.Thread] = set()
        self._background: asyncio.Task[None] | None = None
        self._closed = False
        self.key_set: _core.KeySet | None = None
        # Logging and health.
        self._logged_at = -math.inf  # the last fetch_failed record
        self._unlogged = 0  # failures since it
        self._stale_logged_at = -math.inf  # the last stale_use record
        self._stale_unlogged = 0  # stale uses since it
        self._failing = False
        self._withdrawn = False
        self._empty = False
        self.failure_count = 0
        self.stale_uses = 0
        self.last_success: float | None = None
        self.last_failure: float | None = None
        self.last_error: str | None = None

    @property
    def name(self) -> str:
        """The URL for logs: the JWKS URL, or the issuer being discovered."""
        return self.fetcher.name

    @property
    def url(self) -> str | None:
        """The JWKS URL (given, or the one discovery names now)."""
        return self.fetcher.url

    @property
    def discover(self) -> str | None:
        """The issuer whose discovery document names the JWKS URL, if any."""
        return self.fetcher.discover

    @property
    def fetch_count(self) -> int:
        """HTTP requests made (discovery included)."""
        return self.fetcher.count

    @property
    def started(self) -> bool:
        """``start()`` runs the background refresh (an app's lifespan called it)."""
        return self._background is not None

    @property
    def refresh_at(self) -> float:
        """When keys are next due (read on the request path, past a cache miss)."""
        return self.schedule.refresh_at

    @property
    def expires_at(self) -> float:
        """When the keys held expire (refresh due before)."""
        return self.schedule.expires_at

    @property
    def stale_until(self) -> float:
        """When the keys held stop serving."""
        return self.schedule.stale_until

    def _event(
        self,
        level: int,
        event: str,
        message: str,
        *args: object,
        exc_info: BaseException | None = None,
        **fields: object,
    ) -> None:
        log_event(
            level,
            event,
            self.fetcher.source,
            message,
            *args,
            exc_info=exc_info,
            stacklevel=3,  # the line that called this method
            **fields,
        )

    def subscribe(self, listener: Listener) -> None:
        """Call ``listener(key_set)`` on every accepted key set."""
        self._listeners.append(listener)

    # -- one fetch (the steps live in _fetch), and what its outcome changes ----

    def fetch_sync(self, started: float | None = None, *, rediscover: bool = True) -> None:
        """Fetch now in this thread and install the keys, or record the failure."""
        started = self._clock() if started is None else started
        try:
            key_set, headers = self.fetcher.fetch_sync(rediscover=rediscover)
        except FetchError as exc:
            self._failed(str(exc), exc.retry_after)
            return
        self._accept(key_set, headers, started)

    async def fetch_async(self, started: float | None = None, *, rediscover: bool = True) -> None:
        """Fetch now on this event loop and install the keys, or record the failure."""
        started = self._clock() if started is None else started
        try:
            key_set, headers = await self.fetcher.fetch_async(rediscover=rediscover)
        except FetchError as exc:
            self._failed(str(exc), exc.retry_after)
            return
        self._accept(key_set, headers, started)

    def _accept(self, key_set: _core.KeySet | None, headers: httpx.Headers, started: float) -> None:
        now = self._clock()
        ttl = ttl_of(headers, self.options, now)
        spread = random.random()  # noqa: S311 - spread, not secrecy
        if key_set is None:
            self._accept_empty(now, ttl, spread, started)
            return
        for listener in self._listeners:
            listener(key_set)
        held = self.key_set
        kids = {(key.fingerprint, key.kid) for key in key_set.keys}
        before = set() if held is None else {(k.fingerprint, k.kid) for k in held.keys}
        with self._lock:
            self.schedule.succeeded(started=started, now=now, ttl=ttl, spread=spread)
            self.key_set = key_set
            self.last_success = now
            self._withdrawn = self._empty = False
            recovered, self._failing = self._failing, False
            self._unlogged = 0
            self._stale_logged_at, self._stale_unlogged = -math.inf, 0
        self._watch_bound(now)
        self._event(
            logging.WARNING if recovered else logging.INFO if kids != before else logging.DEBUG,
            "keys.loaded" if held is None else "keys.refreshed",
            "JWKS %s: %d keys (%d new, %d withdrawn), kept for %.0f s%s",
            self.name,
            len(kids),
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
        )

    def _accept_empty(self, now: float, ttl: float, spread: float, started: float) -> None:
        """A well-formed empty key list: withdraws the keys when seen twice in a row."""
        with self._lock:
            outcome = self.schedule.succeeded(
                started=started, now=now, ttl=ttl, spread=spread, empty=True
            )
            self.last_success = now
            self._failing = False
            held = self.key_set
            if outcome == "withdrawn":
                self.key_set = None
                self._empty = True
        if outcome == "empty-kept" or held is None:
            kept = outcome == "empty-kept"
            self._event(
                logging.WARNING if kept else logging.ERROR,
                "keys.empty",
                "JWKS %s: the provider publishes an empty key list; %s",
                self.name,
                "keys kept until it is seen again" if kept else "no keys",
                keys=len(held) if kept and held is not None else 0,
            )
            return
        self._event(
            logging.ERROR,
            "keys.withdrawn",
            "JWKS %s: empty key list seen again; keys withdrawn",
            self.name,
            cause="empty-key-list",
            keys_before=len(held),
        )
        for listener in self._listeners:
            listener(None)

    def _failed(self, reason: str, retry_after: float | None = None) -> None:
        now = self._clock()
        with self._lock:
            self.failure_count += 1
            self.last_failure = now
            self.last_error = reason
            pause = self.schedule.failed(now, retry_after)
            first = not self._failing
            self._failing = True
            due = now - self._logged_at >= self.options.log_interval
            if first or due:
                self._logged_at = now
                unlogged, self._unlogged = self._unlogged, 0
            else:
                self._unlogged += 1
        key_set = self.key_set
        if key_set is not None:
            self._watch_bound(now)
        if first or due:
            self._event(
                logging.WARNING,
                "keys.fetch_failed",
                "JWKS %s: fetch failed (%s); %s; next attempt in %.3g s (%d failures so far)",
                self.name,
                reason,
                "no keys held" if key_set is None else "keeping the last good keys",
                pause,
                self.failure_count,
                error=reason,
                failures=self.failure_count,
                retry_in=pause,
                keys=0 if key_set is None else len(key_set),
                suppressed=unlogged,
            )

    # -- single flight ----------------------------------------------------

    def _begin(
        self, *, unknown_kid: bool, arrived: float = -math.inf
    ) -> tuple[_Flight | None, bool]:
        """Join the fetch in flight, or start one if the schedule allows.

        Returns ``(flight, leader)``; ``(None, False)`` when no fetch may
        start, or (``unknown_kid``) when the keys held answer for a token
        that arrived at ``arrived``.
        """
        now = self._clock()
        with self._lock:
            if self._closed:
                return None, False
            if unknown_kid and self.schedule.answers_for(arrived):
                return None, False
            if self._flight is not None:
                return self._flight, False
            decision = self.schedule.may_fetch(now, unknown_kid=unknown_kid)
            if not decision.fetch:
                return None, False
            self.schedule.started(now, decision)
            flight = self._flight = _Flight(now, rediscover=decision.why != "unknown-kid")
            return flight, True

    def _end(self, flight: _Flight) -> None:
        with self._lock:
            if self._flight is flight:
                self._flight = None
            waiters, flight.waiters = flight.waiters, []
            flight.done.set()
        for loop, future in waiters:
            # A closed loop has nobody waiting any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_wake, future)

    def _lead_sync(self, flight: _Flight) -> None:
        try:
            self.fetch_sync(flight.started, rediscover=flight.rediscover)
        except Exception as exc:  # noqa: BLE001 - logged; a listener bug must not hang waiters
            self._unexpected(exc)
            self._failed(f"internal error ({type(exc).__name__})")
        finally:
            self._end(flight)

    async def _lead_async(self, flight: _Flight) -> None:
        try:
            await self.fetch_async(flight.started, rediscover=flight.rediscover)
        except Exception as exc:  # noqa: BLE001 - as above
            self._unexpected(exc)
            self._failed(f"internal error ({type(exc).__name__})")
        finally:
            self._end(flight)

    def _unexpected(self, exc: Exception) -> None:
        self._event(
            logging.ERROR,
            "keys.internal_error",
            "JWKS %s: refresh failed unexpectedly",
            self.name,
            error=type(exc).__name__,
            exc_info=exc,
        )

    def _run(self, flight: _Flight, *, block: bool) -> None:
        """Lead ``flight``: here (``block``), else on this thread's event loop or a thread."""
        if block:
            self._lead_sync(flight)
            return
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is not None:
            task = loop.create_task(self._lead_async(flight))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            thread = threading.Thread(
                target=self._run_thread, args=(flight,), name="grelmicro-jwks", daemon=True
            )
            self._threads.add(thread)
            thread.start()

    def refresh_blocking(self, *, unknown_kid: bool = False) -> bool:
        """Fetch in this thread (or wait for the fetch in flight). True if one ran."""
        flight, leader = self._begin(unknown_kid=unknown_kid)
        if flight is None:
            return False
        if leader:
            self._lead_sync(flight)
        else:
            flight.done.wait(self.options.wait_limit())
        return True

    def refresh_background(self, *, unknown_kid: bool = False) -> _Flight | None:
        """Start a fetch without waiting: on this thread's event loop, else a thread."""
        flight, leader = self._begin(unknown_kid=unknown_kid)
        if flight is not None and leader:
            self._run(flight, block=False)
        return flight

    def _run_thread(self, flight: _Flight) -> None:
        try:
            self._lead_sync(flight)
        finally:
            self._threads.discard(threading.current_thread())

    async def refresh_async(self, *, unknown_kid: bool = False) -> bool:
        """Fetch on this loop (or wait for the fetch in flight). True if one ran."""
        flight, leader = self._begin(unknown_kid=unknown_kid)
        if flight is None:
            return False
        if leader:
            await self._lead_async(flight)
        else:
            await self.wait_async(flight)
        return True

    async def wait_async(self, flight: _Flight) -> None:
        """Wait for ``flight`` without blocking the event loop."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if flight.done.is_set():
                return
            flight.waiters.append((loop, future))
        # asyncio.TimeoutError is not the built-in TimeoutError before 3.11.
        with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(future), self.options.wait_limit())

    def in_flight(self) -> _Flight | None:
        """The fetch in progress, if any."""
        return self._flight

    # -- what the request path calls past refresh_at ----------------------

    def due(self, now: float) -> bool:
        """Keys are due for refresh (or missing): act, and say whether they serve.

        Called by the verifier only when ``now >= refresh_at``. Never blocks
        while keys are usable; returns False when keys are missing or past
        the staleness bound and this call could not get new ones.
        """
        schedule = self.schedule
        if self.key_set is not None and schedule.serves(now):
            if schedule.stale(now):
                self.stale_uses += 1
                self._stale_use(now)
            if now >= schedule.refresh_at and (self._background is None or self._background.done()):
                self.refresh_background()
            return True
        if _on_event_loop():
            self.refresh_background()
        else:
            self.refresh_blocking()
        if self.key_set is not None and schedule.serves(self._clock()):
            return True
        self._withdraw_if_past_bound()
        return False

    def _stale_use(self, now: float) -> None:
        """Log a use of expired keys: the first after they expired, then once per log interval."""
        with self._lock:
            if now - self._stale_logged_at < self.options.log_interval:
                self._stale_unlogged += 1
                return
            self._stale_logged_at = now
            unlogged, self._stale_unlogged = self._stale_unlogged, 0
        schedule = self.schedule
        self._event(
            logging.WARNING,
            "keys.stale_use",
            "JWKS %s: serving keys %.0f s past their expiry (withdrawn in %.0f s)",
            self.name,
            now - schedule.expires_at,
            schedule.stale_until - now,
            stale_for=now - schedule.expires_at,
            withdrawn_in=schedule.stale_until - now,
            stale_uses=self.stale_uses,
            suppressed=unlogged,
        )

    def _withdraw_if_past_bound(self) -> None:
        """Past the bound, withdraw the last good keys and every cached result.

        The listeners drop the keys, and the verifier's cache with them.
        """
        # The bound watcher and a request may both get here: the second waits
        # until the first has logged and told the listeners.
        with self._withdrawing:
            held = self.key_set
            if held is None or self._withdrawn or self.schedule.serves(self._clock()):
                return
            self._withdrawn = True
            self._event(
                logging.ERROR,
                "keys.withdrawn",
                "JWKS %s: keys past their staleness bound; verification answers 503",
                self.name,
                cause="max-stale",
                keys_before=len(held),
                last_error=self.last_error,
            )
            for listener in self._listeners:
                listener(None)

    def unknown_kid(self, arrived: float) -> KidStep:
        """A token that arrived at ``arrived`` names a kid the keys lack: what now.

        ``final`` when the keys held come from a document fetched after the
        token arrived: the kid is unknown.
        Otherwise one fetch, when the schedule allows it: run (or joined)
        here and ``fetched``, or, on an event loop that must not block,
        started there and ``pending``. ``unavailable`` when none may start.
        """
        flight, leader = self._begin(unknown_kid=True, arrived=arrived)
        if flight is None:
            with self._lock:
                answers = self._closed or self.schedule.answers_for(arrived)
            return "final" if answers else "unavailable"
        if _on_event_loop():
            # Never block an event loop: fetch on it; verify_async waits for it.
            if leader:
                self._run(flight, block=False)
            return "pending"
        if leader:
            self._lead_sync(flight)
        else:
            flight.done.wait(self.options.wait_limit())
        return "fetched"

    def retry_after(self, *, unknown_kid: bool = False) -> float:
        """Seconds until a fetch may start (a fetch in flight: the first pause)."""
        now = self._clock()
        with self._lock:  # may_fetch drops budget entries that left the window
            if self._flight is not None:
                return FIRST_RETRY
            return self.schedule.may_fetch(now, unknown_kid=unknown_kid).wait(now)

    def unavailable(self, *, unknown_kid: bool = False) -> KeysUnavailableError:
        """The 503 error, saying why (never key material) and when to try again."""
        if self._empty:
            detail = "the provider publishes no keys"
        elif unknown_kid:
            detail = "the token names a key not seen yet and the keys cannot be refetched now"
        elif self.key_set is None:
            detail = "no keys loaded yet"
        else:
            detail = "the last good keys are past their staleness bound"
        if self.last_error:
            detail += f"; last fetch: {self.last_error}"
        error = KeysUnavailableError(f"keys from {self.name} are unavailable: {detail}")
        error.retry_after = max(self.retry_after(unknown_kid=unknown_kid), FIRST_RETRY)
        return error

    # -- lifecycle --------------------------------------------------------

    async def start(self) -> None:
        """Load keys now (a failure is logged, not raised) and keep them fresh."""
        self._closed = False
        if self.key_set is None:
            await self.refresh_async()
        if self._background is None or self._background.done():
            self._background = asyncio.get_running_loop().create_task(self._keep_fresh())

    async def _keep_fresh(self) -> None:
        while not self._closed:
            delay = self.schedule.refresh_at - self._clock()
            await asyncio.sleep(min(max(delay, 0.05), self.options.max_ttl))
            if self._clock() >= self.schedule.refresh_at:
                await self.refresh_async()
            # The refresh time never passes the bound while fetches fail, so
            # this wakes at the bound: cached results stop with the keys.
            self._withdraw_if_past_bound()

    async def aclose(self) -> None:
        """Stop the background refresh and any fetch started on this loop."""
        self._closed = True
        pending = [t for t in (self._background, *self._tasks) if t is not None]
        for task in pending:
            task.cancel()
        for task in pending:
            # Whatever the task ended with was logged by the task itself.
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._background = None
        self.close_threads()

    def close_threads(self) -> None:
        """No more fetches; wait (bounded) for fetch threads to finish."""
        self._closed = True
        self.join()

    def _watch_bound(self, now: float) -> None:
        """Withdraw the keys at their bound even if only cache hits come.

        A cache hit never calls in here: on an event loop the background
        task wakes at the bound; otherwise the bound watcher does.
        """
        if self._background is None or self._background.done():
            _BOUNDS.call_at(self.schedule.stale_until - now, self)

    def join(self) -> None:
        """Wait (bounded) for the fetch threads running now."""
        for thread in list(self._threads):
            thread.join(self.options.wait_limit())

    def health(self) -> KeySourceHealth:
        """The state of this source now."""
        now = self._clock()
        key_set = self.key_set
        return KeySourceHealth(
            ready=key_set is not None and self.schedule.serves(now),
            last_success=self.last_success,
            last_failure=self.last_failure,
            last_error=self.last_error,
            key_count=0 if key_set is None else len(key_set),
            fetch_count=self.fetch_count,
            failure_count=self.failure_count,
            stale_uses=self.stale_uses,
            expires_at=None if key_set is None else self.schedule.expires_at,
            url=self.name,
            skipped_keys=() if key_set is None else tuple(key_set.skipped),
        )


class _BoundWatch:
    """One daemon thread for every key source: withdraws keys at their bounds.

    Sources are held weakly; a deadline that a later fetch moved just finds
    the keys still serving and does nothing.
    """

    def __init__(self) -> None:
        self._ready = threading.Condition()
        self._heap: list[tuple[float, int, weakref.ref[KeySource]]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def call_at(self, delay: float, source: KeySource) -> None:
        """Look at ``source`` in ``delay`` seconds (of its clock, read as real time)."""
        when = time.monotonic() + max(delay, 0.0)
        with self._ready:
            heapq.heappush(self._heap, (when, next(self._order), weakref.ref(source)))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="grelmicro-jwks-bounds", daemon=True
                )
                self._thread.start()
            self._ready.notify()

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._heap:
                    self._ready.wait()
                when, _, ref = self._heap[0]
                delay = when - time.monotonic()
                if delay > 0:
                    self._ready.wait(delay)
                    continue
                heapq.heappop(self._heap)
            source = ref()
            if source is not None:
                try:
                    source._withdraw_if_past_bound()
                except Exception:  # a listener bug must not stop the watcher
                    logger.exception("JWKS %s: withdrawing keys failed", source.name)


_BOUNDS = _BoundWatch()


def _kids(pairs: set[tuple[str, str | None]]) -> list[str | None]:
    """The kids of ``(fingerprint, kid)`` pairs, sorted (kid-less keys last, as None)."""
    return sorted((kid for _, kid in pairs), key=lambda kid: (kid is None, kid or ""))


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
