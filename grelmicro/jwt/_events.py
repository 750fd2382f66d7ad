"""Events of the network key path and of verifications, and the observers that hear them.

A key source and the verifier describe what happens to keys (fetched,
changed, withdrawn, skipped, a wait that answers 503...) and to tokens
(refused, accepted by a full verification: :mod:`grelmicro.jwt._outcomes`)
as :class:`Event` objects; they do not log or count anything themselves.
Observers do:

- :func:`log_observer` turns each event into one log record on the
  ``grelmicro.jwt`` logger, with stable ``jwt_*`` fields for machines
  (listed in ``docs/observability.md``);
- :mod:`grelmicro.jwt.otel` counts and traces the same events when a
  verifier asks for telemetry.

Observers hear an event after it happened (the snapshot is published, the
fetch has ended), and nothing they do reaches back:

- **A failure stays theirs.** An observer that raises, or a logging filter
  that raises on every record, is skipped; a short note goes straight to
  ``sys.stderr`` (never through the logging that failed, at most once per
  observer per :data:`NOTE_INTERVAL`, naming the observer, the event and
  the exception's class only: no token or key material).
- **A slow one holds no one.** An event emitted on a thread that runs an
  event loop is handed to one library thread, the dispatcher (a bounded
  queue; when it is full the event is dropped and counted), so the loop
  never runs an observer. Elsewhere (a fetch thread, a sync request, the
  bound watcher) observers run on the emitting thread, after the work the
  event reports: there is no loop to hold, and a log record then carries
  the thread and context of what it reports. An emitter's events keep their
  order: while one of them waits for the dispatcher, the next ones queue
  behind it whatever thread emits them.

:func:`flush` waits for the queued events (tests, and the exit hook which
then stops and joins the dispatcher); a forked child starts with an empty
queue and no dispatcher thread (:mod:`grelmicro.jwt._lifecycle`).

Listeners added with ``inline=True`` are the library's own installers, not
observers: they run on the emitting thread, before any observer, so what
an event installs never waits behind a slow observer. Their failures are
contained the same way.

Nothing here imports the rest of the package but the lifecycle: every
module can emit.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from grelmicro.jwt import _lifecycle

__all__ = [
    "DISPATCHER",
    "NOTE_INTERVAL",
    "QUEUE_SIZE",
    "TOKEN_ACCEPTED",
    "TOKEN_REFUSED",
    "Dispatcher",
    "Event",
    "Observer",
    "Observers",
    "flush",
    "log_event",
    "log_observer",
]

logger = logging.getLogger("grelmicro.jwt")

#: A token refused, or answered 503 (fields: ``reason``, ``error``, ``duration`` if timed).
TOKEN_REFUSED = "token.refused"  # noqa: S105 - an event name
#: A token accepted by a full verification (fields: ``issuer``, ``algorithm``,
#: ``tenant``, ``duration``); emitted only when the verifier announces them.
TOKEN_ACCEPTED = "token.accepted"  # noqa: S105 - an event name

#: Events waiting for the dispatcher, at most; past it a new one is dropped (and counted).
QUEUE_SIZE = 1024

#: Seconds between two notes about one failing observer (or about dropped events).
NOTE_INTERVAL = 60.0

#: How long a note may be, in characters.
NOTE_LIMIT = 300


@dataclass(frozen=True)
class Event:
    """One thing that happened to a source's keys, or to a token.

    Attributes:
        name: the stable event name (``keys.refreshed``, ``token.refused``...).
        source: the stable name of the key source (the issuer given to
            ``discover=``, else the JWKS URL); for a token's event, the
            configured issuer it was accepted for, else empty.
        level: the logging level the event deserves.
        message: a %-format message for people; ``args`` fill it.
        fields: stable values for machines (no token or key material).
        exc_info: the exception of an unexpected error (a bug, never a
            provider fault), for its traceback in the log.
    """

    name: str
    source: str
    level: int
    message: str
    args: tuple[object, ...] = ()
    fields: dict[str, Any] = field(default_factory=dict)
    exc_info: BaseException | None = None


Observer = Callable[[Event], None]


def log_event(
    level: int,
    event: str,
    source: str,
    message: str,
    *args: object,
    exc_info: BaseException | None = None,
    stacklevel: int = 2,
    **fields: object,
) -> None:
    """One log record: a message for people, stable ``extra`` fields for machines.

    The record carries ``jwt_event``, ``jwt_source`` and each of ``fields``
    prefixed with ``jwt_``.
    A logging setup that raises (a filter, say) is noted on ``sys.stderr``
    (see :func:`note`), never raised to the caller.
    """
    try:
        if logger.isEnabledFor(level):
            extra: dict[str, object] = {"jwt_event": event, "jwt_source": source}
            extra.update({f"jwt_{name}": value for name, value in fields.items()})
            logger.log(level, message, *args, exc_info=exc_info, extra=extra, stacklevel=stacklevel)
    except Exception as exc:  # noqa: BLE001 - logging must never fail what it reports
        note(
            ("log", logger.name),
            f"logging {event} on logger {logger.name!r} failed ({type(exc).__name__})",
        )


def log_observer(event: Event) -> None:
    """The logging observer: every event becomes one record (see :func:`log_event`)."""
    if not logger.isEnabledFor(event.level):  # a frequent DEBUG event costs one check
        return
    log_event(
        event.level,
        event.name,
        event.source,
        event.message,
        *event.args,
        exc_info=event.exc_info,
        **event.fields,
    )


class Observers:
    """The observers of one emitter; the logging observer is always first.

    ``emit`` runs the inline listeners (installers) on the calling thread,
    then hands the event to the observers: on this thread, or through the
    dispatcher when this thread runs an event loop (see the module
    docstring).
    """

    __slots__ = ("_inline", "_observers")

    def __init__(self) -> None:
        self._observers: tuple[Observer, ...] = (log_observer,)
        self._inline: tuple[Observer, ...] = ()

    def add(self, observer: Observer, *, inline: bool = False) -> None:
        """Let ``observer`` hear every later event.

        ``inline=True`` is for the library's own installers only (what an
        event must change before the emitter goes on): they run on the
        emitting thread, before the observers.
        """
        with _LOCKS.add:
            if inline:
                self._inline = (*self._inline, observer)
            else:
                self._observers = (*self._observers, observer)

    def emit(self, event: Event) -> None:
        """Tell every listener and observer; one that raises is noted and skipped."""
        for listener in self._inline:
            _call(listener, event)
        DISPATCHER.hand(self, event)

    def deliver(self, event: Event) -> None:
        """Run the observers on ``event`` here and now, in order (the dispatcher's part)."""
        for observer in self._observers:
            _call(observer, event)


def _call(observer: Observer, event: Event) -> None:
    try:
        observer(event)
    except Exception as exc:  # noqa: BLE001 - an observer must never fail a fetch or a request
        name = _name_of(observer)
        note(
            ("observer", id(observer)),
            f"observer {name} failed on event {event.name} ({type(exc).__name__}); skipped",
        )


def _name_of(observer: object) -> str:
    """A name for people: the qualified name of the function or class (never its repr)."""
    kind = observer if hasattr(observer, "__qualname__") else type(observer)
    module = getattr(kind, "__module__", None) or "?"
    return f"{module}.{getattr(kind, '__qualname__', '?')}"


def note(key: object, text: str) -> None:
    """Write ``text`` to ``sys.stderr``, at most once per ``key`` per :data:`NOTE_INTERVAL`.

    For failures of the logging path itself: the note never goes through
    logging. Notes held back are counted and said with the next one. Never
    raises (no stderr, a closed one, a full pipe...).
    """
    now = _clock()
    with _LOCKS.notes:
        last, held = _NOTES.get(key, (None, 0))
        if last is not None and now - last < NOTE_INTERVAL:
            _NOTES[key] = (last, held + 1)
            return
        if len(_NOTES) >= _NOTES_MAX:
            _NOTES.clear()
        _NOTES[key] = (now, 0)
    if held:
        text += f" [{held} more since the last note]"
    line = f"grelmicro.jwt: {text}"[:NOTE_LIMIT] + "\n"
    try:
        stream = sys.stderr
        if stream is not None:
            stream.write(line)
            stream.flush()
    except Exception:  # noqa: BLE001, S110 - nowhere left to say it
        pass


#: Notes by key: when the last one was written, and how many were held back since.
_NOTES: dict[object, tuple[float, int]] = {}
_NOTES_MAX = 256
#: The clock of the note interval (tests move it).
_clock: Callable[[], float] = time.monotonic


class _Locks:
    """The module's locks, renewed in a forked child."""

    def __init__(self) -> None:
        self.add = threading.Lock()
        self.notes = threading.Lock()


_LOCKS = _Locks()


def _on_loop_thread() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class Dispatcher:
    """The one library thread that runs observers for emitters on an event loop thread.

    Started on the first event it gets (through :func:`_lifecycle.spawn`),
    told to end at exit (it runs what is queued, then returns and is
    joined with the other library threads), and forgotten in a forked
    child, which starts its own on demand.
    """

    def __init__(self, size: int = QUEUE_SIZE) -> None:
        self.size = size
        self.reset()

    def reset(self) -> None:
        """Fresh state: at creation, and in a forked child (the parent's events are its own)."""
        self._ready = threading.Condition(threading.Lock())
        self._queue: collections.deque[tuple[Observers, Event]] = collections.deque()
        # Emitters with events queued or being delivered: their next ones queue too.
        self._pending: dict[int, int] = {}
        self._busy = False
        self._thread: threading.Thread | None = None
        self._stopped = False
        self.dropped = 0

    def hand(self, observers: Observers, event: Event) -> None:
        """Deliver ``event``: queued from a loop thread or behind queued ones, else here."""
        on_loop = _on_loop_thread()
        key = id(observers)
        with self._ready:
            queue = (on_loop or key in self._pending) and not self._stopped
            if queue and len(self._queue) >= self.size:
                self.dropped += 1
                dropped = self.dropped
            elif queue and self._start():
                self._queue.append((observers, event))
                self._pending[key] = self._pending.get(key, 0) + 1
                self._ready.notify_all()
                return
            else:
                dropped = 0
        if dropped:
            note(("dropped", id(self)), f"{dropped} events dropped in all: observers too slow")
            return
        observers.deliver(event)

    def _start(self) -> bool:
        """The thread runs, or was just started (the lock held); False at exit."""
        if self._thread is None:
            self._thread = _lifecycle.spawn(self._run, "grelmicro-jwt-events")
        return self._thread is not None

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._queue and not self._stopped:
                    self._ready.wait()
                if not self._queue:  # stopped, and all delivered
                    return
                observers, event = self._queue.popleft()
                self._busy = True
            try:
                observers.deliver(event)
            finally:
                with self._ready:
                    self._busy = False
                    key = id(observers)
                    left = self._pending.get(key, 1) - 1
                    if left:
                        self._pending[key] = left
                    else:
                        self._pending.pop(key, None)
                    self._ready.notify_all()

    def flush(self, timeout: float) -> bool:
        """Wait until every queued event was delivered (``timeout`` s at most); True if so."""
        with self._ready:
            if threading.current_thread() is self._thread:
                return not self._queue  # an observer cannot wait for itself
            return self._ready.wait_for(lambda: not self._queue and not self._busy, timeout)

    def stop(self) -> None:
        """Deliver what is queued, then end (the exit hook joins it); later events run inline."""
        with self._ready:
            self._stopped = True
            self._ready.notify_all()


DISPATCHER = Dispatcher()


def flush(timeout: float = 5.0) -> bool:
    """Wait until every event handed to the dispatcher was heard; True if so within ``timeout``."""
    return DISPATCHER.flush(timeout)


def _renew_locks() -> None:
    global _LOCKS  # noqa: PLW0603 - the child's own
    _LOCKS = _Locks()


_lifecycle.at_stop(DISPATCHER.stop)
_lifecycle.at_fork_child(_renew_locks)
_lifecycle.at_fork_child(DISPATCHER.reset)
