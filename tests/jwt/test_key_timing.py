"""Key timing never refuses a valid token, and each outcome is reported once.

Against real JWKS servers on 127.0.0.1 (and a real uvicorn for the FastAPI
dependency). Time is a fake clock the tests move: a token of a key the
provider published after our last fetch must verify (one refetch, or a 503
saying when to retry), never 401; ``on_reject`` hears each token's final
outcome once, after any refetch-and-retry.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import threading
import time
from typing import Any

import pytest
from fastapi import Depends, FastAPI
from forge import NOW, Signer, hmac_key, private_key
from servers import FAST, DocumentServer, jwks_of, serve
from support import HANG_GUARD, FakeClock, documents, eventually, eventually_async, timed

from grelmicro.jwt import (
    Claims,
    FetchOptions,
    JWTVerifier,
    KeysUnavailableError,
    TokenRejectedError,
    UnknownKeyError,
)
from grelmicro.jwt._config import JWTConfig
from grelmicro.jwt._issuers import network_algorithms
from grelmicro.jwt._router import worth_refetch
from grelmicro.jwt.fastapi import JWTBearer

JWKS = "/jwks.json"
AUD = "https://api.example.com"


def mint(key: Signer, **claims: Any) -> str:
    return key.mint({"aud": AUD, "sub": "user-1", "exp": NOW + 3600, **claims})


@pytest.fixture
def k1() -> Signer:
    return private_key("RS256", kid="k1", seed=41)


@pytest.fixture
def k2() -> Signer:
    return private_key("ES256", kid="k2", seed=42)  # a new key of a new algorithm


class Reports:
    """An ``on_reject`` hook that counts what it hears."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def __call__(self, error: TokenRejectedError) -> None:
        self.reasons.append(error.reason)


def verifier_over(
    url: str, clock: FakeClock, reports: Reports, options: FetchOptions = FAST, **kw: Any
) -> JWTVerifier:
    return JWTVerifier(
        jwks_url=url,
        allow_insecure_loopback=True,
        fetch=timed(options, clock),
        clock=clock,
        audience=AUD,
        on_reject=reports,
        **kw,
    )


# -- outcomes reported once, after the refetch-and-retry -------------------------


