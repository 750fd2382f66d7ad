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
  flight. Other modules renew their own state (a module-level lock, the
  HTTP clients the library opened) with :func:`at_fork_child`.

Joining blocks, so it never happens on an event loop: :func:`join_off_loop`
joins on a library thread and awaits the result.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import heapq
import itertools
import logging
import os
import socket
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "BoundWatch",
    "Stoppable",
    "at_fork_child",
    "at_stop",
    "closing",
    "join_all",
    "join_off_loop",
    "register",
    "spawn",
    "stop_all",
    "track_stream",
]

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
        self.stop_hooks: list[Callable[[], None]] = []
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

    # Registered and started in one step under the lock: stop_all() never
    # sees a thread it cannot join yet (joining one not started raises).
    with state.lock:
        if state.closing:
            return None
        thread = threading.Thread(target=run, name=name, daemon=True)
        state.threads.add(thread)
        try:
            thread.start()
        except BaseException:
            state.threads.discard(thread)
            raise
    return thread


def join_all(threads: Iterable[threading.Thread], timeout: float) -> bool:
    """Join each of ``threads``, ``timeout`` seconds in all; True when every one ended.

    Tolerates anything: the current thread, a thread never started, a join
    that raises. Every thread gets its turn, even after one failed.
    """
    deadline = time.monotonic() + timeout
    current = threading.current_thread()
    ended = True
    for thread in threads:
        if thread is current:
            continue
        try:
            thread.join(max(deadline - time.monotonic(), 0.0))
        except Exception:  # noqa: BLE001 - not started, or a subclass' bug: join the rest
            ended = False
            continue
        ended = ended and not thread.is_alive()
    return ended


async def join_off_loop(threads: Iterable[threading.Thread], timeout: float) -> bool:
    """:func:`join_all` without blocking the running event loop; True when every one ended.

    The joining runs on a library thread (so the exit hook joins it too);
    the loop only awaits its answer. Cancelling the caller leaves the
    joiner to end on its own, within ``timeout``.
    """
    current = threading.current_thread()
    pending = [thread for thread in threads if thread is not current and thread.is_alive()]
    if not pending:
        return True
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[bool] = loop.create_future()

    def settle(ended: bool) -> None:
        if not answer.done():
            answer.set_result(ended)

    def run() -> None:
        ended = join_all(pending, timeout)
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(settle, ended)

    if spawn(run, "grelmicro-jwks-join") is None:
        return False  # the interpreter exits: the exit hook joins them
    return await answer


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
    """Stop every source and join every library thread, ``join`` s in all (the exit hook).

    Nothing a source, a stream or a hook does (raise, say) keeps the rest
    from being stopped or any thread from being joined.
    """
    state = _STATE
    with state.lock:
        state.closing = True
        sources = list(state.sources)
        streams = list(state.streams)
        hooks = list(state.stop_hooks)
    for source in sources:
        with contextlib.suppress(Exception):
            source.stop()
    for holder in streams:
        with contextlib.suppress(Exception):
            holder.shut()
    with contextlib.suppress(Exception):
        BOUNDS.stop()
    for hook in hooks:
        with contextlib.suppress(Exception):
            hook()
    with state.lock:  # no thread starts from now on (closing): this is all of them
        threads = list(state.threads)
    join_all(threads, join)


def at_stop(hook: Callable[[], None]) -> None:
    """Call ``hook`` at exit, after the sources stop and before the threads are joined.

    A hook tells its own library thread to end (it is then joined with the
    others); it must not block.
    """
    with _STATE.lock:
        _STATE.stop_hooks.append(hook)


def renew_lock_after_fork(namespace: dict[str, Any], name: str) -> None:
    """In a forked child, replace the module lock ``namespace[name]`` with a new one.

    A parent's thread may have held it at the fork; no thread of the child
    would ever release it. Call it once, beside the lock, with ``globals()``.
    """

    def renew() -> None:
        namespace[name] = threading.Lock()

    at_fork_child(renew)


