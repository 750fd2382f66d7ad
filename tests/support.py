"""Helpers shared by the tests, one per concern and layer: build a verifier, read an outcome."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from forge import NOW, Signer, signer, spki_pem
from grelmicro_core import CoreError, Key, KeySet, Policy, Verifier

from grelmicro.jwt import (
    Claims,
    DPoPReplayError,
    DPoPVerifier,
    FetchOptions,
    JWTVerifier,
    TokenRejectedError,
)

# --- the core layer (grelmicro_core): an outcome is "ok" or the error kind ---

#: A payload that passes the default policy at ``NOW``.
FRESH = {"sub": "user-1", "exp": NOW + 600}


def key_for(sig: Signer, kid: str | None = None) -> Key:
    """The core key matching a signer, built from its natural form."""
    if sig.alg.startswith("HS"):
        return Key.secret(sig.private, sig.alg, kid)
    return Key.pem(spki_pem(sig.private), sig.alg, kid)


def verifier(keys: Key | Sequence[Key], **policy: Any) -> Verifier:
    """A verifier over ``keys`` with ``Policy(**policy)``."""
    keys = [keys] if isinstance(keys, Key) else list(keys)
    return Verifier(KeySet(keys), Policy(**policy))


def hs256(kid: str | None = None, **policy: Any) -> tuple[Signer, Verifier]:
    """The HS256 signer and a verifier for it: the cheap default for claim tests."""
    sig = signer("HS256")
    return sig, verifier(key_for(sig, kid), **policy)


def kind_of(call: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
    """``"ok"`` when the call succeeds, else the core error kind."""
    try:
        call(*args, **kwargs)
    except CoreError as exc:
        kind, message = exc.args
        assert isinstance(message, str)
        assert message
        return str(kind)
    return "ok"


def rejection(check: Verifier, token: str | bytes, now: float = NOW) -> str:
    """``"ok"`` or the error kind of ``check.verify(token, now)``."""
    return kind_of(check.verify, token, now)


def error_of(call: Callable[..., Any], *args: Any, **kwargs: Any) -> CoreError:
    """The ``CoreError`` a call raises (fails the test if it raises none)."""
    try:
        call(*args, **kwargs)
    except CoreError as exc:
        return exc
    raise AssertionError(f"{call!r} raised nothing")


# --- the product layer (grelmicro.jwt): claims, or (class name, reason) -----

#: The expected outcome "accepted" in tables of :func:`outcome` results.
OK = None


def outcome(verifier: JWTVerifier, token: object, now: float = NOW) -> tuple[str, str] | Claims:
    """The claims, or ``(class name, reason)`` of the rejection."""
    try:
        return verifier.verify(token, now=now)  # type: ignore[arg-type]
    except TokenRejectedError as exc:
        return (type(exc).__name__, exc.reason)


def rejected(error: type[TokenRejectedError], reason: str) -> tuple[str, str]:
    """The :func:`outcome` of a refusal by ``error`` with ``reason``."""
    return (error.__name__, reason)


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def in_thread(work: Callable[[], Any]) -> Any:
    """``work()`` run in a new thread (started after the verifier was built)."""
    out: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            out.append(work())
        except BaseException as exc:  # re-raised in the caller
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    if errors:
        raise errors[0]
    return out[0]


def together(count: int, work: Callable[[int], None], timeout: float = 120) -> list[BaseException]:
    """Run ``work(index)`` in ``count`` threads started together; what they raised."""
    barrier = threading.Barrier(count)
    unexpected: list[BaseException] = []

    def run(index: int) -> None:
        barrier.wait()
        try:
            work(index)
        except BaseException as exc:
            unexpected.append(exc)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    assert not any(thread.is_alive() for thread in threads)
    return unexpected


#: How long a test waits for something that must come: only a true hang runs
#: it out, never a slow machine (tests assert no speed, see eventually()).
HANG_GUARD = 60.0


def eventually(condition: Callable[[], object], what: str) -> None:
    """Wait until ``condition()`` holds; fail only past :data:`HANG_GUARD`.

    For what another thread or a real clock brings about: the test asserts
    that it happens, never how soon.
    """
    guard = time.monotonic() + HANG_GUARD
    while not condition():
        if time.monotonic() > guard:
            raise AssertionError(f"{what}: not after {HANG_GUARD} s (a hang)")
        time.sleep(0.01)


async def eventually_async(condition: Callable[[], object], what: str) -> None:
    """:func:`eventually` on an event loop: the loop keeps running meanwhile."""
    guard = time.monotonic() + HANG_GUARD
    while not condition():
        if time.monotonic() > guard:
            raise AssertionError(f"{what}: not after {HANG_GUARD} s (a hang)")
        await asyncio.sleep(0.01)


def accepted_proofs(
    dpop: DPoPVerifier,
    token: str,
    claims: Claims,
    proofs: Sequence[str],
    order: Iterable[int],
    *,
    uri: str,
    now: float | None = None,
) -> list[int]:
    """Present ``proofs[index]`` for each index of ``order`` (GET ``uri``, DPoP scheme).

    Returns the indexes accepted, in order; every other one was refused as a
    replay (any other error is raised).
    """
    accepted = []
    for index in order:
        try:
            dpop.check(
                scheme="DPoP",
                access_token=token,
                claims=claims,
                proof=proofs[index],
                method="GET",
                uri=uri,
                now=now,
            )
            accepted.append(index)
        except DPoPReplayError:
            pass
    return accepted


@contextmanager
def documents(
    pages: dict[str, Any], headers: dict[str, str] | None = None
) -> Iterator[tuple[str, list[str]]]:
    """Serve JSON ``pages`` on 127.0.0.1 from a thread; yields the base URL and a request log.

    Every answer carries ``headers`` too. HTTP/1.0, one connection per request:
    the FastAPI lifespan test checks that shutdown ends the refresh task, which
    it does not do within the test's wait against
    ``tests/jwt/servers.DocumentServer``'s keep-alive connections. The JWKS
    benchmark serves its key sets with this too.
    """
    log: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            log.append(self.path)
            page = pages.get(self.path)
            body = b"" if page is None else json.dumps(page).encode()
            self.send_response(404 if page is None else 200)
            self.send_header("Content-Type", "application/json")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", log
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def timed(options: FetchOptions | None, clock: Callable[[], float]) -> FetchOptions:
    """``options`` (default ones when None) whose key timing runs on ``clock``.

    Key fetching runs on a monotonic clock of its own, never on the
    verifier's ``clock=``; a test that moves time for both passes its fake
    clock to each.
    """
    return dataclasses.replace(options or FetchOptions(), timer=clock)
