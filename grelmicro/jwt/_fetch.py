"""One fetch of a key source: the discovery document when there is one, then the JWKS.

The fetch is written once, as steps (:meth:`Fetcher._steps`): a generator
that yields each URL to GET and gets its answer back (or the
:class:`~grelmicro.jwt._http.FetchError` of that request thrown in). A sync
and an async driver run the same steps; only the transport call differs
(:func:`~grelmicro.jwt._http.get_sync` or
:func:`~grelmicro.jwt._http.get_async`). When to fetch is the schedule's
business (:mod:`grelmicro.jwt._schedule`), and single flight the key
source's (:mod:`grelmicro.jwt._jwks`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass

import httpx

from grelmicro.jwt import _core
from grelmicro.jwt._calls import run_async, run_sync
from grelmicro.jwt._discovery import discovery_urls, jwks_uri_of
from grelmicro.jwt._events import Event
from grelmicro.jwt._http import (
    Answer,
    Clients,
    ConfigFaultError,
    FetchError,
    FetchOptions,
    get_async,
    get_sync,
    validators_of,
)

__all__ = ["Fetched", "Fetcher", "NoClientError", "Request"]


#: Yield a GET (URL and validators), get its answer back; return what was fetched.
Steps = Generator["Request", Answer, "Fetched"]


@dataclass(frozen=True)
class Request:
    """One GET a fetch needs: the URL, and the validators that make it conditional."""

    url: str
    validators: Mapping[str, str] | None = None


@dataclass(frozen=True)
class Fetched:
    """What one fetch brought.

    Attributes:
        key_set: the usable keys (None: a well-formed empty key list).
        headers: the headers of the JWKS answer (its freshness).
        not_modified: the provider answered 304: the document held is current.
    """

    key_set: _core.KeySet | None
    headers: httpx.Headers
    not_modified: bool = False


def _is_empty_jwks(body: bytes) -> bool:
    """A well-formed JWKS whose key list is empty (``{"keys": []}``)."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False
    return isinstance(document, dict) and document.get("keys") == []


#: HTTP answers of a JWKS URL that say it moved: discovery is read again at once.
MOVED = frozenset({404, 410})


