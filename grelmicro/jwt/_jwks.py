"""Keys from the network: one JWKS URL, fetched, kept fresh and kept safe.

A :class:`KeySource` owns one JWKS URL (or an issuer whose OIDC discovery
document names it). It fetches with httpx under strict limits (https only,
no redirects, timeouts, a response-size cap, a key-count cap, no ``oct``
keys), honours ``Cache-Control: max-age`` within bounds, and keeps the last
good keys through provider faults up to a bounded staleness.

Concurrency: at most one fetch per source is in flight. Threads and asyncio
tasks that need it join that one fetch (a :class:`_Flight`). Fetches asked
for by tokens with an unknown ``kid`` are limited to one per cooldown.
Nothing here runs on the request path unless a fetch is due: the verifier
reads :attr:`KeySource.refresh_at` and calls in only past it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import math
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from grelmicro.jwt import _core
from grelmicro.jwt._discovery import discovery_urls, jwks_uri_of
from grelmicro.jwt._http import Clients, FetchError, FetchOptions, get_async, get_sync, ttl_of
from grelmicro.jwt._keys import note_padded
from grelmicro.jwt.errors import KeysUnavailableError

__all__ = ["FetchBudget", "FetchOptions", "KeySource", "KeySourceHealth"]

logger = logging.getLogger("grelmicro.jwt")

Clock = Callable[[], float]
#: Gets each accepted key set, or None when the keys went past the staleness bound.
Listener = Callable[[_core.KeySet | None], None]


@dataclass(frozen=True)
class KeySourceHealth:
    """The state of network keys, for readiness probes, logs and metrics.

    Static keys are always ready. Times are seconds since the epoch (the
    verifier's clock); counters count since the verifier was built.

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

    @classmethod
    def combine(cls, parts: list[KeySourceHealth], static_keys: int) -> KeySourceHealth:
        """One health for several sources: ready only when all of them are."""
        if len(parts) == 1 and not static_keys:
            return parts[0]

        def latest(values: list[float | None]) -> float | None:
            known = [v for v in values if v is not None]
            return max(known) if known else None

        errors = [(p.last_failure, p.last_error) for p in parts if p.last_failure is not None]
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
        )


class FetchBudget:
    """Fetches for unknown ``kid`` values, shared by every source of a verifier.

    At most ``limit`` such fetches start within any ``window`` seconds,
    whichever sources ask: one budget, however many issuers are configured.
    """

    __slots__ = ("_lock", "_starts", "limit", "window")

    def __init__(self, limit: int, window: float) -> None:
        self.limit = limit
        self.window = window
        self._starts: collections.deque[float] = collections.deque()
        self._lock = threading.Lock()

    def take(self, now: float) -> bool:
        """Spend one fetch if the budget allows it now."""
        with self._lock:
            starts = self._starts
            while starts and now - starts[0] >= self.window:
                starts.popleft()
            if len(starts) >= self.limit:
                return False
            starts.append(now)
            return True


