"""The key router: which keys may verify which token, and the network miss path.

Each trusted issuer has a :class:`Slot`: its own policy (naming that issuer
alone) and the core verifier derived from its keys. With several issuers, a
token goes to the issuer its (unverified) ``iss`` names, so a key of one
issuer can never verify a token claiming another; an ``iss`` nobody
configured is refused before any network call.

What serves is one value, the :class:`Route`: for every slot a
:class:`SlotKeys` (a snapshot and the core verifier built from it, or the
reason there is none), built by a pure function (:func:`derive`) from the
policy and the sources' snapshots and installed whole by one
compare-and-swap (:meth:`KeyRouter.rebuild`). A source asks for a rebuild
right after it publishes (holding no lock, before its events); a miss that
finds a newer snapshot rebuilds too. Keys that serve none of the allowed
algorithms are a state of their own (``fault``): tokens are refused and
health says why; the older core is never kept beside the newer snapshot.

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
import dataclasses
import json
import logging
import math
import threading
import time
import weakref
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Protocol

from grelmicro.jwt import _core, _lifecycle
from grelmicro.jwt._events import Event
from grelmicro.jwt._health import KeySourceHealth, TenantLookupHealth
from grelmicro.jwt._http import Clients
from grelmicro.jwt._jwks import KeySource
from grelmicro.jwt._keys import key_identity
from grelmicro.jwt._schedule import Decision
from grelmicro.jwt._snapshot import EMPTY, FULL, KeyWait, Snapshot
from grelmicro.jwt._steps import Result, Steps, drive_sync
from grelmicro.jwt.errors import KeysUnavailableError

__all__ = [
    "KeyRouter",
    "Precheck",
    "Route",
    "Slot",
    "SlotKeys",
    "TemplateRoute",
    "derive",
    "unverified_claims",
    "worth_refetch",
]

logger = logging.getLogger("grelmicro.jwt")


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
    required: tuple[str, ...] = ()

    def refusal(  # noqa: PLR0911 - one return per refusal, in the core's order
        self, token: str | bytes, now: float
    ) -> _core.CoreError | None:
        """The refusal any key would give ``token`` for its claims, or None.

        Also refused before a fetch (issue 38, N33): a payload that cannot
        be read (three segments within the size cap, but not a JSON object
        in base64url); ``iss`` missing or not a string while issuers are
        configured; ``aud`` missing or not a string or list of strings while
        audiences are; ``exp`` present but not a finite number (never
        accepted); a claim the policy requires (``required``, ``exp`` by
        default) missing.
        """

        def error(
            kind: str, message: str, **context: float | str | tuple[str, ...]
        ) -> _core.CoreError:
            refused = _core.CoreError(kind, message)
            refused.context = context or None
            return refused

        claims = unverified_claims(token, self.max_token_size)
        if claims is None:
            raw = token.encode("ascii", "replace") if isinstance(token, str) else token
            if len(raw) <= self.max_token_size and raw.count(b".") == 2:
                return error("malformed", "token payload is not a readable JSON object")
            return None
        for name in self.required:
            if name not in claims:
                return error("missing-claim", f"token has no {name} claim", claim=name)
        iss = claims.get("iss")
        if self.issuers and iss is None:
            return error("missing-claim", "token has no iss claim", claim="iss")
        if self.issuers and not isinstance(iss, str):
            return error("invalid-claim", "token iss claim must be a string", claim="iss")
        if self.issuers and iss not in self.issuers:
            return error(
                "issuer",
                "token issuer is not the configured one",
                expected=self.issuers,
                seen=(str(iss),),
            )
        aud = claims.get("aud")
        seen = (aud,) if isinstance(aud, str) else aud if isinstance(aud, list) else None
        if self.audiences and aud is None:
            return error("missing-claim", "token has no aud claim", claim="aud")
        if self.audiences and (seen is None or not all(isinstance(v, str) for v in seen)):
            return error(
                "invalid-claim", "token aud claim must be a string or strings", claim="aud"
            )
        if self.audiences and seen is not None and not set(seen) & set(self.audiences):
            return error(
                "audience",
                "token audience is not a configured one",
                expected=self.audiences,
                seen=tuple(seen),
            )
        exp = claims.get("exp", 0)
        if isinstance(exp, bool) or not isinstance(exp, (int, float)) or not math.isfinite(exp):
            return error("invalid-claim", "token exp claim must be a number", claim="exp")
        if "exp" in claims and now >= exp + self.leeway:
            return error(
                "expired", "token expired", exp=float(exp), now=float(now), leeway=self.leeway
            )
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


@dataclass(frozen=True)
class SlotKeys:
    """What one issuer serves with: a snapshot and what was built from it, whole.

    ``core`` is the core verifier built from ``snapshot``'s keys, or None:
    no keys (``snapshot.cause`` says why) or keys none of which serves the
    allowed algorithms (``fault`` says so: a configuration fault, not an
    outage). A new snapshot is never paired with an older core.
    """

    snapshot: Snapshot
    core: _core.Verifier | None
    keys: tuple[_core.Key, ...] = ()
    fault: str | None = None

    def serves(self, now: float) -> bool:
        """The core may verify tokens at monotonic time ``now``."""
        return self.core is not None and self.snapshot.serves(now)

    def refusal(self, token: str | bytes, max_token_size: int) -> _core.CoreError:
        """What keys that serve no allowed algorithm answer ``token`` (no core to ask).

        A ``kid`` the document names: ``algorithm`` (that key is not for
        an allowed algorithm); any other: ``unknown-key``, as a core would.
        """
        kid = None
        with contextlib.suppress(_core.CoreError):
            kid = _core.unverified_header(token, max_token_size=max_token_size).get("kid")
        if isinstance(kid, str) and any(key.kid == kid for key in self.keys):
            return _core.CoreError(
                "algorithm", "the key this token names serves no allowed algorithm"
            )
        return _core.CoreError("unknown-key", "no key matches the token's kid")


NO_KEYS = SlotKeys(EMPTY, None)


def derive(
    policy: _core.Policy, allowed: frozenset[str], snapshot: Snapshot, held: SlotKeys
) -> SlotKeys:
    """What ``snapshot`` serves under ``policy`` (pure; ``held``'s core kept for the same keys)."""
    key_set = snapshot.key_set
    if key_set is None:
        return SlotKeys(snapshot, None)
    keys = tuple(key_set.keys)
    if held.core is not None and key_identity(keys) == key_identity(held.keys):
        return SlotKeys(snapshot, held.core, held.keys)
    try:
        core = _core.Verifier(key_set, policy)
    except _core.CoreError:
        offered = sorted({key.algorithm for key in keys if key.algorithm})
        fault = "no key serves {}; the provider offers {}".format(
            ", ".join(sorted(allowed)) or "the allowed algorithms",
            ", ".join(offered) or "no key for them",
        )
        return SlotKeys(snapshot, None, keys, fault)
    return SlotKeys(snapshot, core, keys)


def drops_cache(held: SlotKeys, new: SlotKeys) -> bool:
    """Whether cached results of ``held`` must go when ``new`` serves instead.

    The same keys change nothing; added keys keep the cache unless they
    change which key a cached token selects (the core's
    ``Verifier.keeps_cache_of``); removed keys, none, or a core that
    cannot be built drop it.
    """
    if held.core is None or new.core is held.core:
        return False
    return new.core is None or not new.core.keeps_cache_of(held.core)


@dataclass(frozen=True)
class Route:
    """What serves now, for every issuer: installed whole, read whole.

    ``keys[slot.index]`` is each slot's :class:`SlotKeys`; ``epoch`` counts
    the routes that dropped the cache (a verified result is only ever
    stored in the cache of its epoch).
    """

    keys: tuple[SlotKeys, ...]
    epoch: int = 0


class Slot:
    """One issuer: its policy, where its keys come from, and its place in the route."""

    __slots__ = (
        "index",
        "max_token_size",
        "name",
        "policy",
        "precheck",
        "refetch_algorithms",
        "router",
        "source",
        "static",
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
        self.static = None if core is None else SlotKeys(EMPTY, core)
        self.index = 0
        self.refetch_algorithms = refetch_algorithms
        self.max_token_size = max_token_size
        self.precheck = precheck
        self.router: KeyRouter | None = None
        self.timer: Callable[[], float] = time.monotonic if source is None else source.timer

    @property
    def keys(self) -> SlotKeys:
        """What this slot serves with now (the installed route's entry)."""
        if self.router is None:
            return self.static or NO_KEYS
        return self.router.route.keys[self.index]

    @property
    def core(self) -> _core.Verifier | None:
        """The core verifier serving now, if any."""
        return self.keys.core

    def verify_until(self, token: str | bytes, now: float) -> Result:
        """The engine call of a miss: ``(payload, valid_until)``, or the refusal.

        ``valid_until`` comes from this issuer's core verifier (its own
        policy's ``max_age`` included); network keys end it at their
        staleness bound too, so no cache hit outlives them.
        """
        source = self.source
        if source is None:
            return self.static.core.verify_until(token, now)  # type: ignore[union-attr]
        held = self._current(source)
        arrived = self.timer()
        core = held.core
        if core is None or not held.snapshot.serves(arrived):
            return drive_sync(self.steps(token, now, arrived, None), token, now)
        if arrived >= source.refresh_at:
            if arrived >= held.snapshot.expires_at:
                source.note_stale_use(arrived)
            source.refresh_background()
        try:
            payload, until = core.verify_until(token, now)
        except _core.CoreError as exc:
            if not self._worth_refetch(exc.args[0], token, held):
                raise
            return drive_sync(self.steps(token, now, arrived, exc, held.snapshot), token, now)
        return payload, _capped(until, now, arrived, held.snapshot)

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
        how long: a rotation that ends 200 is one accepted verification,
        never a refusal.
        """
        inner = self._steps(token, now, arrived, refused, refused_by)
        waits = 0
        try:
            wait = next(inner)
            while True:
                waits += 1
                wait = inner.send((yield wait))
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

    def _steps(  # noqa: PLR0912 - the one place the miss path is written
        self,
        token: str | bytes,
        now: float,
        arrived: float,
        refused: _core.CoreError | None,
        refused_by: Snapshot,
    ) -> Steps:
        """The miss path that may wait for keys (see :mod:`grelmicro.jwt._steps`).

        ``arrived``: when the miss started (monotonic), taken once; the
        token waits at most ``key_wait`` from then, and for one fetch at
        most. ``refused``: the refusal the keys of ``refused_by`` gave, if
        the caller already asked them. Only that refusal decides: newer
        keys installed meanwhile are asked first. A kid absent from a
        document whose fetch started after ``arrived`` is final (401
        ``unknown-key``); otherwise one wait for a fetch (single flight,
        paced), then a 503 that says why and when, while the fetch goes on.
        """
        source = self.source
        assert source is not None  # noqa: S101 - only network slots take steps
        until = arrived + source.options.key_wait
        waited: str | None = None
        while True:
            held = self._current(source)
            if refused is not None and held.snapshot is not refused_by:
                refused = None  # newer keys than the ones that refused: ask them
            if refused is None:
                if not held.snapshot.serves(self.timer()):
                    if held.snapshot.key_set is not None:
                        source.check_bound()  # past the bound: withdrawn (said once)
                    waited = yield from self._one_wait(source, "keys", until, waited)
                    continue
                if held.core is None:  # keys, none for an allowed algorithm
                    refused, refused_by = held.refusal(token, self.max_token_size), held.snapshot
                    if not self._worth_refetch(refused.args[0], token, held):
                        raise refused
                else:
                    try:
                        payload, valid = held.core.verify_until(token, now)
                    except _core.CoreError as exc:
                        if not self._worth_refetch(exc.args[0], token, held):
                            raise
                        refused, refused_by = exc, held.snapshot
                    else:
                        return payload, _capped(valid, now, self.timer(), held.snapshot)
            if refused_by.key_set is not None and refused_by.fetched_at >= arrived:
                raise _fresh(refused)  # keys fetched after the token arrived answered it
            early = None if self.precheck is None else self.precheck.refusal(token, now)
            if early is not None:
                raise early
            waited = yield from self._one_wait(source, "unknown-kid", until, waited)

    @staticmethod
    def _one_wait(
        source: KeySource, why: str, until: float, waited: str | None
    ) -> Generator[KeyWait, str | None, str | None]:
        """The token's one wait for a fetch (``why``); after it, 503 while the fetch goes on.

        The second time a token would need to wait, it does not: it gets a
        503 saying why (``waiters`` when it could not even wait), and the
        next fetch starts now if the schedule allows (nobody waits for it).
        """
        unknown_kid = why == "unknown-kid"
        if waited == FULL:
            raise source.unavailable(None, unknown_kid=unknown_kid, full=True)
        if waited is not None:
            raise source.unavailable(source.kick(why), unknown_kid=unknown_kid)
        wait = source.need(why, until)
        if isinstance(wait, Decision):
            raise source.unavailable(wait, unknown_kid=unknown_kid)
        return (yield wait)

    def _current(self, source: KeySource) -> SlotKeys:
        """This slot's entry of the route, rebuilt first if the source published since."""
        router = self.router
        assert router is not None  # noqa: S101 - network slots belong to a router
        held = router.route.keys[self.index]
        if source.snapshot is not held.snapshot:
            router.rebuild()
            held = router.route.keys[self.index]
        return held

    def _worth_refetch(self, kind: str, token: str | bytes, held: SlotKeys) -> bool:
        alg = kid = None
        if kind == "algorithm":
            with contextlib.suppress(_core.CoreError):
                header = _core.unverified_header(token, max_token_size=self.max_token_size)
                alg, kid = header.get("alg"), header.get("kid")
        known = isinstance(kid, str) and any(key.kid == kid for key in held.keys)
        return worth_refetch(kind, alg, self.refetch_algorithms, kid_held=known)


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

    def lookup_health(self, wall: Callable[[], float]) -> TenantLookupHealth | None:
        """Its ``tenants=`` callable's lookups, or None."""
        ...


class KeyRouter:
    """The engine of a verifier with network keys or several issuers.

    Issuers given as exact strings are found by a dict lookup of the
    token's ``iss``; issuer templates (``{tenantid}``) are tried only when
    that finds nothing. Their slots are never in the dict: a token reaches
    a template's keys only through its route's tenant checks.
    """

    __slots__ = (
        "__weakref__",
        "_clients",
        "_lock",
        "_max_size",
        "_on_drop",
        "_ordered",
        "_slots",
        "_static_keys",
        "_templates",
        "_wall",
        "route",
        "sources",
        "verify_until",
    )

    #: What serves now: one value, replaced whole (:meth:`rebuild`).
    route: Route

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
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._slots = slots
        self._wall = wall
        self._templates = templates
        self.sources = tuple(sources)
        self._clients = clients
        self._max_size = max_token_size
        self._static_keys = static_keys
        self._lock = threading.Lock()
        self._on_drop: Callable[[], None] | None = None
        self._ordered = tuple(self._all_slots())
        for index, slot in enumerate(self._ordered):
            slot.index = index
            slot.router = self
        self.route = Route(tuple(slot.static or NO_KEYS for slot in self._ordered))
        ref = weakref.ref(self)
        for source in self.sources:
            source.on_publish(_rebuilder(ref))
        _ROUTERS.add(self)
        if len(slots) == 1 and not templates:
            # One issuer: its policy checks iss; no routing needed.
            self.verify_until = next(iter(slots.values())).verify_until
        elif not slots and len(templates) == 1:
            self.verify_until = templates[0].verify_until  # it checks iss itself
        else:
            self.verify_until = self._route

    def _all_slots(self) -> list[Slot]:
        return [*self._slots.values(), *(route.slot for route in self._templates)]

    def rebuild(self) -> None:
        """Build the route from the sources' newest snapshots; install it whole (CAS).

        Pure building (:func:`derive`) runs outside any lock; the one lock
        is held only to compare the route it started from with the one
        installed and swap (and, when keys were removed, to hand the
        verifier a fresh cache in the same step). A rebuild that lost the
        race builds again from the winner's route: the newest snapshot
        always ends up installed, and never beside an older core.
        """
        while True:
            held = self.route
            entries: list[SlotKeys] = []
            drop = False
            faults: list[tuple[Slot, SlotKeys]] = []
            for slot, entry in zip(self._ordered, held.keys, strict=True):
                source = slot.source
                snapshot = None if source is None else source.snapshot
                if snapshot is None or snapshot.generation <= entry.snapshot.generation:
                    entries.append(entry)
                    continue
                fresh = derive(slot.policy, slot.refetch_algorithms, snapshot, entry)
                drop = drop or drops_cache(entry, fresh)
                if fresh.fault is not None and fresh.fault != entry.fault:
                    faults.append((slot, fresh))
                entries.append(fresh)
            if len(entries) == len(held.keys) and all(
                a is b for a, b in zip(entries, held.keys, strict=True)
            ):
                return
            route = Route(tuple(entries), held.epoch + drop)
            with self._lock:
                if self.route is not held:
                    continue  # another rebuild installed first: build on its route
                self.route = route
                if drop and self._on_drop is not None:
                    self._on_drop()
            for slot, fresh in faults:
                _fault_event(slot, fresh)
            return

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
        """Call ``callback`` inside the route's swap when cached results must go.

        It installs the verifier's fresh cache (a pointer swap in the core):
        the route and its cache change in one step under the route's lock,
        the only lock held, and nothing it calls takes another of ours.
        """
        self._on_drop = callback

    def after_fork(self) -> None:
        """In a forked child: a fresh lock (a parent's thread may have held it)."""
        self._lock = threading.Lock()

    @property
    def algorithms(self) -> list[str]:
        """Algorithms accepted now (by the keys the installed route serves with)."""
        names: set[str] = set()
        for entry in self.route.keys:
            if entry.core is not None:
                names.update(entry.core.algorithms)
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

    def load_sync(self) -> None:
        """Load every source's keys now and leave no thread running (a uWSGI master).

        Each fetch runs on a library thread as a sync caller's does; this
        waits for them, then for every library thread to end. Sources whose
        keys are loaded, or with no way to fetch from a thread (an
        ``AsyncClient`` alone), are left as they are: their keys load on
        first need.
        """
        waits = [
            source.need("keys", until=math.inf)
            for source in self.sources
            if source.snapshot.key_set is None
        ]  # every source's fetch started before any is waited for
        limit = max((source.options.wait_limit() for source in self.sources), default=0.0)
        for wait in waits:
            if isinstance(wait, KeyWait):
                wait.flight.done.wait(limit)
        _lifecycle.join_threads(limit)  # the fetches' threads, the GETs' own

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
        """Every source's health as the installed route serves it, combined.

        Readiness is read from the route, not from the sources' newest
        snapshots: a source whose keys serve no allowed algorithm is not
        ready (a configuration fault), whatever it fetched.
        """
        route = self.route
        parts = []
        for source in self.sources:
            health = source.health()
            entries = [
                entry
                for slot, entry in zip(self._ordered, route.keys, strict=True)
                if slot.source is source
            ]
            fault = next((e.fault for e in entries if e.fault is not None), None)
            serves = bool(entries) and all(e.serves(source.timer()) for e in entries)
            if fault is not None or serves != health.ready:
                config = health.config_error
                if fault is not None:
                    config = fault if config is None else f"{config}; {fault}"
                retry = health.retry_after
                if not serves and retry is None:
                    retry = max(source.schedule.next_attempt(source.timer()), 0.0)
                health = dataclasses.replace(
                    health, ready=serves, config_error=config, retry_after=None if serves else retry
                )
            parts.append(health)
        combined = KeySourceHealth.combine(parts, self._static_keys)
        lookups = tuple(
            state
            for route in self._templates
            if (state := route.lookup_health(self._wall)) is not None
        )
        return dataclasses.replace(combined, tenant_lookups=lookups) if lookups else combined


#: Every live router, for the fork hook (fresh locks in the child).
_ROUTERS: weakref.WeakSet[KeyRouter] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for router in list(_ROUTERS):
        router.after_fork()


_lifecycle.at_fork_child(_after_fork_in_child)


def _rebuilder(ref: weakref.ref[KeyRouter]) -> Callable[[], None]:
    """What a source calls after it publishes: rebuild the route (held weakly)."""

    def rebuild() -> None:
        router = ref()
        if router is not None:
            router.rebuild()

    return rebuild


def _fault_event(slot: Slot, entry: SlotKeys) -> None:
    """Said once per new fault, after the route that carries it is installed."""
    source = slot.source
    assert source is not None  # noqa: S101 - only network keys change
    source.observers.emit(
        Event(
            "keys.not_served",
            source.source,
            logging.ERROR,
            "issuer %s: the keys from %s are not used: %s; fix the configuration"
            " (algorithms=) or the provider's keys; tokens are refused meanwhile",
            (slot.name, source.name, entry.fault),
            {"issuer": slot.name, "error": entry.fault, "generation": entry.snapshot.generation},
        )
    )


def static_slot(name: str, policy: _core.Policy, key_set: _core.KeySet) -> Slot:
    """A slot whose keys were given in code."""
    return Slot(name, policy, None, core=_core.call(_core.Verifier, key_set, policy))