class Fetcher:
    """Fetches one source's keys: where they are, how to ask, what came back.

    ``url`` is the JWKS URL (given, or found by discovery and updated when
    the discovery document moves it); ``count`` counts HTTP requests,
    discovery included. The validators and keys of the last document are
    kept so the next request is conditional (a 304 costs no parse).
    """

    def __init__(
        self,
        *,
        jwks_url: str | None,
        discover: str | None,
        options: FetchOptions,
        clients: Clients,
        allow_insecure_loopback: bool,
        emit: Callable[[Event], None],
        issuer: str | None = None,
    ) -> None:
        self.url = jwks_url
        self.discover = discover
        #: The ``issuer`` the metadata must name: the discovered URL, or an
        #: issuer template whose metadata lives elsewhere (Entra's ``common``).
        self.issuer = issuer or discover
        self.options = options
        self._clients = clients
        self._insecure_ok = allow_insecure_loopback
        self._emit = emit
        self.count = 0
        # The last good JWKS answer: its URL, validators and keys.
        self._held: tuple[str, Mapping[str, str], _core.KeySet | None] | None = None
        self._skipped: frozenset[tuple[str | None, str, str]] = frozenset()
        self._padded: frozenset[str] = frozenset()

    @property
    def name(self) -> str:
        """The URL for messages: the JWKS URL, or the issuer being discovered."""
        return self.url or f"discovery of {self.discover}"

    @property
    def source(self) -> str:
        """The stable name of this source: the issuer given to ``discover=``, else the JWKS URL."""
        return self.discover or self.url or "unnamed"

    def forget(self) -> None:
        """Ask unconditionally next time (the keys held were withdrawn)."""
        self._held = None

    # -- the steps ---------------------------------------------------------------

    def _steps(self, *, rediscover: bool) -> Steps:
        """Discovery (when configured, and ``rediscover`` or not done yet), then the JWKS.

        Discovery is read again on the refresh schedule, with the issuer
        check each time, so a ``jwks_uri`` that moves is followed; and at
        once when the JWKS URL answers 404 or 410 (it moved).
        """
        url = self.url
        discovered = False
        if self.discover is not None and (url is None or rediscover):
            url = yield from self._discovery(self.discover)
            discovered = True
        assert url is not None  # noqa: S101 - a JWKS URL, given or discovered
        try:
            answer = yield self._request(url)
        except FetchError as exc:
            if self.discover is None or discovered or exc.status not in MOVED:
                raise
            url = yield from self._discovery(self.discover)
            answer = yield self._request(url)
        return self._fetched(url, answer)

    def _request(self, url: str) -> Request:
        held = self._held
        return Request(url, held[1] if held is not None and held[0] == url else None)

    def _fetched(self, url: str, answer: Answer) -> Fetched:
        held = self._held
        if answer.not_modified and held is not None and held[0] == url:
            return Fetched(held[2], answer.headers, not_modified=True)
        key_set = self._parse(answer.body)
        self._held = (url, validators_of(answer.headers), key_set)
        return Fetched(key_set, answer.headers)

    def _discovery(self, issuer: str) -> Generator[Request, Answer, str]:
        last: FetchError | None = None
        for candidate in discovery_urls(issuer):
            try:
                answer = yield Request(candidate)
            except ConfigFaultError:
                raise
            except FetchError as exc:
                last = exc
                continue
            found = jwks_uri_of(answer.body, self.issuer or issuer, self._insecure_ok)
            if self.url is not None and found != self.url:
                self._emit(
                    Event(
                        "discovery.moved",
                        self.source,
                        logging.WARNING,
                        "discovery of %s: jwks_uri moved to %s",
                        (issuer, found),
                        {"jwks_uri": found, "jwks_uri_before": self.url},
                    )
                )
            self.url = found
            return found
        raise FetchError(f"discovery failed: {last}")

    def _parse(self, body: bytes) -> _core.KeySet | None:
        """The usable keys of a document; None for a well-formed empty key list."""
        try:
            key_set = _core.KeySet.from_jwks(
                body, allow_symmetric=False, max_keys=self.options.max_keys
            )
        except _core.CoreError as exc:
            if _is_empty_jwks(body):
                return None
            raise FetchError(f"not a usable JWKS: {exc.args[1]}") from None
        self._note(key_set)
        return key_set

    def _note(self, key_set: _core.KeySet) -> None:
        """Skipped and padded keys, said when they change (not on every fetch)."""
        skipped = frozenset(key_set.skipped)
        for kid, code, reason in sorted(
            skipped - self._skipped, key=lambda s: (s[0] or "", *s[1:])
        ):
            self._emit(
                Event(
                    "keys.key_skipped",
                    self.source,
                    logging.WARNING if code == "private-key" else logging.INFO,
                    "JWKS %s: key %r skipped: %s",
                    (self.name, kid, reason),
                    {"kid": kid, "code": code, "reason": reason},
                )
            )
        self._skipped = skipped
        padded = frozenset(key.fingerprint for key in key_set.keys if key.padded)
        for key in key_set.keys:
            if key.padded and key.fingerprint not in self._padded:
                self._emit(
                    Event(
                        "keys.key_padded",
                        self.source,
                        logging.INFO,
                        "JWKS %s: key %r has EC coordinates shorter than its curve size; "
                        "left-padded with zeros (the same key)",
                        (self.name, key.kid),
                        {"kid": key.kid},
                    )
                )
        self._padded = padded

    # -- the drivers ---------------------------------------------------------------

    def can_fetch_sync(self) -> bool:
        """Whether :meth:`fetch_sync` has a client (a user's ``AsyncClient`` alone: no)."""
        return self._clients.can_sync()

    def fetch_sync(self, *, rediscover: bool = True) -> Fetched:
        """Run the steps in this thread; raises :class:`FetchError` (:class:`NoClientError`)."""
        client = self._clients.sync()
        if client is None:
            raise NoClientError(
                "only an async client was given: fetch with verify_async or start()"
            )

        def get(request: Request) -> Answer:
            self.count += 1
            return get_sync(client, request.url, self.options, request.validators)

        return run_sync(self._steps(rediscover=rediscover), get, errors=FetchError)

    async def fetch_async(self, *, rediscover: bool = True) -> Fetched:
        """Run the steps on this event loop; raises :class:`FetchError`."""
        client = self._clients.async_()
        if client is None:  # the user gave a sync client only
            return await asyncio.to_thread(self.fetch_sync, rediscover=rediscover)

        async def get(request: Request) -> Answer:
            self.count += 1
            return await get_async(client, request.url, self.options, request.validators)

        return await run_async(self._steps(rediscover=rediscover), get, errors=FetchError)


class NoClientError(FetchError):
    """No HTTP client for this mode (a sync caller, only an ``AsyncClient`` given).

    Not a provider failure: no backoff, no ``keys.fetch_failed``.
    """
