"""OpenTelemetry metrics and traces for a :class:`~grelmicro.jwt.JWTVerifier`.

Turn it on with ``JWTVerifier(..., telemetry=True)`` (the global meter and
tracer providers) or ``telemetry=Telemetry(meter_provider=...,
tracer_provider=..., latency=True)``. Needs the ``otel`` extra
(``pip install 'grelmicro[jwt,otel]'``, which brings ``opentelemetry-api``);
the API is imported only when a verifier asks for telemetry, so without it
nothing is imported and nothing is paid.

It is an observer of the verifier's events (``verifier.observe``, see
:mod:`grelmicro.jwt._events`): ``token.refused`` and ``token.accepted``
count verifications, ``keys.fetch`` gives each key fetch a span, a count
and a duration. It wraps nothing and reads nothing private of the verifier.

What it costs: a cache hit runs no Python code of this module. Accepted
verifications served from the cache are read from the cache's counters at
collection time (an observable counter); a verifier built with telemetry
announces each accepted cache miss (the full verification) with one
event; a refusal is an event of the refusal path, which already runs
Python. Key sources are read (``health()``) at collection time. The
metric and span names, units and attributes are listed in
``docs/observability.md``; attributes only ever hold values from bounded
sets: the stable ``reason`` of :mod:`grelmicro.jwt.errors`, issuers and
key sources from the configuration, the verifier's algorithms.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from grelmicro.jwt import _lifecycle
from grelmicro.jwt._events import TOKEN_ACCEPTED, TOKEN_REFUSED, Event
from grelmicro.jwt.errors import ConfigurationError, JWTError

__all__ = ["METER_NAME", "Telemetry"]

#: The instrumentation scope of every meter and tracer this module uses.
METER_NAME = "grelmicro.jwt"

#: Histogram buckets in seconds (the SDK's default ones are meant for milliseconds).
_FETCH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_VERIFY_BUCKETS = (1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 5e-3)

#: Attribute names, one scheme for metrics and spans (docs/observability.md).
_OUTCOME = "grelmicro.jwt.outcome"
_REASON = "grelmicro.jwt.reason"
_ISSUER = "grelmicro.jwt.issuer"
_ALGORITHM = "grelmicro.jwt.algorithm"
_TENANT = "grelmicro.jwt.tenant"
_CACHE = "grelmicro.jwt.cache"
_SOURCE = "grelmicro.jwt.source"
_CHECK = "grelmicro.jwt.check"


class _Verifier(Protocol):
    """What telemetry reads of a verifier (it sits below the verifier: no import of it)."""

    def observe(self, observer: Callable[[Event], None], *, on_thread: bool = False) -> None:
        """Hear the verifier's events."""
        ...

    def cache_info(self) -> Any:
        """Cache counters and size."""
        ...

    def health(self) -> Any:
        """Key health."""
        ...


class _Source(Protocol):
    """What telemetry reads of a key source."""

    @property
    def source(self) -> str:
        """The source's stable name."""
        ...

    @property
    def wall(self) -> Callable[[], float]:
        """The clock that dates its health (the verifier's)."""
        ...

    def health(self) -> Any:
        """The source's health."""
        ...


@dataclass(frozen=True)
class Telemetry:
    """What a verifier reports, and to which providers.

    Attributes:
        meter_provider: an OpenTelemetry ``MeterProvider`` (default: the
            global one, ``opentelemetry.metrics.get_meter_provider()``).
        tracer_provider: a ``TracerProvider`` (default: the global one).
        latency: also record ``grelmicro.jwt.verification.duration`` for
            each full verification (cache misses); it costs two clock reads
            per miss. Cache hits are never timed.
    """

    meter_provider: Any = None
    tracer_provider: Any = None
    latency: bool = False

    @classmethod
    def of(cls, option: object) -> Telemetry | None:
        """The ``telemetry=`` option of a verifier: ``False``, ``True`` or a Telemetry."""
        if option is False or option is None:
            return None
        if option is True:
            return cls()
        if isinstance(option, Telemetry):
            return option
        raise ConfigurationError("telemetry must be True, False or a grelmicro.jwt.otel.Telemetry")