def test_sync_verify_of_a_newly_published_key_is_not_reported(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    server.set(JWKS, jwks_of(k1))
    clock, reports = FakeClock(), Reports()
    verifier = verifier_over(server.url(JWKS), clock, reports)
    verifier.verify(mint(k1))
    server.set(JWKS, jwks_of(k1, k2))
    clock.now += 8  # the keys held predate the token
    assert verifier.verify(mint(k2))["sub"] == "user-1"
    assert reports.reasons == []
    assert server.count(JWKS) == 2
    # A kid nobody publishes: one fetch looked, one report.
    clock.now += 8
    with pytest.raises(UnknownKeyError):
        verifier.verify(mint(k1.with_kid("nobody")))
    assert reports.reasons == ["unknown-key"]
    verifier.close()


@pytest.mark.anyio
async def test_verify_async_of_a_newly_published_key_is_not_reported(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    server.set(JWKS, jwks_of(k1))
    clock, reports = FakeClock(), Reports()
    # A slow answer the token waits for; no limit of FAST ends it first.
    patient = dataclasses.replace(FAST, read_timeout=HANG_GUARD, total_timeout=HANG_GUARD)
    async with verifier_over(server.url(JWKS), clock, reports, patient) as verifier:
        server.set(JWKS, jwks_of(k1, k2), delay=0.2)
        clock.now += 8
        assert (await verifier.verify_async(mint(k2)))["sub"] == "user-1"
        assert reports.reasons == []
        clock.now += 8
        with pytest.raises(UnknownKeyError):
            await verifier.verify_async(mint(k1.with_kid("nobody")))
        assert reports.reasons == ["unknown-key"]
        assert server.count(JWKS) == 3  # the load, then one fetch per token


def bearer_app(verifier: JWTVerifier) -> FastAPI:
    auth = JWTBearer(verifier)
    app = FastAPI()

    @app.get("/me")
    async def me(claims: Claims = Depends(auth)) -> dict[str, Any]:  # noqa: B008
        return {"sub": claims.subject}

    auth.install(app)
    return app


def test_jwt_bearer_answers_200_for_a_newly_published_key_and_reports_nothing(
    k1: Signer, k2: Signer
) -> None:
    pages: dict[str, Any] = {JWKS: jwks_of(k1)}
    clock, reports = FakeClock(), Reports()
    with documents(pages) as (base, log):
        verifier = verifier_over(base + JWKS, clock, reports)
        with serve(bearer_app(verifier)) as client:
            assert log == [JWKS]  # loaded at start-up
            pages[JWKS] = jwks_of(k1, k2)  # a new key, of an algorithm not served before
            clock.now += 8
            response = client.get("/me", headers={"Authorization": f"Bearer {mint(k2)}"})
            assert (response.status_code, response.json()) == (200, {"sub": "user-1"})
            assert reports.reasons == []
            assert log == [JWKS, JWKS]
            clock.now += 8
            forged = mint(k1.with_kid("nobody"))
            response = client.get("/me", headers={"Authorization": f"Bearer {forged}"})
            assert response.status_code == 401
            assert reports.reasons == ["unknown-key"]  # once, though retried after a fetch


# -- suppressed or failed refetches answer 503, never 401 ------------------------


def test_a_spent_budget_answers_503_with_the_time_to_the_next_fetch(k1: Signer, k2: Signer) -> None:
    pages: dict[str, Any] = {JWKS: jwks_of(k1)}
    clock, reports = FakeClock(), Reports()
    options = dataclasses.replace(FAST, unknown_kid_budget=1, unknown_kid_interval=30)
    with documents(pages) as (base, log):
        verifier = verifier_over(base + JWKS, clock, reports, options)
        with serve(bearer_app(verifier)) as client:
            clock.now += 3
            junk = mint(k1.with_kid("junk"))
            assert client.get("/me", headers={"Authorization": f"Bearer {junk}"}).status_code == 401
            assert len(log) == 2  # the junk spent the budget (at NOW + 3)
            pages[JWKS] = jwks_of(k1, k2)
            clock.now += 3
            token = mint(k2)
            response = client.get("/me", headers={"Authorization": f"Bearer {token}"})
            assert response.status_code == 503  # never 401: the kid may be new
            assert response.headers["retry-after"] == str(30 - 3)
            assert len(log) == 2
            clock.now += 27  # the window has room again
            response = client.get("/me", headers={"Authorization": f"Bearer {token}"})
            assert response.status_code == 200
            assert len(log) == 3
    assert reports.reasons == ["unknown-key"]


def test_a_failed_refetch_answers_503_and_the_retry_verifies(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    server.set(JWKS, jwks_of(k1))
    clock, reports = FakeClock(), Reports()
    verifier = verifier_over(server.url(JWKS), clock, reports)
    verifier.verify(mint(k1))
    server.set(JWKS, "down", status=500)
    clock.now += 8
    with pytest.raises(KeysUnavailableError) as caught:
        verifier.verify(mint(k2))
    # The provider fails (an outage, not a pending key): retry after one load
    # pace, 0.75 to 1.25 s (a failed fetch spends no budget).
    assert (caught.value.reason, caught.value.wait) == ("keys-unavailable", "provider-failing")
    assert caught.value.retry_after is not None
    assert 0.75 <= caught.value.retry_after <= 1.25
    assert server.count(JWKS) == 2
    assert verifier.verify(mint(k1, jti="known"))["sub"] == "user-1"  # known keys serve
    server.set(JWKS, jwks_of(k1, k2))
    clock.now += 1.3
    assert verifier.verify(mint(k2))["sub"] == "user-1"
    assert server.count(JWKS) == 3
    assert reports.reasons == []
    verifier.close()


# -- start-up: with no keys held, a load about every second (never a long backoff) -----


def test_a_provider_down_at_start_is_retried_about_every_second(
    server: DocumentServer, k1: Signer
) -> None:
    """No keys held: each pause is about 1 s (jitter 0.75-1.25 s), never doubling.

    The service answers nothing anyway; the first request after the
    provider returns gets keys. (Doubling up to the cooldown is for a
    source that holds keys: see test_schedule.)
    """
    server.set(JWKS, "down", status=500)
    clock, reports = FakeClock(), Reports()
    options = dataclasses.replace(FAST, cooldown=5)
    verifier = verifier_over(server.url(JWKS), clock, reports, options, cache_size=0)
    token = mint(k1)
    waits: list[float] = []
    for step in range(8):
        with pytest.raises(KeysUnavailableError) as caught:
            verifier.verify(token)
        assert server.count(JWKS) == step + 1  # one attempt per pause, none in between
        assert caught.value.wait == "provider-failing"
        assert caught.value.retry_after is not None
        waits.append(caught.value.retry_after)
        with pytest.raises(KeysUnavailableError):
            verifier.verify(token)  # within the pause: no fetch
        assert server.count(JWKS) == step + 1
        clock.now += caught.value.retry_after
    assert all(0.75 <= wait <= 1.25 for wait in waits), waits
    # The provider is back: the next request loads the keys, at once.
    server.set(JWKS, jwks_of(k1))
    assert verifier.verify(token)["sub"] == "user-1"
    assert server.count(JWKS) == 9
    assert reports.reasons == []
    verifier.close()


def test_a_providers_retry_after_is_honoured_within_the_cooldown(
    server: DocumentServer, k1: Signer
) -> None:
    server.set(JWKS, "busy", status=503, headers={"Retry-After": "12"})
    clock = FakeClock()
    verifier = verifier_over(server.url(JWKS), clock, Reports())
    with pytest.raises(KeysUnavailableError) as caught:
        verifier.verify(mint(k1))
    assert caught.value.retry_after == 12
    server.set(JWKS, "busy", status=503, headers={"Retry-After": "86400"})
    clock.now += 12
    with pytest.raises(KeysUnavailableError) as caught:
        verifier.verify(mint(k1))
    assert caught.value.retry_after == FAST.cooldown
    verifier.close()


# -- an empty key list withdraws the keys the second time in a row ---------------


def test_an_empty_key_list_seen_twice_withdraws_the_keys(
    server: DocumentServer, k1: Signer
) -> None:
    headers = {"Cache-Control": "max-age=100"}
    server.set(JWKS, jwks_of(k1), headers=headers)
    clock = FakeClock()
    verifier = verifier_over(server.url(JWKS), clock, Reports())
    token = mint(k1)
    verifier.verify(token)
    server.set(JWKS, {"keys": []}, headers=headers)
    clock.now += 100
    assert verifier.verify(token)["sub"] == "user-1"  # a hit; the refresh is not asked yet
    assert verifier.verify(mint(k1, jti="miss"))["sub"] == "user-1"  # due: refresh runs
    for source in verifier._key_sources():  # type: ignore[union-attr]
        source.join()
    assert server.count(JWKS) == 2
    assert verifier.health().ready  # seen once: kept, asked again soon
    assert verifier.verify(mint(k1, jti="still"))["sub"] == "user-1"
    clock.now += 1
    verifier.verify(mint(k1, jti="due"))  # due again: the second look runs in a thread
    for source in verifier._key_sources():  # type: ignore[union-attr]
        source.join()
    assert server.count(JWKS) == 3
    with pytest.raises(KeysUnavailableError, match="publishes no keys"):
        verifier.verify(mint(k1, jti="after"))
    with pytest.raises(KeysUnavailableError):
        verifier.verify(token)  # the cached result went with the keys
    assert not verifier.health().ready
    verifier.close()


# -- discovery is read again on the refresh schedule -----------------------------

OIDC = "/.well-known/openid-configuration"


def test_discovery_is_read_again_and_a_moved_jwks_uri_followed(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    issuer = server.url("/")
    headers = {"Cache-Control": "max-age=100"}
    server.set(OIDC, {"issuer": issuer, "jwks_uri": server.url("/keys-1")})
    server.set("/keys-1", jwks_of(k1), headers=headers)
    clock = FakeClock()
    verifier = JWTVerifier(
        discover=issuer,
        allow_insecure_loopback=True,
        fetch=timed(FAST, clock),
        clock=clock,
        audience=AUD,
    )
    assert verifier.verify(mint(k1, iss=issuer))["sub"] == "user-1"
    # An unknown kid re-reads discovery too (the jwks_uri may have moved).
    clock.now += 8
    with pytest.raises(UnknownKeyError):
        verifier.verify(mint(k1.with_kid("nobody"), iss=issuer))
    assert (server.count(OIDC), server.count("/keys-1")) == (2, 2)
    # The provider moves its keys; the scheduled refresh follows.
    server.set(OIDC, {"issuer": issuer, "jwks_uri": server.url("/keys-2")})
    server.set("/keys-2", jwks_of(k2), headers=headers)
    clock.now += 100
    verifier.verify(mint(k1, iss=issuer, jti="due"))  # due: refreshes in a thread
    for source in verifier._key_sources():  # type: ignore[union-attr]
        source.join()
    assert (server.count(OIDC), server.count("/keys-2")) == (3, 1)
    assert verifier.verify(mint(k2, iss=issuer))["sub"] == "user-1"
    # A discovery document naming another issuer is refused each time.
    server.set(OIDC, {"issuer": "https://elsewhere.example/", "jwks_uri": server.url("/keys-1")})
    clock.now += 100
    verifier.verify(mint(k2, iss=issuer, jti="due-again"))
    for source in verifier._key_sources():  # type: ignore[union-attr]
        source.join()
    assert server.count("/keys-1") == 2  # not followed
    # A configuration fault, said as one (both values), not an outage.
    health = verifier.health()
    assert health.config_error is not None
    assert 'names issuer "https://elsewhere.example/"' in health.config_error
    assert f'configured "{issuer}"' in health.config_error
    assert health.ready  # the keys held serve until their bound
    assert verifier.verify(mint(k2, iss=issuer, jti="kept"))["sub"] == "user-1"
    verifier.close()


def test_a_key_published_only_at_a_moved_jwks_uri_is_found_by_the_unknown_kid_refetch(
    server: DocumentServer, k1: Signer, k2: Signer
) -> None:
    # The provider moves its jwks_uri while the old URL still serves the old
    # set: a token of a key published only at the new URL was 401 unknown-key
    # because the unknown-kid refetch re-read the old JWKS, not discovery.
    issuer = server.url("/")
    headers = {"Cache-Control": "max-age=100"}
    server.set(OIDC, {"issuer": issuer, "jwks_uri": server.url("/keys-1")})
    server.set("/keys-1", jwks_of(k1), headers=headers)
    clock = FakeClock()
    verifier = JWTVerifier(
        discover=issuer,
        allow_insecure_loopback=True,
        fetch=timed(FAST, clock),
        clock=clock,
        audience=AUD,
    )
    assert verifier.verify(mint(k1, iss=issuer))["sub"] == "user-1"
    server.set(OIDC, {"issuer": issuer, "jwks_uri": server.url("/keys-2")})
    server.set("/keys-2", jwks_of(k1, k2), headers=headers)
    clock.now += 8  # past the unknown-kid pace, long before the refresh
    assert verifier.verify(mint(k2, iss=issuer))["sub"] == "user-1"
    assert (server.count("/keys-1"), server.count("/keys-2")) == (1, 1)
    verifier.close()


# -- the sync fetch is bounded in total, headers included -------------------------


class HeaderDrip:
    """A loopback server that answers with headers dripped one byte at a time.

    Each byte comes well within the read timeout, so only a bound on the
    whole request ends the wait; ``finished`` is set once it has dripped
    everything (far later than any test waits).
    """

    def __init__(self, gap: float = 0.05, header_bytes: int = 2000) -> None:
        self.gap = gap
        self.header_bytes = header_bytes
        self.stopping = threading.Event()
        self.finished = threading.Event()
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/jwks.json"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            connection, _ = self.listener.accept()
            with connection:
                connection.recv(4096)
                head = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * self.header_bytes
                for i in range(len(head)):
                    if self.stopping.wait(self.gap):
                        return
                    connection.sendall(head[i : i + 1])
                self.finished.set()

    def stop(self) -> None:
        self.stopping.set()
        self.listener.close()
        self.thread.join(5)


def test_a_server_dripping_headers_is_cut_at_the_total_timeout(k1: Signer) -> None:
    drip = HeaderDrip()
    try:
        options = FetchOptions(connect_timeout=1, read_timeout=0.5, total_timeout=1, key_wait=5)
        verifier = JWTVerifier(
            jwks_url=drip.url,
            allow_insecure_loopback=True,
            fetch=timed(options, FakeClock()),
            clock=FakeClock(),
        )
        with pytest.raises(KeysUnavailableError, match="took longer than 1 s"):
            verifier.verify(mint(k1))
        assert not drip.finished.is_set()  # the answer was still dripping: cut, not waited
        verifier.close()
    finally:
        drip.stop()


# -- past the staleness bound, cached results stop too ----------------------------


@pytest.mark.anyio
async def test_cached_results_stop_at_the_bound_even_with_only_hits(
    server: DocumentServer, k1: Signer
) -> None:
    """The background refresh wakes at the bound and withdraws the keys and the
    cache: a token cached for an hour is not served past it (real clock)."""
    server.set(JWKS, jwks_of(k1), headers={"Cache-Control": "max-age=0"})
    options = FetchOptions(min_ttl=0.2, max_ttl=1, max_stale=0.3, cooldown=0.1, jitter=0.0)
    token = k1.mint({"aud": AUD, "sub": "u", "exp": time.time() + 3600})
    verifier = JWTVerifier(
        jwks_url=server.url(JWKS),
        allow_insecure_loopback=True,
        fetch=options,
        audience=AUD,
        cache_ttl=3600,
    )
    async with verifier:
        assert (await verifier.verify_async(token))["sub"] == "u"
        assert verifier.cache_info().size == 1
        server.set(JWKS, "down", status=500)
        await eventually_async(  # the bound is 0.5 s away: a wait, never a timing check
            lambda: not verifier.health().ready and verifier.cache_info().size == 0,
            "keys and cached results withdrawn at the bound",
        )
        # On the loop's thread a sync verify never blocks: a 503 (it may hand
        # a load to the loop), never the cached result.
        with pytest.raises(KeysUnavailableError):
            verifier.verify(token)
        with pytest.raises(KeysUnavailableError, match="staleness"):
            await verifier.verify_async(token)


def test_sync_cached_results_stop_at_the_bound_once_a_refresh_failed(
    server: DocumentServer, k1: Signer
) -> None:
    server.set(JWKS, jwks_of(k1), headers={"Cache-Control": "max-age=0"})
    options = FetchOptions(min_ttl=0.2, max_ttl=1, max_stale=0.3, cooldown=0.1, jitter=0.0)
    token = k1.mint({"aud": AUD, "sub": "u", "exp": time.time() + 3600})
    verifier = JWTVerifier(
        jwks_url=server.url(JWKS),
        allow_insecure_loopback=True,
        fetch=options,
        audience=AUD,
        cache_ttl=3600,
    )
    assert verifier.verify(token)["sub"] == "u"
    server.set(JWKS, "down", status=500)

    def a_refresh_failed() -> bool:
        # A miss past expiry tries a refresh; one that comes after the bound
        # (a slow machine) tries it too, and is refused.
        with contextlib.suppress(KeysUnavailableError):
            verifier.verify(k1.mint({"aud": AUD, "sub": "u", "exp": time.time() + 60}))
        return verifier.health().failure_count > 0

    eventually(a_refresh_failed, "a failed refresh")
    # Then only hits, until the bound (a wait, never a timing check).
    eventually(lambda: verifier.cache_info().size == 0, "cached results dropped at the bound")
    with pytest.raises(KeysUnavailableError, match="staleness"):
        verifier.verify(token)
    verifier.close()


def test_sync_cached_results_stop_at_the_bound_with_only_hits(
    server: DocumentServer, k1: Signer
) -> None:
    """No miss, so no refresh was ever tried: the keys still stop at their
    bound, and the cached result with them."""
    server.set(JWKS, jwks_of(k1), headers={"Cache-Control": "max-age=0"})
    options = FetchOptions(min_ttl=0.2, max_ttl=1, max_stale=0.3, cooldown=0.1, jitter=0.0)
    token = k1.mint({"aud": AUD, "sub": "u", "exp": time.time() + 3600})
    verifier = JWTVerifier(
        jwks_url=server.url(JWKS),
        allow_insecure_loopback=True,
        fetch=options,
        audience=AUD,
        cache_ttl=3600,
    )
    assert verifier.verify(token)["sub"] == "u"
    server.set(JWKS, "down", status=500)
    # Dropped at the bound, with no call in between (a wait, never a timing check).
    eventually(lambda: verifier.cache_info().size == 0, "cached results dropped at the bound")
    assert verifier.health().failure_count == 0  # no refresh was ever tried
    with pytest.raises(KeysUnavailableError, match="staleness"):
        verifier.verify(token)
    verifier.close()


# -- the one rule of what is worth a refetch --------------------------------------


@pytest.mark.parametrize(
    ("kind", "alg", "worth"),
    [
        ("unknown-key", "RS256", True),
        ("unknown-key", None, True),
        ("algorithm", "ES256", True),  # a new key of a new algorithm the policy allows
        ("algorithm", "HS256", False),  # no fetched key is ever symmetric
        ("algorithm", "none", False),
        ("algorithm", None, False),
        ("signature", "RS256", False),
        ("expired", "RS256", False),
        ("malformed", None, False),
    ],
)
def test_worth_refetch(kind: str, alg: str | None, worth: bool) -> None:
    allowed = network_algorithms(JWTConfig.build())
    assert worth_refetch(kind, alg, allowed) is worth


def test_network_algorithms_follow_the_policy() -> None:
    assert network_algorithms(JWTConfig.build(algorithms=["RS256", "HS256"])) == {"RS256"}


def test_refusals_about_the_token_itself_never_refetch(server: DocumentServer, k1: Signer) -> None:
    server.set(JWKS, jwks_of(k1))
    clock, reports = FakeClock(), Reports()
    verifier = verifier_over(server.url(JWKS), clock, reports)
    verifier.verify(mint(k1))
    clock.now += 8  # the keys held predate what follows: a refetch would be allowed
    symmetric = hmac_key(kid="k1").mint({"aud": AUD, "exp": NOW + 60})
    expired = mint(k1, exp=NOW - 60)
    impostor = mint(private_key("RS256", kid="k1", seed=99))
    for token in (symmetric, expired, impostor):
        with pytest.raises(TokenRejectedError):
            verifier.verify(token)
    assert server.count(JWKS) == 1
    assert reports.reasons == ["algorithm", "expired", "signature"]
    verifier.close()
