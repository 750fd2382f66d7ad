"""What serves is one value; fetches belong to their sources; a request waits for keys only so long.

Each test names the defect it closes (reproduced against the previous tree,
through the public API but for a fake monotonic timer). Real JWKS servers on
127.0.0.1; a gate holds a fetch in flight as long as a test likes. Ordering
is forced with events and gates, never with sleeps; nothing asserts speed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from forge import NOW, Signer, private_key
from servers import FAST, DocumentServer, jwks_of
from support import FakeClock, eventually

from grelmicro.jwt import (
    FetchOptions,
    JWTVerifier,
    KeysUnavailableError,
    TokenRejectedError,
    UnknownKeyError,
)
from grelmicro.jwt._steps import Pending
from grelmicro.jwt.fastapi import JWTBearer

JWKS = "/jwks.json"
AUD = "https://api.example.com"
ISS = "https://idp.example.com/"
KEEP = {"Cache-Control": "max-age=100"}


def mint(key: Signer, **claims: Any) -> str:
    return key.mint({"aud": AUD, "iss": ISS, "sub": "user-1", "exp": NOW + 3600, **claims})


@pytest.fixture
def k1() -> Signer:
    return private_key("ES256", kid="k1", seed=71)


@pytest.fixture
def k2() -> Signer:
    return private_key("ES256", kid="k2", seed=72)


@pytest.fixture
def server() -> Iterator[DocumentServer]:
    server = DocumentServer().start()
    yield server
    server.stop()


def Mono() -> FakeClock:
    """A fake monotonic clock (key timing only), at 1000 s."""
    return FakeClock(1000.0)


def verifier_over(
    server: DocumentServer, mono: FakeClock, *, options: FetchOptions = FAST, **kw: Any
) -> JWTVerifier:
    return JWTVerifier(
        jwks_url=server.url(JWKS),
        allow_insecure_loopback=True,
        fetch=dataclasses.replace(options, timer=mono),
        clock=FakeClock(),
        audience=AUD,
        issuer=ISS,
        **kw,
    )


def only_source(verifier: JWTVerifier) -> Any:
    (source,) = verifier._key_sources()
    return source


def load(verifier: JWTVerifier) -> None:
    """The first keys, fetched now and waited for (whatever the key_wait)."""
    wait = only_source(verifier).need("keys")
    assert wait.flight.done.wait(30)


def slow_load(
    verifier: JWTVerifier, server: DocumentServer, mono: FakeClock, seconds: float
) -> None:
    """As :func:`load`, the fetch taking ``seconds`` on the fake clock (its answer held meanwhile).

    The source's patience for later fetches is four times that, up to
    ``key_wait`` (:meth:`KeyState.patience`).
    """
    gate = threading.Event()
    server.hold(JWKS, gate)
    asked = server.count(JWKS)
    wait = only_source(verifier).need("keys")
    eventually(lambda: server.count(JWKS) > asked, "the provider was asked")
    mono.now += seconds
    gate.set()
    assert wait.flight.done.wait(30)


def held_then_gated(
    server: DocumentServer,
    k1: Signer,
    k2: Signer,
    options: FetchOptions,
    *,
    fetch_seconds: float = 0.0,
) -> tuple[JWTVerifier, threading.Event, FakeClock]:
    """k1's keys loaded and serving; then k2 published behind a gate (the fetch hangs).

    The fake clock moves past the keys' fetch: a k2 token arrives after it.
    ``fetch_seconds``: how long the load took (:func:`slow_load`).
    """
    server.set(JWKS, jwks_of(k1), headers=KEEP)
    mono = Mono()
    verifier = verifier_over(server, mono, options=options)
    if fetch_seconds:
        slow_load(verifier, server, mono, fetch_seconds)
    else:
        load(verifier)
    assert verifier.verify(mint(k1))["sub"] == "user-1"
    gate = threading.Event()
    server.set(JWKS, jwks_of(k1, k2), headers=KEEP, gate=gate)
    mono.now += 2
    return verifier, gate, mono


def landed(verifier: JWTVerifier) -> None:
    """The fetch in flight, if any, has ended (its route installed)."""
    flight = only_source(verifier).in_flight()
    if flight is not None:
        assert flight.done.wait(30)
    only_source(verifier).join()


# -- 1. the route is one value: a new snapshot is never paired with an old core ------------


def test_an_algorithm_migration_refuses_the_removed_key_and_says_why(
    server: DocumentServer, k1: Signer
) -> None:
    """Fail-open: new keys serving no allowed algorithm left the removed key verifying."""
    rs = private_key("RS256", kid="r1", seed=73)
    mono = Mono()
    server.set(JWKS, jwks_of(k1), headers=KEEP)
    verifier = verifier_over(server, mono, algorithms=["ES256"])
    old = mint(k1)
    assert verifier.verify(old)["sub"] == "user-1"
    server.set(JWKS, jwks_of(rs), headers=KEEP)  # ES256 -> RS256 at the provider
    mono.now += 101
    verifier.verify(mint(k1, jti="due"))  # due: the refresh runs in the background
    landed(verifier)
    with pytest.raises(UnknownKeyError):  # the removed key, cached result included
        verifier.verify(old)
    health = verifier.health()
    assert not health.ready
    assert health.config_error is not None
    assert "no key serves ES256; the provider offers RS256" in health.config_error
    assert "configuration error" in health.problem
    assert verifier.algorithms == ()
    # A token of the new key is refused for its algorithm, at once.
    with pytest.raises(TokenRejectedError):
        verifier.verify(rs.mint({"aud": AUD, "iss": ISS, "sub": "u", "exp": NOW + 60}))
    ready = asyncio.run(JWTBearer(verifier).readiness())
    assert ready.status_code == 503
    # Nine refreshes later, far past the bound: still refused, still not ready.
    for _ in range(9):
        mono.now += 101
        with pytest.raises(TokenRejectedError):
            verifier.verify(mint(k1, jti=f"later{mono.now}"))
        landed(verifier)
    assert not verifier.health().ready
    verifier.close()


def test_keys_serving_no_allowed_algorithm_at_the_first_load_are_a_401_and_not_ready(
    server: DocumentServer, k1: Signer
) -> None:
    """At start-up the same desync answered every request 503 while readiness said 200."""
    rs = private_key("RS256", kid="r1", seed=73)
    server.set(JWKS, jwks_of(rs), headers=KEEP)
    mono = Mono()
    verifier = verifier_over(server, mono, algorithms=["ES256"])
    with pytest.raises(UnknownKeyError):
        verifier.verify(mint(k1))
    health = verifier.health()
    assert (health.ready, health.key_count) == (False, 1)
    assert "no key serves ES256" in (health.config_error or "")
    # The provider publishes an ES256 key: the next token naming it is served.
    server.set(JWKS, jwks_of(k1, rs), headers=KEEP)
    mono.now += 2  # past the unknown-kid pace
    assert verifier.verify(mint(k1))["sub"] == "user-1"
    assert verifier.health().ready
    verifier.close()


# -- 2. fetches belong to their source -------------------------------------------------


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_fetch_left_by_a_loop_that_closed_does_not_hold_the_next_request(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    """A fetch handed to a loop that closed first stayed "in flight" for ever (164 s, 503)."""
    server.set(JWKS, jwks_of(k1), headers=KEEP)
    mono = Mono()
    client = httpx.Client()  # a sync client: the dead loop leaves no transport behind
    options = dataclasses.replace(FAST, key_wait=20)
    verifier = verifier_over(server, mono, options=options, client=client)
    loop = asyncio.new_event_loop()

    async def main() -> None:
        await verifier.start()  # the source's runner is this loop from now on
        server.set(JWKS, jwks_of(k1, k2), headers=KEEP)
        mono.now += 2  # the token comes after the keys held were fetched
        with pytest.raises(Pending):  # a sync call on the loop: handed to the loop
            verifier.verify(mint(k2))

    loop.run_until_complete(main())
    left = only_source(verifier).in_flight()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the loop's tasks die unfinished, as in such apps
        loop.close()
        gc.collect()
    assert left is not None
    assert not left.done.is_set()  # the scenario: nobody will end it
    # The next request replaces it (a library thread runs the new fetch) and is served.
    assert verifier.verify(mint(k2))["sub"] == "user-1"
    assert left.done.is_set()  # its waiters were let go
    verifier.close()
    client.close()
    with warnings.catch_warnings():  # what the dead loop left: its unstarted tasks
        warnings.simplefilter("ignore")
        for task in list(only_source(verifier)._tasks):
            task.get_coro().close()
        only_source(verifier)._tasks.clear()
        gc.collect()


def test_cancelling_a_waiter_cancels_nothing_else(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    """The leader ran the fetch in its own task: a disconnect cancelled it for everyone."""
    server.set(JWKS, jwks_of(k1), headers=KEEP)
    mono = Mono()
    verifier = verifier_over(server, mono, options=dataclasses.replace(FAST, key_wait=30))
    assert verifier.verify(mint(k1))["sub"] == "user-1"
    gate = threading.Event()
    server.set(JWKS, jwks_of(k1, k2), headers=KEEP, gate=gate)
    mono.now += 2
    source = only_source(verifier)

    async def main() -> None:
        first = asyncio.create_task(verifier.verify_async(mint(k2, jti="a")))
        second = asyncio.create_task(verifier.verify_async(mint(k2, jti="b")))
        for _ in range(10_000):  # both wait for the one fetch
            if source.parking.count == 2:
                break
            await asyncio.sleep(0)
        assert source.parking.count == 2
        first.cancel()  # a client disconnect, a timeout middleware
        with pytest.raises(asyncio.CancelledError):
            await first
        gate.set()
        assert (await second)["sub"] == "user-1"

    asyncio.run(main())
    assert server.count(JWKS) == 2  # one load, one fetch for the new kid
    verifier.close()


def test_a_sync_caller_with_only_an_async_client_spends_no_pace(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    """Each try spent the unknown-kid pace of async callers too, and no fetch ever came."""
    server.set(JWKS, jwks_of(k1), headers=KEEP)
    client = httpx.AsyncClient()
    mono = Mono()
    verifier = verifier_over(server, mono, client=client)

    async def main() -> None:
        assert (await verifier.verify_async(mint(k1)))["sub"] == "user-1"
        server.set(JWKS, jwks_of(k1, k2), headers=KEEP)
        mono.now += 2
        pace = only_source(verifier).schedule.may_fetch(mono(), unknown_kid=True)
        for _ in range(3):  # a sync caller off the loop (a worker thread), no loop of the source
            with pytest.raises(KeysUnavailableError) as caught:
                await asyncio.to_thread(verifier.verify, mint(k2))
            assert caught.value.wait == "no-sync-client"
        assert only_source(verifier).schedule.may_fetch(mono(), unknown_kid=True) == pace
        assert server.count(JWKS) == 1
        # An async caller at the same instant fetches at once: no pace was spent.
        assert (await verifier.verify_async(mint(k2, jti="async")))["sub"] == "user-1"
        await client.aclose()

    asyncio.run(main())


def test_a_sync_caller_hands_its_fetch_to_the_loop_that_ran_start(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    """With only an AsyncClient and the app's loop in another thread: 503 for ever."""
    server.set(JWKS, jwks_of(k1), headers=KEEP)
    mono = Mono()
    loop = asyncio.new_event_loop()
    started = threading.Event()
    made: list[JWTVerifier] = []
    client = httpx.AsyncClient()

    def run_loop() -> None:
        asyncio.set_event_loop(loop)

        async def begin() -> None:
            verifier = verifier_over(server, mono, client=client)
            made.append(verifier)
            await verifier.start()

        loop.run_until_complete(begin())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=run_loop, daemon=True)
    thread.start()
    assert started.wait(30)
    (verifier,) = made
    server.set(JWKS, jwks_of(k1, k2), headers=KEEP)
    mono.now += 2
    try:
        assert verifier.verify(mint(k2))["sub"] == "user-1"  # fetched on the app's loop
    finally:
        asyncio.run_coroutine_threadsafe(verifier.aclose(), loop).result(30)
        asyncio.run_coroutine_threadsafe(client.aclose(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


# -- 3. a bounded wait -----------------------------------------------------------------


def test_a_slow_provider_answers_503_within_key_wait_and_the_next_request_is_served(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    """A request waited up to four back-to-back fetches (p50 18 s), then 503 anyway."""
    verifier, gate, _ = held_then_gated(server, k1, k2, dataclasses.replace(FAST, key_wait=0))
    with pytest.raises(KeysUnavailableError) as caught:
        verifier.verify(mint(k2))
    assert caught.value.wait == "fetch-in-flight"
    assert caught.value.retry_after is not None
    assert only_source(verifier).in_flight() is not None  # the fetch goes on without it
    gate.set()
    landed(verifier)
    assert verifier.verify(mint(k2))["sub"] == "user-1"  # the next one after it lands
    assert server.count(JWKS) == 2
    verifier.close()


def test_the_requests_waiting_for_keys_are_bounded(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    """750 requests parked while the provider timed out (RSS 55 -> 95 MiB)."""
    options = dataclasses.replace(FAST, key_wait=30, max_waiters=2)
    # A provider whose fetches take 10 s: a thread joining one waits for it.
    verifier, gate, _ = held_then_gated(server, k1, k2, options, fetch_seconds=10)
    source = only_source(verifier)
    answers: list[Any] = []

    def wait_for_key(jti: str) -> None:
        answers.append(verifier.verify(mint(k2, jti=jti))["sub"])

    threads = [threading.Thread(target=wait_for_key, args=(f"t{i}",)) for i in range(2)]
    for thread in threads:
        thread.start()
    eventually(lambda: source.parking.count == 2, "two requests parked")
    with pytest.raises(KeysUnavailableError) as caught:  # the third is answered at once
        verifier.verify(mint(k2, jti="third"))
    assert caught.value.wait == "waiters"
    assert verifier.verify(mint(k1, jti="known"))["sub"] == "user-1"  # known keys: no wait
    gate.set()
    for thread in threads:
        thread.join(30)
    assert answers == ["user-1", "user-1"]
    assert source.parking.count == 0
    verifier.close()


def refused_without_waiting(verifier: JWTVerifier, token: str) -> str:
    """Verify ``token`` in a thread of its own; it must be refused without parking: its wait member.

    One request waits already (parked); the newcomer must answer, never park
    beside it (on the tree before, it parked and this failed).
    """
    source = only_source(verifier)
    parked = source.parking.count
    answered: list[KeysUnavailableError] = []

    def newcomer() -> None:
        try:
            verifier.verify(token)
        except KeysUnavailableError as error:
            answered.append(error)

    thread = threading.Thread(target=newcomer)
    thread.start()
    eventually(
        lambda: not thread.is_alive() or source.parking.count > parked,
        "the newcomer answered or parked",
    )
    assert source.parking.count == parked  # it did not wait
    thread.join(30)
    (error,) = answered
    return str(error.wait)


#: A key_wait long enough to see who stops waiting before it; fetches that never time out.
LONG_WAIT = dataclasses.replace(FAST, read_timeout=60, total_timeout=60, key_wait=30)


@dataclasses.dataclass
class Waiting:
    """A k2 fetch held by its gate and the request (a thread) that started it, waiting."""

    verifier: JWTVerifier
    gate: threading.Event
    mono: FakeClock
    source: Any
    starter: threading.Thread
    served: list[Any]

    def join(self, *others: threading.Thread) -> list[Any]:
        """Open the gate; the subjects served once the starter and ``others`` are done."""
        self.gate.set()
        for thread in (self.starter, *others):
            thread.join(30)
        return self.served


def a_request_waiting_on_k2(
    server: DocumentServer, k1: Signer, k2: Signer, *, fetch_seconds: float = 10.0
) -> Waiting:
    """:func:`held_then_gated` with :data:`LONG_WAIT`, and a k2 request that started the fetch.

    The provider's fetches take ``fetch_seconds`` (10 s: the source's
    patience is the whole ``key_wait``, 30 s).
    """
    verifier, gate, mono = held_then_gated(server, k1, k2, LONG_WAIT, fetch_seconds=fetch_seconds)
    source = only_source(verifier)
    served: list[Any] = []
    starter = threading.Thread(target=lambda: served.append(verifier.verify(mint(k2))["sub"]))
    starter.start()
    eventually(lambda: source.parking.count == 1, "the request that started the fetch waits")
    return Waiting(verifier, gate, mono, source, starter, served)


def test_nobody_waits_on_a_fetch_past_key_wait_from_its_start(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    """Each newcomer waited its own key_wait on a hung fetch.

    Under gunicorn's gthread workers (4 threads) a hung provider with 10% of
    tokens naming a new kid held request threads a second each, and tokens of
    held keys queued behind them (held-key p99 3 to 5x the healthy run's).
    """
    waiting = a_request_waiting_on_k2(server, k1, k2)
    flight = waiting.source.in_flight()
    assert flight is not None

    waiting.mono.now += 31  # the fetch has run past key_wait (30 s), short of its deadline
    # It never waited behind the slow fetch: its 503 came at once.
    assert refused_without_waiting(waiting.verifier, mint(k2, jti="late")) == "fetch-in-flight"
    assert waiting.source.in_flight() is flight  # the fetch goes on

    # The fetch lands: the request that arrived inside the window is served.
    assert waiting.join() == ["user-1"]
    waiting.verifier.close()


def test_while_the_last_fetch_failed_only_the_request_that_starts_the_next_one_waits(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    """A provider that hangs held a request thread a key_wait for every new-kid token.

    Under gunicorn's gthread workers the held keys' requests queued behind
    those threads (held-key p99 3-5x the healthy run's, ``bench/gunicorn_hung.py``).
    """
    server.set(JWKS, jwks_of(k1), headers=KEEP)
    mono = Mono()
    options = dataclasses.replace(FAST, read_timeout=10, total_timeout=10, key_wait=30)
    verifier = verifier_over(server, mono, options=options)
    slow_load(verifier, server, mono, 10)  # a provider slow to answer: joiners are patient
    source = only_source(verifier)
    server.set(JWKS, "down", status=503)
    mono.now += 2
    with pytest.raises(KeysUnavailableError):  # waited for the fetch, which failed
        verifier.verify(mint(k2))
    assert source.state.failing

    gate = threading.Event()
    server.set(JWKS, jwks_of(k1, k2), headers=KEEP, gate=gate)  # back, but slow to answer
    mono.now += 2  # past the pace after a failed fetch
    first: list[Any] = []
    leader = threading.Thread(target=lambda: first.append(verifier.verify(mint(k2))["sub"]))
    leader.start()  # it starts the next fetch: it waits for it
    eventually(lambda: source.parking.count == 1, "the request that started the fetch waits")
    # The newcomer does not wait: its 503 comes at once.
    assert refused_without_waiting(verifier, mint(k2, jti="while-failing")) == "fetch-in-flight"
    gate.set()
    leader.join(30)
    assert first == ["user-1"]  # the fetch landed: its starter is served
    landed(verifier)
    assert not source.state.failing

    k3 = private_key("ES256", kid="k3", seed=73)
    gate = threading.Event()
    server.set(JWKS, jwks_of(k1, k2, k3), headers=KEEP, gate=gate)
    mono.now += 2
    waiters = [
        threading.Thread(target=lambda j=j: first.append(verifier.verify(mint(k3, jti=j))["sub"]))
        for j in ("a", "b")
    ]
    for waiter in waiters:
        waiter.start()
    # Healthy again: every request waits for the fetch, not only its starter.
    eventually(lambda: source.parking.count == 2, "both requests wait")
    gate.set()
    for waiter in waiters:
        waiter.join(30)
    assert first == ["user-1"] * 3
    verifier.close()


def test_a_thread_waits_only_the_sources_patience_into_a_fetch(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    """A hung provider's first fetch held a thread for every new-kid token of its first second.

    The provider had not failed yet, so each request waited up to
    ``key_wait`` for the fetch: under gthread workers the held keys'
    requests queued behind them (``bench/gunicorn_hung.py``, 200 req/s).
    """
    # Fetches take no time on the fake clock: the patience is its floor.
    verifier, gate, mono = held_then_gated(server, k1, k2, LONG_WAIT)
    source = only_source(verifier)
    answers: list[KeysUnavailableError] = []

    def request(jti: str) -> None:
        try:
            verifier.verify(mint(k2, jti=jti))
        except KeysUnavailableError as error:
            answers.append(error)

    for jti in ("starts-the-fetch", "joins-it"):
        thread = threading.Thread(target=request, args=(jti,))
        thread.start()
        thread.join(10)  # a quarter of a second each, the gate shut (before: key_wait, 30 s)
        assert not thread.is_alive()
    assert [error.wait for error in answers] == ["fetch-in-flight"] * 2
    assert all(error.retry_after is not None for error in answers)
    flight = source.in_flight()
    assert flight is not None  # the fetch goes on

    mono.now += 1  # past the patience: a newcomer thread does not even park
    assert refused_without_waiting(verifier, mint(k2, jti="later")) == "fetch-in-flight"
    gate.set()
    assert flight.done.wait(30)
    assert verifier.verify(mint(k2, jti="after"))["sub"] == "user-1"  # the fetch landed
    verifier.close()


def test_a_task_waits_past_the_patience_it_holds_no_thread(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    """The patience is for threads: an event loop's waiting task costs nothing."""
    verifier, gate, mono = held_then_gated(server, k1, k2, LONG_WAIT)
    parking = only_source(verifier).parking

    async def parked(jti: str, count: int) -> asyncio.Future[Any]:
        task = asyncio.ensure_future(verifier.verify_async(mint(k2, jti=jti)))
        while parking.count < count and not task.done():
            await asyncio.sleep(0.01)
        assert parking.count == count  # it waits for the fetch
        return task

    async def requests() -> list[str]:
        first = await parked("first", 1)
        mono.now += 1  # past the patience (a thread would be refused now), within key_wait
        second = await parked("second", 2)
        gate.set()
        return [(await task)["sub"] for task in (first, second)]

    assert asyncio.run(requests()) == ["user-1", "user-1"]
    verifier.close()


def test_a_thread_joining_a_slow_providers_fetch_waits_for_it(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    """The patience follows the provider: four times its slowest recent good fetch."""
    waiting = a_request_waiting_on_k2(server, k1, k2, fetch_seconds=2)
    waiting.mono.now += 5  # 5 s into the fetch: within the patience (8 s)
    verifier = waiting.verifier
    joiner = threading.Thread(
        target=lambda: waiting.served.append(verifier.verify(mint(k2, jti="j"))["sub"])
    )
    joiner.start()
    eventually(lambda: waiting.source.parking.count == 2, "the thread joining the fetch waits")
    assert waiting.join(joiner) == ["user-1", "user-1"]
    verifier.close()


def test_a_flight_past_its_deadline_is_replaced(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    """need() joined any registered flight, whatever its age."""
    # The gate is never opened: that answer never comes (until the server stops).
    verifier, _, mono = held_then_gated(server, k1, k2, dataclasses.replace(FAST, key_wait=0))
    with pytest.raises(KeysUnavailableError):
        verifier.verify(mint(k2))
    stuck = only_source(verifier).in_flight()
    assert stuck is not None
    mono.now += FAST.wait_limit() + 1  # past its deadline
    server.set(JWKS, jwks_of(k1, k2), headers=KEEP)
    with pytest.raises(KeysUnavailableError):  # key_wait 0: answered at once, fetch replaced
        verifier.verify(mint(k2, jti="again"))
    fresh = only_source(verifier).in_flight()
    assert fresh is not None
    assert fresh is not stuck
    assert fresh.done.wait(30)
    assert verifier.verify(mint(k2, jti="served"))["sub"] == "user-1"
    verifier.close()


# -- 4. smaller items ------------------------------------------------------------------


def test_a_token_that_waited_for_keys_is_cached(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    """JWTVerifier._finish built Claims and never stored them: every rotation re-verified."""
    server.set(JWKS, jwks_of(k1), headers=KEEP)
    mono = Mono()
    verifier = verifier_over(server, mono, cache_stats=True)
    assert verifier.verify(mint(k1))["sub"] == "user-1"
    server.set(JWKS, jwks_of(k1, k2), headers=KEEP)
    mono.now += 2
    token = mint(k2)
    assert asyncio.run(verifier.verify_async(token))["sub"] == "user-1"  # waited on the loop
    hits = verifier.cache_info().hits
    assert verifier.verify(token)["sub"] == "user-1"
    assert verifier.cache_info().hits == (hits or 0) + 1
    verifier.close()


def test_a_logging_filter_that_raises_does_not_stop_keys_being_installed(
    server: DocumentServer, k1: Signer
) -> None:
    """The fetch event went out before the snapshot was installed, through the failing logger."""

    class Broken(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            raise RuntimeError("a broken filter")

    logger = logging.getLogger("grelmicro.jwt")
    broken = Broken()
    logger.addFilter(broken)
    try:
        server.set(JWKS, jwks_of(k1), headers=KEEP)
        verifier = verifier_over(server, Mono())
        assert verifier.verify(mint(k1))["sub"] == "user-1"
        assert verifier.health().ready
    finally:
        logger.removeFilter(broken)
    verifier.close()
