"""Every thread the library starts, and how they end: at close, at exit, after fork.

Threads come from :func:`spawn` only; each is registered until it returns,
so it can be joined. Three kinds exist: a key fetch run off the request
path (a sync app), the helper that bounds a sync HTTP request in total, and
the one bound watcher (:class:`BoundWatch`) that withdraws keys at their
staleness bound when only cache hits come.

- **At interpreter exit** (an ``atexit`` hook, which runs while threads
  still run normally, before finalization): no new thread starts, every
  live key source stops fetching, the sockets of requests in flight are
  shut (their reads return at once), the watcher stops, and every library
  thread is joined (bounded). So no library thread is inside the core when
  the interpreter finalizes: a thread that re-takes the GIL then would be
  ended by force through Rust frames, which aborts the process.
- **After fork** (``os.register_at_fork``): the child has none of the
  parent's threads; it gets fresh locks, an empty registry and a watcher
  that starts again on demand, and each live source forgets its fetch in
  flight.
"""

from __future__ import annotations

import atexit
import contextlib
import heapq
import itertools
import logging
import os
import socket
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["BoundWatch", "Stoppable", "closing", "register", "spawn", "stop_all", "track_stream"]

logger = logging.getLogger("grelmicro.jwt")

#: How long the exit hook waits, in all, for library threads to return.
EXIT_JOIN = 5.0


class Stoppable(Protocol):
    """What the registry needs of a key source."""

    def stop(self) -> None:
        """No more fetches; fetches in flight end without installing anything."""

    def after_fork(self) -> None:
        """In a forked child: fresh locks, no fetch in flight."""

    def check_bound(self) -> None:
        """Withdraw the keys if they are past their staleness bound."""


class _Registry:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.threads: set[threading.Thread] = set()
        self.streams: set[Any] = set()
        self.sources: weakref.WeakSet[Any] = weakref.WeakSet()
        self.closing = False


_STATE = _Registry()


def closing() -> bool:
    """The interpreter is exiting: start nothing, install nothing."""
    return _STATE.closing


def register(source: Stoppable) -> None:
    """Stop ``source`` at exit and refresh it after fork (held weakly)."""
    with _STATE.lock:
        _STATE.sources.add(source)


def spawn(target: Callable[[], None], name: str) -> threading.Thread | None:
    """Run ``target`` on a new registered thread; None when the interpreter exits."""
    state = _STATE

    def run() -> None:
        try:
            target()
        finally:
            with state.lock:
                state.threads.discard(threading.current_thread())

    with state.lock:
        if state.closing:
            return None
        thread = threading.Thread(target=run, name=name, daemon=True)
        state.threads.add(thread)
    thread.start()
    return thread


@contextlib.contextmanager
def track_stream(streams: list[Any]) -> Any:
    """While inside, the connections in ``streams`` are shut if the interpreter exits."""
    state = _STATE
    holder = _Streams(streams)
    with state.lock:
        state.streams.add(holder)
    try:
        yield holder
    finally:
        with state.lock:
            state.streams.discard(holder)


class _Streams:
    __slots__ = ("streams",)

    def __init__(self, streams: list[Any]) -> None:
        self.streams = streams

    def shut(self) -> None:
        for stream in self.streams:
            shut(stream)


def shut(stream: Any) -> None:
    """Shut a connection's socket down: a read blocked on it returns at once."""
    sock = getattr(stream, "get_extra_info", lambda _: None)("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def stop_all(join: float = EXIT_JOIN) -> None:
    """Stop every source and join every library thread (the exit hook)."""
    state = _STATE
    with state.lock:
        state.closing = True
        sources = list(state.sources)
        streams = list(state.streams)
    for source in sources:
        with contextlib.suppress(Exception):
            source.stop()
    for holder in streams:
        holder.shut()
    BOUNDS.stop()
    deadline = time.monotonic() + join
    with state.lock:
        threads = list(state.threads)
    for thread in threads:
        if thread is not threading.current_thread():
            thread.join(max(deadline - time.monotonic(), 0.0))


def _after_fork_in_child() -> None:
    global _STATE  # noqa: PLW0603 - the child's own registry
    old = _STATE
    _STATE = _Registry()
    _STATE.sources = old.sources
    BOUNDS.reset()
    for source in list(old.sources):
        with contextlib.suppress(Exception):
            source.after_fork()


class BoundWatch:
    """One thread for every key source: withdraws keys at their bounds.

    Sources are held weakly; a deadline that a later fetch moved just finds
    the keys still serving and does nothing. Times are ``time.monotonic()``.
    The thread starts on the first deadline, stops with :meth:`stop` (the
    exit hook) and starts again in a forked child.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Fresh state (at creation, and in a forked child)."""
        self._ready = threading.Condition()
        self._heap: list[tuple[float, int, weakref.ref[Any]]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def call_at(self, when: float, source: Stoppable) -> None:
        """Look at ``source`` at monotonic time ``when``."""
        with self._ready:
            if self._stopped:
                return
            heapq.heappush(self._heap, (when, next(self._order), weakref.ref(source)))
            if self._thread is None:
                self._thread = spawn(self._run, "grelmicro-jwks-bounds")
            self._ready.notify()

    def stop(self) -> None:
        """End the thread (joined by the caller through the registry)."""
        with self._ready:
            self._stopped = True
            self._heap.clear()
            self._ready.notify_all()

    def _run(self) -> None:
        while True:
            with self._ready:
                if self._stopped:
                    return
                if not self._heap:
                    self._ready.wait()
                    continue
                when, _, ref = self._heap[0]
                delay = when - time.monotonic()
                if delay > 0:
                    self._ready.wait(delay)
                    continue
                heapq.heappop(self._heap)
            source = ref()
            if source is not None:
                try:
                    source.check_bound()
                except Exception:  # an observer's bug must not stop the watcher
                    logger.exception("withdrawing keys at their bound failed")


BOUNDS = BoundWatch()

atexit.register(stop_all)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
