"""The key router: which keys may verify which token, and the network miss path.

Each trusted issuer has a :class:`Slot`: its own policy (naming that issuer
alone) and the core verifier derived from its keys. With several issuers, a
token goes to the issuer its (unverified) ``iss`` names, so a key of one
issuer can never verify a token claiming another; an ``iss`` nobody
configured is refused before any network call.

A slot with network keys derives its core verifier from its source's
snapshot (:mod:`grelmicro.jwt._snapshot`): :meth:`KeyRouter.derive` reads
the source's current snapshot and installs it only if its generation is
newer than the slot's (compare-and-swap under the router's lock), so the
newest snapshot wins whatever order the news comes in. A source's event
triggers it (keys refreshed or withdrawn: cached results of removed keys
go at once); a miss that finds a newer snapshot pulls it too.

The verifier's cache calls ``router.verify_until(token, now)`` on a miss
only, so a cache hit costs what it costs with static keys. A miss whose
keys serve crosses into the core once. Only when the answer needs keys the
slot does not hold does it take the steps (:meth:`Slot.steps`, run by a
driver of :mod:`grelmicro.jwt._steps`).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from grelmicro.jwt import _core
from grelmicro.jwt._events import Event
from grelmicro.jwt._health import KeySourceHealth
from grelmicro.jwt._http import Clients
from grelmicro.jwt._jwks import CHANGES, KeySource
from grelmicro.jwt._keys import key_identity
from grelmicro.jwt._schedule import Decision
from grelmicro.jwt._snapshot import EMPTY, Snapshot
from grelmicro.jwt._steps import Result, Steps, drive_sync
from grelmicro.jwt.errors import KeysUnavailableError

__all__ = ["KeyRouter", "Precheck", "Slot", "TemplateRoute", "unverified_claims", "worth_refetch"]

logger = logging.getLogger("grelmicro.jwt")

#: Fetch rounds one token may take part in before the router answers 503:
#: a load, the fetch in flight it joined, and one of its own.
_ROUNDS = 4


def worth_refetch(
    kind: str, alg: object, refetch_algorithms: frozenset[str], *, kid_held: bool = False
) -> bool:
    """Whether keys the provider may have just published could accept a token.

    The one rule for every path: no key has the token's ``kid``
    (``unknown-key``), or no key held serves its ``alg`` while the policy
    allows it (``algorithm``: a new key of a new algorithm). A token naming
    a ``kid`` the keys hold, with an ``alg`` that key does not serve, is
    refused for what it says (``kid_held``): no refetch can change which
    key that ``kid`` names. Every other refusal is about the token.
    """
    if kind == "unknown-key":
        return True
    return kind == "algorithm" and not kid_held and alg in refetch_algorithms


@dataclass(frozen=True)
class Precheck:
    """What a token must pass, unverified, before it may spend a fetch.

    A token whose unverified ``iss``, ``aud`` or ``exp`` already fails the
    policy would be refused by any key: it gets its 401 without a fetch.
    Never used to accept anything.
    """

    issuers: tuple[str, ...]
    audiences: tuple[str, ...]
    leeway: float
    max_token_size: int

    def refusal(self, token: str | bytes, now: float) -> _core.CoreError | None:
        """The refusal any key would give ``token`` for its claims, or None."""
        claims = unverified_claims(token, self.max_token_size)
        if claims is None:
            return None
        iss = claims.get("iss")
        if self.issuers and isinstance(iss, str) and iss not in self.issuers:
            error = _core.CoreError("issuer", "token issuer is not the configured one")
            error.context = {"expected": self.issuers, "seen": (iss,)}
            return error
        aud = claims.get("aud")
        seen = (aud,) if isinstance(aud, str) else aud if isinstance(aud, list) else None
        if (
            self.audiences
            and seen is not None
            and all(isinstance(v, str) for v in seen)
            and not set(seen) & set(self.audiences)
        ):
            error = _core.CoreError("audience", "token audience is not a configured one")
            error.context = {"expected": self.audiences, "seen": tuple(seen)}
            return error
        exp = claims.get("exp")
        if (
            isinstance(exp, (int, float))
            and not isinstance(exp, bool)
            and math.isfinite(exp)
            and now >= exp + self.leeway
        ):
            error = _core.CoreError("expired", "token expired")
            error.context = {"exp": float(exp), "now": float(now), "leeway": self.leeway}
            return error
        return None


def unverified_claims(token: str | bytes, limit: int) -> dict[str, Any] | None:
    """The payload of a compact JWS, unverified; None when it is not readable."""
    if len(token) > limit:
        return None
    raw = token.encode("ascii", "replace") if isinstance(token, str) else token
    parts = raw.split(b".")
    if len(parts) != 3:
        return None
    try:
        segment = parts[1]
        document = json.loads(base64.urlsafe_b64decode(segment + b"=" * (-len(segment) % 4)))
    except (ValueError, binascii.Error, RecursionError, UnicodeDecodeError):
        return None
    return document if isinstance(document, dict) else None


class Slot:
    """One issuer's current core verifier, and where its keys come from."""

    __slots__ = (
        "core",
        "keys",
        "max_token_size",
        "name",
        "policy",
        "precheck",
        "refetch_algorithms",
        "router",
        "snapshot",
        "source",
        "timer",
    )

    def __init__(
        self,
        name: str,
        policy: _core.Policy,
        source: KeySource | None,
        *,
        refetch_algorithms: frozenset[str] = frozenset(),
        max_token_size: int = 8192,
        precheck: Precheck | None = None,
        core: _core.Verifier | None = None,
    ) -> None:
        self.name = name
        self.policy = policy
        self.source = source
        self.core = core
        self.keys: tuple[_core.Key, ...] = ()
        self.snapshot: Snapshot = EMPTY
        self.refetch_algorithms = refetch_algorithms
        self.max_token_size = max_token_size
        self.precheck = precheck
        self.router: KeyRouter | None = None
        self.timer: Callable[[], float] = time.monotonic if source is None else source.timer

    def adopt(self, snapshot: Snapshot) -> bool:
        """Install ``snapshot`` if newer than the one held; True when cached results must go.

        The same keys change nothing; added keys keep the cache unless they
        change which key a cached token selects; removed keys (or none)
        drop it. The rule is the core's ``Verifier.keeps_cache_of``.
        """
        if snapshot.generation <= self.snapshot.generation:
            return False
        # Every store below writes the core before the snapshot: readers take
        # the snapshot first (verify_until), so a refusal is never charged to
        # a snapshot newer than the keys that gave it.
        key_set = snapshot.key_set
        if key_set is None:
            dropped = self.core is not None
            self.core, self.keys, self.snapshot = None, (), snapshot
            return dropped
        keys = tuple(key_set.keys)
        if self.core is not None and key_identity(keys) == key_identity(self.keys):
            self.snapshot = snapshot
            return False
        try:
            core = _core.Verifier(key_set, self.policy)
        except _core.CoreError as exc:
            self.snapshot = snapshot  # not tried again for every miss
            logger.error(  # noqa: TRY400 - the core error says it all; no traceback
                "issuer %s: new keys not installed: %s", self.name, exc.args[1]
            )
            return False
        drop = self.core is not None and not core.keeps_cache_of(self.core)
        self.core, self.keys, self.snapshot = core, keys, snapshot
        return drop

    def verify_until(self, token: str | bytes, now: float) -> Result:
        """The engine call of a miss: ``(payload, valid_until)``, or the refusal.

        ``valid_until`` comes from this issuer's core verifier (its own
        policy's ``max_age`` included); network keys end it at their
        staleness bound too, so no cache hit outlives them.
        """
        source = self.source
        if source is None:
            return self.core.verify_until(token, now)  # type: ignore[union-attr]
        self._catch_up(source)
        arrived = self.timer()
        # The snapshot first, then the core: adopt() stores the core first, so
        # a core older than the snapshot read with it is never seen (a newer
        # one can be: its refusals then count as the older snapshot's).
        snapshot = self.snapshot
        core = self.core
        if core is None or not snapshot.serves(arrived):
            return drive_sync(self.steps(token, now, arrived, None), token)
        if arrived >= source.refresh_at:
            if arrived >= snapshot.expires_at:
                source.note_stale_use(arrived)
            source.refresh_background()
        try:
            payload, until = core.verify_until(token, now)
        except _core.CoreError as exc:
            if not self._worth_refetch(exc.args[0], token):
                raise
            return drive_sync(self.steps(token, now, arrived, exc, snapshot), token)
        return payload, _capped(until, now, arrived, snapshot)

    def steps(
        self,
        token: str | bytes,
        now: float,
        arrived: float,
        refused: _core.CoreError | None,
        refused_by: Snapshot = EMPTY,
    ) -> Steps:
        """The miss path that may wait for keys; its answer after a wait is an event.

        ``keys.answered_after_wait`` (DEBUG) says how the token ended
        (``accepted``, ``refused`` with its reason, ``unavailable``), after
        how many waits and how long after it arrived: a rotation that ends
        200 is one accepted verification, never a refusal.
        """
        inner = self._steps(token, now, arrived, refused, refused_by)
        waits = 0
        try:
            wait = next(inner)
            while True:
                waits += 1
                yield wait
                wait = inner.send(None)
        except StopIteration as done:
            if waits:
                self._answered(arrived, waits, "accepted", None)
            return done.value  # type: ignore[no-any-return]
        except _core.CoreError as exc:
            if waits:
                self._answered(arrived, waits, "refused", exc.args[0])
            raise
        except KeysUnavailableError as exc:
            if waits:
                self._answered(arrived, waits, "unavailable", exc.reason)
            raise

    def _answered(self, arrived: float, waits: int, outcome: str, reason: str | None) -> None:
        source = self.source
        assert source is not None  # noqa: S101 - only network slots take steps
        waited = max(self.timer() - arrived, 0.0)
        source.observers.emit(
            Event(
                "keys.answered_after_wait",
                source.source,
                logging.DEBUG,
                "JWKS %s: a token waited %.3g s for keys (%d waits): %s%s",
                (source.name, waited, waits, outcome, f" ({reason})" if reason else ""),
                {"outcome": outcome, "reason": reason, "waits": waits, "waited": waited},
            )
        )

    def _steps(
        self,
        token: str | bytes,
        now: float,
        arrived: float,
        refused: _core.CoreError | None,
        refused_by: Snapshot,
    ) -> Steps:
        """The miss path that may wait for keys (see :mod:`grelmicro.jwt._steps`).

        ``arrived``: when the miss started (monotonic), taken once.
        ``refused``: the refusal the keys of ``refused_by`` gave, if the
        caller already asked them. Only that refusal decides: when newer
        keys were installed meanwhile (a refresh that ended between the
        caller's check and this step), they are asked first. A kid absent
        from a document whose fetch started after ``arrived`` is final
        (401 ``unknown-key``); before that, one fetch (single flight, paced)
        or a 503 that says why and when.
        """
        source = self.source
        assert source is not None  # noqa: S101 - only network slots take steps
        for _ in range(_ROUNDS):
            self._catch_up(source)
            if refused is not None and self.snapshot is not refused_by:
                refused = None  # newer keys than the ones that refused: ask them
            if refused is None:
                snapshot = self.snapshot  # then the core (see verify_until)
                core = self.core
                if core is None or not snapshot.serves(self.timer()):
                    if snapshot.key_set is not None:
                        source.check_bound()  # past the bound: withdrawn (said once)
                    wait = source.need("keys")
                    if isinstance(wait, Decision):
                        raise source.unavailable(wait, unknown_kid=False)
                    yield wait
                    continue
                try:
                    payload, until = core.verify_until(token, now)
                except _core.CoreError as exc:
                    if not self._worth_refetch(exc.args[0], token):
                        raise
                    refused, refused_by = exc, snapshot
                else:
                    return payload, _capped(until, now, self.timer(), snapshot)
            if refused_by.key_set is not None and refused_by.fetched_at >= arrived:
                raise _fresh(refused)  # keys fetched after the token arrived answered it
            early = None if self.precheck is None else self.precheck.refusal(token, now)
            if early is not None:
                raise early
            wait = source.need("unknown-kid")
            if isinstance(wait, Decision):
                raise source.unavailable(wait, unknown_kid=True)
            yield wait
            refused = None
        raise source.unavailable(None, unknown_kid=True)

    def _catch_up(self, source: KeySource) -> None:
        """Install the source's newest snapshot here if this slot is behind it."""
        if source.snapshot is not self.snapshot and self.router is not None:
            self.router.derive(source)

    def _worth_refetch(self, kind: str, token: str | bytes) -> bool:
        alg = kid = None
        if kind == "algorithm":
            with contextlib.suppress(_core.CoreError):
                header = _core.unverified_header(token, max_token_size=self.max_token_size)
                alg, kid = header.get("alg"), header.get("kid")
        held = isinstance(kid, str) and any(key.kid == kid for key in self.keys)
        return worth_refetch(kind, alg, self.refetch_algorithms, kid_held=held)


