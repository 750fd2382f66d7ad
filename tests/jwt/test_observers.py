"""Observers hear key events; whatever they do, keys install and the event loop runs.

A logging filter that raises, an observer that raises, an observer that
blocks: none of them stops a fetch, an install, a verification or the loop.
Real JWKS servers on 127.0.0.1; ordering is forced with events, never with
sleeps; the note interval runs on a clock the test moves.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator

import pytest
from forge import NOW, Signer, private_key
from servers import FAST, DocumentServer, jwks_of
from support import FakeClock

from grelmicro.jwt import JWTVerifier, _events, _lifecycle
from grelmicro.jwt._events import Dispatcher, Event, Observers

JWKS = "/jwks.json"
AUD = "https://api.example.com"
ISS = "https://idp.example.com/"
#: What a test waits for at most (a hang guard, never a speed assertion).
GUARD = 10.0


@pytest.fixture
def k1() -> Signer:
    return private_key("ES256", kid="k1", seed=81)


class Stderr:
    """What the library writes to ``sys.stderr``."""

    def __init__(self, capture: pytest.CaptureFixture[str]) -> None:
        self.capture = capture

    def getvalue(self) -> str:
        return self.capture.readouterr().err


@pytest.fixture
def stderr(capsys: pytest.CaptureFixture[str]) -> Stderr:
    return Stderr(capsys)


@pytest.fixture
def notes_afresh(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """An empty note memory and the clock of its interval."""
    clock = FakeClock(1000.0)
    monkeypatch.setattr(_events, "_NOTES", {})
    monkeypatch.setattr(_events, "_clock", clock)
    return clock


@pytest.fixture
def raising_filter() -> Iterator[None]:
    """A filter on the library's logger that raises on every record (DEBUG and up)."""

    def refuse(record: logging.LogRecord) -> bool:
        raise RuntimeError("a broken filter")

    log = logging.getLogger("grelmicro.jwt")
    level = log.level
    log.setLevel(logging.DEBUG)
    log.addFilter(refuse)
    try:
        yield
    finally:
        log.removeFilter(refuse)
        log.setLevel(level)


def mint(key: Signer) -> str:
    return key.mint({"aud": AUD, "iss": ISS, "sub": "user-1", "exp": NOW + 3600})


def network_verifier(server: DocumentServer) -> JWTVerifier:
    return JWTVerifier(
        jwks_url=server.url(JWKS),
        allow_insecure_loopback=True,
        fetch=dataclasses.replace(FAST),
        clock=FakeClock(),
        audience=AUD,
        issuer=ISS,
    )


def event(name: str = "keys.fetch") -> Event:
    return Event(name, "https://idp.example.com/", logging.DEBUG, "%s", ("x",))


# -- an observer that raises -------------------------------------------------------------


@pytest.mark.usefixtures("raising_filter", "notes_afresh")
def test_a_logging_filter_that_raises_never_stops_keys_being_installed(
    server: DocumentServer, k1: Signer, stderr: Stderr
) -> None:
    """The containment logged through the logger that had just failed: the fetch died.

    Its exception left the observer loop, so the keys were never installed
    and every token was answered 503.
    """
    server.set(JWKS, jwks_of(k1))
    token = mint(k1)
    verifier = network_verifier(server)

    assert verifier.verify(token)["sub"] == "user-1"
    assert verifier.health().ready

    notes = stderr.getvalue()
    assert "grelmicro.jwt: logging keys." in notes
    assert "RuntimeError" in notes
    assert token not in notes
    assert token.split(".")[2] not in notes


@pytest.mark.usefixtures("raising_filter", "notes_afresh")
def test_a_logging_filter_that_raises_never_stops_an_async_load(
    server: DocumentServer, k1: Signer, stderr: Stderr
) -> None:
    server.set(JWKS, jwks_of(k1))
    verifier = network_verifier(server)

    async def main() -> str:
        async with verifier:
            claims = await verifier.verify_async(mint(k1))
            return str(claims["sub"])

    assert asyncio.run(main()) == "user-1"
    assert _events.flush(GUARD)
    assert "RuntimeError" in stderr.getvalue()


def test_an_observer_that_raises_is_noted_once_per_interval_and_skipped(
    notes_afresh: FakeClock, stderr: Stderr
) -> None:
    heard: list[str] = []
    observers = Observers()

    def broken(event: Event) -> None:
        raise ValueError("observer bug holding a secret: s3cr3t")

    observers.add(broken)
    observers.add(lambda event: heard.append(event.name))

    observers.emit(event("keys.loaded"))
    observers.emit(event("keys.refreshed"))
    notes_afresh.now += _events.NOTE_INTERVAL
    observers.emit(event("keys.withdrawn"))

    assert heard == ["keys.loaded", "keys.refreshed", "keys.withdrawn"]
    written = stderr.getvalue()
    notes = written.splitlines()
    assert len(notes) == 2
    assert "broken failed on event keys.loaded (ValueError)" in notes[0]
    assert "keys.withdrawn" in notes[1]
    assert "[1 more since the last note]" in notes[1]
    assert "s3cr3t" not in written  # the class of the exception only