class _Flight:
    """One fetch in progress; threads and tasks wait on it together."""

    __slots__ = ("done", "waiters")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class KeySource:
    """Keys from one JWKS URL (or from an issuer's discovery document).

    Listeners (the issuers using these keys) get every new key set; a
    document that fails any check never reaches them.
    """

    def __init__(
        self,
        *,
        jwks_url: str | None,
        discover: str | None,
        options: FetchOptions,
        clients: Clients,
        clock: Clock,
        allow_insecure_loopback: bool,
        budget: FetchBudget | None = None,
    ) -> None:
        self.url = jwks_url
        self._budget = budget or FetchBudget(options.unknown_kid_budget, options.cooldown)
        self.discover = discover
        self.options = options
        self._clients = clients
        self._clock = clock
        self._insecure_ok = allow_insecure_loopback
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()
        self._flight: _Flight | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._threads: set[threading.Thread] = set()
        self._background: asyncio.Task[None] | None = None
        self._closed = False
        # Key state.
        self.key_set: _core.KeySet | None = None
        self.refresh_at: float = -math.inf  # read on the request path
        self.expires_at: float = -math.inf
        self.stale_until: float = -math.inf
        # Gates and health.
        self._retry_at = -math.inf
        self._kid_at = -math.inf
        self._logged_at = -math.inf
        self._failing = False
        self._withdrawn = False
        self.fetch_count = 0
        self.failure_count = 0
        self.stale_uses = 0
        self.last_success: float | None = None
        self.last_failure: float | None = None
        self.last_error: str | None = None

    @property
    def name(self) -> str:
        """The URL for logs: the JWKS URL, or the issuer being discovered."""
        return self.url or f"discovery of {self.discover}"

    def subscribe(self, listener: Listener) -> None:
        """Call ``listener(key_set)`` on every accepted key set."""
        self._listeners.append(listener)

    # -- fetching ---------------------------------------------------------

    def _resolve_sync(self, client: httpx.Client) -> str:
        if self.url is not None:
            return self.url
        assert self.discover is not None  # noqa: S101 - one of the two is set
        last: FetchError | None = None
        for url in discovery_urls(self.discover):
            self.fetch_count += 1
            try:
                body, _ = get_sync(client, url, self.options)
            except FetchError as exc:
                last = exc
                continue
            self.url = jwks_uri_of(body, self.discover, self._insecure_ok)
            return self.url
        raise FetchError(f"discovery failed: {last}")

    async def _resolve_async(self, client: httpx.AsyncClient) -> str:
        if self.url is not None:
            return self.url
        assert self.discover is not None  # noqa: S101 - one of the two is set
        last: FetchError | None = None
        for url in discovery_urls(self.discover):
            self.fetch_count += 1
            try:
                body, _ = await get_async(client, url, self.options)
            except FetchError as exc:
                last = exc
                continue
            self.url = jwks_uri_of(body, self.discover, self._insecure_ok)
            return self.url
        raise FetchError(f"discovery failed: {last}")

    def _parse(self, body: bytes) -> _core.KeySet:
        try:
            key_set = _core.KeySet.from_jwks(
                body, allow_symmetric=False, max_keys=self.options.max_keys
            )
        except _core.CoreError as exc:
            raise FetchError(f"not a usable JWKS: {exc.args[1]}") from None
        for kid, reason in key_set.skipped:
            (logger.warning if "private key" in reason else logger.info)(
                "JWKS %s: key %r skipped: %s", self.name, kid, reason
            )
        note_padded(key_set.keys, f"JWKS {self.name}")
        return key_set

    def fetch_sync(self) -> None:
        """Fetch now in this thread and install the keys, or record the failure."""
        client = self._clients.sync()
        if client is None:
            self._failed("only an async client was given: await verifier.start() first")
            return
        try:
            url = self._resolve_sync(client)
            self.fetch_count += 1
            body, headers = get_sync(client, url, self.options)
            key_set = self._parse(body)
        except FetchError as exc:
            self._failed(str(exc))
            return
        self._accept(key_set, headers)

    async def fetch_async(self) -> None:
        """Fetch now on this event loop and install the keys, or record the failure."""
        client = self._clients.async_()
        if client is None:  # the user gave a sync client only
            await asyncio.to_thread(self.fetch_sync)
            return
        try:
            url = await self._resolve_async(client)
            self.fetch_count += 1
            body, headers = await get_async(client, url, self.options)
            key_set = self._parse(body)
        except FetchError as exc:
            self._failed(str(exc))
            return
        self._accept(key_set, headers)

    def _accept(self, key_set: _core.KeySet, headers: httpx.Headers) -> None:
        now = self._clock()
        ttl = ttl_of(headers, self.options, now)
        for listener in self._listeners:
            listener(key_set)
        early = ttl * self.options.jitter * random.random()  # noqa: S311 - spread, not secrecy
        kids = {(key.fingerprint, key.kid) for key in key_set.keys}
        before = (
            set() if self.key_set is None else {(k.fingerprint, k.kid) for k in self.key_set.keys}
        )
        if kids != before:
            logger.info(
                "JWKS %s: %d keys (%d new, %d withdrawn), kept for %.0f s",
                self.name,
                len(kids),
                len(kids - before),
                len(before - kids),
                ttl,
            )
        with self._lock:
            self.key_set = key_set
            self.last_success = now
            self.expires_at = now + ttl
            self.stale_until = now + ttl + self.options.max_stale
            self.refresh_at = now + ttl - early
            self._retry_at = -math.inf
            self._withdrawn = False
            recovered, self._failing = self._failing, False
        if recovered:
            logger.warning("JWKS %s: fetched again, %d keys", self.name, len(key_set))

    def _failed(self, reason: str) -> None:
        now = self._clock()
        with self._lock:
            self.failure_count += 1
            self.last_failure = now
            self.last_error = reason
            self._retry_at = now + self.options.cooldown
            # Past a failure, look again after the cooldown, not at every call.
            self.refresh_at = min(max(self.refresh_at, self._retry_at), self.stale_until)
            if self.key_set is None:
                self.refresh_at = self._retry_at
            first = not self._failing
            self._failing = True
            due = now - self._logged_at >= self.options.log_interval
            if first or due:
                self._logged_at = now
        if first or due:
            held = "no keys held" if self.key_set is None else "keeping the last good keys"
            logger.warning(
                "JWKS %s: fetch failed (%s); %s (%d failures so far)",
                self.name,
                reason,
                held,
                self.failure_count,
            )

    # -- single flight ----------------------------------------------------

    def _begin(self, *, unknown_kid: bool) -> tuple[_Flight | None, bool]:
        """Join the fetch in flight, or start one if the gates allow.

        Returns ``(flight, leader)``; ``(None, False)`` when no fetch may start.
        """
        now = self._clock()
        with self._lock:
            if self._closed:
                return None, False
            if self._flight is not None:
                return self._flight, False
            if now < self._retry_at:
                return None, False
            if unknown_kid:
                if now - self._kid_at < self.options.cooldown or not self._budget.take(now):
                    return None, False
                self._kid_at = now
            flight = self._flight = _Flight()
            return flight, True

    def _end(self, flight: _Flight) -> None:
        with self._lock:
            if self._flight is flight:
                self._flight = None
            waiters, flight.waiters = flight.waiters, []
            flight.done.set()
        for loop, future in waiters:
            # A closed loop has nobody waiting any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_wake, future)

    def _lead_sync(self, flight: _Flight) -> None:
        try:
            self.fetch_sync()
        except Exception as exc:  # a listener bug must not leave waiters hanging
            logger.exception("JWKS %s: refresh failed unexpectedly", self.name)
            self._failed(f"internal error ({type(exc).__name__})")
        finally:
            self._end(flight)

    async def _lead_async(self, flight: _Flight) -> None:
        try:
            await self.fetch_async()
        except Exception as exc:
            logger.exception("JWKS %s: refresh failed unexpectedly", self.name)
            self._failed(f"internal error ({type(exc).__name__})")
        finally:
            self._end(flight)

    def refresh_blocking(self, *, unknown_kid: bool) -> bool:
        """Fetch in this thread (or wait for the fetch in flight). True if one ran."""
        flight, leader = self._begin(unknown_kid=unknown_kid)
        if flight is None:
            return False
        if leader:
            self._lead_sync(flight)
        else:
            flight.done.wait(self.options.wait_limit())
        return True

    def refresh_background(self, *, unknown_kid: bool) -> _Flight | None:
        """Start a fetch without waiting: on this thread's event loop, else a thread."""
        flight, leader = self._begin(unknown_kid=unknown_kid)
        if flight is None or not leader:
            return flight
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is not None:
            task = loop.create_task(self._lead_async(flight))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            thread = threading.Thread(
                target=self._run_thread, args=(flight,), name="grelmicro-jwks", daemon=True
            )
            self._threads.add(thread)
            thread.start()
        return flight

    def _run_thread(self, flight: _Flight) -> None:
        try:
            self._lead_sync(flight)
        finally:
            self._threads.discard(threading.current_thread())

    async def refresh_async(self, *, unknown_kid: bool) -> bool:
        """Fetch on this loop (or wait for the fetch in flight). True if one ran."""
        flight, leader = self._begin(unknown_kid=unknown_kid)
        if flight is None:
            return False
        if leader:
            await self._lead_async(flight)
        else:
            await self.wait_async(flight)
        return True

    async def wait_async(self, flight: _Flight) -> None:
        """Wait for ``flight`` without blocking the event loop."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if flight.done.is_set():
                return
            flight.waiters.append((loop, future))
        # asyncio.TimeoutError is not the built-in TimeoutError before 3.11.
        with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(future), self.options.wait_limit())

    def in_flight(self) -> _Flight | None:
        """The fetch in progress, if any."""
        return self._flight

    # -- what the request path calls past refresh_at ----------------------

    def due(self, now: float) -> bool:
        """Keys are due for refresh (or missing): act, and say whether they serve.

        Called by the verifier only when ``now >= refresh_at``. Never blocks
        while keys are usable; returns False when keys are missing or past
        the staleness bound and this call could not get new ones.
        """
        if self.key_set is not None and now < self.stale_until:
            if now >= self.expires_at:
                self.stale_uses += 1
            if now >= self.refresh_at and (self._background is None or self._background.done()):
                self.refresh_background(unknown_kid=False)
            return True
        if _on_event_loop():
            self.refresh_background(unknown_kid=False)
        else:
            self.refresh_blocking(unknown_kid=False)
        if self.key_set is not None and self._clock() < self.stale_until:
            return True
        if self.key_set is not None and not self._withdrawn:
            # Past the bound: the last good keys stop serving, and so does
            # every cached result they verified.
            self._withdrawn = True
            logger.error(
                "JWKS %s: keys past their staleness bound; verification answers 503", self.name
            )
            for listener in self._listeners:
                listener(None)
        return False

    def unavailable(self) -> KeysUnavailableError:
        """The 503 error, saying why without any key material."""
        if self.key_set is None:
            detail = "no keys loaded yet"
        else:
            detail = "the last good keys are past their staleness bound"
        if self.last_error:
            detail += f"; last fetch: {self.last_error}"
        return KeysUnavailableError(f"keys from {self.name} are unavailable: {detail}")

    def after_unknown_kid(self) -> bool:
        """A token named an unknown ``kid``: maybe refetch. True if a fetch ran."""
        if _on_event_loop():
            # Never block an event loop: fetch on it; verify_async waits for it.
            self.refresh_background(unknown_kid=True)
            return False
        return self.refresh_blocking(unknown_kid=True)

    # -- lifecycle --------------------------------------------------------

    async def start(self) -> None:
        """Load keys now (a failure is logged, not raised) and keep them fresh."""
        self._closed = False
        if self.key_set is None:
            await self.refresh_async(unknown_kid=False)
        if self._background is None or self._background.done():
            self._background = asyncio.get_running_loop().create_task(self._keep_fresh())

    async def _keep_fresh(self) -> None:
        while not self._closed:
            delay = max(self.refresh_at - self._clock(), 0.0)
            if self.key_set is None or self._failing:
                delay = max(self._retry_at - self._clock(), 0.05)
            await asyncio.sleep(min(max(delay, 0.05), self.options.max_ttl))
            if self._clock() >= self.refresh_at or self.key_set is None:
                await self.refresh_async(unknown_kid=False)

    async def aclose(self) -> None:
        """Stop the background refresh and any fetch started on this loop."""
        self._closed = True
        pending = [t for t in (self._background, *self._tasks) if t is not None]
        for task in pending:
            task.cancel()
        for task in pending:
            # Whatever the task ended with was logged by the task itself.
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._background = None
        self.close_threads()

    def close_threads(self) -> None:
        """No more fetches; wait (bounded) for fetch threads to finish."""
        self._closed = True
        self.join()

    def join(self) -> None:
        """Wait (bounded) for the fetch threads running now."""
        for thread in list(self._threads):
            thread.join(self.options.wait_limit())

    def health(self) -> KeySourceHealth:
        """The state of this source now."""
        now = self._clock()
        key_set = self.key_set
        return KeySourceHealth(
            ready=key_set is not None and now < self.stale_until,
            last_success=self.last_success,
            last_failure=self.last_failure,
            last_error=self.last_error,
            key_count=0 if key_set is None else len(key_set),
            fetch_count=self.fetch_count,
            failure_count=self.failure_count,
            stale_uses=self.stale_uses,
            expires_at=None if key_set is None else self.expires_at,
            url=self.name,
            skipped_keys=() if key_set is None else tuple(key_set.skipped),
        )


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