def _capped(until: float | None, now: float, at: float, snapshot: Snapshot) -> float | None:
    """``until`` ended at the keys' staleness bound (monotonic, moved onto ``now``'s clock)."""
    if until is None:
        return None
    return min(until, now + (snapshot.stale_until - at))


def _fresh(error: _core.CoreError) -> _core.CoreError:
    """A copy of a refusal without its traceback (no frame kept alive by a re-raise)."""
    copy = _core.CoreError(*error.args)
    copy.context = error.context
    return copy


def _unknown_issuer(seen: str | None, expected: tuple[str, ...]) -> _core.CoreError:
    """The refusal of a token whose ``iss`` names none of the configured issuers."""
    if seen is None:
        error = _core.CoreError("issuer", "token has no iss claim (a string) to choose an issuer")
        error.context = {"expected": expected}
    else:
        error = _core.CoreError("issuer", "token issuer is not one of the configured issuers")
        error.context = {"expected": expected, "seen": (seen,)}
    return error


class TemplateRoute(Protocol):
    """An issuer template's entry (:class:`grelmicro.jwt._tenants.TenantRoute`)."""

    name: str
    slot: Slot

    def match(self, iss: str) -> str | None:
        """The tenant ``iss`` names through the template, or None."""
        ...

    def routed(self, token: str | bytes, now: float, iss: str | None) -> Result:
        """Verify ``token`` as a token of this template."""
        ...

    def verify_until(self, token: str | bytes, now: float) -> Result:
        """The engine call when the template is the only issuer."""
        ...


