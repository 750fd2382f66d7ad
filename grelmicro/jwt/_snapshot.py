"""Key state as values: generation-numbered, immutable snapshots, and fetches in flight.

A key source never changes keys in place: each change (keys loaded or
refreshed, keys withdrawn at their bound or by an empty key list) is a new
:class:`Snapshot` with the next generation number, published under the
source's lock. Whoever derives something from a snapshot (the verifier's
route: each issuer's core verifier, the cache) installs it only if its
generation is newer than what it holds, so the newest snapshot always
wins, withdrawal included, whatever order the news arrives in.

A :class:`Flight` is one fetch in progress: threads and asyncio tasks that
need it wait on it together (single flight). It has a deadline: a flight
whose runner never ran it (a loop closed first) or never ended is replaced
by the next request that needs keys. A :class:`KeyWait` is what a
verification step asks its driver to do: wait for the flight, at most as
long as the token may still wait (``key_wait`` from its arrival). The
fetch itself belongs to its key source (it runs on the source's loop or a
library thread): a waiter runs nothing, and cancelling one cancels nothing
else. :class:`Wait` is the older shape where the first caller runs the work
(the tenant lookups still use it).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from grelmicro.jwt import _core

__all__ = ["EMPTY", "Flight", "KeyWait", "Parking", "Snapshot", "Wait"]


@dataclass(frozen=True)
class Snapshot:
    """The keys of a source at one generation (times on the monotonic clock).

    Attributes:
        generation: increases with every change; the newer snapshot wins.
        key_set: the keys, or None (not loaded yet, or withdrawn).
        fetched_at: when the fetch of the document behind it started
            (``-inf``: none); a kid this document lacks is unknown for
            tokens that arrived before that.
        expires_at: when the keys expire (a refresh is due before).
        stale_until: when they stop serving, refreshed or not.
        cause: why there are no keys (``not-loaded``, ``max-stale``,
            ``empty-key-list``), None while keys are held.
    """

    generation: int
    key_set: _core.KeySet | None
    fetched_at: float = -math.inf
    expires_at: float = -math.inf
    stale_until: float = -math.inf
    cause: str | None = "not-loaded"

    def serves(self, now: float) -> bool:
        """The keys may verify tokens at monotonic time ``now``."""
        return self.key_set is not None and now < self.stale_until


#: The state of a source that has fetched nothing yet.
EMPTY = Snapshot(0, None)


class Flight:
    """One fetch in progress; threads and tasks wait on it together.

    ``why`` is what the schedule allowed it for (``load``, ``refresh``,
    ``unknown-kid``); ``started`` its monotonic start, which the document
    it brings carries as ``fetched_at``.
    """

    __slots__ = (
        "deadline",
        "done",
        "loop",
        "running",
        "started",
        "started_ns",
        "waiters",
        "why",
    )

    def __init__(self, started: float, why: str, deadline: float = math.inf) -> None:
        self.started = started
        self.deadline = deadline  # past it, the flight is abandoned and replaced
        self.loop: asyncio.AbstractEventLoop | None = None  # the loop that runs it, if any
        self.started_ns = time.time_ns()  # for a trace span, after the fact
        self.why = why
        self.done = threading.Event()
        self.running = False  # handed to a runner (a thread or a task runs it)
        self.waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def orphaned(self, now: float) -> bool:
        """Nobody will end it: past its deadline, or the loop that runs it closed."""
        loop = self.loop
        return now >= self.deadline or (loop is not None and loop.is_closed())

    def finish(self, lock: threading.Lock) -> None:
        """Wake everyone waiting (threads and event loops)."""
        with lock:
            waiters, self.waiters = self.waiters, []
            self.done.set()
        for loop, future in waiters:
            # A closed loop has nobody waiting any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_wake, future)

    async def wait_async(self, lock: threading.Lock, limit: float) -> None:
        """Wait for the end without blocking the event loop (at most ``limit`` seconds).

        Cancelling the caller cancels its wait only: the future it waits on
        is shielded and the fetch runs elsewhere.
        """
        if limit <= 0:
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with lock:
            if self.done.is_set():
                return
            self.waiters.append((loop, future))
        try:
            # asyncio.TimeoutError is not the built-in TimeoutError before 3.11.
            with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(future), limit)
        finally:
            with lock, contextlib.suppress(ValueError):
                self.waiters.remove((loop, future))


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


@dataclass(frozen=True)
class Wait:
    """A step's request to its driver: get ``flight`` done, then resume.

    The leader (the caller whose request started the fetch) runs it: in
    its thread (``run_sync``) or on its event loop (``run_async``); everyone
    else waits for it. ``limit`` bounds a wait.
    """

    flight: Flight
    leader: bool
    run_sync: Callable[[Flight], None]
    run_async: Callable[[Flight], Awaitable[None]]
    start_on_loop: Callable[[Flight], None]
    lock: threading.Lock
    limit: float

    def block(self) -> None:
        """The sync driver: run the fetch here (leader) or wait for it."""
        if self.leader and not self.flight.running:
            self.flight.running = True
            self.run_sync(self.flight)
        else:
            self.flight.done.wait(self.limit)

    def hand_to_loop(self) -> None:
        """A sync caller on an event loop must not block: the loop runs the fetch."""
        if self.leader and not self.flight.running:
            self.flight.running = True
            self.start_on_loop(self.flight)

    async def wait_async(self) -> None:
        """The async driver: run the fetch on this loop (leader) or wait for it."""
        if self.leader and not self.flight.running:
            self.flight.running = True
            await self.run_async(self.flight)
        else:
            await self.flight.wait_async(self.lock, self.limit)


class Parking:
    """How many requests wait for a source's fetches now, within a bound."""

    __slots__ = ("_lock", "bound", "count")

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.count = 0
        self._lock = threading.Lock()

    def enter(self) -> bool:
        """Take a place; False when every place is taken (answer at once instead)."""
        with self._lock:
            if self.count >= self.bound:
                return False
            self.count += 1
            return True

    def leave(self) -> None:
        """Give the place back."""
        with self._lock:
            self.count -= 1

    def after_fork(self) -> None:
        """In a forked child: nobody waits, fresh lock."""
        self._lock = threading.Lock()
        self.count = 0


