"""Keys from a JWKS URL, against real HTTP and HTTPS servers on 127.0.0.1.

Every server here is a real socket server (``servers.DocumentServer``); the
tests set what it answers and count what it was asked. Time for freshness is
a fake clock the test moves, except where a background task must really run.
No test bounds how long anything takes: a fetch the test needs in flight is
held by a gate on the server's answer, opened once the call under test has
returned, and what a background task brings about is awaited under a hang
guard only (``support.eventually``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from forge import NOW, Signer, hmac_key, private_key
from servers import FAST, DocumentServer, jwks_of, make_tls
from support import HANG_GUARD, FakeClock, eventually, eventually_async, timed, together

from grelmicro.jwt import (
    ConfigurationError,
    FetchOptions,
    InvalidSignatureError,
    JWTVerifier,
    KeysUnavailableError,
    TokenRejectedError,
    UnknownKeyError,
)
from grelmicro.jwt._core import CoreError
from grelmicro.jwt._jwks import KeySource
from grelmicro.jwt._steps import drive_sync

JWKS = "/jwks.json"
AUD = "https://api.example.com"

# For a fetch the test holds at a gate: no limit ends it before the gate opens.
PATIENT = dataclasses.replace(FAST, read_timeout=HANG_GUARD, total_timeout=HANG_GUARD)


def mint(key: Signer, iss: str = "https://idp.example.com/", **claims: Any) -> str:
    return key.mint({"iss": iss, "aud": AUD, "sub": "user-1", "exp": NOW + 3600, **claims})


def settle(verifier: JWTVerifier) -> None:
    """Wait for the refresh threads a verification started."""
    assert verifier._router is not None
    for source in verifier._key_sources():
        source.join()


def only_source(verifier: JWTVerifier) -> KeySource:
    """The verifier's one key source."""
    assert verifier._router is not None
    (source,) = verifier._key_sources()
    return source


def all_waiting(verifier: JWTVerifier, count: int) -> Callable[[], bool]:
    """Whether ``count`` tasks wait on the fetch in flight (to hold its answer until then)."""
    source = only_source(verifier)

    def waiting() -> bool:
        flight = source.in_flight()
        return flight is not None and len(flight.waiters) == count

    return waiting


@pytest.fixture
def k1() -> Signer:
    return private_key("RS256", kid="k1", seed=11)


@pytest.fixture
def k2() -> Signer:
    return private_key("ES256", kid="k2", seed=12)


def network_verifier(
    server: DocumentServer, clock: FakeClock, options: FetchOptions = FAST, **kw: Any
) -> JWTVerifier:
    kw.setdefault("audience", AUD)
    kw.setdefault("issuer", "https://idp.example.com/")
    return JWTVerifier(
        jwks_url=server.url(JWKS),
        allow_insecure_loopback=True,
        fetch=timed(options, clock),
        clock=clock,
        **kw,
    )


# -- build-time refusals -----------------------------------------------------


@pytest.mark.parametrize(
    ("url", "flag", "words"),
    [
        ("http://idp.example.com/jwks", True, "https"),
        ("http://10.0.0.1/jwks", True, "https"),
        ("http://127.0.0.1:9/jwks", False, "allow_insecure_loopback"),
        ("ftp://idp.example.com/jwks", False, "https"),
        ("https://user:pw@idp.example.com/jwks", False, "credentials"),
        ("not a url", False, "URL|host|https"),
        ("", False, "non-empty"),
    ],
)
def test_insecure_urls_are_refused_at_build_time(url: str, flag: bool, words: str) -> None:
    with pytest.raises(ConfigurationError, match=words):
        JWTVerifier(jwks_url=url, allow_insecure_loopback=flag)


