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
(:class:`~grelmicro.jwt._fetch.Fetcher`), the background refresh and the
source's part of the lifecycle (:mod:`grelmicro.jwt._lifecycle`); what an
outcome changes (and what a 503 says) is :mod:`grelmicro.jwt._keystate`'s,
health :mod:`grelmicro.jwt._health`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable

from grelmicro.jwt import _lifecycle
from grelmicro.jwt._events import Event, Observers
from grelmicro.jwt._fetch import Fetched, Fetcher
from grelmicro.jwt._health import KeySourceHealth
from grelmicro.jwt._http import FetchError, FetchOptions
from grelmicro.jwt._keystate import KeyState
from grelmicro.jwt._schedule import Decision, Schedule
from grelmicro.jwt._snapshot import Flight, KeyWait, Parking, Snapshot
from grelmicro.jwt._steps import on_event_loop
from grelmicro.jwt.errors import KeysUnavailableError

__all__ = ["FetchOptions", "KeySource", "KeySourceHealth"]

Timer = Callable[[], float]

#: Event names that mean "a new snapshot": derive again.
CHANGES = frozenset({"keys.loaded", "keys.refreshed", "keys.withdrawn"})


class KeySource:
    """Keys from one JWKS URL (or from an issuer's discovery document).

    ``timer`` is the monotonic clock every schedule decision runs on
    (``time.monotonic``; tests pass a fake one). ``wall`` (the verifier's
    clock) only dates what :meth:`health` shows people. Its state is a
    value it holds, :attr:`state` (a :class:`KeyState`): the snapshot, the
    schedule, the counters and the transitions; the source adds the fetch,
    its runner and the lifecycle.
    """

    def __init__(
        self,
        fetcher: Fetcher,
        observers: Observers,
        *,
        timer: Timer = time.monotonic,
        wall: Timer = time.time,
    ) -> None:
        options = fetcher.options
        self.options = options
        self.timer = timer
        self.wall = wall
        self.fetcher = fetcher  # emits to ``observers``
        self.state = KeyState(
            options,
            named=self.fetcher,
            observers=observers,
            on_keys=self._watch_bound,
            timer=timer,
            wall=wall,
        )
        self._flight: Flight | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop start() ran on
        self.parking = Parking(options.max_waiters)
        self._tasks: set[asyncio.Task[None]] = set()
        self._threads: set[threading.Thread] = set()
        self._background: asyncio.Task[None] | None = None
        _lifecycle.register(self)

    # -- the state it holds ---------------------------------------------------------

    @property
    def snapshot(self) -> Snapshot:
        """The keys now (the newest generation published)."""
        return self.state.snapshot

    @property
    def schedule(self) -> Schedule:
        """When to fetch (pure, monotonic)."""
        return self.state.schedule

    @property
    def observers(self) -> Observers:
        """Who hears this source's events."""
        return self.state.observers

    @property
    def _lock(self) -> threading.Lock:
        return self.state.lock

    @property
    def _closed(self) -> bool:
        return self.state.closed

    @_closed.setter
    def _closed(self, value: bool) -> None:
        self.state.closed = value

    def on_publish(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` after each new snapshot, holding no lock (see :class:`KeyState`)."""
        self.state.on_publish(callback)

    def check_bound(self) -> None:
        """Past the bound, withdraw the last good keys."""
        self.state.check_bound()

    def note_stale_use(self, now: float) -> None:
        """A verification served by keys past their expiry."""
        self.state.note_stale_use(now)

    def unavailable(
        self, decision: Decision | None, *, unknown_kid: bool, full: bool = False
    ) -> KeysUnavailableError:
        """The 503 for a token that cannot be answered now (see :meth:`KeyState.unavailable`)."""
        return self.state.unavailable(decision, unknown_kid=unknown_kid, full=full)

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

    # -- single flight, owned by the source ---------------------------------------

    def need(self, why: str, until: float | None = None) -> KeyWait | Decision:
        """Join the fetch in flight, or start one if the schedule allows; wait until ``until``.

        ``why`` is ``keys`` (load or refresh) or ``unknown-kid`` (a token
        names a kid the keys lack); ``until`` (monotonic) is when the
        caller stops waiting (its arrival plus ``key_wait``), and no later
        than ``key_wait`` after the flight began. A caller that joins a
        flight another started does not wait while the last fetch failed,
        and a thread waits no later than the source's patience into the
        flight (:meth:`KeyState.patience`). The fetch runs
        on this source's runner (:meth:`_launch`), never in the caller:
        the :class:`KeyWait` returned only waits. A flight past its deadline
        (its runner never ran it, or it hangs) is abandoned and replaced.
        Returns the schedule's refusal (why not, and when) when no fetch
        may start, and ``no-sync-client`` when nothing here could run one
        (no pace spent).
        """
        now = self.timer()
        flight, started = self._flight_for(why, now)
        if isinstance(flight, Decision):
            return flight
        if started:
            self._launch(flight)
        key_wait = self.options.key_wait
        limit = now + key_wait if until is None else until
        # Nobody waits on a fetch past key_wait from its start; while the
        # last fetch failed, only the request that started this one waits;
        # and a thread waits no longer than the source's patience into it
        # (a few times its slowest recent good fetch). A provider that hangs
        # would otherwise hold a pool's request threads a key_wait each, and
        # the requests whose keys are held would queue behind them (gthread
        # workers). The others get their 503 with Retry-After; the fetch
        # goes on.
        limit = min(limit, flight.started + key_wait)
        if self.state.failing and not started:
            limit = now
        thread_limit = flight.started + self.state.patience(key_wait)
        return KeyWait(flight, limit, self.timer, self._lock, self.parking, thread_limit)

    def kick(self, why: str) -> Decision | None:
        """Start a fetch if one may start (nobody waits for it); None when one runs now."""
        flight, started = self._flight_for(why, self.timer())
        if isinstance(flight, Decision):
            return flight
        if started:
            self._launch(flight)
        return None

    def _flight_for(self, why: str, now: float) -> tuple[Flight | Decision, bool]:
        """The flight to wait for (and whether it is new), or why there is none."""
        with self._lock:
            if self._closed:
                return Decision(fetch=False, why="backoff", at=math.inf), False
            flight = self._flight
            if flight is not None and not flight.orphaned(now):
                return flight, False
            abandoned = flight
            if flight is not None:  # orphaned: it never ended, its pace is given back
                self.schedule.abandoned(flight.started, flight.why)
            if self._runner() is None:
                return Decision(fetch=False, why="no-sync-client", at=math.inf), False
            decision = self.schedule.may_fetch(now, unknown_kid=why == "unknown-kid")
            if not decision.fetch:
                self._flight = None
                result: tuple[Flight | Decision, bool] = (decision, False)
            else:
                self.schedule.started(now, decision)
                deadline = now + self.options.wait_limit()
                flight = self._flight = Flight(now, decision.why, deadline)
                result = (flight, True)
        if abandoned is not None:
            abandoned.finish(self._lock)  # its waiters stop waiting for a runner that is gone
        return result

    def refresh_background(self) -> None:
        """Start a load or refresh if one may start, without waiting for it."""
        self.kick("keys")

    def _runner(self) -> str | None:
        """Where a fetch would run now: ``loop`` (the source's own), ``thread``, ``here``.

        The loop ``start()`` ran on first, while it runs; else a library
        thread when a sync client is at hand; else this thread's running loop
        (an async client only). None: nothing here can fetch (a sync caller
        and only an ``AsyncClient``, with no loop of the source's running).
        """
        loop = self._loop
        if loop is not None and loop.is_running() and not loop.is_closed():
            return "loop"
        if self.fetcher.can_fetch_sync():
            return "thread"
        if on_event_loop():
            return "here"
        return None

    def _launch(self, flight: Flight) -> None:
        """Run ``flight`` on the source's runner; the caller does not wait here."""
        flight.running = True
        runner = self._runner()
        if runner == "loop":
            loop = self._loop
            assert loop is not None  # noqa: S101 - _runner said so
            with contextlib.suppress(RuntimeError):  # closed meanwhile: a thread runs it
                # The task is created on the loop itself: a loop that closes
                # first leaves no coroutine behind, only an orphaned flight
                # (the next request that needs keys replaces it).
                flight.loop = loop
                loop.call_soon_threadsafe(self._start_task, flight)
                return
            flight.loop = None
            runner = "thread" if self.fetcher.can_fetch_sync() else None
        if runner == "here":
            flight.loop = asyncio.get_running_loop()
            self._start_task(flight)
            return
        if runner == "thread":
            thread = _lifecycle.spawn(lambda: self._run_sync(flight), "grelmicro-jwks")
            if thread is None:  # the interpreter exits
                self._end(flight)
            else:
                self._threads.add(thread)
            return
        self._end(flight)

    def _start_task(self, flight: Flight) -> None:
        """On the runner's loop: the fetch as a task of its own (no request's task)."""
        if self._closed:
            self._end(flight)
            return
        task = asyncio.get_running_loop().create_task(self._run_async(flight))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _run_sync(self, flight: Flight) -> None:
        try:
            if self._closed:
                return
            try:
                fetched: Fetched | FetchError = self.fetcher.fetch_sync(rediscover=True)
            except FetchError as exc:
                fetched = exc
            self.state._outcome(flight, fetched)
        except Exception as exc:  # noqa: BLE001 - logged; waiters must never hang
            self._unexpected(flight, exc)
        finally:
            self._end(flight)
            self._threads.discard(threading.current_thread())

    async def _run_async(self, flight: Flight) -> None:
        try:
            if self._closed:
                return
            try:
                fetched: Fetched | FetchError = await self.fetcher.fetch_async(rediscover=True)
            except FetchError as exc:
                fetched = exc
            self.state._outcome(flight, fetched)
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
        self.state._outcome(flight, FetchError(f"internal error ({type(exc).__name__})"))

    def _watch_bound(self, snapshot: Snapshot) -> None:
        """Withdraw at the bound even if only cache hits come (the watcher, or the task)."""
        if self._background is None or self._background.done():
            # The watcher sleeps on time.monotonic(); the bound is on this source's timer.
            _lifecycle.BOUNDS.call_at(time.monotonic() + snapshot.stale_until - self.timer(), self)

    # -- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Load keys now (a failure is logged, not raised) and keep them fresh."""
        self._closed = False
        if self._loop is None or self._loop.is_closed() or not self._loop.is_running():
            self._loop = asyncio.get_running_loop()  # fetches run here from now on
        if self.snapshot.key_set is None:
            wait = self.need("keys", until=math.inf)
            if isinstance(wait, KeyWait):
                await wait.flight.wait_async(self._lock, self.options.wait_limit())
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
                    wait = self.need("keys", until=math.inf)
                    if isinstance(wait, KeyWait):
                        await wait.flight.wait_async(self._lock, self.options.wait_limit())
                self.check_bound()
            except Exception as exc:  # noqa: BLE001 - logged; the refresh keeps going
                self.state._emit(
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
        self._loop = None
        # Fetch threads are joined off the loop: a join here would stall every request.
        try:
            joined = asyncio.get_running_loop().run_in_executor(None, self.close)
        except RuntimeError:  # the interpreter is exiting (a worker's SIGTERM): no executor
            self.close()
            return
        await joined

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
        self.state.after_fork()
        self._flight = None
        self._threads = set()
        self._tasks = set()
        self._background = None
        self._loop = None
        self.parking.after_fork()
        if self.snapshot.key_set is not None:
            self._watch_bound(self.snapshot)

    def health(self) -> KeySourceHealth:
        """The state of this source now (what serves: the snapshot)."""
        now = self.timer()
        state = self.state
        snapshot = state.snapshot
        key_set = snapshot.key_set
        skipped = () if key_set is None else key_set.skipped
        wall = self.wall()
        ready = snapshot.serves(now)
        retry = None
        if not ready and not self._closed:
            retry = max(self.schedule.next_attempt(now), 0.0)
            flight = self._flight
            if flight is not None:  # a fetch runs: it answers at its deadline at the latest
                retry = min(max(retry, 0.0), max(flight.deadline - now, 0.0))
        return KeySourceHealth(
            ready=ready,
            retry_after=retry,
            last_success=state.last_success,
            last_failure=state.last_failure,
            last_error=state.last_error,
            key_count=0 if key_set is None else len(key_set),
            fetch_count=self.fetch_count,
            failure_count=state.failure_count,
            stale_uses=state.stale_uses,
            expires_at=None if key_set is None else wall + (snapshot.expires_at - now),
            url=self.name,
            # (kid, reason): the health's shape; the code goes to the log.
            skipped_keys=tuple((kid, reason) for kid, _, reason in skipped),
            config_error=state.config_error,
            generation=snapshot.generation,
        )