class KeyRouter:
    """The engine of a verifier with network keys or several issuers.

    Issuers given as exact strings are found by a dict lookup of the
    token's ``iss``; issuer templates (``{tenantid}``) are tried only when
    that finds nothing. Their slots are never in the dict: a token reaches
    a template's keys only through its route's tenant checks.
    """

    __slots__ = (
        "_clients",
        "_lock",
        "_max_size",
        "_on_drop",
        "_slots",
        "_static_keys",
        "_templates",
        "sources",
        "verify_until",
    )

    #: The engine's ``verify_until(token, now) -> (payload, valid_until)``.
    verify_until: Callable[[str | bytes, float], Result]

    def __init__(
        self,
        slots: dict[str, Slot],
        sources: list[KeySource],
        clients: Clients,
        max_token_size: int,
        static_keys: int,
        *,
        templates: tuple[TemplateRoute, ...] = (),
    ) -> None:
        self._slots = slots
        self._templates = templates
        self.sources = tuple(sources)
        self._clients = clients
        self._max_size = max_token_size
        self._static_keys = static_keys
        self._lock = threading.Lock()
        self._on_drop: Callable[[], None] | None = None
        for slot in self._all_slots():
            slot.router = self
        for source in self.sources:
            source.observers.add(self._observer(source))
        if len(slots) == 1 and not templates:
            # One issuer: its policy checks iss; no routing needed.
            self.verify_until = next(iter(slots.values())).verify_until
        elif not slots and len(templates) == 1:
            self.verify_until = templates[0].verify_until  # it checks iss itself
        else:
            self.verify_until = self._route

    def _all_slots(self) -> list[Slot]:
        return [*self._slots.values(), *(route.slot for route in self._templates)]

    def _observer(self, source: KeySource) -> Callable[[Event], None]:
        def changed(event: Event) -> None:
            if event.name in CHANGES:
                self.derive(source)

        return changed

    def derive(self, source: KeySource) -> None:
        """Install ``source``'s newest snapshot in its slots (compare-and-swap on generation)."""
        with self._lock:
            snapshot = source.snapshot
            drop = False
            for slot in self._all_slots():
                if slot.source is source:
                    drop = slot.adopt(snapshot) or drop
            if drop and self._on_drop is not None:
                self._on_drop()

    def _route(self, token: str | bytes, now: float) -> Result:
        issuer = _core.unverified_issuer(token, self._max_size)
        slot = None if issuer is None else self._slots.get(issuer)
        if slot is None:
            if issuer is not None:
                for route in self._templates:  # only when no exact issuer matched
                    if route.match(issuer) is not None:
                        return route.routed(token, now, issuer)
            raise _unknown_issuer(issuer, self.issuers)
        return slot.verify_until(token, now)

    def on_removed(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (holding the router's lock) when keys were removed or withdrawn."""
        self._on_drop = callback

    @property
    def algorithms(self) -> list[str]:
        """Algorithms accepted now (by the keys loaded so far)."""
        names: set[str] = set()
        for slot in self._all_slots():
            if slot.core is not None:
                names.update(slot.core.algorithms)
        order = _core.algorithms()
        return sorted(names, key=order.index)

    @property
    def issuers(self) -> tuple[str, ...]:
        """The configured issuers (templates as written)."""
        return (*self._slots, *(route.name for route in self._templates))

    @property
    def templates(self) -> tuple[TemplateRoute, ...]:
        """The issuer templates' routes (for telemetry and the FastAPI dependency)."""
        return self._templates

    async def start(self) -> None:
        """Load every source's keys and keep them fresh in the background."""
        for source in self.sources:
            await source.start()

    async def aclose(self) -> None:
        """Stop background refreshes; close the clients we opened."""
        for source in self.sources:
            await source.aclose()
        await self._clients.aclose()

    def close(self) -> None:
        """Sync close: join fetch threads, close our sync client."""
        for source in self.sources:
            source.close()
        self._clients.close()

    def health(self) -> KeySourceHealth:
        """Every source's health, combined."""
        return KeySourceHealth.combine(
            [source.health() for source in self.sources], self._static_keys
        )


def static_slot(name: str, policy: _core.Policy, key_set: _core.KeySet) -> Slot:
    """A slot whose keys were given in code."""
    return Slot(name, policy, None, core=_core.call(_core.Verifier, key_set, policy))
