"""Key state as values: generation-numbered, immutable snapshots, and fetches in flight.

A key source never changes keys in place: each change (keys loaded or
refreshed, keys withdrawn at their bound or by an empty key list) is a new
:class:`Snapshot` with the next generation number, published under the
source's lock. Whoever derives something from a snapshot (the verifier's
route: each issuer's core verifier, the cache) installs it only if its
generation is newer than what it holds, so the newest snapshot always
wins, withdrawal included, whatever order the news arrives in.

A :class:`Flight` is one fetch in progress: threads and asyncio tasks that
need it wait on it together (single flight). A :class:`Wait` is what a
verification step asks its driver to do: run the flight (the leader) or
wait for it.
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

__all__ = ["EMPTY", "Flight", "Snapshot", "Wait"]


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

    __slots__ = ("done", "running", "started", "started_ns", "waiters", "why")

    def __init__(self, started: float, why: str) -> None:
        self.started = started
        self.started_ns = time.time_ns()  # for a trace span, after the fact
        self.why = why
        self.done = threading.Event()
        self.running = False  # the leader took it (a thread or a task runs it)
        self.waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

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
        """Wait for the end without blocking the event loop (at most ``limit`` seconds)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with lock:
            if self.done.is_set():
                return
            self.waiters.append((loop, future))
        # asyncio.TimeoutError is not the built-in TimeoutError before 3.11.
        with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(future), limit)


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
