"""Multi-tenant issuers: an issuer template bound to the token's tenant claim.

A multi-tenant provider (Microsoft Entra ID's ``common``, ``organizations``
and ``consumers`` endpoints) publishes one set of keys for every tenant and
an issuer *template*, ``https://login.microsoftonline.com/{tenantid}/v2.0``.
A token of tenant ``t`` says ``iss: .../t/v2.0`` and ``tid: t``. Trusting
the template means checking three things the core's exact ``iss`` match
cannot: the placeholder's value is one safe path segment, it equals the
token's tenant claim, and it is a tenant this verifier allows.

:class:`IssuerTemplate` parses a template once and matches a token's
``iss`` against it (strictly: one segment of ``[A-Za-z0-9_-]``, nothing
decoded). :class:`Tenants` is the allow-list (a set, ``"any"``, or a
callable whose answers are cached for a bounded time). :class:`TenantRoute`
is the router's entry for one template: it refuses before any key work
(and before any fetch) what the unverified claims already fail, lets the
template's one :class:`~grelmicro.jwt._router.Slot` verify, then checks the
*verified* ``iss`` and tenant claim again: the decision rests on signed
bytes only.

Only the routing path runs this: a cache hit never does, and an issuer
given as an exact string costs what it cost before.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import re
import threading
import time
from collections.abc import (
    Awaitable,
    Callable,
    Collection,
    Coroutine,
    Generator,
    Iterator,
    Mapping,
)
from typing import Any, Literal

from grelmicro.jwt import _core, _lifecycle
from grelmicro.jwt._calls import run_async, run_sync
from grelmicro.jwt._health import TenantLookupHealth
from grelmicro.jwt._router import Slot, unverified_claims
from grelmicro.jwt._snapshot import FULL, Flight, KeyWait, Parking
from grelmicro.jwt._steps import Pending, Result, Steps, drive_sync, on_event_loop
from grelmicro.jwt.errors import ConfigurationError, TenantUnavailableError

__all__ = [
    "LOOKUP_WAIT",
    "MAX_LOOKUPS",
    "PLACEHOLDER",
    "ExactIssuer",
    "IssuerTemplate",
    "TenantRoute",
    "Tenants",
    "TenantsOption",
    "is_guest",
    "is_template",
]

logger = logging.getLogger("grelmicro.jwt")

#: The placeholder Entra's metadata uses (and Microsoft.IdentityModel substitutes).
PLACEHOLDER = "{tenantid}"

#: A tenant id: one path segment of ASCII letters, digits, ``-`` and ``_``.
#: Entra's ids are GUIDs (the personal-accounts tenant
#: ``9188040d-6c67-4c5b-b112-36a304b66dad`` is one too); its ``iss`` never
#: carries a domain name, so ``.`` is refused, and with it ``..``. No ``/``,
#: no ``%`` (nothing is decoded), nothing outside ASCII (no look-alikes).
TENANT_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")

#: Seconds a lookup (a call of a ``tenants=`` callable) may take; a later answer decides nothing.
LOOKUP_TIMEOUT = 10.0

#: Seconds a request waits for a lookup (then 503 ``tenant-unavailable``; the lookup goes on).
LOOKUP_WAIT = 1.0

#: Lookups running at once for one template (beyond: 503 at once, nothing started).
MAX_LOOKUPS = 8

#: Requests waiting for lookups at once for one template (beyond: 503 at once).
MAX_TENANT_WAITERS = 256

#: Callable answers kept at most this long (seconds); this many allowed, as many refused.
TENANT_TTL = 300.0
TENANT_CACHE_SIZE = 4096

#: What ``tenants=`` takes: ids, ``"any"``, or a callable (sync or async).
TenantsOption = Collection[str] | Literal["any"] | Callable[[str], bool | Awaitable[bool]]


def is_template(issuer: str) -> bool:
    """Whether a configured issuer is a template (it has a brace)."""
    return "{" in issuer or "}" in issuer


def valid_tenant(value: object) -> bool:
    """Whether ``value`` is a tenant id this module accepts (see ``TENANT_ID``)."""
    return isinstance(value, str) and TENANT_ID.fullmatch(value) is not None


class IssuerTemplate:
    """An issuer with one ``{tenantid}`` path segment, parsed once.

    Refused when built: another placeholder or a stray brace, the
    placeholder twice, outside the path (in the host) or not a whole path
    segment, a query or fragment.
    """

    __slots__ = ("parts", "prefix", "suffix", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        where = f"issuer template {_core.quoted(text)}"
        others = text.replace(PLACEHOLDER, "", 1)
        if text.count(PLACEHOLDER) != 1 or "{" in others or "}" in others:
            raise ConfigurationError(
                f"{where}: a template holds the placeholder {PLACEHOLDER} exactly once (lower "
                "case, as Entra's metadata writes it) and no other brace"
            )
        prefix, suffix = text.split(PLACEHOLDER)
        scheme, sep, rest = prefix.partition("://")
        host = rest.split("/", 1)[0]
        if not sep or not scheme or not host or "/" not in rest or not prefix.endswith("/"):
            raise ConfigurationError(
                f"{where}: {PLACEHOLDER} must be a whole path segment after the host, "
                "as in https://login.microsoftonline.com/{tenantid}/v2.0"
            )
        if suffix and not suffix.startswith("/"):
            raise ConfigurationError(f"{where}: {PLACEHOLDER} must be a whole path segment")
        if "?" in text or "#" in text:
            raise ConfigurationError(f"{where}: an issuer has no query or fragment")
        self.prefix = prefix
        self.suffix = suffix
        self.parts = tuple(text.split("/"))

    def __repr__(self) -> str:
        return f"IssuerTemplate({self.text!r})"

    def match(self, iss: str) -> str | None:
        """The tenant ``iss`` names through this template, or None (exact, nothing decoded)."""
        prefix, suffix = self.prefix, self.suffix
        if len(iss) <= len(prefix) + len(suffix):
            return None
        if not iss.startswith(prefix) or not iss.endswith(suffix):
            return None
        tenant = iss[len(prefix) : len(iss) - len(suffix)]
        return tenant if TENANT_ID.fullmatch(tenant) else None

    def overlaps(self, other: str) -> bool:
        """Whether some ``iss`` matches both this template and ``other`` (a template or not).

        A tenant is one segment without ``/``: both match the same ``iss``
        only if they have as many segments, equal where neither is the
        placeholder, and a literal facing the placeholder is a tenant id.
        """
        theirs = tuple(other.split("/"))
        if len(theirs) != len(self.parts):
            return False
        for mine, their in zip(self.parts, theirs, strict=True):
            if mine == PLACEHOLDER and their == PLACEHOLDER:
                continue
            if mine == PLACEHOLDER:
                if not valid_tenant(their):
                    return False
            elif their == PLACEHOLDER:
                if not valid_tenant(mine):
                    return False
            elif mine != their:
                return False
        return True


def check_unambiguous(names: Collection[str]) -> None:
    """Refuse issuers of which two could match the same ``iss`` (with a template)."""
    listed = list(names)
    for i, name in enumerate(listed):
        if not is_template(name):
            continue
        template = IssuerTemplate(name)
        for other in listed[:i] + listed[i + 1 :]:
            if template.overlaps(other):
                raise ConfigurationError(
                    f"issuer template {name!r} and issuer {other!r} can match the same iss; "
                    "a token must name exactly one configured issuer"
                )


class Tenants:
    """Which tenants a template issuer accepts; fail closed.

    ``tenants=[...]`` (ids), ``"any"`` (every tenant the provider signs for:
    see the warning in ``docs/issuers.md``) or a callable ``tenant ->
    bool`` (or an awaitable of one) for tenants that sign up at run time.
    Only ``True`` allows.

    A callable is asked only about the tenant of a token whose signature
    verified, and never in a request's own frame: a sync callable runs on a
    library thread, an async one as a task of its own on the caller's event
    loop (or, with no loop running, in a fresh loop on a library thread).
    A request waits for the answer at most :data:`LOOKUP_WAIT` seconds, and
    never past that from the lookup's start (then 503
    ``tenant-unavailable`` while the lookup goes on); while the last lookup
    failed, only the request that starts one waits for it; at most
    :data:`MAX_LOOKUPS` lookups run at once (then 503 at once); a lookup
    that takes longer than :data:`LOOKUP_TIMEOUT` decides nothing. Answers
    are kept ``ttl`` seconds in two tables of :data:`TENANT_CACHE_SIZE`
    entries each, one for allowed tenants and one for refused ones, so a
    flood of refused tenants never evicts an allowed one. :meth:`health`
    counts the lookups and their failures (no tenant id).
    """

    __slots__ = (
        "__weakref__",  # its after-fork hook is held weakly
        "_allowed",
        "_failing",
        "_flights",
        "_last_error",
        "_last_failure",
        "_lock",
        "_refused",
        "_running",
        "_stats",
        "_tasks",
        "any",
        "is_async",
        "listed",
        "lookup",
        "parking",
        "timer",
        "ttl",
    )

    def __init__(
        self,
        where: str,
        option: object,
        *,
        ttl: float = TENANT_TTL,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self.any = False
        self.listed: frozenset[str] | None = None
        self.lookup: Callable[[str], Any] | None = None
        self.is_async = False
        self.timer = timer
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 0 < ttl <= 86_400:
            raise ConfigurationError(f"{where}: tenants_ttl is seconds, more than 0, at most a day")
        self.ttl: float | None = None
        if option is None:
            raise ConfigurationError(
                f"{where}: a template issuer needs tenants=: a list of tenant ids, a callable "
                'deciding one tenant id, or tenants="any" to accept every tenant of the provider'
            )
        if isinstance(option, str):
            if option != "any":
                raise ConfigurationError(
                    f'{where}: tenants= takes a list of tenant ids, a callable or "any"; '
                    f"for one tenant write tenants=[{option!r}]"
                    if valid_tenant(option)
                    else f'{where}: tenants= takes a list of tenant ids, a callable or "any"'
                )
            self.any = True
        elif callable(option):
            self.lookup = option
            self.is_async = inspect.iscoroutinefunction(option) or inspect.iscoroutinefunction(
                getattr(option, "__call__", None)  # noqa: B004 - an async __call__ method
            )
            self.ttl = float(ttl)
        elif isinstance(option, Collection):
            listed = list(option)
            if not listed:
                raise ConfigurationError(f"{where}: tenants= is empty: no token would be accepted")
            for tenant in listed:
                if not valid_tenant(tenant):
                    shown = _core.quoted(tenant) if isinstance(tenant, str) else type(tenant)
                    raise ConfigurationError(
                        f"{where}: tenant id {shown} is not one path segment of ASCII letters, "
                        "digits, '-' or '_' (a GUID for Entra ID)"
                    )
            self.listed = frozenset(listed)
        else:
            raise ConfigurationError(
                f'{where}: tenants= takes a list of tenant ids, a callable or "any"'
            )
        self._allowed: dict[str, float] = {}
        self._refused: dict[str, float] = {}
        self._flights: dict[str, Flight] = {}
        self._running: set[Flight] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        # lookups, failures, timeouts, busy: counters for health() (bumped under _lock).
        self._stats = {"lookups": 0, "failures": 0, "timeouts": 0, "busy": 0}
        self._failing = False
        self._last_failure: float | None = None
        self._last_error: str | None = None
        self._lock = threading.Lock()
        self.parking = Parking(MAX_TENANT_WAITERS)
        _lifecycle.at_fork_child(self.after_fork)  # held weakly

    def __repr__(self) -> str:
        if self.any:
            return "Tenants('any')"
        if self.listed is not None:
            return f"Tenants({sorted(self.listed)!r})"
        return f"Tenants({self.lookup!r})"

    def known(self, tenant: str) -> bool | None:
        """Whether ``tenant`` is allowed, as far as known now (None: not decided)."""
        if self.any:
            return True
        if self.listed is not None:
            return tenant in self.listed
        now = self.timer()
        until = self._allowed.get(tenant)
        if until is not None and now < until:
            return True
        until = self._refused.get(tenant)
        if until is not None and now < until:
            return False
        return None

    def lookups(self) -> int:
        """How many lookups run now (a stuck callable holds its place until it returns)."""
        return len(self._running)

    def decide(self, tenant: str) -> bool | KeyWait:
        """The answer for ``tenant``, or the wait for a lookup (started here if none runs).

        Raises:
            TenantUnavailableError: :data:`MAX_LOOKUPS` lookups run already.
        """
        known = self.known(tenant)
        if known is not None:
            return known
        now = self.timer()
        with self._lock:
            flight = self._flights.get(tenant)
            start = flight is None or flight.orphaned(now)
            if start:
                if flight is not None and flight.loop is not None and flight.loop.is_closed():
                    self._running.discard(flight)  # its task never ran: its place is free
                if len(self._running) >= MAX_LOOKUPS:
                    self._stats["busy"] += 1
                    raise _undecided("tenant-lookups-busy")
                self._stats["lookups"] += 1
                flight = Flight(now, "tenant", now + LOOKUP_TIMEOUT)
                flight.running = True
                self._flights[tenant] = flight
                self._running.add(flight)
        assert flight is not None  # noqa: S101 - set above
        if start:
            self._launch(tenant, flight)
        # As for keys: nobody waits on a lookup past LOOKUP_WAIT from its
        # start, and while the last lookup failed only the request that
        # starts one waits for it (a directory that hangs holds one request
        # thread per lookup, not one per request).
        until = flight.started + LOOKUP_WAIT  # it started at or before now
        if self._failing and not start:
            until = now
        return KeyWait(flight, until, self.timer, self._lock, self.parking)

    def _launch(self, tenant: str, flight: Flight) -> None:
        """Run the lookup on its owner: a task on this loop (async), else a library thread."""
        if self.is_async and on_event_loop():
            loop = asyncio.get_running_loop()
            flight.loop = loop
            task = loop.create_task(self._run_async(tenant, flight))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return
        thread = _lifecycle.spawn(lambda: self._run_sync(tenant, flight), "grelmicro-tenants")
        if thread is None:  # the interpreter exits: nothing is decided
            self._landed(tenant, flight)

    def _asking(self, tenant: str) -> Generator[Coroutine[Any, Any, object], object, object]:
        """The lookup of ``tenant``: yields the awaitable an async callable gives, if any."""
        assert self.lookup is not None  # noqa: S101 - only callables look up
        answer = self.lookup(tenant)
        if inspect.isawaitable(answer):
            answer = yield _awaited(answer)
        return answer

    def _run_sync(self, tenant: str, flight: Flight) -> None:
        with self._deciding(tenant, flight) as decide:
            decide(run_sync(self._asking(tenant), asyncio.run, errors=()))

    async def _run_async(self, tenant: str, flight: Flight) -> None:
        with self._deciding(tenant, flight) as decide:
            decide(await run_async(self._asking(tenant), _itself, errors=()))

    @contextlib.contextmanager
    def _deciding(self, tenant: str, flight: Flight) -> Iterator[Callable[[object], None]]:
        """Around one lookup: its answer stored, a failure said (fail closed), the flight landed."""
        try:
            yield lambda answer: self._store(tenant, answer, flight)
        except Exception as exc:  # noqa: BLE001 - fail closed, said in the log
            self._failed(tenant, exc)
        finally:
            self._landed(tenant, flight)

    def _store(self, tenant: str, answer: object, flight: Flight) -> None:
        now = self.timer()
        if now >= flight.deadline:  # later than LOOKUP_TIMEOUT: decides nothing
            self._failed(tenant, TimeoutError())
            return
        assert self.ttl is not None  # noqa: S101 - only callables store answers
        table = self._allowed if answer is True else self._refused
        with self._lock:
            self._failing = False  # a lookup answered in time: the directory answers
            table.pop(tenant, None)
            while len(table) >= TENANT_CACHE_SIZE:
                oldest = next(iter(table))
                if table[oldest] > now:  # drain the expired first, then the oldest
                    expired = [key for key, until in table.items() if until <= now]
                    for key in expired:
                        del table[key]
                    if len(table) < TENANT_CACHE_SIZE:
                        break
                del table[next(iter(table))]
            table[tenant] = now + self.ttl
            (self._refused if answer is True else self._allowed).pop(tenant, None)

    def _failed(self, tenant: str, exc: BaseException) -> None:
        timed_out = isinstance(exc, (TimeoutError, asyncio.TimeoutError))
        with self._lock:
            self._stats["failures"] += 1
            self._stats["timeouts"] += timed_out
            self._failing = True
            self._last_failure = self.timer()
            self._last_error = (
                f"a lookup took longer than {LOOKUP_TIMEOUT:g} s"
                if timed_out
                else f"the callable raised {type(exc).__name__}"
            )
        logger.error(
            "tenants callable failed for tenant %s: %s",
            _core.quoted(tenant, 64),
            type(exc).__name__,
        )

    def _landed(self, tenant: str, flight: Flight) -> None:
        with self._lock:
            if self._flights.get(tenant) is flight:
                del self._flights[tenant]
            self._running.discard(flight)
        flight.finish(self._lock)

    def health(self, issuer: str, wall: Callable[[], float]) -> TenantLookupHealth | None:
        """The lookups' state for ``health()`` (None when ``tenants=`` is no callable).

        ``wall`` dates the last failure for people (the verifier's clock).
        """
        if self.lookup is None:
            return None
        now = self.timer()
        with self._lock:
            running = list(self._running)
            stats = dict(self._stats)
            failing, last, error = self._failing, self._last_failure, self._last_error
            allowed = sum(1 for until in self._allowed.values() if now < until)
            refused = sum(1 for until in self._refused.values() if now < until)
        overdue = sum(1 for flight in running if now >= flight.deadline)
        return TenantLookupHealth(
            issuer=issuer,
            failing=failing or overdue > 0,
            running=len(running),
            overdue=overdue,
            allowed=allowed,
            refused=refused,
            last_failure=None if last is None else wall() - (now - last),
            last_error=error,
            **stats,
        )

    def after_fork(self) -> None:
        """In a forked child: no lookup runs, fresh lock (answers and counts are kept)."""
        self._lock = threading.Lock()
        self._flights = {}
        self._running = set()
        self._tasks = set()
        self.parking.after_fork()


def _itself(awaitable: Coroutine[Any, Any, object]) -> Awaitable[object]:
    """The async driver's call: the awaitable itself (run_async awaits it)."""
    return awaitable


async def _awaited(answer: Awaitable[Any]) -> Any:
    return await asyncio.wait_for(answer, LOOKUP_TIMEOUT)


#: What a tenant 503 waits for (``TenantUnavailableError.wait``).
WAITS = {
    "tenant-lookup": "the tenants callable has not answered yet",
    "tenant-lookup-failed": "the tenants callable failed or took too long",
    "tenant-lookups-busy": "too many tenant lookups run at once",
}


def _undecided(wait: str) -> TenantUnavailableError:
    """503: whether the tenant is accepted is not decided (asked again next time)."""
    error = TenantUnavailableError(f"the tenant of this token could not be decided: {WAITS[wait]}")
    error.retry_after = 1.0
    error.wait = wait
    return error


def _refusal(kind: str, message: str) -> _core.CoreError:
    return _core.CoreError(kind, message)


def _issuer_refusal(template: str, iss: object) -> _core.CoreError:
    if not isinstance(iss, str):
        error = _core.CoreError("issuer", "token has no iss claim (a string) to choose an issuer")
        error.context = {"expected": (template,)}
        return error
    error = _core.CoreError("issuer", "token issuer does not match the issuer template")
    error.context = {"expected": (template,), "seen": (iss,)}
    return error


def is_guest(payload: Mapping[str, Any]) -> bool:
    """Entra ID's guest rules: ``acct`` is 1, or ``idp`` names another issuer than ``iss``."""
    if payload.get("acct") == 1 and not isinstance(payload.get("acct"), bool):
        return True
    idp = payload.get("idp")
    return isinstance(idp, str) and idp != payload.get("iss")


class ExactIssuer:
    """The matcher of an exact issuer routed like a template (it has checks of its own)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def match(self, iss: str) -> str | None:
        """``iss`` itself when it is this issuer, else None."""
        return iss if iss == self.text else None


class TenantRoute:
    """The router's entry for an issuer with checks after the signature.

    An issuer template's entry (its slot, its tenant claim, its tenants), or
    an exact issuer's with guest or claim-value checks (``tenants`` None).
    The one slot (one key source: one JWKS, fetched once) verifies every
    tenant's tokens; a token reaches it only through :meth:`routed`.

    Before any key work, only what says nothing about the allow-list is
    checked (the ``iss`` matches the template, the tenant claim equals its
    segment); the allow-list is asked only about a token whose signature
    verified, so an unsigned token of an allowed tenant and one of an
    unknown tenant get the same answer, and cause no lookup.
    """

    __slots__ = (
        "claim",
        "guests",
        "max_token_size",
        "name",
        "slot",
        "template",
        "tenants",
        "values",
    )

    def __init__(
        self,
        template: IssuerTemplate | ExactIssuer,
        slot: Slot,
        tenants: Tenants | None,
        claim: str,
        max_token_size: int,
        *,
        guests: str = "allow",
        values: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        self.template = template
        self.name = template.text
        self.slot = slot
        self.tenants = tenants
        self.claim = claim
        self.max_token_size = max_token_size
        self.guests = guests
        self.values = dict(values or {})

    def match(self, iss: str) -> str | None:
        """The tenant ``iss`` names through this template (or ``iss``, when exact), or None."""
        return self.template.match(iss)

    def verify_until(self, token: str | bytes, now: float) -> Result:
        """The engine call when this template is the only issuer."""
        return self.routed(token, now, _core.unverified_issuer(token, self.max_token_size))

    def routed(self, token: str | bytes, now: float, iss: str | None) -> Result:
        """Verify ``token``, whose unverified ``iss`` is ``iss``, as a token of this issuer."""
        tenant = None if iss is None else self.template.match(iss)
        if tenant is None:
            raise _issuer_refusal(self.name, iss)
        if self.tenants is not None:
            claims = unverified_claims(token, self.max_token_size)
            if claims is not None:  # unreadable: the core refuses it for what it is
                self._check_claim(claims.get(self.claim), tenant)
        try:
            payload, until = self.slot.verify_until(token, now)
        except Pending as pending:  # keys fetched on the event loop: check what they verify
            steps = self._then_checked(pending.steps, now, tenant)
            next(steps)  # to where the suspended steps wait: the driver resumes both
            pending.steps = steps
            raise
        try:
            return drive_sync(self._checked(payload, until, now, tenant), token, now)
        except Pending as pending:
            pending.wait = "tenant-lookup"
            raise

    def _then_checked(self, steps: Steps, now: float, tenant: str) -> Steps:
        """``steps`` (suspended at their first wait), then the checks after the signature.

        Primed by one ``next()`` (its first yield stands for the wait the
        steps are suspended at); every later send resumes ``steps``.
        """
        sent = yield None  # type: ignore[misc]
        try:
            wait = steps.send(sent)
            while True:
                sent = yield wait
                wait = steps.send(sent)
        except StopIteration as done:
            payload, until = done.value
        return (yield from self._checked(payload, until, now, tenant))

    def _checked(self, payload: Any, until: float | None, now: float, tenant: str) -> Steps:
        """The checks after the signature: ``iss`` and tenant bound, then the allow-list.

        The allow-list may wait (bounded) for the lookup of a tenant not
        decided yet; every other check answers at once.
        """
        payload, until = self._bound(payload, until, now, tenant)
        if self.tenants is None:
            return payload, until
        decided = self.tenants.decide(tenant)
        if isinstance(decided, bool):
            return self._allowed(decided, payload, until, tenant)
        return (yield from self._lookup(decided, payload, until, tenant))

    def _lookup(self, wait: KeyWait, payload: Any, until: float | None, tenant: str) -> Steps:
        """Wait (bounded) for the lookup of ``tenant``; then its answer, or 503."""
        sent = yield wait
        assert self.tenants is not None  # noqa: S101 - only a template looks up
        allowed = self.tenants.known(tenant)
        if allowed is None:
            if sent == FULL or not wait.flight.done.is_set():
                raise _undecided("tenant-lookup")
            raise _undecided("tenant-lookup-failed")
        return self._allowed(allowed, payload, until, tenant)

    def _allowed(self, allowed: bool, payload: Any, until: float | None, tenant: str) -> Result:
        if not allowed:
            raise _refusal(
                "tenant", f"tenant {_core.quoted(tenant, 64)} is not one this service accepts"
            )
        if self.guests == "refuse" and is_guest(payload):
            raise _refusal("guest", "token is a guest's (acct or idp) and guests are refused")
        return payload, until

    def _bound(self, payload: Any, until: float | None, now: float, tenant: str) -> Result:
        """The verified ``iss`` (and tenant claim) name what was routed on; values; guests."""
        iss = payload.get("iss")
        if not isinstance(iss, str) or self.template.match(iss) != tenant:
            raise _issuer_refusal(self.name, iss)
        if self.tenants is not None:
            self._check_claim(payload.get(self.claim), tenant)
            ttl = self.tenants.ttl
            if ttl is not None and until is not None:  # a callable's answer is kept ttl at most
                until = min(until, now + ttl)
        for name, accepted in self.values.items():
            value = payload.get(name)
            if not isinstance(value, str) or value not in accepted:
                raise _refusal(
                    "invalid-claim",
                    f"token's {name} claim is not "
                    + ("one of the accepted values" if len(accepted) > 1 else "the accepted value"),
                )
        if self.tenants is None and self.guests == "refuse" and is_guest(payload):
            raise _refusal("guest", "token is a guest's (acct or idp) and guests are refused")
        return payload, until

    def _check_claim(self, value: object, tenant: str) -> None:
        claim = self.claim
        if value is None:
            raise _refusal("tenant", f"token has no {claim} claim to bind its issuer's tenant")
        if not isinstance(value, str):
            raise _refusal("tenant", f"token's {claim} claim is not a string")
        if value != tenant:
            raise _refusal(
                "tenant",
                f"token's {claim} {_core.quoted(value, 64)} is not the tenant its iss names "
                f"({_core.quoted(tenant, 64)})",
            )

    def lookup_health(self, wall: Callable[[], float]) -> TenantLookupHealth | None:
        """The ``tenants=`` callable's lookups (None without one): see :meth:`Tenants.health`."""
        return None if self.tenants is None else self.tenants.health(self.name, wall)

    def bucket(self, tenant: str) -> str | None:
        """The tenant as a metric attribute: only an allow-listed id, else None."""
        listed = None if self.tenants is None else self.tenants.listed
        return tenant if listed is not None and tenant in listed else None
