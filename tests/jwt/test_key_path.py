"""The rebuilt network key path: snapshots, steps, monotonic time, lifecycle, availability.

Each test names the defect it closes (found against the previous tree, each
failing there). Real JWKS servers on 127.0.0.1; a real uvicorn for the
FastAPI dependency. Key timing runs on a fake monotonic clock the tests move
(``FetchOptions(timer=...)``); the verifier's ``clock=`` is for claims only.
Ordering is forced with events, never with sleeps.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
from typing import Any

import httpx
import pytest
from fastapi import Depends, FastAPI
from forge import NOW, Signer, private_key
from servers import FAST, DocumentServer, jwks_of, serve
from support import FakeClock

from grelmicro.jwt import (
    Claims,
    ExpiredTokenError,
    FetchOptions,
    JWTVerifier,
    KeyPendingError,
    KeysUnavailableError,
    TokenRejectedError,
    UnknownKeyError,
    _lifecycle,
)
from grelmicro.jwt._events import Event
from grelmicro.jwt.fastapi import JWTBearer

JWKS = "/jwks.json"
AUD = "https://api.example.com"
ISS = "https://idp.example.com/"


def mint(key: Signer, **claims: Any) -> str:
    return key.mint({"aud": AUD, "iss": ISS, "sub": "user-1", "exp": NOW + 3600, **claims})


@pytest.fixture
def k1() -> Signer:
    return private_key("ES256", kid="k1", seed=71)


@pytest.fixture
def k2() -> Signer:
    return private_key("ES256", kid="k2", seed=72)


@pytest.fixture
def server() -> Any:
    server = DocumentServer().start()
    yield server
    server.stop()


class Mono:
    """A fake monotonic clock (key timing only)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def verifier_over(
    server: DocumentServer,
    mono: Mono,
    *,
    options: FetchOptions = FAST,
    clock: Any = None,
    **kw: Any,
) -> JWTVerifier:
    return JWTVerifier(
        jwks_url=server.url(JWKS),
        allow_insecure_loopback=True,
        fetch=dataclasses.replace(options, timer=mono),
        clock=clock or FakeClock(),
        audience=AUD,
        issuer=ISS,
        **kw,
    )


def only_source(verifier: JWTVerifier) -> Any:
    (source,) = verifier._key_sources()
    return source


# -- 1. snapshots: the newest wins, withdrawal included ----------------------------------


