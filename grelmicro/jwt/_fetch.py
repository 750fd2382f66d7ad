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
from collections.abc import Generator

import httpx

from grelmicro.jwt import _core
from grelmicro.jwt._discovery import discovery_urls, jwks_uri_of
from grelmicro.jwt._http import Clients, FetchError, FetchOptions, get_async, get_sync
from grelmicro.jwt._keys import note_padded

__all__ = ["Fetched", "Fetcher", "log_event"]

logger = logging.getLogger("grelmicro.jwt")


def log_event(
    level: int,
    event: str,
    source: str,
    message: str,
    *args: object,
    exc_info: BaseException | None = None,
    stacklevel: int = 2,
    **fields: object,
) -> None:
    """One key-source event: a message for people, stable ``extra`` fields for machines.

    The record carries ``jwt_event`` (``keys.refreshed``...), ``jwt_source``
    (the configured JWKS URL, or the issuer given to ``discover=``) and each
    of ``fields`` prefixed with ``jwt_``. The events and their fields are
    listed in ``docs/observability.md``; none carries token or key material.
    """
    if logger.isEnabledFor(level):
        extra: dict[str, object] = {"jwt_event": event, "jwt_source": source}
        extra.update({f"jwt_{name}": value for name, value in fields.items()})
        logger.log(level, message, *args, exc_info=exc_info, extra=extra, stacklevel=stacklevel)


Answer = tuple[bytes, httpx.Headers]
#: The key set of a document (None: a well-formed empty key list) and the
#: headers of its answer.
Fetched = tuple["_core.KeySet | None", httpx.Headers]
#: Yield a URL to GET, get its answer back; return what was fetched.
Steps = Generator[str, Answer, Fetched]


def _is_empty_jwks(body: bytes) -> bool:
    """A well-formed JWKS whose key list is empty (``{"keys": []}``)."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False
    return isinstance(document, dict) and document.get("keys") == []


class Fetcher:
    """Fetches one source's keys: where they are, how to ask, what came back.

    ``url`` is the JWKS URL (given, or found by discovery and updated when
    the discovery document moves it); ``count`` counts HTTP requests,
    discovery included.
    """

    def __init__(
        self,
        *,
        jwks_url: str | None,
        discover: str | None,
        options: FetchOptions,
        clients: Clients,
        allow_insecure_loopback: bool,
    ) -> None:
        self.url = jwks_url
        self.discover = discover
        self.options = options
        self._clients = clients
        self._insecure_ok = allow_insecure_loopback
        self.count = 0

    @property
    def name(self) -> str:
        """The URL for messages: the JWKS URL, or the issuer being discovered."""
        return self.url or f"discovery of {self.discover}"

    @property
    def source(self) -> str:
        """The stable name of this source: the issuer given to ``discover=``, else the JWKS URL."""
        return self.discover or self.url or "unnamed"

    # -- the steps ---------------------------------------------------------------

    def _steps(self, *, rediscover: bool) -> Steps:
        """Discovery (when configured, and ``rediscover`` or not done yet), then the JWKS.

        Discovery is read again on the refresh schedule, with the issuer
        check each time, so a ``jwks_uri`` that moves is followed.
        """
        url = self.url
        if self.discover is not None and (url is None or rediscover):
            url = yield from self._discovery(self.discover)
        assert url is not None  # noqa: S101 - a JWKS URL, given or discovered
        body, headers = yield url
        return self._parse(body), headers

    def _discovery(self, issuer: str) -> Generator[str, Answer, str]:
        last: FetchError | None = None
        for candidate in discovery_urls(issuer):
            try:
                body, _ = yield candidate
            except FetchError as exc:
                last = exc
                continue
            found = jwks_uri_of(body, issuer, self._insecure_ok)
            if self.url is not None and found != self.url:
                log_event(
                    logging.WARNING,
                    "discovery.moved",
                    self.source,
                    "discovery of %s: jwks_uri moved to %s",
                    issuer,
                    found,
                    jwks_uri=found,
                    jwks_uri_before=self.url,
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
        for kid, reason in key_set.skipped:
            log_event(
                logging.WARNING if "private key" in reason else logging.INFO,
                "keys.key_skipped",
                self.source,
                "JWKS %s: key %r skipped: %s",
                self.name,
                kid,
                reason,
                kid=kid,
                reason=reason,
            )
        note_padded(key_set.keys, f"JWKS {self.name}")
        return key_set

    # -- the drivers ---------------------------------------------------------------

    def fetch_sync(self, *, rediscover: bool = True) -> Fetched:
        """Run the steps in this thread; raises :class:`FetchError`."""
        client = self._clients.sync()
        if client is None:
            raise FetchError("only an async client was given: await verifier.start() first")
        steps = self._steps(rediscover=rediscover)
        try:
            url = next(steps)
            while True:
                self.count += 1
                try:
                    answer = get_sync(client, url, self.options)
                except FetchError as exc:
                    url = steps.throw(exc)
                else:
                    url = steps.send(answer)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def fetch_async(self, *, rediscover: bool = True) -> Fetched:
        """Run the steps on this event loop; raises :class:`FetchError`."""
        client = self._clients.async_()
        if client is None:  # the user gave a sync client only
            return await asyncio.to_thread(self.fetch_sync, rediscover=rediscover)
        steps = self._steps(rediscover=rediscover)
        try:
            url = next(steps)
            while True:
                self.count += 1
                try:
                    answer = await get_async(client, url, self.options)
                except FetchError as exc:
                    url = steps.throw(exc)
                else:
                    url = steps.send(answer)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
