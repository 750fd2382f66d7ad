"""What a verifier says about its keys: health for probes, and why a 503 waits.

:class:`KeySourceHealth` is what ``verifier.health()`` returns and what
readiness, the CLI and telemetry read. :class:`Waiting` turns the 503s a
source answers into rate-limited events that name the wait (a fetch in
flight, the unknown-kid pace, the backoff, a failing provider, a
configuration fault), so a 503 is never silent, even at scale.
:class:`TenantLookupHealth` is the state of one issuer template's
``tenants=`` callable (counts only: never a tenant id).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from grelmicro.jwt._events import Event

__all__ = ["READINESS_WAITS", "KeySourceHealth", "TenantLookupHealth", "Waiting"]

#: The waits that mean no keys serve at all (readiness answers 503); the
#: others (``budget``, ``fetch-in-flight`` for a new kid) concern one token.
READINESS_WAITS = frozenset({"provider-failing", "config", "closed", "backoff"})


@dataclass(frozen=True)
class TenantLookupHealth:
    """How the ``tenants=`` callable of one issuer template fares.

    Only a template whose ``tenants=`` is a callable has lookups (a list or
    ``"any"`` never waits on anything). Counts since the verifier was
    built; no tenant id appears here, whatever the tokens named.

    Attributes:
        issuer: the issuer template, as configured.
        failing: the latest lookup to end failed or overran its bound, or
            one runs past its bound now; tokens of tenants not decided yet
            are answered 503 ``tenant-unavailable``. Cleared by the next
            lookup that answers in time.
        lookups: lookups started.
        failures: lookups that raised or overran their bound (``timeouts``
            included): each answered its waiting requests 503
            (``wait`` ``tenant-lookup-failed``).
        timeouts: the failures that were a lookup taking longer than its bound.
        busy: requests answered 503 at once because the most lookups ran
            (``wait`` ``tenant-lookups-busy``).
        running: lookups running now.
        overdue: of those, the ones past their bound (a hung sync callable).
        allowed: answers "allowed" held now (they keep serving while lookups fail).
        refused: answers "refused" held now.
        last_failure: when a lookup last failed (seconds since the epoch, on
            the verifier's clock).
        last_error: why (the exception's class name, or that it took too
            long); never its message, which could hold a tenant id.
    """

    issuer: str
    failing: bool = False
    lookups: int = 0
    failures: int = 0
    timeouts: int = 0
    busy: int = 0
    running: int = 0
    overdue: int = 0
    allowed: int = 0
    refused: int = 0
    last_failure: float | None = None
    last_error: str | None = None

    @property
    def problem(self) -> str:
        """One line for people: why tenant lookups fail (empty when they do not)."""
        if not self.failing:
            return ""
        why = self.last_error or "a lookup runs past its bound"
        if self.overdue:
            why = f"{self.overdue} running past their bound"
        return f"tenant lookups failing for {self.issuer}: {why}"


@dataclass(frozen=True)
class KeySourceHealth:
    """The state of network keys, for readiness probes, logs and metrics.

    Static keys are always ready. Times are seconds since the epoch, on
    the verifier's clock (for people: every decision about fetching runs
    on a monotonic clock); counters count since the verifier was built.

    Attributes:
        ready: keys are loaded and not past the staleness bound.
        last_success: when keys were last fetched and accepted.
        last_failure: when a fetch last failed.
        last_error: why it failed (no key or token material, ever).
        key_count: usable keys held now.
        fetch_count: HTTP requests made (discovery included).
        failure_count: fetches that failed.
        stale_uses: verifications served past the keys' expiry.
        expires_at: when the current keys expire (before the grace period).
        url: the JWKS URL of this source (or the issuer being discovered).
        sources: per-URL health, when the verifier has several sources.
        skipped_keys: ``(kid, reason)`` of every key the current JWKS left
            out (unsupported, malformed, weak, private, not for signatures,
            a kid two keys claim); ``len()`` is the count. Never key material.
        config_error: a configuration fault that keeps keys from loading
            (the discovery document names another issuer...), or None. Not
            an outage: retrying cannot fix it.
        generation: the generation of the key snapshot serving now.
        retry_after: while not ready, seconds until the next fetch attempt
            (what ``/ready`` sends as ``Retry-After``); None when ready or
            when no attempt will come (closed).
        tenant_lookups: one :class:`TenantLookupHealth` per issuer
            template whose ``tenants=`` is a callable. Failing lookups do not
            make ``ready`` false: keys serve, the tenants already decided
            are still accepted, and a probe taking every replica out would
            not mend the application's tenant directory.
    """

    ready: bool
    last_success: float | None = None
    last_failure: float | None = None
    last_error: str | None = None
    key_count: int = 0
    fetch_count: int = 0
    failure_count: int = 0
    stale_uses: int = 0
    expires_at: float | None = None
    url: str | None = None
    sources: tuple[KeySourceHealth, ...] = ()
    skipped_keys: tuple[tuple[str | None, str], ...] = ()
    config_error: str | None = None
    generation: int = 0
    retry_after: float | None = None
    tenant_lookups: tuple[TenantLookupHealth, ...] = ()

    @classmethod
    def combine(cls, parts: list[KeySourceHealth], static_keys: int) -> KeySourceHealth:
        """One health for several sources: ready only when all of them are."""
        if len(parts) == 1 and not static_keys:
            return parts[0]

        def latest(values: list[float | None]) -> float | None:
            known = [v for v in values if v is not None]
            return max(known) if known else None

        errors = [(p.last_failure, p.last_error) for p in parts if p.last_failure is not None]
        config = [p.config_error for p in parts if p.config_error is not None]
        return cls(
            ready=all(p.ready for p in parts),
            last_success=latest([p.last_success for p in parts]),
            last_failure=latest([p.last_failure for p in parts]),
            last_error=max(errors, key=lambda e: e[0] or 0.0)[1] if errors else None,
            key_count=static_keys + sum(p.key_count for p in parts),
            fetch_count=sum(p.fetch_count for p in parts),
            failure_count=sum(p.failure_count for p in parts),
            stale_uses=sum(p.stale_uses for p in parts),
            expires_at=min((p.expires_at for p in parts if p.expires_at is not None), default=None),
            sources=tuple(parts),
            skipped_keys=tuple(skip for p in parts for skip in p.skipped_keys),
            config_error="; ".join(config) if config else None,
            retry_after=max(
                (p.retry_after for p in parts if not p.ready and p.retry_after is not None),
                default=None,
            ),
        )

    @property
    def problem(self) -> str:
        """One line for people: why keys do not serve (empty when ready)."""
        if self.ready:
            return ""
        if self.config_error:
            return f"configuration error: {self.config_error}"
        if self.last_error:
            return f"keys unavailable: {self.last_error}"
        return "keys unavailable: not loaded yet"

    @property
    def tenants_failing(self) -> bool:
        """Whether the ``tenants=`` lookups of some issuer template fail now."""
        return any(lookups.failing for lookups in self.tenant_lookups)


class Waiting:
    """Rate-limited events for the 503s of one source: one per wait kind per interval.

    The event ``keys.waiting`` (INFO) names the wait, the source and the
    seconds until the next attempt, with how many 503s of that kind the
    interval held.
    """

    __slots__ = ("_emit", "_interval", "_lock", "_logged", "_unlogged")

    def __init__(self, emit: Callable[[Event], None], interval: float) -> None:
        self._emit = emit
        self._interval = interval
        self._lock = threading.Lock()
        self._logged: dict[str, float] = {}
        self._unlogged: dict[str, int] = {}

    def note(self, source: str, name: str, why: str, retry_in: float) -> None:
        """A 503 answered because of ``why``; said at most once per interval per kind."""
        now = time.monotonic()
        with self._lock:
            if now - self._logged.get(why, -math.inf) < self._interval:
                self._unlogged[why] = self._unlogged.get(why, 0) + 1
                return
            self._logged[why] = now
            suppressed = self._unlogged.pop(why, 0)
        self._emit(
            Event(
                "keys.waiting",
                source,
                logging.INFO,
                "JWKS %s: answering 503 (%s); next attempt in %.3g s",
                (name, _WHY.get(why, why), retry_in),
                {"wait": why, "retry_in": retry_in, "suppressed": suppressed},
            )
        )


_WHY = {
    "fetch-in-flight": "a fetch is in flight",
    "budget": "unknown-kid fetches are paced",
    "backoff": "backing off after a failed fetch",
    "provider-failing": "the provider is failing",
    "config": "a configuration error keeps keys from loading",
    "closed": "the verifier is closed",
}