def test_a_withdrawal_heard_late_never_undoes_the_refresh_after_it(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    """The fail-closed race: withdraw decides, refresh installs, withdraw installs "no keys".

    The withdrawal's news is held (an observer blocks on it) while a refresh
    publishes new keys; when the withdrawal's news arrives, the verifier
    derives from the source's current snapshot, the refresh's: it serves, and
    health agrees.
    """
    mono = Mono()
    server.set(JWKS, jwks_of(k1))
    verifier = verifier_over(server, mono, options=dataclasses.replace(FAST, max_stale=10))
    source = only_source(verifier)
    assert verifier.verify(mint(k1))["sub"] == "user-1"
    held, release = threading.Event(), threading.Event()

    def slow_to_hear(event: Event) -> None:
        if event.name == "keys.withdrawn":
            held.set()
            assert release.wait(10)

    # Observers run in order: this one delays the verifier's hearing of the withdrawal.
    source.observers._observers = (slow_to_hear, *source.observers._observers)
    mono.now += FAST.default_ttl + 10 + 1  # past the bound
    withdrawing = threading.Thread(target=source.check_bound)
    withdrawing.start()
    assert held.wait(10)
    server.set(JWKS, jwks_of(k1, k2))
    wait = source.need("keys")
    assert not isinstance(wait, type(None))
    wait.block()  # the refresh: a newer snapshot
    release.set()
    withdrawing.join(10)
    assert verifier.verify(mint(k2))["sub"] == "user-1"
    health = verifier.health()
    assert health.ready
    assert health.key_count == 2
    assert health.generation == source.snapshot.generation


# -- 2. verification as steps: one arrival, one fetch, 401 on every path --------------------


def test_a_forged_kid_through_verify_async_is_401_after_one_fetch(
    server: DocumentServer, k1: Signer
) -> None:
    """verify_async took the arrival after its first verify had started the fetch: 503 forever."""
    server.set(JWKS, jwks_of(k1))
    mono = Mono()
    verifier = verifier_over(server, mono)
    assert verifier.verify(mint(k1))["sub"] == "user-1"
    forged = private_key("ES256", kid="forged", seed=9)
    mono.now += 0.5  # the token arrives after the last fetch started

    async def run() -> None:
        before = server.count(JWKS)
        with pytest.raises(UnknownKeyError):
            await verifier.verify_async(mint(forged))
        assert server.count(JWKS) == before + 1
        await verifier.aclose()

    asyncio.run(run())


def test_a_forged_kid_through_jwtbearer_is_401_after_one_fetch(
    server: DocumentServer, k1: Signer
) -> None:
    """The FastAPI dependency answered 503 (twice, a fetch each) where 401 is due."""
    server.set(JWKS, jwks_of(k1))
    verifier = JWTVerifier(
        jwks_url=server.url(JWKS),
        allow_insecure_loopback=True,
        fetch=FAST,
        audience=AUD,
        issuer=ISS,
        clock=FakeClock(),
    )
    auth = JWTBearer(verifier)
    app = FastAPI()
    auth.install(app)

    @app.get("/me")
    async def me(claims: Claims = Depends(auth)) -> dict[str, Any]:  # noqa: B008 - auth is local
        return {"sub": claims.subject}

    forged = private_key("ES256", kid="forged", seed=9)
    with serve(app) as client:
        assert client.get("/me", headers={"Authorization": f"Bearer {mint(k1)}"}).status_code == 200
        before = server.count(JWKS)
        answer = client.get("/me", headers={"Authorization": f"Bearer {mint(forged)}"})
        assert answer.status_code == 401, answer.text
        assert "unknown-key" in answer.text
        assert server.count(JWKS) == before + 1


def test_a_rotation_that_ends_200_reports_no_refusal(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    """A refetch counted as two keys-unavailable refusals; now: nothing to on_reject."""
    heard: list[str] = []
    answers: list[tuple[str, int]] = []
    server.set(JWKS, jwks_of(k1))
    mono = Mono()
    verifier = verifier_over(server, mono, on_reject=lambda e: heard.append(e.reason))
    only_source(verifier).observers.add(
        lambda e: (
            answers.append((e.fields["outcome"], e.fields["waits"]))
            if e.name == "keys.answered_after_wait"
            else None
        )
    )
    assert verifier.verify(mint(k1))["sub"] == "user-1"
    server.set(JWKS, jwks_of(k1, k2))
    mono.now += 0.5
    assert verifier.verify(mint(k2))["sub"] == "user-1"

    async def rotate_async() -> None:
        mono.now += 1.0
        k3 = private_key("ES256", kid="k3", seed=73)
        server.set(JWKS, jwks_of(k1, k2, k3))
        assert (await verifier.verify_async(mint(k3)))["sub"] == "user-1"
        await verifier.aclose()

    asyncio.run(rotate_async())
    assert heard == []
    # The first load, then each rotation: one answer each, all accepted after one wait.
    assert answers == [("accepted", 1), ("accepted", 1), ("accepted", 1)]


# -- 3. monotonic time: the verifier's clock is for claims only -----------------------------


def test_a_backward_step_of_the_verifiers_clock_never_refuses_a_new_key(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    """After the clock stepped back 600 s, a newly published key got 401 unknown-key."""
    mono = Mono()
    clock = FakeClock()
    server.set(JWKS, jwks_of(k1))
    verifier = verifier_over(server, mono, clock=clock)
    assert verifier.verify(mint(k1))["sub"] == "user-1"
    clock.now -= 600  # the wall clock steps back; monotonic time goes on
    mono.now += 2
    server.set(JWKS, jwks_of(k1, k2))
    assert verifier.verify(mint(k2))["sub"] == "user-1"


def test_a_forward_step_of_the_verifiers_clock_does_not_withdraw_keys(
    server: DocumentServer, k1: Signer
) -> None:
    """Withdrawal at the staleness bound runs on monotonic time, not on the claims clock."""
    mono = Mono()
    clock = FakeClock()
    server.set(JWKS, jwks_of(k1))
    verifier = verifier_over(server, mono, clock=clock, cache_size=0)
    assert verifier.verify(mint(k1))["sub"] == "user-1"
    clock.now += FAST.max_ttl + FAST.max_stale + 10  # far past any bound, on the wall
    fetches = server.count(JWKS)
    assert verifier.verify(mint(k1, exp=clock.now + 60))["sub"] == "user-1"
    assert server.count(JWKS) == fetches  # nothing due on the monotonic clock
    assert verifier.health().ready


# -- 4. availability (issue 31) --------------------------------------------------------------


def test_failed_fetches_never_spend_the_unknown_kid_budget(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    """A key published during an outage waited a whole budget after the provider returned.

    While the provider fails, an unknown-kid fetch never follows a failed one
    back to back (one load pace, 0.75 to 1.25 s, after it); failures never
    spend the budget, so the new key is fetched a pace after the return.
    """
    mono = Mono()
    server.set(JWKS, jwks_of(k1))
    verifier = verifier_over(server, mono)
    assert verifier.verify(mint(k1))["sub"] == "user-1"
    server.set(JWKS, "down", status=503)
    junk = [private_key("ES256", kid=f"junk{i}", seed=80 + i) for i in range(5)]
    fetches = server.hits[JWKS]
    for key in junk:  # a flood of invented kids during the outage, a pace apart
        mono.now += 1.3
        with pytest.raises(KeysUnavailableError):
            verifier.verify(mint(key))
        with pytest.raises(KeysUnavailableError) as again:  # right after the failure
            verifier.verify(mint(key, jti="again"))
        assert again.value.wait in ("provider-failing", "backoff")
        assert verifier.verify(mint(k1))["sub"] == "user-1"  # held keys answer throughout
    assert server.hits[JWKS] - fetches == 5  # one a pace, none back to back
    server.set(JWKS, jwks_of(k1, k2))  # the provider returns with a new key
    mono.now += 1.3
    assert verifier.verify(mint(k2))["sub"] == "user-1"


def test_while_no_keys_are_held_loads_are_retried_about_every_second(
    server: DocumentServer, k1: Signer
) -> None:
    """Provider down at start-up: the next try waited 1, 2, 4... up to 30 s."""
    mono = Mono()
    server.set(JWKS, "down", status=500)
    verifier = verifier_over(server, mono)
    for _ in range(6):  # far past where a doubling backoff would have reached 30 s
        with pytest.raises(KeysUnavailableError) as raised:
            verifier.verify(mint(k1))
        assert raised.value.retry_after is not None
        assert raised.value.retry_after <= 1.25
        mono.now += 1.3
    server.set(JWKS, jwks_of(k1))
    assert verifier.verify(mint(k1))["sub"] == "user-1"


def test_unknown_kids_are_paced_about_one_fetch_a_second_and_answer_key_pending(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    """Invented kids spent a 7.5 s budget step (and said keys-unavailable, like an outage)."""
    mono = Mono()
    server.set(JWKS, jwks_of(k1), headers={"ETag": '"v1"'})
    verifier = verifier_over(server, mono, options=FetchOptions(timer=mono))
    assert verifier.verify(mint(k1))["sub"] == "user-1"
    mono.now += 0.5
    first = private_key("ES256", kid="junk-a", seed=91)
    with pytest.raises(UnknownKeyError):
        verifier.verify(mint(first))  # its own fetch: a 304, the kid is unknown
    assert server.not_modified[JWKS] == 1
    mono.now += 0.2
    second = private_key("ES256", kid="junk-b", seed=92)
    with pytest.raises(KeyPendingError) as raised:
        verifier.verify(mint(second))  # within the pace: no fetch
    assert raised.value.reason == "key-pending"
    assert raised.value.wait == "budget"
    assert 0 < (raised.value.retry_after or 0) <= 1.0
    server.set(JWKS, jwks_of(k1, k2), headers={"ETag": '"v2"'})  # an unannounced rotation
    mono.now += 1.0
    assert verifier.verify(mint(k2))["sub"] == "user-1"


def test_a_token_that_fails_the_policy_unverified_spends_no_fetch(
    server: DocumentServer, k1: Signer
) -> None:
    """An expired (or foreign-issuer) token with an invented kid cost a fetch."""
    server.set(JWKS, jwks_of(k1))
    mono = Mono()
    verifier = verifier_over(server, mono)
    assert verifier.verify(mint(k1))["sub"] == "user-1"
    mono.now += 0.5  # the keys held predate these tokens: a fetch would be due
    forged = private_key("ES256", kid="forged", seed=9)
    fetches = server.count(JWKS)
    with pytest.raises(ExpiredTokenError):
        verifier.verify(mint(forged, exp=NOW - 10))
    with pytest.raises(TokenRejectedError) as raised:
        verifier.verify(mint(forged, iss="https://evil.example/"))
    assert raised.value.reason == "issuer"
    with pytest.raises(TokenRejectedError) as raised:
        verifier.verify(mint(forged, aud="https://other.example/"))
    assert raised.value.reason == "audience"
    assert server.count(JWKS) == fetches


def without(key: Signer, *names: str, **claims: Any) -> str:
    """A token of ``key`` with the claims ``names`` left out and ``claims`` set."""
    body = {"aud": AUD, "iss": ISS, "sub": "user-1", "exp": NOW + 3600, **claims}
    return key.mint({k: v for k, v in body.items() if k not in names})


@pytest.mark.parametrize(
    ("forge", "reason"),
    [
        (lambda k: without(k, "iss"), "missing-claim"),
        (lambda k: without(k, "aud"), "missing-claim"),
        (lambda k: without(k, iss=7), "invalid-claim"),
        (lambda k: without(k, aud=["api", 7]), "invalid-claim"),
        (lambda k: without(k, aud={"a": 1}), "invalid-claim"),
        (lambda k: without(k, exp="tomorrow"), "invalid-claim"),
        (lambda k: without(k, exp=True), "invalid-claim"),
        (lambda k: k.mint(b"not json"), "malformed"),
        (lambda k: k.mint(b"[1, 2]"), "malformed"),
    ],
    ids=[
        "no-iss", "no-aud", "iss-int", "aud-with-int", "aud-object", "exp-string",
        "exp-bool", "payload-not-json", "payload-not-object",
    ],
)  # fmt: skip
def test_a_token_missing_or_mistyping_what_the_policy_checks_spends_no_fetch(
    server: DocumentServer, k1: Signer, forge: Any, reason: str
) -> None:
    """Issue 38, N33: only present, well-typed claims were checked before a fetch."""
    server.set(JWKS, jwks_of(k1))
    mono = Mono()
    verifier = verifier_over(server, mono)
    assert verifier.verify(mint(k1))["sub"] == "user-1"
    mono.now += 0.5  # the keys held predate these tokens: a fetch would be due
    forged = private_key("ES256", kid="forged", seed=9)
    fetches = server.count(JWKS)
    with pytest.raises(TokenRejectedError) as raised:
        verifier.verify(forge(forged))
    assert raised.value.reason == reason
    assert server.count(JWKS) == fetches


def test_a_moved_jwks_uri_is_followed_at_once(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    """Once the old JWKS URL answered 404, 503 until the next scheduled discovery."""
    issuer = server.url("/")
    meta = {"issuer": issuer, "jwks_uri": server.url(JWKS)}
    server.set("/.well-known/openid-configuration", meta)
    server.set(JWKS, jwks_of(k1))
    mono = Mono()
    verifier = JWTVerifier(
        discover=issuer,
        allow_insecure_loopback=True,
        fetch=dataclasses.replace(FAST, timer=mono),
        clock=FakeClock(),
        audience=AUD,
    )
    assert verifier.verify(k1.mint({"aud": AUD, "iss": issuer, "exp": NOW + 60}))
    server.set("/.well-known/openid-configuration", {**meta, "jwks_uri": server.url("/v2/jwks")})
    server.set("/v2/jwks", jwks_of(k1, k2))
    server.set(JWKS, "gone", status=404)
    mono.now += 1
    claims = verifier.verify(k2.mint({"aud": AUD, "iss": issuer, "exp": NOW + 60}))
    assert claims["iss"] == issuer
    assert only_source(verifier).url == server.url("/v2/jwks")


def test_a_discovery_issuer_mismatch_is_a_configuration_error(
    server: DocumentServer, k1: Signer, caplog: pytest.LogCaptureFixture
) -> None:
    """A trailing-slash mismatch looked like an outage; the message showed neither value."""
    issuer = server.url("/")
    server.set(
        "/.well-known/openid-configuration",
        {"issuer": issuer.rstrip("/"), "jwks_uri": server.url(JWKS)},
    )
    server.set(JWKS, jwks_of(k1))
    mono = Mono()
    verifier = JWTVerifier(
        discover=issuer,
        allow_insecure_loopback=True,
        fetch=dataclasses.replace(FAST, timer=mono),
        audience=AUD,
    )
    with caplog.at_level(logging.ERROR, logger="grelmicro.jwt"):
        for _ in range(3):
            with pytest.raises(KeysUnavailableError) as raised:
                verifier.verify(k1.mint({"aud": AUD, "iss": issuer, "exp": NOW + 60}))
            mono.now += 31
    assert raised.value.wait == "config"
    assert issuer.rstrip("/") in str(raised.value)
    assert "trailing slash" in str(raised.value)
    health = verifier.health()
    assert not health.ready
    assert health.config_error is not None
    assert health.problem.startswith("configuration error")
    errors = [r for r in caplog.records if getattr(r, "jwt_event", "") == "keys.config_error"]
    assert len(errors) == 1  # once per change, not per attempt


def test_every_503_says_why_in_a_rate_limited_event(
    server: DocumentServer, k1: Signer, caplog: pytest.LogCaptureFixture
) -> None:
    """Valid tokens of a new key got 503 for seconds with no log line, even at DEBUG."""
    mono = Mono()
    server.set(JWKS, "down", status=500)
    verifier = verifier_over(server, mono)
    with caplog.at_level(logging.INFO, logger="grelmicro.jwt"):
        for _ in range(3):
            with pytest.raises(KeysUnavailableError):
                verifier.verify(mint(k1))
    waits = [r for r in caplog.records if getattr(r, "jwt_event", "") == "keys.waiting"]
    assert len(waits) == 1  # rate-limited
    assert waits[0].jwt_wait in ("provider-failing", "backoff")  # type: ignore[attr-defined]
    assert waits[0].jwt_retry_in <= 1.25  # type: ignore[attr-defined]


# -- 5. smaller items --------------------------------------------------------------------


def test_an_already_read_httpx_answer_is_accepted(k1: Signer) -> None:
    """A MockTransport answer built with json= failed as internal error (StreamConsumed)."""

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=jwks_of(k1))

    verifier = JWTVerifier(
        jwks_url="https://idp.example.com/jwks.json",
        client=httpx.Client(transport=httpx.MockTransport(answer)),
        audience=AUD,
        issuer=ISS,
        clock=FakeClock(),
    )
    assert verifier.verify(mint(k1))["sub"] == "user-1"
    assert verifier.health().failure_count == 0


def test_a_sync_caller_with_only_an_async_client_is_no_provider_failure(k1: Signer) -> None:
    """It was recorded as a failed fetch and started the backoff."""
    verifier = JWTVerifier(
        jwks_url="https://idp.example.com/jwks.json",
        client=httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(500))),
        audience=AUD,
        issuer=ISS,
    )
    with pytest.raises(KeysUnavailableError):
        verifier.verify(mint(k1))
    health = verifier.health()
    assert (health.failure_count, health.last_error) == (0, None)


def test_skipped_keys_are_logged_when_they_change_with_jwt_event(
    server: DocumentServer, k1: Signer, caplog: pytest.LogCaptureFixture
) -> None:
    """keys.key_skipped was logged again on every fetch."""
    document = jwks_of(k1)
    document["keys"].append({"kty": "RSA", "kid": "odd", "n": "AQAB", "e": "AQAB"})
    server.set(JWKS, document)
    mono = Mono()
    verifier = verifier_over(server, mono)
    with caplog.at_level(logging.INFO, logger="grelmicro.jwt"):
        verifier.verify(mint(k1))
        mono.now += FAST.default_ttl + 1
        verifier.verify(mint(k1, sub="again"))
        only_source(verifier).need("keys").block()
    skipped = [r for r in caplog.records if getattr(r, "jwt_event", "") == "keys.key_skipped"]
    assert len(skipped) == 1
    assert server.count(JWKS) >= 2


def test_a_failing_observer_never_stops_the_background_refresh(
    server: DocumentServer, k1: Signer
) -> None:
    """_keep_fresh died silently when a listener raised."""
    server.set(JWKS, jwks_of(k1))
    verifier = JWTVerifier(
        jwks_url=server.url(JWKS),
        allow_insecure_loopback=True,
        fetch=dataclasses.replace(FAST, min_ttl=0, default_ttl=0),
        audience=AUD,
        issuer=ISS,
        clock=FakeClock(),
    )
    source = only_source(verifier)

    def broken(event: Event) -> None:
        raise RuntimeError("observer bug")

    source.observers.add(broken)

    async def run() -> None:
        await verifier.start()
        try:
            before = server.count(JWKS)
            while server.count(JWKS) < before + 2:  # bounded by the loop's own progress
                await asyncio.sleep(0.05)
            assert not source._background.done()
        finally:
            await verifier.aclose()

    asyncio.run(asyncio.wait_for(run(), 30))
    assert verifier.verify(mint(k1))["sub"] == "user-1"


def test_repr_of_a_half_built_verifier_is_safe() -> None:
    """repr() of a verifier whose __init__ failed raised AttributeError."""
    half = JWTVerifier.__new__(JWTVerifier)
    assert "not built" in repr(half)


# -- 6. lifecycle ----------------------------------------------------------------------------

EXITING = textwrap.dedent(
    """
    import sys, threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from grelmicro.jwt import FetchOptions, JWTVerifier

    release = threading.Event()
    class Slow(BaseHTTPRequestHandler):
        def log_message(self, *a): pass
        def do_GET(self):
            release.wait(30)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    verifier = JWTVerifier(
        jwks_url=f"http://127.0.0.1:{httpd.server_address[1]}/jwks",
        allow_insecure_loopback=True, audience="a", issuer="i",
        fetch=FetchOptions(total_timeout=20, read_timeout=20),
    )
    (source,) = verifier._key_sources()
    source.refresh_background()  # a background fetch is in flight as the program ends
    print("exiting", flush=True)
    """
)


def test_a_program_that_exits_while_a_refresh_runs_exits_cleanly() -> None:
    """Daemon threads called into the core during finalization: exit 134 in 3 of 60 runs."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for _ in range(3):
        done = subprocess.run(
            [sys.executable, "-c", EXITING],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.strip() == "exiting"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_gets_a_fresh_bound_watcher() -> None:
    """After fork the watcher was a dead thread in the child and never restarted."""
    fired = threading.Event()

    class Probe:
        def check_bound(self) -> None:
            fired.set()

        def stop(self) -> None:
            pass

        def after_fork(self) -> None:
            pass

    keep = Probe()
    _lifecycle.BOUNDS.call_at(float("inf"), keep)  # the parent's watcher runs
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            _lifecycle.BOUNDS.call_at(0.0, keep)
            ok = fired.wait(10)
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        answer = pipe.read()
    os.waitpid(pid, 0)
    assert answer == b"1"


def test_close_joins_the_fetch_threads_it_started(server: DocumentServer, k1: Signer) -> None:
    """Every fetch thread the library starts is registered, and close() joins it."""
    gate = threading.Event()
    server.set(JWKS, json.dumps(jwks_of(k1)), gate=gate)
    verifier = verifier_over(server, Mono())
    source = only_source(verifier)
    source.refresh_background()
    threads = [t for t in _lifecycle._STATE.threads if t.name.startswith("grelmicro-jwks-")]
    threads += [t for t in _lifecycle._STATE.threads if t.name == "grelmicro-jwks"]
    assert any(t.name == "grelmicro-jwks" for t in threads)
    threads = [t for t in threads if t.name != "grelmicro-jwks-bounds"]
    gate.set()
    verifier.close()
    for thread in threads:
        thread.join(10)
        assert not thread.is_alive()