def test_a_note_never_raises_without_a_stderr(
    notes_afresh: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stderr", None)
    observers = Observers()
    observers.add(lambda event: 1 / 0)  # type: ignore[func-returns-value]
    observers.emit(event())


# -- an observer that blocks ----------------------------------------------------------------


def test_a_blocked_observer_never_holds_the_event_loop() -> None:
    """Observers ran on the loop thread: one that waited held every task of the app."""
    released: list[bool] = []
    release = threading.Event()
    observers = Observers()
    observers.add(lambda event: released.append(release.wait(GUARD)))

    async def main() -> None:
        observers.emit(event())

        async def other_task() -> None:
            release.set()  # runs only while the loop is free

        await asyncio.wait_for(other_task(), GUARD)

    asyncio.run(main())
    assert _events.flush(GUARD)
    assert released == [True]  # released by the task, not by the guard


def test_keys_install_and_verify_while_an_observer_is_blocked(
    server: DocumentServer, k1: Signer
) -> None:
    server.set(JWKS, jwks_of(k1))
    verifier = network_verifier(server)
    (source,) = verifier._key_sources()
    entered, release = threading.Event(), threading.Event()
    returned: list[str] = []

    def slow(event: Event) -> None:
        entered.set()
        release.wait(GUARD)
        returned.append(event.name)

    source.observers.add(slow)

    async def main() -> str:
        try:
            await verifier.start()
            claims = await verifier.verify_async(mint(k1))
            assert await asyncio.to_thread(entered.wait, GUARD)
            assert returned == []  # loaded and verified while the observer was blocked
            return str(claims["sub"])
        finally:
            release.set()
            await verifier.aclose()

    assert asyncio.run(main()) == "user-1"
    assert _events.flush(GUARD)


def test_an_emitters_events_keep_their_order_across_threads() -> None:
    """An event from the loop queued, the next one from a thread: heard in that order."""
    heard: list[str] = []
    release = threading.Event()
    observers = Observers()

    def hear(event: Event) -> None:
        if event.name == "first":
            release.wait(GUARD)
        heard.append(event.name)

    observers.add(hear)

    async def main() -> None:
        observers.emit(event("first"))  # queued: the loop never runs observers

    asyncio.run(main())
    emitting = threading.Thread(target=lambda: observers.emit(event("second")))
    emitting.start()
    emitting.join(GUARD)  # it queued behind "first": it did not wait for it
    assert not emitting.is_alive()
    release.set()
    assert _events.flush(GUARD)
    assert heard == ["first", "second"]


def test_a_full_queue_drops_and_counts(
    monkeypatch: pytest.MonkeyPatch, notes_afresh: FakeClock, stderr: Stderr
) -> None:
    dispatcher = Dispatcher(size=2)
    monkeypatch.setattr(_events, "DISPATCHER", dispatcher)
    entered, release = threading.Event(), threading.Event()
    heard: list[str] = []
    observers = Observers()

    def hear(event: Event) -> None:
        entered.set()
        release.wait(GUARD)
        heard.append(event.name)

    observers.add(hear)

    async def main() -> None:
        observers.emit(event("0"))
        assert await asyncio.to_thread(entered.wait, GUARD)  # "0" is being heard
        for name in "1234":
            observers.emit(event(name))

    try:
        asyncio.run(main())
        assert dispatcher.dropped == 2
        release.set()
        assert dispatcher.flush(GUARD)
        assert heard == ["0", "1", "2"]
        assert "1 events dropped in all" in stderr.getvalue()  # the next: with the next note
    finally:
        release.set()
        dispatcher.stop()
        assert dispatcher._thread is not None
        dispatcher._thread.join(GUARD)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_gets_a_dispatcher_of_its_own() -> None:
    """The child inherited the parent's dispatcher thread, dead there: events queued forever."""
    observers = Observers()
    heard = threading.Event()
    observers.add(lambda event: heard.set())

    async def emit() -> None:
        observers.emit(event())

    asyncio.run(emit())  # the parent's dispatcher runs
    assert _events.flush(GUARD)
    heard.clear()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            asyncio.run(emit())
            ok = _events.flush(GUARD) and heard.is_set()
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        answer = pipe.read()
    os.waitpid(pid, 0)
    assert answer == b"1"


EXITING = textwrap.dedent(
    """
    import asyncio, logging, os
    from grelmicro.jwt._events import Event, Observers

    observers = Observers()
    # One write each (the dispatcher and the main thread both print): no interleaving.
    observers.add(lambda event: os.write(1, f"heard {event.name}\\n".encode()))

    async def main():
        observers.emit(Event("keys.loaded", "s", logging.DEBUG, "m"))

    asyncio.run(main())
    os.write(1, b"exiting\\n")
    """
)


def test_events_queued_at_exit_are_heard_and_the_dispatcher_joined() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", EXITING],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    # Two threads write, a line each in one write: none goes missing.
    assert done.stdout.count("heard keys.loaded") == 1
    assert "exiting" in done.stdout


def test_the_dispatcher_is_a_library_thread() -> None:
    async def emit() -> None:
        Observers().emit(event())

    asyncio.run(emit())
    assert _events.flush(GUARD)
    names = [thread.name for thread in _lifecycle._STATE.threads]
    assert "grelmicro-jwt-events" in names