@pytest.mark.parametrize(
    "settings",
    [
        {"jwks_url": "https://a/jwks", "jwks": {"keys": []}},
        {"discover": "https://a/", "issuer": "https://b/"},
        {"discover": "http://a.example/"},
        {"jwks_url": "https://a/jwks", "client": object()},
        {"jwks_url": "https://a/jwks", "fetch": {"cooldown": 1}},
    ],
)
def test_conflicting_or_bad_settings_are_refused(settings: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        JWTVerifier(**settings)


@pytest.mark.parametrize(
    "options",
    [
        {"min_ttl": 10, "max_ttl": 5},
        {"cooldown": -1},
        {"unknown_kid_interval": -1},
        {"unknown_kid_interval": float("inf")},
        {"connect_timeout": 0},
        {"read_timeout": float("nan")},
        {"max_response_size": 10},
        {"max_keys": 0},
        {"jitter": 0.9},
        {"max_stale": True},
    ],
)
def test_fetch_options_are_checked(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        FetchOptions(**options)


def test_building_makes_no_request(server: DocumentServer, k1: Signer) -> None:
    server.set(JWKS, jwks_of(k1))
    verifier = network_verifier(server, FakeClock())
    assert server.count(JWKS) == 0
    assert verifier.health().ready is False
    verifier.close()


# -- loading, TLS, freshness -------------------------------------------------


def test_first_sync_verify_loads_the_keys(server: DocumentServer, k1: Signer) -> None:
    server.set(JWKS, jwks_of(k1))
    verifier = network_verifier(server, FakeClock())
    assert verifier.verify(mint(k1))["sub"] == "user-1"
    health = verifier.health()
    assert (health.ready, health.key_count, health.fetch_count) == (True, 1, 1)
    assert health.last_success == NOW
    for _ in range(20):
        verifier.verify(mint(k1, jti="x"))
    assert server.count(JWKS) == 1
    verifier.close()


def test_https_with_a_client_that_trusts_the_test_ca(k1: Signer) -> None:
    tls = make_tls()
    server = DocumentServer(tls=tls.server).start()
    try:
        server.set(JWKS, jwks_of(k1))
        with httpx.Client(verify=tls.client_context()) as client:
            verifier = JWTVerifier(
                jwks_url=server.url(JWKS),
                client=client,
                fetch=timed(FAST, FakeClock()),
                clock=FakeClock(),
                audience=AUD,
            )
            assert verifier.verify(mint(k1))["sub"] == "user-1"
            verifier.close()
        # Our own client trusts the system store only: the test CA is refused.
        untrusted = JWTVerifier(
            jwks_url=server.url(JWKS), fetch=timed(FAST, FakeClock()), clock=FakeClock()
        )
        with pytest.raises(KeysUnavailableError, match="TLS"):
            untrusted.verify(mint(k1))
        assert "TLS" in (untrusted.health().last_error or "")
        untrusted.close()
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("headers", "expected_ttl"),
    [
        ({"Cache-Control": "public, max-age=1200"}, 1200),
        ({"Cache-Control": "max-age=5"}, 60),  # raised to min_ttl
        ({"Cache-Control": "max-age=999999"}, 3600),  # cut to max_ttl
        ({"Cache-Control": "no-store"}, 60),
        ({"Cache-Control": "max-age=1200", "Age": "200"}, 1000),
        ({}, 300),  # default_ttl
    ],
)
def test_cache_control_sets_expiry_within_bounds(
    server: DocumentServer, k1: Signer, headers: dict[str, str], expected_ttl: int
) -> None:
    server.set(JWKS, jwks_of(k1), headers=headers)
    verifier = network_verifier(server, FakeClock())
    verifier.verify(mint(k1))
    assert verifier.health().expires_at == NOW + expected_ttl
    verifier.close()


def test_expired_keys_refresh_in_the_background_while_requests_go_on(
    server: DocumentServer, k1: Signer
) -> None:
    clock = FakeClock()
    server.set(JWKS, jwks_of(k1), headers={"Cache-Control": "max-age=100"})
    verifier = network_verifier(server, clock, PATIENT, cache_size=0)
    verifier.verify(mint(k1))
    clock.now += 99
    verifier.verify(mint(k1))
    assert server.count(JWKS) == 1
    gate = threading.Event()
    server.set(JWKS, jwks_of(k1), headers={"Cache-Control": "max-age=100"}, gate=gate)
    clock.now += 2
    # Due: a thread refreshes and this call is served by the keys held. The
    # answer waits for the gate, opened only below: a call that waited for the
    # fetch would hang until the hang guard and return with no fetch in flight.
    assert verifier.verify(mint(k1))["sub"] == "user-1"
    assert only_source(verifier).in_flight() is not None
    assert verifier.health().expires_at == NOW + 100  # the refresh has not ended
    gate.set()
    settle(verifier)
    assert server.count(JWKS) == 2
    assert verifier.health().expires_at == NOW + 101 + 100


# -- unknown kid: cooldown and rotation --------------------------------------


def test_invented_kids_cost_at_most_the_budget_per_interval(
    server: DocumentServer, k1: Signer
) -> None:
    server.set(JWKS, jwks_of(k1))
    clock = FakeClock()
    options = dataclasses.replace(FAST, unknown_kid_budget=2, unknown_kid_interval=30)
    verifier = network_verifier(server, clock, options)
    verifier.verify(mint(k1))
    # Keys fetched as the token arrived answer for it: 401, no fetch.
    with pytest.raises(UnknownKeyError):
        verifier.verify(mint(k1.with_kid("invented")))
    assert server.count(JWKS) == 1
    clock.now += 3  # the keys now predate arriving tokens: one look first
    for i in range(200):
        forged = k1.with_kid(f"invented-{i}")
        with pytest.raises(UnknownKeyError):
            verifier.verify(mint(forged, jti=str(i)))
    assert server.count(JWKS) == 2  # one refetch for the whole flood
    clock.now += 3
    with pytest.raises(KeysUnavailableError) as caught:  # spread: one per 30 / 2 s
        verifier.verify(mint(k1.with_kid("early")))
    assert caught.value.retry_after == 15 - 3
    clock.now += 12
    with pytest.raises(UnknownKeyError):
        verifier.verify(mint(k1.with_kid("second")))
    assert server.count(JWKS) == 3  # the budget's second fetch
    clock.now += 3
    with pytest.raises(KeysUnavailableError) as caught:  # budget spent: 503, never 401
        verifier.verify(mint(k1.with_kid("third")))
    assert caught.value.retry_after == 30 - 18  # the first of the two leaves the window
    assert server.count(JWKS) == 3
    assert verifier.verify(mint(k1, jti="ok"))["sub"] == "user-1"  # known keys: no fetch
    assert server.count(JWKS) == 3
    clock.now += 12  # the window has room again
    with pytest.raises(UnknownKeyError):
        verifier.verify(mint(k1.with_kid("again")))
    assert server.count(JWKS) == 4
    verifier.close()


def test_rotation_that_adds_a_key_keeps_the_cache(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    server.set(JWKS, jwks_of(k1))
    clock = FakeClock()
    verifier = network_verifier(server, clock)
    old = mint(k1)
    assert verifier.verify(old)["sub"] == "user-1"
    cache_before = verifier._cache
    # The provider adds k2: a token naming it triggers one refresh; cache kept.
    server.set(JWKS, jwks_of(k1, k2))
    clock.now += 3  # the keys held predate the token
    assert verifier.verify(mint(k2))["sub"] == "user-1"
    assert verifier._cache is cache_before
    assert verifier.cache_info().size == 2
    verifier.close()


def test_an_added_key_that_makes_kid_less_tokens_ambiguous_drops_the_cache(
    server: DocumentServer, k1: Signer
) -> None:
    # A kid-less token verifies while k1 is the only RS256 key (design.md §3).
    # Once the provider adds a second RS256 key the same token is ambiguous:
    # the cache must not keep serving the answer the old key set gave.
    clock = FakeClock()
    server.set(JWKS, jwks_of(k1), headers={"Cache-Control": "max-age=100"})
    verifier = network_verifier(server, clock)
    kid_less = mint(k1.with_kid(None))
    assert verifier.verify(kid_less)["sub"] == "user-1"
    assert verifier.cache_info().size == 1
    second_rs256 = private_key("RS256", kid="k1b", seed=13)
    server.set(JWKS, jwks_of(k1, second_rs256), headers={"Cache-Control": "max-age=100"})
    clock.now += 101
    verifier.verify(mint(second_rs256, jti="trigger"))  # due: the refresh adds it
    settle(verifier)
    with pytest.raises(UnknownKeyError):
        verifier.verify(kid_less)
    verifier.close()


def test_a_refresh_that_ends_before_the_miss_step_is_asked_not_its_predecessor(
    server: DocumentServer, k1: Signer
) -> None:
    # The race CI once hit: a background refresh starts at the token's
    # arrival and installs new keys between the held keys' refusal and the
    # miss step. The refusal came from the old keys; the new ones (fetched
    # after the token arrived) hold its kid and must be the ones asked.
    clock = FakeClock()
    server.set(JWKS, jwks_of(k1), headers={"Cache-Control": "max-age=100"})
    verifier = network_verifier(server, clock)
    assert verifier.verify(mint(k1))["sub"] == "user-1"
    assert verifier._router is not None
    (slot,) = verifier._router._slots.values()
    old = slot.keys.snapshot
    second = private_key("RS256", kid="k1b", seed=13)
    token = mint(second)
    clock.now += 101
    arrived = slot.timer()
    assert slot.core is not None
    with pytest.raises(CoreError) as refused:
        slot.core.verify_until(token, clock())
    server.set(JWKS, jwks_of(k1, second), headers={"Cache-Control": "max-age=100"})
    only_source(verifier).refresh_background()
    settle(verifier)
    assert slot.keys.snapshot is not old  # the source installed its route on publishing
    assert slot.keys.snapshot.fetched_at >= arrived
    steps = slot.steps(token, clock(), arrived, refused.value, old)
    payload, _ = drive_sync(steps, token)
    assert payload["sub"] == "user-1"
    assert server.count(JWKS) == 2  # no fetch of its own: the refresh answered it
    verifier.close()


def test_withdrawn_key_stops_verifying_even_from_the_cache(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    clock = FakeClock()
    server.set(JWKS, jwks_of(k1, k2), headers={"Cache-Control": "max-age=100"})
    verifier = network_verifier(server, clock)
    old = mint(k1)
    verifier.verify(old)
    before = verifier._cache
    server.set(JWKS, jwks_of(k2), headers={"Cache-Control": "max-age=100"})
    clock.now += 101
    verifier.verify(mint(k2, jti="trigger"))  # due: the refresh withdraws k1
    settle(verifier)
    assert verifier._cache is not before  # a new cache
    with pytest.raises(TokenRejectedError):  # k1 was the only RS256 key: now alg or kid
        verifier.verify(old)
    verifier.close()


def test_a_refresh_with_the_same_keys_changes_nothing(server: DocumentServer, k1: Signer) -> None:
    clock = FakeClock()
    server.set(JWKS, jwks_of(k1), headers={"Cache-Control": "max-age=100"})
    verifier = network_verifier(server, clock)
    verifier.verify(mint(k1))
    before = (verifier._cache, verifier._engine)
    clock.now += 101
    verifier.verify(mint(k1, jti="x"))
    settle(verifier)
    assert server.count(JWKS) == 2
    assert (verifier._cache, verifier._engine) == before
    assert verifier.cache_info().size == 2


def test_fetched_symmetric_keys_are_never_used(server: DocumentServer, k1: Signer) -> None:
    secret = hmac_key(secret=b"s" * 32, kid="hs")
    server.set(JWKS, {"keys": [k1.public_jwk(), secret.public_jwk()]})
    verifier = network_verifier(server, FakeClock())
    assert verifier.verify(mint(k1))
    with pytest.raises(TokenRejectedError):
        verifier.verify(mint(secret))
    assert verifier.health().key_count == 1
    verifier.close()


# -- faults ------------------------------------------------------------------

FAULTS: dict[str, dict[str, Any]] = {
    "5xx": {"body": "oops", "status": 503},
    "404": {"body": "gone", "status": 404},
    "html": {"body": "<html><body>Sign in</body></html>", "headers": {"Content-Type": "text/html"}},
    "invalid-json": {"body": '{"keys": [', "headers": {"Content-Type": "application/json"}},
    "not-an-object": {"body": "[1, 2]"},
    "only-unusable-keys": {
        "body": '{"keys": [{"kty": "oct", "k": "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}]}'
    },
    "oversize": {"body": '{"keys": [], "pad": "' + "x" * 300_000 + '"}'},
    "oversize-no-length": {
        "body": '{"keys": [], "pad": "' + "x" * 300_000 + '"}',
        "content_length": False,
    },
    "redirect": {"body": "", "status": 302, "headers": {"Location": "/elsewhere"}},
    "slow": {"body": '{"keys": []}', "delay": 3.0},
    "drip": {"body": '{"keys": [' + " " * 200 + "]}", "drip": 0.1},
    "gzip": {"body": "\x1f\x8b", "headers": {"Content-Encoding": "gzip"}},
}

#: What ended each fault's fetch (``health().last_error``). "slow" answers
#: after the read timeout and "drip" long after the total one: their errors
#: name the limit that cut them, so none was waited out.
FAULT_ERRORS = {
    "5xx": "answered HTTP 503",
    "404": "answered HTTP 404",
    "html": "not valid JSON",
    "invalid-json": "not valid JSON",
    "not-an-object": "no keys array",
    "only-unusable-keys": "no usable key",
    "oversize": "larger than the limit",
    "oversize-no-length": "larger than the limit",
    "redirect": "redirects are not followed",
    "slow": "timed out (ReadTimeout)",
    "drip": f"answer took longer than {FAST.total_timeout} s",
    "gzip": "content-encoding 'gzip'",
    "down": "could not connect",
}


def break_source(server: DocumentServer, fault: str) -> None:
    """Make ``server``'s JWKS answer with ``fault`` (``"down"``: nothing listens any more)."""
    if fault == "down":
        server.stop()
    else:
        server.set(JWKS, **FAULTS[fault])


def faulty_source(server: DocumentServer, fault: str) -> JWTVerifier:
    """A verifier (no keys yet) over ``server``'s JWKS, broken by ``fault``."""
    url = server.url(JWKS)
    break_source(server, fault)
    return JWTVerifier(
        jwks_url=url,
        allow_insecure_loopback=True,
        fetch=timed(FAST, FakeClock()),
        clock=FakeClock(),
        audience=AUD,
    )


@pytest.mark.parametrize("fault", [*FAULTS, "down"])
def test_no_keys_at_start_is_a_503_never_a_401(
    server: DocumentServer, k1: Signer, fault: str
) -> None:
    verifier = faulty_source(server, fault)
    with pytest.raises(KeysUnavailableError) as caught:
        verifier.verify(mint(k1))
    assert not isinstance(caught.value, TokenRejectedError)
    assert caught.value.__cause__ is None
    flight = only_source(verifier).in_flight()
    if flight is not None:  # slower than key_wait (drip): 503 now, the fetch goes on
        assert caught.value.wait == "fetch-in-flight"
        assert flight.done.wait(10)
    health = verifier.health()
    assert (health.ready, health.failure_count) == (False, 1)
    assert FAULT_ERRORS[fault] in (health.last_error or "")
    asked = server.count(JWKS)
    # Within the cooldown the next request fails without a fetch.
    with pytest.raises(KeysUnavailableError):
        verifier.verify(mint(k1))
    assert (verifier.health().fetch_count, server.count(JWKS)) == (1, asked)
    verifier.close()


@pytest.mark.parametrize("fault", [*FAULTS, "down"])
def test_a_failing_provider_keeps_the_last_good_keys_until_the_bound(
    k1: Signer, fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    server = DocumentServer().start()
    try:
        clock = FakeClock()
        server.set(JWKS, jwks_of(k1), headers={"Cache-Control": "max-age=100"})
        options = dataclasses.replace(FAST, log_interval=1000)
        verifier = network_verifier(server, clock, options, cache_size=0)
        token = mint(k1)
        verifier.verify(token)
        break_source(server, fault)
        caplog.set_level(logging.WARNING, "grelmicro.jwt")
        # Past expiry, within the staleness bound: served, counted, logged once.
        for step in range(5):
            clock.now = NOW + 101 + step * 40
            assert verifier.verify(token)["sub"] == "user-1"
            settle(verifier)
        health = verifier.health()
        assert health.ready
        assert health.failure_count >= 2
        assert health.stale_uses == 5
        assert health.key_count == 1  # a bad document never replaced the keys
        failures = [r for r in caplog.records if "fetch failed" in r.getMessage()]
        assert len(failures) == 1  # once per log interval (1000 s here)
        assert token not in caplog.text
        # Past expiry + max_stale: 503.
        clock.now = NOW + 100 + 600 + 1
        with pytest.raises(KeysUnavailableError, match="staleness"):
            verifier.verify(token)
        assert verifier.health().ready is False
        verifier.close()
    finally:
        if fault != "down":
            server.stop()


def test_a_cached_result_is_not_served_past_the_bound(server: DocumentServer, k1: Signer) -> None:
    """Past the staleness bound a cache hit is refused too, whatever the threads do.

    The bound watcher runs on real time and may come late; the cached result
    itself ends at the bound, so the request that finds it looks at the keys.
    """
    clock = FakeClock()
    server.set(JWKS, jwks_of(k1), headers={"Cache-Control": "max-age=100"})
    verifier = network_verifier(server, clock, cache_ttl=3600)
    token = mint(k1)  # exp and cache_ttl would keep it an hour
    verifier.verify(token)
    break_source(server, "5xx")
    clock.now = NOW + 100 + 600 + 1  # past expiry + max_stale; no watcher woke yet
    with pytest.raises(KeysUnavailableError, match="staleness"):
        verifier.verify(token)
    verifier.close()


def test_a_miss_in_flight_at_the_bound_leaves_nothing_served_after_it(
    server: DocumentServer, k1: Signer
) -> None:
    """A miss verified before the keys pass their bound stores where no later call looks.

    The miss holds the route it started with: its result goes into the cache
    the withdrawal dropped, never into the one installed after it.
    """
    clock = FakeClock()
    server.set(JWKS, jwks_of(k1), headers={"Cache-Control": "max-age=100"})
    # Cached results would outlive the bound by far (cache_ttl, exp): only
    # the withdrawal stops them.
    verifier = network_verifier(server, clock, cache_ttl=3600)
    token, trigger = mint(k1, jti="in-flight"), mint(k1, jti="trigger")
    verifier.verify(mint(k1, jti="load"))
    router = verifier._router
    assert router is not None
    engine = router.verify_until
    verified, release = threading.Event(), threading.Event()

    def held(given: str | bytes, now: float) -> tuple[Any, float | None]:
        answer = engine(given, now)
        if given == token:  # verified; its result is not stored yet
            verified.set()
            assert release.wait(HANG_GUARD)
        return answer

    router.verify_until = held
    verifier._drop_cache()  # the route verifies through the hook from now on
    results: list[object] = []
    worker = threading.Thread(target=lambda: results.append(verifier.verify(token)))
    worker.start()
    try:
        assert verified.wait(HANG_GUARD)
        break_source(server, "5xx")
        clock.now = NOW + 100 + 600 + 1  # past expiry + max_stale
        with pytest.raises(KeysUnavailableError, match="staleness"):
            verifier.verify(trigger)  # the keys are withdrawn, the cache with them
    finally:
        release.set()
        worker.join(HANG_GUARD)
    assert not worker.is_alive()
    assert len(results) == 1  # verified before the bound: answered
    with pytest.raises(KeysUnavailableError, match="staleness"):
        verifier.verify(token)
    verifier.close()


@pytest.mark.anyio
@pytest.mark.parametrize("fault", ["5xx", "html", "slow", "drip", "oversize-no-length", "down"])
async def test_async_faults_end_in_a_503_cut_by_the_limits(
    server: DocumentServer, k1: Signer, fault: str
) -> None:
    verifier = faulty_source(server, fault)
    await verifier.start()  # logs, does not raise
    with pytest.raises(KeysUnavailableError):
        await verifier.verify_async(mint(k1))
    health = verifier.health()
    assert health.failure_count == 1
    assert FAULT_ERRORS[fault] in (health.last_error or "")
    await verifier.aclose()


def test_an_oversize_document_is_not_read_past_the_cap(k1: Signer) -> None:
    server = DocumentServer().start()
    try:
        # 50 MB announced, dripped without a length: we stop after the cap.
        server.set(JWKS, **FAULTS["oversize-no-length"])
        options = FetchOptions(max_response_size=1024, read_timeout=1, total_timeout=2)
        verifier = JWTVerifier(
            jwks_url=server.url(JWKS), allow_insecure_loopback=True, fetch=options
        )
        with pytest.raises(KeysUnavailableError, match="larger than the limit of 1024"):
            verifier.verify(mint(k1))
        verifier.close()
    finally:
        server.stop()


def test_too_many_keys_is_a_bad_document(server: DocumentServer) -> None:
    keys = [private_key("ES256", kid=f"k{i}", seed=100 + i) for i in range(4)]
    server.set(JWKS, jwks_of(*keys))
    options = FetchOptions(max_keys=3)
    verifier = JWTVerifier(
        jwks_url=server.url(JWKS),
        allow_insecure_loopback=True,
        fetch=timed(options, FakeClock()),
        clock=FakeClock(),
    )
    with pytest.raises(KeysUnavailableError, match="JWKS"):
        verifier.verify(mint(keys[0]))
    verifier.close()


def test_a_redirect_is_never_followed(server: DocumentServer, k1: Signer) -> None:
    server.set(JWKS, "", status=301, headers={"Location": "/real.json"})
    server.set("/real.json", jwks_of(k1))
    verifier = network_verifier(server, FakeClock())
    with pytest.raises(KeysUnavailableError, match="redirect"):
        verifier.verify(mint(k1))
    assert server.count("/real.json") == 0
    verifier.close()


# -- single flight: threads and tasks ----------------------------------------


def test_fifty_threads_during_a_load_share_one_fetch(server: DocumentServer, k1: Signer) -> None:
    # The delay makes the threads overlap; PATIENT: no limit ends the slow answer.
    server.set(JWKS, jwks_of(k1), delay=0.3)
    verifier = JWTVerifier(
        jwks_url=server.url(JWKS),
        allow_insecure_loopback=True,
        fetch=timed(PATIENT, FakeClock()),
        clock=FakeClock(),
        audience=AUD,
        cache_size=0,
    )
    results: list[object] = []

    assert (
        together(50, lambda i: results.append(verifier.verify(mint(k1, jti=str(i)))["sub"])) == []
    )
    assert results == ["user-1"] * 50
    assert server.count(JWKS) == 1
    verifier.close()


def test_fifty_threads_with_a_new_kid_during_a_refresh_share_one_fetch(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    # A provider slow to answer (0.3 s), from the first fetch: a thread waits
    # for its fetches (KeyState.patience: from the fetches it saw, timed on
    # the real monotonic clock here).
    server.set(JWKS, jwks_of(k1), delay=0.3)
    verifier = JWTVerifier(
        jwks_url=server.url(JWKS),
        allow_insecure_loopback=True,
        fetch=PATIENT,
        clock=FakeClock(),
        audience=AUD,
        issuer="https://idp.example.com/",
        cache_size=0,
    )
    verifier.verify(mint(k1))
    server.set(JWKS, jwks_of(k1, k2), delay=0.3)
    results: list[object] = []

    assert (
        together(50, lambda i: results.append(verifier.verify(mint(k2, jti=str(i)))["sub"])) == []
    )
    assert results == ["user-1"] * 50
    assert server.count(JWKS) == 2
    verifier.close()


@pytest.mark.anyio
async def test_fifty_tasks_during_a_load_share_one_fetch(
    server: DocumentServer, k1: Signer
) -> None:
    gate = threading.Event()
    server.set(JWKS, jwks_of(k1), gate=gate)
    verifier = network_verifier(server, FakeClock(), PATIENT, cache_size=0)
    tokens = [mint(k1, jti=str(i)) for i in range(50)]
    calls = asyncio.ensure_future(asyncio.gather(*(verifier.verify_async(t) for t in tokens)))
    # The answer is held until every task waits on the one fetch in flight.
    await eventually_async(all_waiting(verifier, 50), "50 tasks waiting on one fetch")
    gate.set()
    results = await calls
    assert [c["sub"] for c in results] == ["user-1"] * 50
    assert server.count(JWKS) == 1
    await verifier.aclose()


@pytest.mark.anyio
async def test_fifty_tasks_with_a_new_kid_share_one_fetch(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    server.set(JWKS, jwks_of(k1))
    clock = FakeClock()
    async with network_verifier(server, clock, PATIENT, cache_size=0) as verifier:
        assert server.count(JWKS) == 1  # start() loaded the keys
        gate = threading.Event()
        server.set(JWKS, jwks_of(k1, k2), gate=gate)
        clock.now += 3  # the keys held predate the tokens
        tokens = [mint(k2, jti=str(i)) for i in range(50)]
        calls = asyncio.ensure_future(asyncio.gather(*(verifier.verify_async(t) for t in tokens)))
        await eventually_async(all_waiting(verifier, 50), "50 tasks waiting on one fetch")
        gate.set()
        results = await calls
        assert [c["sub"] for c in results] == ["user-1"] * 50
        assert server.count(JWKS) == 2


@pytest.mark.anyio
async def test_sync_verify_on_the_event_loop_never_blocks(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    gate = threading.Event()
    server.set(JWKS, jwks_of(k1), gate=gate)
    verifier = network_verifier(server, FakeClock(), PATIENT)
    with pytest.raises(KeysUnavailableError):
        verifier.verify(mint(k1))  # the load runs on the loop; this call does not wait
    # The answer waits for the gate, opened only below: a call that waited
    # for the load would hang until the hang guard and find it over.
    flight = only_source(verifier).in_flight()
    assert flight is not None
    assert not flight.done.is_set()
    gate.set()
    claims = await verifier.verify_async(mint(k1))
    assert claims["sub"] == "user-1"
    assert server.count(JWKS) == 1
    await verifier.aclose()


@pytest.mark.anyio
async def test_background_refresh_follows_max_age_and_stops_on_aclose(
    server: DocumentServer, k1: Signer
) -> None:
    """The task wakes on real time (at most ``max_ttl`` apart) and fetches when
    the fake clock says the keys are due; no request asks for it."""
    server.set(JWKS, jwks_of(k1), headers={"Cache-Control": "max-age=1"})
    options = FetchOptions(min_ttl=0.5, max_ttl=1, jitter=0.0, cooldown=1)
    clock = FakeClock()
    token = mint(k1)
    verifier = JWTVerifier(
        jwks_url=server.url(JWKS),
        allow_insecure_loopback=True,
        fetch=timed(options, clock),
        clock=clock,
        audience=AUD,
    )
    source = only_source(verifier)
    await verifier.start()
    assert verifier.health().ready
    assert (server.count(JWKS), verifier.health().expires_at) == (1, NOW + 1)
    for fetched in (2, 3):
        clock.now += 1  # max-age reached: the task refetches, expiring a second later
        await eventually_async(
            lambda: verifier.health().expires_at == clock.now + 1, "the background refresh"
        )
        # The clock stands still: however often the task wakes, nothing is due.
        assert server.count(JWKS) == fetched
    assert (await verifier.verify_async(token))["sub"] == "user-1"
    background = source._background
    assert background is not None
    await verifier.aclose()
    assert background.done()
    assert source._background is None
    assert not source._tasks  # nothing left on the loop to fetch again


@pytest.mark.anyio
async def test_start_with_the_provider_down_does_not_raise_and_recovers(k1: Signer) -> None:
    server = DocumentServer().start()
    try:
        server.set(JWKS, "down", status=500)
        options = FetchOptions(min_ttl=5, cooldown=0.2, jitter=0.0)
        token = k1.mint({"aud": AUD, "sub": "u", "exp": time.time() + 600})
        verifier = JWTVerifier(
            jwks_url=server.url(JWKS), allow_insecure_loopback=True, fetch=options, audience=AUD
        )
        await verifier.start()
        assert verifier.health().ready is False
        with pytest.raises(KeysUnavailableError):
            await verifier.verify_async(token)
        server.set(JWKS, jwks_of(k1))
        # The background task retries after the cooldown (real time here).
        await eventually_async(lambda: verifier.health().ready, "recovery")
        assert (await verifier.verify_async(token))["sub"] == "u"
        await verifier.aclose()
    finally:
        server.stop()


# -- what never leaks ---------------------------------------------------------


def test_messages_quote_neither_tokens_nor_documents(
    server: DocumentServer, k1: Signer, caplog: pytest.LogCaptureFixture
) -> None:
    marker = "SECRET-DOCUMENT-CONTENT"
    server.set(JWKS, '{"keys": "' + marker + '"', status=200)
    verifier = network_verifier(server, FakeClock())
    token = mint(k1)
    caplog.set_level(logging.DEBUG, "grelmicro.jwt")
    with pytest.raises(KeysUnavailableError) as caught:
        verifier.verify(token)
    for text in (str(caught.value), caplog.text, repr(verifier.health())):
        assert marker not in text
        assert token not in text
    verifier.close()


def test_signature_of_a_known_kid_still_counts(server: DocumentServer, k1: Signer) -> None:
    server.set(JWKS, jwks_of(k1))
    verifier = network_verifier(server, FakeClock())
    impostor = private_key("RS256", kid="k1", seed=99)
    with pytest.raises(InvalidSignatureError):
        verifier.verify(mint(impostor))
    assert server.count(JWKS) == 1  # a bad signature is not a reason to refetch
    verifier.close()


def test_document_as_json_text(server: DocumentServer, k1: Signer) -> None:
    server.set(JWKS, json.dumps(jwks_of(k1)), headers={"Content-Type": "application/jwk-set+json"})
    verifier = network_verifier(server, FakeClock())
    assert verifier.verify(mint(k1))["sub"] == "user-1"
    verifier.close()


def test_threads_keep_verifying_while_the_provider_rotates(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    """Keys refresh every ~50 ms of real time while eight threads verify; the
    provider alternates k2 and k3 beside k1, each document fetched before the
    next one is published. A token of the key that stays must verify every
    single time. The run is counted in documents fetched, not in seconds."""
    k3 = private_key("ES256", kid="k3", seed=13)
    headers = {"Cache-Control": "max-age=0"}
    server.set(JWKS, jwks_of(k1, k2), headers=headers)
    options = FetchOptions(min_ttl=0.05, max_ttl=1, jitter=0.0, cooldown=0.05)
    verifier = JWTVerifier(
        jwks_url=server.url(JWKS), allow_insecure_loopback=True, fetch=options, cache_size=64
    )
    rotations = 6
    started = threading.Barrier(9)
    stop = threading.Event()
    failures: list[BaseException] = []
    verified = [0] * 8

    def flip() -> None:
        started.wait()
        try:
            for turn in range(rotations):
                server.set(JWKS, jwks_of(k1, k2 if turn % 2 else k3), headers=headers)
                asked = server.count(JWKS)
                # A request counted after the change was answered with it.
                eventually(lambda asked=asked: server.count(JWKS) > asked, "a refresh")
        finally:
            stop.set()

    def worker(n: int) -> None:
        started.wait()
        i = 0
        while not stop.is_set() or i == 0:
            i += 1
            token = k1.mint({"sub": "u", "exp": time.time() + 600, "jti": f"{n}-{i % 40}"})
            try:
                verifier.verify(token)
            except Exception as exc:
                failures.append(exc)
                stop.set()
                return
            verified[n] += 1

    threads = [threading.Thread(target=flip)]
    threads += [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(HANG_GUARD * (rotations + 1))
    assert not any(t.is_alive() for t in threads)
    verifier.close()
    assert failures == []
    assert all(verified)  # every thread verified while the keys changed
    assert server.count(JWKS) >= rotations  # each published document was fetched
