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
import inspect
import logging
import re
import threading
import time
from collections.abc import Awaitable, Callable, Collection
from typing import Any, Literal

from grelmicro.jwt import _core
from grelmicro.jwt._router import Slot, unverified_claims
from grelmicro.jwt._snapshot import Flight, Wait
from grelmicro.jwt._steps import Pending, Result, Steps, drive_sync, on_event_loop
from grelmicro.jwt.errors import ConfigurationError, KeysUnavailableError

__all__ = [
    "PLACEHOLDER",
    "IssuerTemplate",
    "TenantRoute",
    "Tenants",
    "TenantsOption",
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

#: Seconds an awaitable answer of a callable may take (then: undecided, 503).
LOOKUP_TIMEOUT = 10.0

#: Callable answers kept at most this long (seconds) and this many.
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
        where = f"issuer template {_core.escape(text)!r}"
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
    Only ``True`` allows. A callable's answers are kept ``ttl`` seconds
    (at most :data:`TENANT_CACHE_SIZE` of them, the oldest dropped first);
    a failing callable decides nothing (503), and is asked again next time.
    """

    __slots__ = (
        "_answers",
        "_flights",
        "_lock",
        "_tasks",
        "any",
        "is_async",
        "listed",
        "lookup",
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
                    shown = _core.escape(tenant) if isinstance(tenant, str) else type(tenant)
                    raise ConfigurationError(
                        f"{where}: tenant id {shown!r} is not one path segment of ASCII letters, "
                        "digits, '-' or '_' (a GUID for Entra ID)"
                    )
            self.listed = frozenset(listed)
        else:
            raise ConfigurationError(
                f'{where}: tenants= takes a list of tenant ids, a callable or "any"'
            )
        self._answers: dict[str, tuple[bool, float]] = {}
        self._flights: dict[str, Flight] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        if self.any:
            return "Tenants('any')"
        if self.listed is not None:
            return f"Tenants({sorted(self.listed)!r})"
        return f"Tenants({self.lookup!r})"

    def known(self, tenant: str) -> bool | None:
        """Whether ``tenant`` is allowed, as far as known without awaiting (None: ask)."""
        if self.any:
            return True
        if self.listed is not None:
            return tenant in self.listed
        found = self._answers.get(tenant)
        if found is not None and self.timer() < found[1]:
            return found[0]
        if self.is_async:
            return None
        self._ask_sync(tenant)
        found = self._answers.get(tenant)
        return None if found is None else found[0]

    def _store(self, tenant: str, answer: object) -> None:
        with self._lock:
            answers = self._answers
            answers.pop(tenant, None)
            while len(answers) >= TENANT_CACHE_SIZE:
                del answers[next(iter(answers))]
            assert self.ttl is not None  # noqa: S101 - only callables store answers
            answers[tenant] = (answer is True, self.timer() + self.ttl)

    def _failed(self, tenant: str, exc: BaseException) -> None:
        logger.error(
            "tenants callable failed for tenant %s: %s",
            _core.escape(tenant, 64),
            type(exc).__name__,
        )

    def _ask_sync(self, tenant: str) -> None:
        assert self.lookup is not None  # noqa: S101
        try:
            answer = self.lookup(tenant)
            if inspect.isawaitable(answer):
                if on_event_loop():  # an async callable that did not look like one
                    close = getattr(answer, "close", None)
                    if close is not None:
                        close()
                    self.is_async = True  # asked again as a step on this loop
                    return
                answer = asyncio.run(_awaited(answer))  # bounded by LOOKUP_TIMEOUT
        except Exception as exc:  # noqa: BLE001 - fail closed, said in the log
            self._failed(tenant, exc)
            return
        self._store(tenant, answer)

    async def _ask_async(self, tenant: str) -> None:
        assert self.lookup is not None  # noqa: S101
        try:
            answer = self.lookup(tenant)
            if inspect.isawaitable(answer):
                answer = await _awaited(answer)
        except Exception as exc:  # noqa: BLE001 - fail closed, said in the log
            self._failed(tenant, exc)
            return
        self._store(tenant, answer)

    def wait_for(self, tenant: str) -> Wait:
        """The step that asks an async callable about ``tenant`` (single flight per tenant)."""
        with self._lock:
            flight = self._flights.get(tenant)
            leader = flight is None
            if flight is None:
                flight = self._flights[tenant] = Flight(self.timer(), "tenant")

        def run_sync(flight: Flight) -> None:
            try:
                self._ask_sync(tenant)
            finally:
                self._landed(tenant, flight)

        async def run_async(flight: Flight) -> None:
            try:
                await self._ask_async(tenant)
            finally:
                self._landed(tenant, flight)

        def start_on_loop(flight: Flight) -> None:
            task = asyncio.get_running_loop().create_task(run_async(flight))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        return Wait(flight, leader, run_sync, run_async, start_on_loop, self._lock, LOOKUP_TIMEOUT)

    def _landed(self, tenant: str, flight: Flight) -> None:
        with self._lock:
            if self._flights.get(tenant) is flight:
                del self._flights[tenant]
        flight.finish(self._lock)


async def _awaited(answer: Awaitable[Any]) -> Any:
    return await asyncio.wait_for(answer, LOOKUP_TIMEOUT)


def _undecided() -> KeysUnavailableError:
    """503: the tenants callable gave no answer (it failed; asked again next time)."""
    error = KeysUnavailableError("the tenant of this token could not be decided; try again")
    error.retry_after = 1.0
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


class TenantRoute:
    """The router's entry for one template issuer: its slot, its tenant claim, its tenants.

    The template's one slot (one key source: one JWKS, fetched once) verifies
    every tenant's tokens; a token reaches it only through :meth:`routed`.
    """

    __slots__ = ("claim", "max_token_size", "name", "slot", "template", "tenants")

    def __init__(
        self,
        template: IssuerTemplate,
        slot: Slot,
        tenants: Tenants,
        claim: str,
        max_token_size: int,
    ) -> None:
        self.template = template
        self.name = template.text
        self.slot = slot
        self.tenants = tenants
        self.claim = claim
        self.max_token_size = max_token_size

    def match(self, iss: str) -> str | None:
        """The tenant ``iss`` names through this template, or None."""
        return self.template.match(iss)

    def verify_until(self, token: str | bytes, now: float) -> Result:
        """The engine call when this template is the only issuer."""
        return self.routed(token, now, _core.unverified_issuer(token, self.max_token_size))

    def routed(self, token: str | bytes, now: float, iss: str | None) -> Result:
        """Verify ``token``, whose unverified ``iss`` is ``iss``, as a token of this template."""
        tenant = None if iss is None else self.template.match(iss)
        if tenant is None:
            raise _issuer_refusal(self.name, iss)
        claims = unverified_claims(token, self.max_token_size)
        if claims is not None:  # unreadable: the core refuses it for what it is
            self._check_claim(claims.get(self.claim), tenant)
        allowed = self.tenants.known(tenant)
        if allowed is None:
            if not self.tenants.is_async:  # a sync callable failed just now (logged)
                raise _undecided()
            # An async callable: a step, run on the caller's event loop (or a fresh one).
            return drive_sync(self._steps(token, now, tenant), token)
        if not allowed:
            raise self._not_allowed(tenant)
        try:
            payload, until = self.slot.verify_until(token, now)
        except Pending as pending:  # keys fetched on the event loop: check what they verify
            steps = self._then_bound(pending.steps, now, tenant)
            next(steps)  # to where the suspended steps wait: the driver resumes both
            pending.steps = steps
            raise
        return self._bound(payload, until, now, tenant)

    def _then_bound(self, steps: Steps, now: float, tenant: str) -> Steps:
        """``steps`` (suspended at their first wait), then the checks of :meth:`_bound`.

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
        return self._bound(payload, until, now, tenant)

    def _steps(self, token: str | bytes, now: float, tenant: str) -> Steps:
        """Ask the async callable about ``tenant``, then verify (keys may be fetched too)."""
        yield self.tenants.wait_for(tenant)
        allowed = self.tenants.known(tenant)
        if allowed is None:
            raise _undecided()
        if not allowed:
            raise self._not_allowed(tenant)
        slot = self.slot
        if slot.source is None:
            payload, until = slot.core.verify_until(token, now)  # type: ignore[union-attr]
        else:
            payload, until = yield from slot.steps(token, now, slot.timer(), None)
        return self._bound(payload, until, now, tenant)

    def _bound(self, payload: Any, until: float | None, now: float, tenant: str) -> Result:
        """The verified ``iss`` and tenant claim name the tenant decided on; else refused."""
        iss = payload.get("iss")
        if not isinstance(iss, str) or self.template.match(iss) != tenant:
            raise _issuer_refusal(self.name, iss)
        self._check_claim(payload.get(self.claim), tenant)
        ttl = self.tenants.ttl
        if ttl is not None and until is not None:  # a callable's answer is kept ttl at most
            until = min(until, now + ttl)
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
                f'token\'s {claim} "{_core.escape(value, 64)}" is not the tenant its iss names '
                f'("{_core.escape(tenant, 64)}")',
            )

    def _not_allowed(self, tenant: str) -> _core.CoreError:
        return _refusal(
            "tenant", f'tenant "{_core.escape(tenant, 64)}" is not one this service accepts'
        )

    def bucket(self, tenant: str) -> str | None:
        """The tenant as a metric attribute: only an allow-listed id, else None."""
        listed = self.tenants.listed
        return tenant if listed is not None and tenant in listed else None