#: verifier -> its reporter (a verifier without telemetry is not in it).
_REPORTERS: weakref.WeakKeyDictionary[Any, Reporter] = weakref.WeakKeyDictionary()


def answered(verifier: _Verifier, status: int, reason: str) -> None:
    """Count a refusal the FastAPI dependency answers (no-op without telemetry)."""
    reporter = _REPORTERS.get(verifier)
    if reporter is not None:
        reporter.answered(status, reason)


def dpop_reporter(verifier: _Verifier, dpop: Any) -> Reporter | None:
    """The reporter DPoP checks go to (None without telemetry); watches ``dpop``'s replay store."""
    reporter = _REPORTERS.get(verifier)
    if reporter is not None:
        reporter.watch_replay_store(dpop.replay_store)
    return reporter


def dpop_checked(reporter: Reporter | None, error: JWTError | None) -> None:
    """Count one DPoP check: accepted (``error`` None) or refused; no-op without telemetry."""
    if reporter is not None:
        reporter.dpop_checked(error)


class _Instruments:
    """The instruments of one meter provider, shared by every verifier reporting to it.

    An instrument name is created once per meter: a second verifier's
    callbacks would be dropped. So the observable instruments read every
    live :class:`Reporter` of the provider and add up equal attribute sets.
    """

    def __init__(self, meter: Any) -> None:
        self.meter = meter
        self.reporters: weakref.WeakSet[Reporter] = weakref.WeakSet()
        self.duration: Any = None
        observable = (
            (
                "counter",
                "grelmicro.jwt.verifications",
                "{verification}",
                "verifications",
                "Tokens verified, by outcome (accepted/rejected) and stable reason.",
            ),
            (
                "counter",
                "grelmicro.jwt.cache.hits",
                "{lookup}",
                "cache:hits",
                "Verifications answered from the verified-token cache.",
            ),
            (
                "counter",
                "grelmicro.jwt.cache.misses",
                "{lookup}",
                "cache:misses",
                "Cache lookups that ran the full verification.",
            ),
            (
                "up_down_counter",
                "grelmicro.jwt.cache.size",
                "{entry}",
                "cache:size",
                "Entries in the verified-token cache.",
            ),
            (
                "up_down_counter",
                "grelmicro.jwt.cache.limit",
                "{entry}",
                "cache:max_size",
                "Most entries the cache holds.",
            ),
            (
                "gauge",
                "grelmicro.jwt.keys.ready",
                "1",
                "keys:ready",
                "1 when keys are loaded and within their staleness bound, else 0.",
            ),
            (
                "up_down_counter",
                "grelmicro.jwt.keys.count",
                "{key}",
                "keys:key_count",
                "Usable keys held now.",
            ),
            (
                "counter",
                "grelmicro.jwt.keys.stale_uses",
                "{verification}",
                "keys:stale_uses",
                "Verifications served with keys past their expiry (within max_stale).",
            ),
            (
                "gauge",
                "grelmicro.jwt.keys.age",
                "s",
                "keys:age",
                "Seconds since keys were last fetched and accepted.",
            ),
            (
                "counter",
                "grelmicro.jwt.tenant_lookups",
                "{lookup}",
                "tenants:lookups",
                "Lookups of an issuer template's tenants= callable started.",
            ),
            (
                "counter",
                "grelmicro.jwt.tenant_lookup.failures",
                "{lookup}",
                "tenants:failures",
                "Tenant lookups that raised or overran their bound (timeouts included).",
            ),
            (
                "gauge",
                "grelmicro.jwt.tenant_lookup.failing",
                "1",
                "tenants:failing",
                "1 while an issuer template's tenant lookups fail, else 0.",
            ),
        )
        for kind, name, unit, what, description in observable:
            create = getattr(meter, f"create_observable_{kind}")
            create(name, callbacks=[self._reader(what)], unit=unit, description=description)
        self.fetches, self.answers, self.proofs = (
            meter.create_counter(name, unit=unit, description=description)
            for name, unit, description in (
                (
                    "grelmicro.jwt.key_fetches",
                    "{fetch}",
                    "Key fetches (JWKS, with discovery when configured), by result.",
                ),
                (
                    "grelmicro.jwt.http.refusals",
                    "{response}",
                    "Requests the FastAPI dependency refused, by status and reason.",
                ),
                (
                    "grelmicro.jwt.dpop.proofs",
                    "{proof}",
                    "DPoP checks of requests, by outcome (accepted/refused) and reason.",
                ),
            )
        )
        self.fetch_duration = meter.create_histogram(
            "grelmicro.jwt.key_fetch.duration",
            unit="s",
            description="Time a key fetch took, discovery included.",
            explicit_bucket_boundaries_advisory=_FETCH_BUCKETS,
        )
        for name, field, description in (
            ("size", "__len__", "Live entries in the DPoP replay stores."),
            ("limit", "max_size", "Most entries the DPoP replay stores hold."),
        ):
            meter.create_observable_up_down_counter(
                f"grelmicro.jwt.dpop.replay_store.{name}",
                callbacks=[self._stores(field)],
                unit="{entry}",
                description=description,
            )

    def latency(self) -> Any:
        """The verification-duration histogram (created when a verifier first asks)."""
        if self.duration is None:
            self.duration = self.meter.create_histogram(
                "grelmicro.jwt.verification.duration",
                unit="s",
                description="Time of a full verification (cache misses only).",
                explicit_bucket_boundaries_advisory=_VERIFY_BUCKETS,
            )
        return self.duration

    def _stores(self, field: str) -> Callable[[Any], Iterator[Any]]:
        """Read the replay stores of every reporter, each store once (they are often shared)."""

        def observe(options: Any) -> Iterator[Any]:  # noqa: ARG001
            from opentelemetry.metrics import Observation  # noqa: PLC0415

            stores = {id(store): store for r in list(self.reporters) for store in r.replay_stores}
            if not stores:
                return
            if field == "__len__":
                yield Observation(sum(len(store) for store in stores.values()))
                return
            limits = [getattr(store, field, None) for store in stores.values()]
            if all(isinstance(limit, int) for limit in limits):
                yield Observation(sum(limits))  # type: ignore[arg-type]

        return observe

    def _reader(self, what: str) -> Callable[[Any], Iterator[Any]]:
        def observe(options: Any) -> Iterator[Any]:  # noqa: ARG001
            from opentelemetry.metrics import Observation  # noqa: PLC0415

            totals: dict[frozenset[tuple[str, Any]], float] = {}
            for reporter in list(self.reporters):
                for value, attributes in reporter.observe(what):
                    key = frozenset(attributes.items())
                    totals[key] = totals.get(key, 0) + value
            for key, value in totals.items():
                yield Observation(value, dict(key))

        return observe


