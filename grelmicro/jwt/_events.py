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

An observer that raises is reported once and never stops the others, nor
the fetch or the request that emitted the event. Nothing here imports the
rest of the package: every module can emit.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "TOKEN_ACCEPTED",
    "TOKEN_REFUSED",
    "Event",
    "Observer",
    "Observers",
    "log_event",
    "log_observer",
]

logger = logging.getLogger("grelmicro.jwt")

#: A token refused, or answered 503 (fields: ``reason``, ``error``, ``duration`` if timed).
TOKEN_REFUSED = "token.refused"  # noqa: S105 - an event name
#: A token accepted by a full verification (fields: ``issuer``, ``algorithm``,
#: ``tenant``, ``duration``); emitted only when the verifier announces them.
TOKEN_ACCEPTED = "token.accepted"  # noqa: S105 - an event name


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
    """
    if logger.isEnabledFor(level):
        extra: dict[str, object] = {"jwt_event": event, "jwt_source": source}
        extra.update({f"jwt_{name}": value for name, value in fields.items()})
        logger.log(level, message, *args, exc_info=exc_info, extra=extra, stacklevel=stacklevel)


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
    """The observers of one emitter; the logging observer is always first."""

    __slots__ = ("_failed", "_lock", "_observers")

    def __init__(self) -> None:
        self._observers: tuple[Observer, ...] = (log_observer,)
        self._lock = threading.Lock()
        self._failed: set[int] = set()

    def add(self, observer: Observer) -> None:
        """Let ``observer`` hear every later event."""
        with self._lock:
            self._observers = (*self._observers, observer)

    def emit(self, event: Event) -> None:
        """Tell every observer; one that raises is logged (once) and skipped."""
        for observer in self._observers:
            try:
                observer(event)
            except Exception:  # noqa: PERF203 - an observer must never fail a fetch or a request
                if id(observer) not in self._failed:
                    self._failed.add(id(observer))
                    logger.exception("observer %r failed on event %s", observer, event.name)
