"""Keys from the network: one JWKS URL, fetched, kept fresh and kept safe.

A :class:`KeySource` owns one JWKS URL (or an issuer whose OIDC discovery
document names it). It fetches with httpx under strict limits (https only,
no redirects, timeouts, a response-size cap, a key-count cap, no ``oct``
keys), honours ``Cache-Control: max-age`` within bounds, and keeps the last
good keys through provider faults up to a bounded staleness.

Its state is one value, :attr:`KeySource.snapshot` (a
:class:`~grelmicro.jwt._snapshot.Snapshot`): every change publishes the
next generation under the source's one lock, so a withdrawal and a refresh
can never interleave into "no keys" after good ones arrived. It tells
nobody directly: it emits events (:mod:`grelmicro.jwt._events`) to its
observers, and whoever derives from the keys reads the snapshot.

When to fetch is not decided here: the pure
:class:`~grelmicro.jwt._schedule.Schedule` answers that, on the monotonic
clock. This module does single flight (:meth:`KeySource.need`), the fetch
(:class:`~grelmicro.jwt._fetch.Fetcher`) and what its outcome changes,
the background refresh, and the source's part of the lifecycle
(:mod:`grelmicro.jwt._lifecycle`). Health is in :mod:`grelmicro.jwt._health`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import threading
import time
from collections.abc import Callable

from grelmicro.jwt import _core, _lifecycle
from grelmicro.jwt._events import Event, Observers
from grelmicro.jwt._fetch import Fetched, Fetcher, NoClientError
from grelmicro.jwt._health import KeySourceHealth, Waiting
from grelmicro.jwt._http import Clients, ConfigFaultError, FetchError, FetchOptions, ttl_of
from grelmicro.jwt._schedule import FIRST_RETRY, Decision, Schedule
from grelmicro.jwt._snapshot import EMPTY, Flight, Snapshot, Wait
from grelmicro.jwt.errors import KeyPendingError, KeysUnavailableError

__all__ = ["FetchOptions", "KeySource", "KeySourceHealth"]

Timer = Callable[[], float]

#: Event names that mean "a new snapshot": derive again.
CHANGES = frozenset({"keys.loaded", "keys.refreshed", "keys.withdrawn"})


class KeySource:
    """Keys from one JWKS URL (or from an issuer's discovery document).

    ``timer`` is the monotonic clock every schedule decision runs on
    (``time.monotonic``; tests pass a fake one). ``wall`` (the verifier's
    clock) only dates what :meth:`health` shows people.
    """

    def __init__(
        self,
        *,
        jwks_url: str | None,
        discover: str | None,
        options: FetchOptions,
        clients: Clients,
        allow_insecure_loopback: bool,
        timer: Timer = time.monotonic,
        wall: Timer = time.time,
        issuer: str | None = None,
    ) -> None:
        self.observers = Observers()
        self.fetcher = Fetcher(
            jwks_url=jwks_url,
            discover=discover,
            issuer=issuer,
            options=options,
            clients=clients,
            allow_insecure_loopback=allow_insecure_loopback,
            emit=self.observers.emit,
        )
        self.options = options
        self.schedule = Schedule(options)
        self.timer = timer
        self.wall = wall  # for people (health), never for decisions
        self.snapshot: Snapshot = EMPTY
        self._lock = threading.Lock()
        self._flight: Flight | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._threads: set[threading.Thread] = set()
        self._background: asyncio.Task[None] | None = None
        self._closed = False
        self.waiting = Waiting(self.observers.emit, options.log_interval)
        # Health and logging (wall-clock times are for people only).
        self._failing = False
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
        _lifecycle.register(self)

    @property
    def name(self) -> str:
        """The URL for messages: the JWKS URL, or the issuer being discovered."""
        return self.fetcher.name

    @property
    def source(self) -> str:
        """The stable name of this source (the ``jwt_source`` of its events)."""
        return self.fetcher.source

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
        """When keys are next due, on the monotonic clock (read past a cache miss)."""
        return self.schedule.refresh_at

    def _emit(self, name: str, level: int, message: str, *args: object, **fields: object) -> None:
        self.observers.emit(Event(name, self.source, level, message, args, fields))

    # -- single flight -----------------------------------------------------------

    def need(self, why: str) -> Wait | Decision:
        """Join the fetch in flight, or start one if the schedule allows.

        ``why`` is ``keys`` (load or refresh) or ``unknown-kid`` (a token
        names a kid the keys lack). Returns the
        :class:`Wait` to hand to a driver, or the schedule's refusal (why
        not, and when a fetch may start).
        """
        now = self.timer()
        with self._lock:
            if self._closed:
                return Decision(fetch=False, why="backoff", at=math.inf)
            flight = self._flight
            if flight is not None:
                return self._wait(flight, leader=False)
            decision = self.schedule.may_fetch(now, unknown_kid=why == "unknown-kid")
            if not decision.fetch:
                return decision
            self.schedule.started(now, decision)
            flight = self._flight = Flight(now, decision.why)
            return self._wait(flight, leader=True)

    def _wait(self, flight: Flight, *, leader: bool) -> Wait:
        return Wait(
            flight,
            leader,
            self._run_sync,
            self._run_async,
            self._run_on_loop,
            self._lock,
            self.options.wait_limit(),
        )

    def refresh_background(self) -> None:
        """Start a load or refresh if one may start, without waiting for it."""
        wait = self.need("keys")
        if isinstance(wait, Wait) and wait.leader:
            wait.flight.running = True
            self._run_detached(wait.flight)

    def _run_detached(self, flight: Flight) -> None:
        """Run ``flight`` on this thread's event loop, else on a library thread."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            thread = _lifecycle.spawn(lambda: self._run_sync(flight), "grelmicro-jwks")
            if thread is None:  # the interpreter exits
                self._end(flight)
            else:
                self._threads.add(thread)
            return
        self._run_on_loop(flight)

    def _run_on_loop(self, flight: Flight) -> None:
        task = asyncio.get_running_loop().create_task(self._run_async(flight))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _run_sync(self, flight: Flight) -> None:
        try:
            if self._closed:
                return
            rediscover = flight.why != "unknown-kid"
            try:
                fetched: Fetched | FetchError = self.fetcher.fetch_sync(rediscover=rediscover)
            except FetchError as exc:
                fetched = exc
            self._outcome(flight, fetched)
        except Exception as exc:  # noqa: BLE001 - logged; waiters must never hang
            self._unexpected(flight, exc)
        finally:
            self._end(flight)
            self._threads.discard(threading.current_thread())

    async def _run_async(self, flight: Flight) -> None:
        try:
            if self._closed:
                return
            rediscover = flight.why != "unknown-kid"
            try:
                fetched: Fetched | FetchError = await self.fetcher.fetch_async(
                    rediscover=rediscover
                )
            except FetchError as exc:
                fetched = exc
            self._outcome(flight, fetched)
        except Exception as exc:  # noqa: BLE001 - as above
            self._unexpected(flight, exc)
        finally:
            self._end(flight)

    def _end(self, flight: Flight) -> None:
        with self._lock:
            if self._flight is flight:
                self._flight = None
        flight.finish(self._lock)

    def _unexpected(self, flight: Flight, exc: Exception) -> None:
        self.observers.emit(
            Event(
                "keys.internal_error",
                self.source,
                logging.ERROR,
                "JWKS %s: fetch failed unexpectedly (%s)",
                (self.name, type(exc).__name__),
                {"error": type(exc).__name__},
                exc_info=exc,  # a bug: its traceback goes to the log
            )
        )
        self._outcome(flight, FetchError(f"internal error ({type(exc).__name__})"))

    # -- what a fetch's outcome changes -----------------------------------------------

    def _outcome(self, flight: Flight, fetched: Fetched | FetchError) -> None:
        if _lifecycle.closing() or self._closed:
            return  # the interpreter or the verifier is closing: install nothing
        if isinstance(fetched, NoClientError):
            return  # not the provider's failure: no backoff, no event
        self._fetch_event(flight, fetched)
        if isinstance(fetched, FetchError):
            self._failed(fetched)
            return
        now = self.timer()
        ttl = ttl_of(fetched.headers, self.options, time.time())
        spread = random.random()  # noqa: S311 - spread, not secrecy
        if fetched.key_set is None:
            self._empty(flight, now, ttl, spread)
            return
        key_set = fetched.key_set
        with self._lock:
            held = self.snapshot.key_set
            self.schedule.succeeded(
                started=flight.started,
                now=now,
                ttl=ttl,
                spread=spread,
                why=flight.why,  # type: ignore[arg-type]
            )
            snapshot = self._publish(key_set, None)
            recovered, self._failing = self._failing, False
            self._fail_unlogged = 0
            self._stale_logged_at, self._stale_unlogged = -math.inf, 0
            config_fixed, self.config_error = self.config_error, None
        self.last_success = self.wall()
        self._watch_bound(snapshot)
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

    def _empty(self, flight: Flight, now: float, ttl: float, spread: float) -> None:
        """A well-formed empty key list: withdraws the keys when seen twice in a row."""
        with self._lock:
            outcome = self.schedule.succeeded(
                started=flight.started, now=now, ttl=ttl, spread=spread, empty=True
            )
            self._failing = False
            held = self.snapshot.key_set
            # Withdrawn: a snapshot without keys, unless it says so already.
            publish = outcome == "withdrawn" and (
                held is not None or self.snapshot.cause != "empty-key-list"
            )
            snapshot = self._publish(None, "empty-key-list") if publish else None
        self.last_success = self.wall()
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
        with self._lock:
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
        with self._lock:
            held = self.snapshot
            if held.key_set is None or now < held.stale_until:
                return
            self.schedule.withdrawn()
            snapshot = self._publish(None, "max-stale")
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

    def _watch_bound(self, snapshot: Snapshot) -> None:
        """Withdraw at the bound even if only cache hits come (the watcher, or the task)."""
        if self._background is None or self._background.done():
            _lifecycle.BOUNDS.call_at(snapshot.stale_until, self)

    def note_stale_use(self, now: float) -> None:
        """A verification served by keys past their expiry: counted, logged once per interval."""
        snapshot = self.snapshot
        with self._lock:
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
        self, decision: Decision | None, *, unknown_kid: bool
    ) -> KeysUnavailableError:
        """The 503 for a token that cannot be answered now, saying why and when to retry.

        ``decision`` is the schedule's refusal (None: a fetch ran and did not
        answer in time). A token naming a kid the keys lack, while keys are
        held and the provider is not failing, gets :class:`KeyPendingError`
        (``key-pending``): junk traffic, not an outage.
        """
        now = self.timer()
        snapshot = self.snapshot
        wait = FIRST_RETRY if decision is None else max(decision.wait(now), 0.0)
        if self._closed:
            why = "closed"
        elif self.config_error is not None:
            why = "config"
        elif decision is None:
            why = "fetch-in-flight"
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

    # -- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Load keys now (a failure is logged, not raised) and keep them fresh."""
        self._closed = False
        if self.snapshot.key_set is None:
            wait = self.need("keys")
            if isinstance(wait, Wait):
                await wait.wait_async()
        if self._background is None or self._background.done():
            self._background = asyncio.get_running_loop().create_task(self._keep_fresh())

    async def _keep_fresh(self) -> None:
        """The background refresh: wakes for the next refresh or the bound, whichever first."""
        while not self._closed:
            now = self.timer()
            wake = min(self.schedule.refresh_at, self.snapshot.stale_until)
            await asyncio.sleep(min(max(wake - now, 0.05), self.options.max_ttl))
            try:
                if self.timer() >= self.schedule.refresh_at:
                    wait = self.need("keys")
                    if isinstance(wait, Wait):
                        await wait.wait_async()
                self.check_bound()
            except Exception as exc:  # noqa: BLE001 - logged; the refresh keeps going
                self._emit(
                    "keys.internal_error",
                    logging.ERROR,
                    "JWKS %s: background refresh step failed (%s); continuing",
                    self.name,
                    type(exc).__name__,
                    error=type(exc).__name__,
                )

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
        self.close()

    def close(self) -> None:
        """No more fetches; join (bounded) the fetch threads running now."""
        self._closed = True
        self.join()

    def join(self) -> None:
        """Wait (bounded) for the fetch threads this source runs now."""
        for thread in list(self._threads):
            thread.join(self.options.wait_limit())

    def in_flight(self) -> Flight | None:
        """The fetch in progress, if any."""
        return self._flight

    def stop(self) -> None:
        """No more fetches, nothing installed (the exit hook; joining is the registry's)."""
        self._closed = True

    def reopen(self) -> None:
        """Fetch again after :meth:`close` (``start()`` does it for async apps)."""
        self._closed = False

    def after_fork(self) -> None:
        """In a forked child: fresh lock, no fetch in flight, no parent threads or tasks."""
        self._lock = threading.Lock()
        self._flight = None
        self._threads = set()
        self._tasks = set()
        self._background = None
        self.waiting = Waiting(self.observers.emit, self.options.log_interval)
        if self.snapshot.key_set is not None:
            _lifecycle.BOUNDS.call_at(self.snapshot.stale_until, self)

    def health(self) -> KeySourceHealth:
        """The state of this source now (what serves: the snapshot)."""
        now = self.timer()
        snapshot = self.snapshot
        key_set = snapshot.key_set
        wall = self.wall()
        return KeySourceHealth(
            ready=snapshot.serves(now),
            last_success=self.last_success,
            last_failure=self.last_failure,
            last_error=self.last_error,
            key_count=0 if key_set is None else len(key_set),
            fetch_count=self.fetch_count,
            failure_count=self.failure_count,
            stale_uses=self.stale_uses,
            expires_at=None if key_set is None else wall + (snapshot.expires_at - now),
            url=self.name,
            skipped_keys=() if key_set is None else tuple(key_set.skipped),
            config_error=self.config_error,
            generation=snapshot.generation,
        )


def _kids(pairs: set[tuple[str, str | None]]) -> list[str | None]:
    """The kids of ``(fingerprint, kid)`` pairs, sorted (kid-less keys last, as None)."""
    return sorted((kid for _, kid in pairs), key=lambda kid: (kid is None, kid or ""))