def at_fork_child(hook: Callable[[], None]) -> None:
    """Call ``hook`` in a forked child, before any other code of the child runs.

    For what a child must not share with its parent: a module-level lock
    (a parent's thread may have held it at the fork, and no thread of the
    child will ever release it), a connection pool, a thread's handle. A
    bound method is held weakly (its object may go); a function strongly.
    Hooks run in registration order; one that raises does not stop the
    others.
    """
    key = next(_FORK_KEYS)
    ref: Callable[[], Callable[[], None] | None]
    if hasattr(hook, "__self__") and hasattr(hook, "__func__"):
        ref = weakref.WeakMethod(hook, lambda _: _FORK_HOOKS.pop(key, None))
    else:

        def ref() -> Callable[[], None]:
            return hook

    _FORK_HOOKS[key] = ref


#: ``at_fork_child`` hooks, by registration order (a dict: a dead weak
#: method removes its own entry, without a lock a fork could leave held).
_FORK_HOOKS: dict[int, Callable[[], Callable[[], None] | None]] = {}
_FORK_KEYS = itertools.count()


#: The process the after-fork hooks last ran in: a fork that ran none (uWSGI
#: forks in C, calling Python's fork hooks only with ``py-call-uwsgi-fork-hooks``)
#: shows as another pid.
_PID = os.getpid()


def in_uwsgi_master() -> bool:
    """Whether this is a uWSGI master, whose workers uWSGI forks in C (``worker_id() == 0``).

    uWSGI lets the GIL go around that fork without Python's fork hooks (unless
    ``py-call-uwsgi-fork-hooks``): a Python thread of the master's that holds
    the GIL at that instant leaves the worker waiting for it forever. So the
    library starts no thread there (:meth:`JWTVerifier.start_sync`).
    """
    uwsgi = sys.modules.get("uwsgi")
    worker_id = getattr(uwsgi, "worker_id", None)
    options = getattr(uwsgi, "opt", None)
    if not callable(worker_id) or not isinstance(options, dict):
        return False
    master = options.get("master")
    if isinstance(master, bytes):
        master = master.decode(errors="replace")
    if isinstance(master, str):
        master = master.strip().lower() not in ("", "0", "false", "no", "off")
    try:
        return bool(master) and worker_id() == 0
    except Exception:  # noqa: BLE001 - not the uWSGI module we know: not its master
        return False


def join_threads(timeout: float) -> None:
    """Wait (bounded) for the library's threads running now to end (a uWSGI master's fetches).

    Ended as the OS sees it, too: a thread that Python has joined still runs
    its thread-local destructors (OpenSSL's takes a process-wide lock), and a
    C fork in that instant hands the child that lock held for good. Where
    ``/proc/self/task`` lists the process's threads, this waits until it
    lists no more than Python knows of.
    """
    deadline = time.monotonic() + timeout
    with _STATE.lock:
        threads = [t for t in _STATE.threads if t is not threading.current_thread()]
    for thread in threads:
        thread.join(max(deadline - time.monotonic(), 0.0))
    tasks = Path("/proc/self/task")
    settle = min(deadline, time.monotonic() + 1.0)
    with contextlib.suppress(OSError):
        while sum(1 for _ in tasks.iterdir()) > threading.active_count():
            if time.monotonic() >= settle:
                break
            time.sleep(0.001)


def adopt_unseen_fork() -> bool:
    """Run the after-fork hooks now if this process was forked without them; True if it was.

    A server that forks without ``os.fork`` (uWSGI without
    ``py-call-uwsgi-fork-hooks``) leaves the child with its parent's thread
    handles, held locks and connections. :meth:`JWTVerifier.start_sync`
    calls this first: the worker's start is the earliest code of the child
    that is ours.
    """
    if os.getpid() == _PID:
        return False
    _after_fork_in_child()
    return True


def _after_fork_in_child() -> None:
    global _STATE, _PID  # noqa: PLW0603 - the child's own registry
    _PID = os.getpid()
    old = _STATE
    _STATE = _Registry()
    _STATE.sources = old.sources
    _STATE.stop_hooks = old.stop_hooks
    BOUNDS.reset()
    for ref in list(_FORK_HOOKS.values()):
        hook = ref()
        if hook is not None:
            with contextlib.suppress(Exception):
                hook()
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
            # No thread in a uWSGI master: it forks its workers in C (see
            # in_uwsgi_master); each worker watches its own bounds.
            if self._thread is None and not in_uwsgi_master():
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