#: meter provider -> its shared instruments.
_SHARED: weakref.WeakKeyDictionary[Any, _Instruments] = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()

_lifecycle.renew_lock_after_fork(globals(), "_SHARED_LOCK")  # a child's copy may be held


def _instruments(meter_provider: Any) -> _Instruments:
    with _SHARED_LOCK:
        shared = _SHARED.get(meter_provider)
        if shared is None:
            shared = _SHARED[meter_provider] = _Instruments(meter_provider.get_meter(METER_NAME))
        return shared


class Reporter:
    """What one verifier reports; built by the verifier when telemetry is on.

    An observer of the verifier's events (:meth:`attach`). Holds the
    verifier weakly: the shared observable instruments read it at
    collection time and it reports nothing once it is gone.
    """

    def __init__(self, options: Telemetry) -> None:
        try:
            from opentelemetry import metrics, trace  # noqa: PLC0415 - only when asked for
        except ImportError:
            raise ConfigurationError(
                "telemetry needs opentelemetry-api: pip install 'grelmicro[jwt,otel]'"
            ) from None
        self._trace = trace
        shared = _instruments(options.meter_provider or metrics.get_meter_provider())
        tracer_provider = options.tracer_provider or trace.get_tracer_provider()
        self._tracer = tracer_provider.get_tracer(METER_NAME)
        self._verifier: Callable[[], _Verifier | None] = lambda: None
        self._lock = threading.Lock()  # creates cells; bumps take no lock
        #: (outcome, reason, issuer, algorithm, tenant) -> count, read at collection time.
        self._counts: dict[
            tuple[str, str | None, str | None, str | None, str | None], list[int]
        ] = {}
        self._sources: list[tuple[str, weakref.ref[_Source]]] = []
        self._fetches = shared.fetches
        self._fetch_duration = shared.fetch_duration
        self._answers = shared.answers
        self._proofs = shared.proofs
        #: Replay stores to observe (held, not weakly: stores have slots and live as long).
        self.replay_stores: list[Any] = []
        self._duration = shared.latency() if options.latency else None
        shared.reporters.add(self)

    # -- wiring (called by the verifier) -------------------------------------

    def attach(self, verifier: _Verifier, sources: tuple[_Source, ...]) -> None:
        """Report ``verifier``: hear its events, read its cache and ``sources``' health."""
        self._verifier = weakref.ref(verifier)
        for source in sources:
            self._sources.append((source.source, weakref.ref(source)))
        _REPORTERS[verifier] = self
        # On the emitting thread: a refusal is an event of the request's own span.
        verifier.observe(self._observer(), on_thread=True)

    def answered(self, status: int, reason: str) -> None:
        """One refusal answered by the FastAPI dependency."""
        self._answers.add(1, {"http.response.status_code": status, _REASON: reason})

    def watch_replay_store(self, store: object) -> None:
        """Report ``store``'s occupancy (a store that cannot say its size is left out)."""
        if hasattr(store, "__len__") and not any(s is store for s in self.replay_stores):
            self.replay_stores.append(store)

    def dpop_checked(self, error: JWTError | None) -> None:
        """One DPoP check: accepted, or refused with the reason the client is answered."""
        if error is None:
            self._proofs.add(1, {_OUTCOME: "accepted"})
            return
        reason = error.reason
        if getattr(error, "use_nonce", False):
            reason = "use-dpop-nonce"
        elif getattr(error, "unavailable", False):  # a shared store that cannot be reached
            reason = "dpop-replay-store-unavailable"
        elif getattr(error, "store_full", False):
            reason = "dpop-replay-store-full"
        elif getattr(error, "over_quota", False):
            reason = "dpop-replay-over-quota"
        attributes = {_OUTCOME: "refused", _REASON: reason}
        check = getattr(error, "check", None)
        if isinstance(check, str):  # the rule's name, from a fixed set in the code
            attributes[_CHECK] = check
        self._proofs.add(1, attributes)

    # -- counting --------------------------------------------------------------

    def _cell(self, key: tuple[str, str | None, str | None, str | None, str | None]) -> list[int]:
        """The counter of one attribute set (a one-item list, bumped without a lock).

        Like the cache's counters, a bump is a plain ``+= 1``: under
        concurrent threads the counts are close, not exact.
        """
        cell = self._counts.get(key)
        if cell is None:
            with self._lock:
                cell = self._counts.setdefault(key, [0])
        return cell

    def observe(self, what: str) -> Iterator[tuple[float, dict[str, Any]]]:
        """``(value, attributes)`` of one observable instrument, read now."""
        verifier = self._verifier()
        if verifier is None:
            return
        if what == "verifications":
            yield from self._verifications(verifier)
            return
        family, field = what.split(":")
        if family == "cache":
            yield getattr(verifier.cache_info(), field) or 0, {}
            return
        if family == "tenants":
            yield from _tenant_lookups(verifier, field)
            return
        if not self._sources:  # static keys: ready, a fixed count
            if field == "ready":
                yield 1, {}
            elif field == "key_count":
                yield verifier.health().key_count, {}
            return
        for name, ref in self._sources:
            source = ref()
            if source is None:
                continue
            health = source.health()
            if field == "age":
                if health.last_success is None:
                    continue
                # last_success is dated by the source's wall clock: so is "now".
                value: float = max(source.wall() - health.last_success, 0.0)
            else:
                value = int(getattr(health, field))
            yield value, {_SOURCE: name}

    def _verifications(self, verifier: _Verifier) -> Iterator[tuple[float, dict[str, Any]]]:
        yield verifier.cache_info().hits or 0, {_OUTCOME: "accepted", _CACHE: "hit"}
        with self._lock:
            counts = [(key, cell[0]) for key, cell in self._counts.items()]
        for (outcome, reason, issuer, algorithm, tenant), value in counts:
            named = {_REASON: reason, _ISSUER: issuer, _ALGORITHM: algorithm, _TENANT: tenant}
            attributes = {_OUTCOME: outcome}
            if outcome == "accepted":
                attributes[_CACHE] = "miss"
            attributes.update({name: item for name, item in named.items() if item is not None})
            yield value, attributes

    # -- events ------------------------------------------------------------------

    def _observer(self) -> Callable[[Event], None]:
        """The observer of the verifier's events: outcomes are counts, a fetch is a span.

        ``token.accepted`` names a configured issuer, an allowed algorithm and
        a listed tenant at most (the verifier bounds them); ``token.refused``
        is counted by reason and is an event on the current span. A fetch
        span is recorded when the fetch has ended, with its real start and
        end times (the key source emits events; it knows no tracer).
        """
        trace = self._trace
        tracer = self._tracer
        fetches = self._fetches
        fetch_duration = self._fetch_duration
        duration = self._duration
        cell = self._cell

        def observe(event: Event) -> None:
            name = event.name
            fields = event.fields
            if name == TOKEN_ACCEPTED:
                key = ("accepted", None, fields["issuer"], fields["algorithm"], fields["tenant"])
                cell(key)[0] += 1
            elif name == TOKEN_REFUSED:
                reason = fields["reason"]
                cell(("rejected", reason, None, None, None))[0] += 1
                span = trace.get_current_span()
                if span.is_recording():
                    span.add_event("grelmicro.jwt.refusal", {_REASON: reason})
            elif name == "keys.fetch":
                result = fields["result"]
                attributes = {_OUTCOME: result, _SOURCE: event.source}
                fetches.add(1, attributes)
                fetch_duration.record(fields["duration"], attributes)
                span = tracer.start_span(
                    "grelmicro.jwt.key_fetch",
                    start_time=fields["started_ns"],
                    attributes={
                        _SOURCE: event.source,
                        "grelmicro.jwt.discovery": bool(fields["discovery"]),
                        _OUTCOME: result,
                    },
                )
                if result in ("failure", "error"):
                    error = fields.get("error") or result
                    span.set_status(trace.Status(trace.StatusCode.ERROR, error))
                span.end(end_time=fields["started_ns"] + int(fields["duration"] * 1e9))
                return
            else:
                return
            if duration is not None and "duration" in fields:  # a timed full verification
                duration.record(fields["duration"])

        return observe


def _tenant_lookups(verifier: _Verifier, field: str) -> Iterator[tuple[float, dict[str, Any]]]:
    """One tenant-lookup count per issuer template (from the configuration: a bounded set)."""
    for lookups in getattr(verifier.health(), "tenant_lookups", ()):
        yield int(getattr(lookups, field)), {_ISSUER: lookups.issuer}
