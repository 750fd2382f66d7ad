"""HTTP for keys: the limits, the checks and the two clients (sync and async).

Every request for keys goes through :func:`get_sync` or :func:`get_async`:
no redirects, a timeout for the connection, for each read and for the whole
answer (headers included), identity encoding only, and a size cap enforced while streaming (an
oversize answer is abandoned, never read whole). URLs are checked when the
verifier is built (:func:`check_url`): https, or plain http on a loopback
address with an explicit flag.
"""

from __future__ import annotations

import asyncio
import contextvars
import email.utils
import ipaddress
import math
import re
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import httpx

from grelmicro.jwt import _lifecycle
from grelmicro.jwt.errors import ConfigurationError

__all__ = [
    "Answer",
    "Clients",
    "ConfigFaultError",
    "FetchError",
    "FetchOptions",
    "check_url",
    "get_async",
    "get_sync",
    "ttl_of",
]

_MAX_AGE = re.compile(r"(?:^|,)\s*max-age\s*=\s*\"?(\d{1,10})\"?\s*(?:,|$)", re.IGNORECASE)
_NO_CACHE = re.compile(r"(?:^|,)\s*(?:no-cache|no-store)\s*(?:,|$)", re.IGNORECASE)


@dataclass(frozen=True)
class FetchOptions:
    """Limits and timings of key fetching; the defaults suit most providers.

    Attributes:
        connect_timeout: seconds to open the connection (TLS included).
        read_timeout: seconds to wait for each piece of the answer.
        total_timeout: seconds for one whole request, however the server drips.
        max_response_size: bytes read at most from one answer.
        max_keys: keys accepted at most in one JWKS document.
        min_ttl: keys are refetched no sooner than this, whatever
            ``Cache-Control`` says.
        max_ttl: and no later than this.
        default_ttl: when the answer carries no ``max-age``.
        max_stale: how long past their expiry the last good keys still serve
            while the provider fails; then :class:`KeysUnavailableError`.
        cooldown: the longest pause after failed refreshes while keys are
            held: the next attempt waits 1 s, then 2 s, 4 s... up to this (a
            provider's ``Retry-After`` counts, within it). With no keys held
            (start-up, after a withdrawal) loads are retried about every
            second instead: nothing is served meanwhile.
        jitter: share of the TTL by which a refresh comes early, at random,
            so a fleet does not refetch in lockstep.
        log_interval: a failing source logs at most once per this many seconds.
        unknown_kid_budget: successful fetches for tokens naming an unknown
            ``kid`` allowed per ``unknown_kid_interval``, for each source
            (each issuer's keys), and the pace of all of them: at most one
            per ``interval / budget`` seconds (one a second by default). A
            flood of invented kids costs the provider at most that; a real
            new key waits at most that long (answered 503 ``key-pending``
            with ``Retry-After`` meanwhile). Failed fetches never spend the
            budget (only the pace spaces them), and every fetch is
            conditional, so an unchanged JWKS costs a 304.
        unknown_kid_interval: the window of ``unknown_kid_budget``, in
            seconds; ``None`` takes ``cooldown``.
        key_wait: the longest a request waits for keys it needs (not loaded
            yet, or a new ``kid``), in seconds from its arrival, and for one
            fetch at most: past it, 503 with ``Retry-After`` while the fetch
            goes on in the background (the next request after it lands is
            served). Nobody waits on a fetch past ``key_wait`` from the
            fetch's own start either, and while the source's last fetch
            failed (until one succeeds) only the request that starts the
            next fetch waits for it: the others get their 503 at once, so
            a provider that hangs holds one request thread per fetch
            attempt, not one per request. And a request thread waits at
            most the source's patience into a fetch: four times the
            slowest of its last eight good fetches, at least 0.25 s (a
            task on an event loop holds no thread: it waits the whole
            ``key_wait``). ``0`` never waits.
        max_waiters: how many requests may wait for one source's fetch at
            once; beyond it a request is answered 503 at once (a slow
            provider and a flood of invented kids hold no more than this).
        timer: the monotonic clock every fetch decision runs on (default
            ``time.monotonic``; tests pass a fake one). The verifier's
            ``clock=`` is for claims only: a wall-clock step changes nothing
            about when keys are fetched or withdrawn.
    """

    connect_timeout: float = 5.0
    read_timeout: float = 5.0
    total_timeout: float = 15.0
    max_response_size: int = 256 * 1024
    max_keys: int = 100
    min_ttl: float = 300.0
    max_ttl: float = 86_400.0
    default_ttl: float = 900.0
    max_stale: float = 3600.0
    cooldown: float = 30.0
    jitter: float = 0.1
    log_interval: float = 60.0
    unknown_kid_budget: int = 1
    unknown_kid_interval: float | None = 1.0
    key_wait: float = 1.0
    max_waiters: int = 256
    timer: Callable[[], float] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in (
            "connect_timeout",
            "read_timeout",
            "total_timeout",
            "min_ttl",
            "max_ttl",
            "default_ttl",
            "max_stale",
            "cooldown",
            "log_interval",
            "unknown_kid_interval",
            "key_wait",
        ):
            value = getattr(self, name)
            if value is None and name == "unknown_kid_interval":
                continue
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value < 0
            ):
                raise ConfigurationError(f"{name} must be a finite number of seconds >= 0")
        for name in ("connect_timeout", "read_timeout", "total_timeout"):
            if getattr(self, name) <= 0:
                raise ConfigurationError(f"{name} must be > 0")
        if self.min_ttl > self.max_ttl:
            raise ConfigurationError("min_ttl must not exceed max_ttl")
        for name, low, high in (
            ("max_response_size", 64, 1 << 26),
            ("max_keys", 1, 10_000),
            ("unknown_kid_budget", 1, 10_000),
            ("max_waiters", 0, 1 << 20),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ConfigurationError(f"{name} must be an integer from {low} to {high}")
        if self.timer is not None and not callable(self.timer):
            raise ConfigurationError("timer must be a callable returning monotonic seconds")
        if isinstance(self.jitter, bool) or not (
            isinstance(self.jitter, (int, float)) and 0 <= self.jitter <= 0.5
        ):
            raise ConfigurationError("jitter must be a number from 0 to 0.5")

    @property
    def unknown_kid_window(self) -> float:
        """Seconds over which ``unknown_kid_budget`` counts (see ``unknown_kid_interval``)."""
        return self.cooldown if self.unknown_kid_interval is None else self.unknown_kid_interval

    def timeout(self) -> httpx.Timeout:
        """The httpx timeout for one request."""
        return httpx.Timeout(
            connect=self.connect_timeout,
            read=self.read_timeout,
            write=self.read_timeout,
            pool=self.connect_timeout,
        )

    def wait_limit(self) -> float:
        """How long a caller waits at most for a fetch run by someone else."""
        # Discovery, then the JWKS: two requests, each bounded.
        return 2 * (self.total_timeout + self.connect_timeout) + 1.0


class Answer(NamedTuple):
    """One answer to a GET: its body and headers; ``not_modified`` for a 304.

    A 304 comes only to a conditional request (``validators`` sent): the
    document held is still the provider's, and its body is empty.
    """

    body: bytes
    headers: httpx.Headers
    not_modified: bool = False


def validators_of(headers: httpx.Headers) -> dict[str, str]:
    """The request headers that make the next GET conditional (``ETag``, ``Last-Modified``)."""
    found: dict[str, str] = {}
    etag = headers.get("etag")
    if etag and len(etag) <= 256:
        found["If-None-Match"] = etag
    modified = headers.get("last-modified")
    if modified and len(modified) <= 64:
        found["If-Modified-Since"] = modified
    return found


class FetchError(Exception):
    """One failed fetch; the message is safe to log (no document content).

    ``retry_after``: seconds the provider asked us to wait (its
    ``Retry-After`` on a 429 or 503), or ``None``.
    """

    def __init__(
        self, message: str, *, retry_after: float | None = None, status: int | None = None
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.status = status


class ConfigFaultError(FetchError):
    """A fetch refused for what the configuration says, not because the provider is down.

    Example: the discovery document names another issuer than the
    configured one. Health and readiness say so; retrying cannot help
    until the configuration (or the provider's) changes.
    """


def _retry_after(value: str | None) -> float | None:
    """A ``Retry-After`` value in seconds (delta-seconds or an HTTP date)."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit() and len(value) <= 10:
        return float(value)
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, OverflowError, IndexError):
        return None


def check_url(url: object, what: str, *, allow_insecure_loopback: bool) -> str:
    """Refuse at build time a URL keys must not come from."""
    if not isinstance(url, str) or not url:
        raise ConfigurationError(f"{what} must be a non-empty string URL")
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, TypeError):
        raise ConfigurationError(f"{what} is not a valid URL") from None
    if not parsed.host:
        raise ConfigurationError(f"{what} has no host")
    if parsed.userinfo:
        raise ConfigurationError(f"{what} must not carry credentials")
    if parsed.fragment:
        raise ConfigurationError(f"{what} must not have a fragment")
    if parsed.scheme == "https":
        return url
    if parsed.scheme == "http":
        if not _is_loopback(parsed.host):
            raise ConfigurationError(
                f"{what} must use https (plain http only on a loopback address, "
                "with allow_insecure_loopback=True)"
            )
        if not allow_insecure_loopback:
            raise ConfigurationError(
                f"{what} uses plain http; on a loopback address pass allow_insecure_loopback=True"
            )
        return url
    raise ConfigurationError(f"{what} must use https")


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def ttl_of(headers: httpx.Headers, options: FetchOptions, now: float) -> float:
    """Seconds the answer may be kept: ``max-age`` (or ``Expires``) within bounds."""
    control = headers.get("cache-control", "")
    ttl: float = options.default_ttl
    if _NO_CACHE.search(control):
        ttl = 0.0
    else:
        found = _MAX_AGE.search(control)
        if found is not None:
            ttl = float(found.group(1))
            age = headers.get("age", "")
            if age.isdigit() and len(age) <= 10:
                ttl = max(0.0, ttl - float(age))
        elif "expires" in headers:
            try:
                when = email.utils.parsedate_to_datetime(headers["expires"]).timestamp()
                ttl = max(0.0, when - now)
            except (TypeError, ValueError, OverflowError, IndexError):
                ttl = options.default_ttl
    return min(max(ttl, options.min_ttl), options.max_ttl)


def _check_response(response: httpx.Response, cap: int, *, conditional: bool) -> bool:
    """Refuse what must not be read; True for a 304 to a conditional request."""
    status = response.status_code
    if status == 304 and conditional:
        return True
    if 300 <= status < 400:
        raise FetchError(f"answered a redirect ({status}); redirects are not followed")
    if status != 200:
        raise FetchError(
            f"answered HTTP {status}",
            retry_after=_retry_after(response.headers.get("retry-after")),
            status=status,
        )
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in {"", "identity"}:
        raise FetchError(f"answered with content-encoding {encoding[:20]!r}; identity was asked")
    length = response.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > cap):
        raise FetchError(f"answer is larger than the limit of {cap} bytes")
    return False


def _already_read(response: httpx.Response, cap: int) -> bytes:
    """The body of an answer whose stream was read before us (an httpx mock transport's).

    Held in memory already, so only the cap is left to check.
    """
    body = response.content
    if len(body) > cap:
        raise FetchError(f"answer is larger than the limit of {cap} bytes")
    return body


def _describe_http_error(exc: Exception) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out ({type(exc).__name__})"
    if isinstance(exc, httpx.ConnectError):
        text = str(exc)
        if "CERTIFICATE" in text.upper() or "SSL" in text.upper():
            return "TLS failure (certificate not trusted or handshake failed)"
        return "could not connect"
    return f"transport error ({type(exc).__name__})"


_HEADERS = {"Accept": "application/json", "Accept-Encoding": "identity"}


class Clients:
    """The httpx clients of a verifier: the user's, or ours (closed by us).

    Ours are opened on first use. A forked child drops them (it must not
    write on its parent's keep-alive connections) and opens its own on its
    first fetch; a client the user gave stays the user's, in both.
    """

    def __init__(self, client: object, options: FetchOptions) -> None:
        if client is not None and not isinstance(client, (httpx.Client, httpx.AsyncClient)):
            raise ConfigurationError("client must be an httpx.Client or httpx.AsyncClient")
        self._user: httpx.Client | httpx.AsyncClient | None = client
        self._timeout = options.timeout()
        self._own_sync: httpx.Client | None = None
        self._own_async: httpx.AsyncClient | None = None
        self._closer: weakref.finalize[Any, Any] | None = None
        self._lock = threading.Lock()
        if client is None:
            _lifecycle.at_fork_child(self.after_fork)  # held weakly

    def can_sync(self) -> bool:
        """Whether :meth:`sync` gives a client (without opening one)."""
        return self._user is None or isinstance(self._user, httpx.Client)

    def sync(self) -> httpx.Client | None:
        """A sync client, or None when the user gave only an async one."""
        if self._user is not None:
            return self._user if isinstance(self._user, httpx.Client) else None
        with self._lock:
            if self._own_sync is None:
                self._own_sync = httpx.Client(timeout=self._timeout, follow_redirects=False)
                # A verifier dropped without close() does not leak its sockets.
                self._closer = weakref.finalize(self, self._own_sync.close)
            return self._own_sync

    def async_(self) -> httpx.AsyncClient | None:
        """An async client, or None when the user gave only a sync one."""
        if self._user is not None:
            return self._user if isinstance(self._user, httpx.AsyncClient) else None
        with self._lock:
            if self._own_async is None:
                self._own_async = httpx.AsyncClient(timeout=self._timeout, follow_redirects=False)
            return self._own_async

    def after_fork(self) -> None:
        """In a forked child: forget our clients, without closing them; the next use opens new ones.

        Closing would end the parent's connections too (they are the
        parent's); the child only lets go of them. A user's client is kept.
        """
        self._lock = threading.Lock()
        if self._closer is not None:
            self._closer.detach()  # the child's exit must not close the parent's client
            self._closer = None
        self._own_sync = None
        self._own_async = None

    def close(self) -> None:
        """Close our sync client (a later fetch opens another)."""
        with self._lock:
            own, self._own_sync = self._own_sync, None
            closer, self._closer = self._closer, None
        if closer is not None:
            closer.detach()
        if own is not None:
            own.close()

    async def aclose(self) -> None:
        """Close both of our clients."""
        self.close()
        with self._lock:
            own, self._own_async = self._own_async, None
        if own is not None:
            await own.aclose()


def get_sync(
    client: httpx.Client,
    url: str,
    options: FetchOptions,
    validators: Mapping[str, str] | None = None,
) -> Answer:
    """One GET under the limits, with a sync client; bounded in total, headers included.

    httpx bounds each read of a sync request, not the whole: a server that
    drips its headers a byte at a time would hold the caller as long as it
    likes. So the request runs on a helper thread (a library thread,
    :mod:`grelmicro.jwt._lifecycle`) and the caller waits at most
    ``total_timeout``; past it, or at interpreter exit, the connection the
    request opened is shut down, which ends the helper's read too.
    ``validators`` make the request conditional (a 304 answers
    ``not_modified``).
    """
    outcome: list[Answer | BaseException] = []
    streams: list[Any] = []
    done = threading.Event()

    def trace(event: str, info: dict[str, Any]) -> None:
        # The connection this request opens (TCP, then TLS over it).
        if event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            streams.append(info.get("return_value"))

    def run() -> None:
        try:
            outcome.append(_get_sync(client, url, options, trace, validators))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            outcome.append(exc)
        finally:
            done.set()

    # The caller's context goes along (a tracing span, say, so the HTTP
    # client's span nests under the fetch that asked for it).
    context = contextvars.copy_context()
    with _lifecycle.track_stream(streams):
        if _lifecycle.spawn(lambda: context.run(run), "grelmicro-jwks-get") is None:
            raise FetchError("the interpreter is exiting")
        if not done.wait(options.total_timeout):
            for stream in streams:
                _lifecycle.shut(stream)
            raise FetchError(f"answer took longer than {options.total_timeout} s")
    result = outcome[0]
    if isinstance(result, BaseException):
        raise result
    return result


def _get_sync(
    client: httpx.Client,
    url: str,
    options: FetchOptions,
    trace: Callable[..., None],
    validators: Mapping[str, str] | None,
) -> Answer:
    cap = options.max_response_size
    deadline = time.monotonic() + options.total_timeout
    headers = _HEADERS if not validators else {**_HEADERS, **validators}
    try:
        with client.stream(
            "GET",
            url,
            headers=headers,
            timeout=options.timeout(),
            follow_redirects=False,
            extensions={"trace": trace},
        ) as response:
            if _check_response(response, cap, conditional=bool(validators)):
                return Answer(b"", response.headers, not_modified=True)
            body = bytearray()
            try:
                for chunk in response.iter_raw():
                    body += chunk
                    if len(body) > cap:
                        raise FetchError(f"answer is larger than the limit of {cap} bytes")
                    if time.monotonic() > deadline:
                        raise FetchError(f"answer took longer than {options.total_timeout} s")
            except httpx.StreamConsumed:
                return Answer(_already_read(response, cap), response.headers)
            return Answer(bytes(body), response.headers)
    except httpx.HTTPError as exc:
        raise FetchError(_describe_http_error(exc)) from None


async def get_async(
    client: httpx.AsyncClient,
    url: str,
    options: FetchOptions,
    validators: Mapping[str, str] | None = None,
) -> Answer:
    """One GET under the limits, with an async client (see :func:`get_sync`)."""
    cap = options.max_response_size
    headers = _HEADERS if not validators else {**_HEADERS, **validators}
    try:
        async with (
            _timeout(options.total_timeout),
            client.stream(
                "GET", url, headers=headers, timeout=options.timeout(), follow_redirects=False
            ) as response,
        ):
            if _check_response(response, cap, conditional=bool(validators)):
                return Answer(b"", response.headers, not_modified=True)
            body = bytearray()
            try:
                async for chunk in response.aiter_raw():
                    body += chunk
                    if len(body) > cap:
                        raise FetchError(f"answer is larger than the limit of {cap} bytes")
            except httpx.StreamConsumed:
                return Answer(_already_read(response, cap), response.headers)
            return Answer(bytes(body), response.headers)
    except TimeoutError:
        raise FetchError(f"answer took longer than {options.total_timeout} s") from None
    except httpx.HTTPError as exc:
        raise FetchError(_describe_http_error(exc)) from None


def _timeout(delay: float) -> Any:
    """``asyncio.timeout(delay)``, or its stand-in on Python 3.10."""
    timeout = getattr(asyncio, "timeout", None)
    return _Deadline(delay) if timeout is None else timeout(delay)


class _Deadline:
    """``asyncio.timeout`` for Python 3.10: cancels the task past ``delay``."""

    def __init__(self, delay: float) -> None:
        self._delay = delay
        self._handle: asyncio.TimerHandle | None = None
        self._fired = False

    async def __aenter__(self) -> None:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()

        def fire() -> None:
            self._fired = True
            if task is not None:
                task.cancel()

        self._handle = loop.call_later(self._delay, fire)

    async def __aexit__(self, kind: object, value: object, trace: object) -> bool:
        if self._handle is not None:
            self._handle.cancel()
        if self._fired and kind is asyncio.CancelledError:
            raise TimeoutError
        return False
