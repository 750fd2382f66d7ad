"""Verification outcomes as events: ``token.refused`` and ``token.accepted``.

A verifier tells what happened to a token the way a key source tells what
happened to its keys (:mod:`grelmicro.jwt._events`): it emits events, and
observers (the log, :mod:`grelmicro.jwt.otel`, ``verifier.observe(...)``)
count or write them. It never calls telemetry itself.

- ``token.refused`` (DEBUG): every refusal, on the refusal path (it already
  runs Python), and every ``KeysUnavailableError`` a caller is answered;
  a verification that waited for keys is reported once, when it ends.
- ``token.accepted`` (DEBUG): an accepted full verification (a cache miss),
  only when the verifier was built to announce them (``telemetry=``): it
  puts one Python frame on the miss path. A cache hit is never an event;
  hits are read from the cache's counters.

Fields hold values from bounded sets only: the stable ``reason`` and the
error's class name; for an accepted token, the configured issuer it
belongs to (an issuer template's name, never the token's ``iss``), its
tenant when the tenant is on a configured list, its algorithm when the
verifier allows it. Never token text, claim values or key material.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, cast

from grelmicro.jwt import _core
from grelmicro.jwt._events import TOKEN_ACCEPTED, TOKEN_REFUSED, Event, Observers
from grelmicro.jwt._steps import Pending
from grelmicro.jwt.errors import JWTError, TokenRejectedError

__all__ = ["Outcomes"]

RejectHook = Callable[[TokenRejectedError], None]
Verify = Callable[[str | bytes, float], tuple[Any, "float | None"]]

#: (issuer, header segment) pairs remembered with their fields (more are parsed each time).
_HEADERS_KEPT = 64


class _Template(Protocol):
    """An issuer template's route: its name, and the tenant an ``iss`` names."""

    name: str

    def match(self, iss: str) -> str | None: ...

    def bucket(self, tenant: str) -> str | None: ...


class _Engine(Protocol):
    verify_until: Verify

    @property
    def algorithms(self) -> list[str]: ...


