"""Library threads: started and joined as one registry sees them, at exit and after fork.

Each test runs on a registry of its own (``_lifecycle._STATE``) and a bound
watcher of its own, so stopping "everything" stops only what the test made.
Ordering is forced with events and a lock that says when it is contended,
never with sleeps.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from forge import private_key
from servers import FAST, jwks_of
from support import HANG_GUARD, eventually

from grelmicro.jwt import JWTVerifier, _lifecycle
from grelmicro.jwt._http import Clients, get_sync

#: What a test waits for at most (a hang guard, never a speed assertion).
GUARD = 10.0


class ContendedLock:
    """A lock that says when a caller had to wait for it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.contended = threading.Event()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._lock.acquire(blocking=False):
            return True
        self.contended.set()
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A registry and a bound watcher of the test's own."""
    state = _lifecycle._Registry()
    monkeypatch.setattr(_lifecycle, "_STATE", state)
    monkeypatch.setattr(_lifecycle, "BOUNDS", _lifecycle.BoundWatch())
    return state


def catching(call: Callable[[], object], errors: list[BaseException]) -> Callable[[], None]:
    def run() -> None:
        try:
            call()
        except BaseException as exc:  # the test reads it
            errors.append(exc)

    return run


def test_stop_all_never_meets_a_registered_thread_not_yet_started(
    registry: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """spawn() registered, then started outside the lock: stop_all() joined it too early.

    The exit hook raised RuntimeError ("cannot join thread before it is
    started"; 4 of 60 runs) and joined none of the threads after it. Here
    the exit hook runs exactly while spawn() is about to start its thread:
    either it waits for the registry (registration and start are one step),
    or it runs and must not fail.
    """
    registry.lock = ContendedLock()
    plain = threading.Thread
    stopper_done = threading.Event()
    errors: list[BaseException] = []

    class Probe(plain):  # type: ignore[misc,valid-type]
        def start(self) -> None:
            if self.name == "grelmicro-probe":

                def stop() -> None:
                    try:
                        _lifecycle.stop_all(GUARD)
                    finally:
                        stopper_done.set()

                plain(target=catching(stop, errors)).start()
                # Either the exit hook waits for the registry, or it has run.
                while not (registry.lock.contended.wait(0.01) or stopper_done.is_set()):
                    pass
            super().start()

    monkeypatch.setattr(threading, "Thread", Probe)
    thread = _lifecycle.spawn(lambda: None, "grelmicro-probe")
    monkeypatch.setattr(threading, "Thread", plain)
    assert stopper_done.wait(GUARD)
    assert errors == []
    assert thread is not None
    assert not thread.is_alive()
    assert _lifecycle.spawn(lambda: None, "late") is None  # closing: nothing new starts


def test_stop_all_joins_every_thread_whatever_one_of_them_does(registry: Any) -> None:
    """One thread that cannot be joined (never started) kept the rest from being joined."""
    release = threading.Event()
    stopped: list[str] = []

    class Source:
        def stop(self) -> None:
            stopped.append("source")
            release.set()  # what tells its threads to end
            raise RuntimeError("a source's bug")

        def after_fork(self) -> None:
            pass

        def check_bound(self) -> None:
            pass

    source = Source()
    _lifecycle.register(source)
    never_started = threading.Thread(target=lambda: None)
    registry.threads.add(never_started)
    workers = [_lifecycle.spawn(lambda: release.wait(GUARD), f"w{i}") for i in range(3)]

    _lifecycle.stop_all(GUARD)

    assert stopped == ["source"]
    for worker in workers:
        assert worker is not None
        assert not worker.is_alive()


def test_stop_hooks_run_before_the_threads_are_joined(registry: Any) -> None:
    """A library thread of another module (the event dispatcher) is told to end, then joined."""
    release = threading.Event()
    worker = _lifecycle.spawn(lambda: release.wait(GUARD), "grelmicro-jwt-events")
    _lifecycle.at_stop(lambda: (_ for _ in ()).throw(RuntimeError("a hook's bug")))
    _lifecycle.at_stop(release.set)
    _lifecycle.stop_all(GUARD)
    assert worker is not None
    assert not worker.is_alive()


def test_join_all_tolerates_the_current_thread_and_a_thread_never_started() -> None:
    ends = threading.Event()
    worker = threading.Thread(target=lambda: ends.wait(GUARD))
    worker.start()
    ends.set()
    joined = _lifecycle.join_all([threading.current_thread(), threading.Thread(), worker], GUARD)
    assert not joined  # the one never started did not end
    assert not worker.is_alive()


def test_join_off_loop_keeps_the_event_loop_running(registry: Any) -> None:
    """aclose() joined fetch threads on the loop: every task stood still meanwhile."""
    release = threading.Event()
    worker = _lifecycle.spawn(lambda: release.wait(GUARD), "grelmicro-jwks")
    assert worker is not None

    async def main() -> bool:
        joining = asyncio.ensure_future(_lifecycle.join_off_loop([worker], GUARD))

        async def other_task() -> None:
            release.set()  # runs only if the loop is free while the join waits

        await asyncio.wait_for(other_task(), GUARD)
        return await joining

    assert asyncio.run(main())
    assert not worker.is_alive()


def test_join_off_loop_with_nothing_alive_answers_at_once(registry: Any) -> None:
    assert asyncio.run(_lifecycle.join_off_loop([threading.Thread()], GUARD))


# -- after fork -------------------------------------------------------------------------


class PeerServer:
    """An HTTP server on 127.0.0.1 that records the client address of every request."""

    def __init__(self) -> None:
        self.peers: list[tuple[str, int]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: a client may reuse its connection

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                outer.peers.append(self.client_address)
                body = json.dumps({"keys": []}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/jwks.json"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(GUARD)


@pytest.fixture
def peer_server() -> Iterator[PeerServer]:
    server = PeerServer()
    yield server
    server.stop()


def in_child(work: Callable[[], bytes]) -> bytes:
    """Fork; the child runs ``work`` and sends back what it returns; the parent reads it."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        answer_and_exit(read, write, work)
    return answer_of(pid, read, write)


def answer_and_exit(read: int, write: int, work: Callable[[], bytes]) -> None:
    """The child's side: run ``work``, write what it returns (or its error), exit."""
    try:
        os.close(read)
        try:
            answer = work()
        except BaseException as exc:  # the parent reports it
            answer = f"error: {exc!r}".encode()
        os.write(write, answer)
    finally:
        os._exit(0)


def answer_of(pid: int, read: int, write: int) -> bytes:
    """The parent's side: the child's answer; a child that hangs is killed and the test fails."""
    os.close(write)
    chunks: list[bytes] = []
    deadline = time.monotonic() + HANG_GUARD
    try:
        while True:
            ready, _, _ = select.select([read], [], [], max(deadline - time.monotonic(), 0.0))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                raise AssertionError(f"the forked child hung past {HANG_GUARD} s")
            chunk = os.read(read, 65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(read)
        os.waitpid(pid, 0)


FORK = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
MULTI_THREADED_FORK = pytest.mark.filterwarnings(
    "ignore:This process .* is multi-threaded:DeprecationWarning"
)


@FORK
@MULTI_THREADED_FORK
def test_a_forked_child_fetches_on_a_connection_of_its_own(peer_server: PeerServer) -> None:
    """gunicorn --preload: children wrote on the parent's keep-alive socket.

    Two processes on one connection interleave their requests and read each
    other's answers. The child now opens its own connection; the parent
    keeps its own.
    """
    clients = Clients(None, FAST)
    get_sync(clients.sync(), peer_server.url(), FAST)  # the parent's keep-alive connection
    (parent,) = peer_server.peers

    def fetch() -> bytes:
        get_sync(clients.sync(), peer_server.url(), FAST)
        return b"fetched"

    assert in_child(fetch) == b"fetched"
    child = peer_server.peers[1]
    assert child != parent  # a new connection (another client port)
    get_sync(clients.sync(), peer_server.url(), FAST)
    assert peer_server.peers[2] == parent  # the parent's connection is still open and its own
    clients.close()


@FORK
@MULTI_THREADED_FORK
def test_a_forked_child_keeps_the_client_the_user_gave(peer_server: PeerServer) -> None:
    with httpx.Client() as user:
        clients = Clients(user, FAST)

        def same() -> bytes:
            return b"same" if clients.sync() is user else b"other"

        assert in_child(same) == b"same"


@FORK
@MULTI_THREADED_FORK
def test_at_fork_child_hooks_run_in_the_child_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_lifecycle, "_FORK_HOOKS", {})
    calls: list[str] = []

    class Holder:
        def renew(self) -> None:
            calls.append("method")

    holder = Holder()
    _lifecycle.at_fork_child(lambda: calls.append("function"))
    _lifecycle.at_fork_child(holder.renew)
    gone = Holder()
    _lifecycle.at_fork_child(gone.renew)
    del gone  # held weakly: no call, no entry left

    assert len(_lifecycle._FORK_HOOKS) == 2
    assert in_child(lambda: ",".join(calls).encode()) == b"function,method"
    assert calls == []


#: A uWSGI master in miniature, in a process of its own (pytest's has other
#: threads, and a C fork of a process with threads can deadlock on any lock
#: one of them held): ``uwsgi.worker_id()`` is 0 and keys load in
#: ``start_sync``; on "go" it forks with libc's ``fork()``, as uWSGI forks
#: its workers (no Python fork hook runs), through ``PyDLL`` (the GIL kept
#: across the call); the child, worker 1, starts its own keys and verifies
#: a token of a key published after the fork.
C_FORK_MASTER = """
import ctypes, os, sys, types
from grelmicro.jwt import JWTVerifier

sys.modules["uwsgi"] = types.SimpleNamespace(worker_id=lambda: 0, opt={"master": b"true"})
verifier = JWTVerifier(jwks_url=os.environ["JWKS"], allow_insecure_loopback=True, audience="orders")
verifier.start_sync()
print("loaded", flush=True)
assert sys.stdin.readline().strip() == "go"
pid = ctypes.PyDLL(None, use_errno=True).fork()
if pid == 0:
    try:
        sys.modules["uwsgi"] = types.SimpleNamespace(worker_id=lambda: 1, opt={"master": b"true"})
        verifier.start_sync()
        answer = "child " + verifier.verify(os.environ["TOKEN"]).subject
    except BaseException as exc:
        answer = f"child error: {exc!r}"
    print(answer, flush=True)
    os._exit(0)
os.waitpid(pid, 0)
print("master done", flush=True)
"""


@FORK
def test_start_sync_in_a_child_forked_without_python_hooks_starts_its_own(server) -> None:
    """uWSGI without ``py-call-uwsgi-fork-hooks``: the child got the parent's runner and socket.

    ``start_sync`` saw a runner that looked started and did nothing: the
    child never fetched, and every key it lacked was 503 for good. It now
    runs the after-fork hooks first and loads keys on a connection of its own.
    """
    k1, k2 = private_key("RS256", kid="k1"), private_key("RS256", kid="k2", seed=1)
    server.set("/jwks", jwks_of(k1))
    token = k2.mint({"sub": "alice", "aud": "orders", "exp": time.time() + 60})
    master = subprocess.Popen(  # a fixed command line
        [sys.executable, "-c", C_FORK_MASTER],
        env={**os.environ, "JWKS": server.url("/jwks"), "TOKEN": token},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert master.stdin is not None
        assert master.stdout is not None
        assert master.stdout.readline().strip() == "loaded"
        (parent,) = server.peers["/jwks"]
        server.set("/jwks", jwks_of(k1, k2))  # a key the child must fetch
        master.stdin.write("go\n")
        master.stdin.flush()
        output, _ = master.communicate(timeout=HANG_GUARD)
    finally:
        if master.poll() is None:
            master.kill()
            master.wait()
    assert output.splitlines() == ["child alice", "master done"], output
    assert len(server.peers["/jwks"]) == 2  # the child fetched k2
    assert server.peers["/jwks"][1] != parent  # on a connection of its own


def ours(before: set[threading.Thread]) -> set[str]:
    """The library's threads started since ``before`` and still running (by name)."""
    return {t.name for t in set(threading.enumerate()) - before if t.name.startswith("grelmicro")}


def test_start_sync_in_a_uwsgi_master_loads_keys_and_leaves_no_thread(
    server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uWSGI without ``py-call-uwsgi-fork-hooks`` forked its workers in C with our thread running.

    uWSGI lets the GIL go around that fork: when the master's refresher
    thread held it at that instant, the worker waited for it forever (one
    uWSGI test run in five here). In a master (``uwsgi.worker_id() == 0``;
    the module stands in for the one uWSGI embeds) the keys load in the
    caller's time and no thread of ours is left.
    """
    k1 = private_key("RS256", kid="k1")
    server.set("/jwks", jwks_of(k1))
    master = types.SimpleNamespace(worker_id=lambda: 0, opt={"master": b"true"})
    monkeypatch.setitem(sys.modules, "uwsgi", master)
    verifier = JWTVerifier(
        jwks_url=server.url("/jwks"), allow_insecure_loopback=True, audience="orders"
    )
    before = set(threading.enumerate())  # other tests' threads, and the server's
    try:
        verifier.start_sync()
        assert verifier.health().ready  # loaded before it returned
        eventually(lambda: not ours(before), "no thread of ours left")
        assert verifier._loop_thread is None  # no refresher started
        token = k1.mint({"sub": "alice", "aud": "orders", "exp": time.time() + 60})
        assert verifier.verify(token).subject == "alice"

        worker = types.SimpleNamespace(worker_id=lambda: 1, opt={"master": b"true"})
        monkeypatch.setitem(sys.modules, "uwsgi", worker)
        verifier.start_sync()  # a worker (lazy-apps, or the postfork hook): its refresher runs
        assert verifier._loop_thread is not None
        assert verifier._loop_thread.running
    finally:
        verifier.close()