#: What a driver sends back into the steps after a :class:`KeyWait`.
WAITED = "waited"  # the flight ended (or the wait's time ran out: see ``flight.done``)
FULL = "full"  # every waiting place was taken: nobody waited


@dataclass(frozen=True)
class KeyWait:
    """A step's request to its driver: wait for ``flight`` until ``until`` (monotonic).

    The fetch already runs on its source's runner; whoever waits only
    waits, for at most what is left of the token's ``key_wait``, and a
    thread no later than ``thread_until`` (a request thread is taken from a
    pool that the requests whose keys are held need too; a task costs
    nothing while it waits). ``parking`` bounds how many wait at once:
    beyond it, the driver does not wait and the step answers 503 at once.
    """

    flight: Flight
    until: float
    timer: Callable[[], float]
    lock: threading.Lock
    parking: Parking
    thread_until: float = math.inf

    def remaining(self) -> float:
        """Seconds this request may still wait (on an event loop)."""
        return max(self.until - self.timer(), 0.0)

    def block(self) -> str:
        """The sync driver: wait in this thread."""
        left = max(min(self.until, self.thread_until) - self.timer(), 0.0)
        if self.flight.done.is_set() or left <= 0:  # nothing to wait for, or no time to
            return WAITED
        if not self.parking.enter():
            return FULL
        try:
            self.flight.done.wait(left)
        finally:
            self.parking.leave()
        return WAITED

    def hand_to_loop(self) -> None:
        """A sync caller on an event loop: nothing to hand over (the source runs the fetch)."""

    async def wait_async(self) -> str:
        """The async driver: wait on this loop without blocking it."""
        left = self.remaining()
        if self.flight.done.is_set() or left <= 0:
            return WAITED
        if not self.parking.enter():
            return FULL
        try:
            await self.flight.wait_async(self.lock, left)
        finally:
            self.parking.leave()
        return WAITED