class Outcomes:
    """The outcome events of one verifier, and who hears them.

    ``announce_accepted``: emit ``token.accepted`` for accepted full
    verifications (:meth:`engine` then puts a small wrapper on the miss path).
    ``timed``: that wrapper also times each full verification (its
    ``duration`` field, accepted or refused); untimed, the event of an
    (issuer, header) pair is built once and emitted again.
    """

    __slots__ = (
        "_algorithms",
        "_issuers",
        "_last",
        "_named",
        "_templates",
        "announce_accepted",
        "observers",
        "timed",
    )

    def __init__(self, *, announce_accepted: bool = False, timed: bool = False) -> None:
        self.observers = Observers()
        self.announce_accepted = announce_accepted
        self.timed = timed
        self._issuers: frozenset[str] = frozenset()
        self._templates: tuple[_Template, ...] = ()
        self._algorithms: frozenset[str] = frozenset()
        #: (token's iss, header segment) -> its accepted event (without a duration).
        self._named: dict[tuple[object, str | bytes], Event] = {}
        #: The duration of this thread's last refused full verification (for its event).
        self._last = threading.local()

    def bind(
        self,
        issuers: tuple[str, ...],
        algorithms: tuple[str, ...],
        templates: Sequence[object] = (),
    ) -> None:
        """What accepted events may name: configured issuers, templates, allowed algorithms.

        ``templates`` are the issuer templates' routes (``TenantRoute``): a
        token of one is named by the template, with its tenant only when the
        tenant is on a configured list.
        """
        self._issuers = frozenset(issuers)
        self._templates = cast("tuple[_Template, ...]", tuple(templates))
        self._algorithms = frozenset(algorithms)

    # -- refusals ------------------------------------------------------------------

    def on_reject(self, hook: RejectHook | None) -> RejectHook:
        """The refusal hook of the verifier: emit ``token.refused``, then the user's ``hook``."""
        refused = self.refused

        def rejected(error: TokenRejectedError) -> None:
            refused(error)
            if hook is not None:
                hook(error)

        return rejected

    def refused(self, error: JWTError) -> None:
        """A refusal, or keys unavailable (a 503): one ``token.refused`` event."""
        fields: dict[str, Any] = {"reason": error.reason, "error": type(error).__name__}
        duration = getattr(self._last, "duration", None)
        if duration is not None:  # a full verification that the miss-path wrapper timed
            self._last.duration = None
            fields["duration"] = duration
        rejected = isinstance(error, TokenRejectedError)
        self.observers.emit(
            Event(
                TOKEN_REFUSED,
                "",
                logging.DEBUG,
                # The message names claim values (escaped and capped), times and
                # key ids, never the token or key material (_core.translate).
                "token rejected: %s: %s" if rejected else "token not verified: %s: %s",
                (error.reason, error),
                fields,
            )
        )

    # -- accepted full verifications --------------------------------------------------

    def engine(self, engine: Any) -> Any:
        """``engine``, announcing what it accepts when asked to (else ``engine`` itself)."""
        if not self.announce_accepted:
            return engine
        return _Announced(engine, self)

    def accepted(self, token: str | bytes, result: Any, duration: float | None = None) -> None:
        """One accepted full verification; ``result`` is the engine's answer."""
        payload = result[0] if type(result) is tuple else result
        try:  # the core's payload is a read-only mapping (an isinstance() on Mapping costs more)
            issuer = payload.get("iss")
        except AttributeError:
            issuer = None
        # The header segment of a token that verified names its algorithm: the
        # few headers an issuer signs with are parsed once each.
        header = token[: token.find(b"." if type(token) is bytes else ".")]  # type: ignore[arg-type]
        event = self._named.get((issuer, header))
        if event is None:
            event = self._name(token, issuer, header)
        if duration is not None:
            fields = {**event.fields, "duration": duration}
            event = Event(event.name, event.source, event.level, event.message, (), fields)
        self.observers.emit(event)

    def _name(self, token: str | bytes, issuer: object, header: str | bytes) -> Event:
        """The accepted event of a new (issuer, header) pair: fields from bounded sets only."""
        named = issuer if issuer in self._issuers else None  # only configured issuers
        tenant = None
        if named is None and isinstance(issuer, str):
            for route in self._templates:
                found = route.match(issuer)
                if found is not None:
                    named, tenant = route.name, route.bucket(found)  # a listed tenant, or None
                    break
        algorithm = _header_algorithm(token)
        if algorithm not in self._algorithms:
            algorithm = None
        fields = {"issuer": named, "algorithm": algorithm, "tenant": tenant}
        event = Event(TOKEN_ACCEPTED, named or "", logging.DEBUG, "token accepted", (), fields)
        if len(self._named) < _HEADERS_KEPT:  # past it, pairs are named each time
            self._named[(issuer, header)] = event
        return event


class _Announced:
    """An engine whose ``verify_until`` announces the tokens it accepts (misses only).

    Timed (``Outcomes.timed``), an accepted verification's event carries its
    duration, and a refused one leaves it for its ``token.refused`` event
    (emitted on the refusal path, in the same thread, right after).
    """

    __slots__ = ("_engine", "verify_until")

    def __init__(self, engine: _Engine, outcomes: Outcomes) -> None:
        self._engine = engine
        verify = engine.verify_until
        accepted = outcomes.accepted
        if not outcomes.timed:

            def announced(token: str | bytes, now: float) -> Any:
                result = verify(token, now)
                accepted(token, result)
                return result

            self.verify_until = announced
            return
        last = outcomes._last
        clock = time.perf_counter

        def verify_until(token: str | bytes, now: float) -> Any:
            started = clock()
            try:
                result = verify(token, now)
            except Pending:
                raise  # its outcome is announced when it ends
            except Exception:
                last.duration = clock() - started
                raise
            accepted(token, result, clock() - started)
            return result

        self.verify_until = verify_until

    @property
    def algorithms(self) -> list[str]:
        """The engine's algorithms."""
        return self._engine.algorithms


def _header_algorithm(token: str | bytes) -> str | None:
    """The ``alg`` of a token that verified (the caller bounds it to the allowed set)."""
    try:
        algorithm = _core.unverified_header(token).get("alg")
    except (_core.CoreError, TypeError, ValueError):
        return None
    return algorithm if isinstance(algorithm, str) else None
