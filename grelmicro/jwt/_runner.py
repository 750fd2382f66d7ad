"""The event loop ``JWTVerifier.start_sync()`` runs the key sources on, in a library thread.

A WSGI worker (gunicorn sync or gthread, uWSGI, mod_wsgi, Django's
``runserver``) has no lifespan and no event loop: without one, keys load on
the first request that needs them and are refreshed only when requests find
them due. :class:`LoopThread` gives such a process what an ASGI lifespan
gives an async one: a loop in a library thread on which ``await
verifier.start()`` runs (so keys are loaded when ``start_sync()`` returns,
and the background refresh keeps them fresh) and, at ``close()``, ``await
verifier.aclose()``. Request threads only wait (at most ``key_wait``) on
fetches that run on that loop; they never run one.

- **At exit** the thread is told to close its verifier and end; the exit
  hook of :mod:`grelmicro.jwt._lifecycle` joins it with the other library
  threads.
- **After fork** the child has no such thread: it forgets the parent's (the
  key sources forget its loop the same way) and fetches on its own
  connections; call ``start_sync()`` again in the worker (gunicorn
  ``post_fork``) to get a refresher of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import Awaitable, Callable

from grelmicro.jwt import _lifecycle

__all__ = ["LoopThread"]

#: Every live loop thread, told to end at interpreter exit.
_LIVE: weakref.WeakSet[LoopThread] = weakref.WeakSet()


class LoopThread:
    """One library thread running an event loop for one verifier's key sources."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        _lifecycle.at_fork_child(self.after_fork)  # held weakly

    @property
    def running(self) -> bool:
        """Whether the loop thread runs (in this process)."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def start(
        self,
        start: Callable[[], Awaitable[None]],
        close: Callable[[], Awaitable[None]],
    ) -> bool:
        """Run ``start()`` on a new loop thread and return once it has; False if one runs.

        The thread then waits to be stopped, and runs ``close()`` before it ends.
        """
        started = threading.Event()
        failure: list[BaseException] = []

        async def main() -> None:
            self._stopping = asyncio.Event()
            try:
                await start()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller of start_sync
                failure.append(exc)
                return
            finally:
                self._loop = asyncio.get_running_loop()
                started.set()
            try:
                await self._stopping.wait()
            finally:
                await close()

        def run() -> None:
            loop = asyncio.new_event_loop()
            try:
                loop.run_until_complete(main())
            finally:
                self._loop = None
                with contextlib.suppress(Exception):
                    loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        with self._lock:
            if self.running:
                return False
            thread = _lifecycle.spawn(run, "grelmicro-jwt-keys")
            if thread is None:  # the interpreter exits
                return False
            self._thread = thread
            _LIVE.add(self)
        started.wait()
        if failure:
            thread.join()
            raise failure[0]
        return True

    def stop(self, timeout: float) -> None:
        """Tell the loop to run ``close()`` and end; join the thread (at most ``timeout``)."""
        with self._lock:
            thread, loop, stopping = self._thread, self._loop, self._stopping
            self._thread = None
        self._signal(loop, stopping)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def signal(self) -> None:
        """Tell the loop to end, without waiting (the exit hook; the registry joins)."""
        self._signal(self._loop, self._stopping)

    @staticmethod
    def _signal(loop: asyncio.AbstractEventLoop | None, stopping: asyncio.Event | None) -> None:
        if loop is not None and stopping is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(stopping.set)

    def after_fork(self) -> None:
        """In a forked child: the parent's thread and loop are not this process's."""
        self._lock = threading.Lock()
        self._thread = None
        self._loop = None
        self._stopping = None


def _stop_all() -> None:
    for runner in list(_LIVE):
        runner.signal()


_lifecycle.at_stop(_stop_all)
