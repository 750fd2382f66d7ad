"""Key-source log events: one record per event, with stable ``extra`` fields.

A real JWKS server on 127.0.0.1 (``servers.DocumentServer``) and a fake clock
the test moves: rate limits are checked by counting records at chosen clock
readings, never by sleeping. Every record is also checked for token bytes and
for kids that came from a token.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import httpx
import pytest
from forge import NOW, Signer, private_key
from servers import FAST as SHARED_FAST
from servers import DocumentServer, jwks_of
from support import FakeClock, timed

from grelmicro.jwt import JWTVerifier, KeysUnavailableError, UnknownKeyError
from grelmicro.jwt._jwks import KeySource
from grelmicro.jwt._snapshot import KeyWait

JWKS = "/jwks.json"
AUD = "https://api.example.com"
ISS = "https://idp.example.com/"
FAST = dataclasses.replace(SHARED_FAST, log_interval=100)
KEPT = {"Cache-Control": "max-age=100"}


@pytest.fixture
def k1() -> Signer:
    return private_key("RS256", kid="k1", seed=11)


@pytest.fixture
def k2() -> Signer:
    return private_key("ES256", kid="k2", seed=12)


@pytest.fixture(autouse=True)
def _capture(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, "grelmicro.jwt")


def mint(key: Signer, **claims: Any) -> str:
    return key.mint({"iss": ISS, "aud": AUD, "sub": "user-1", "exp": NOW + 3600, **claims})


def build(server: DocumentServer, clock: FakeClock, **kw: Any) -> JWTVerifier:
    kw.setdefault("jwks_url", server.url(JWKS))
    return JWTVerifier(
        allow_insecure_loopback=True,
        fetch=timed(kw.pop("fetch", FAST), clock),  # key timing on the same fake clock
        clock=clock,
        audience=AUD,
        issuer=kw.pop("issuer", ISS),
        cache_size=0,
        **kw,
    )


def source_of(verifier: JWTVerifier) -> KeySource:
    assert verifier._router is not None
    (source,) = verifier._key_sources()
    return source


def settle(verifier: JWTVerifier) -> None:
    source_of(verifier).join()


def refresh(source: KeySource) -> None:
    """One load or refresh, started now and waited for; the schedule must allow it now."""
    assert source.in_flight() is None
    wait = source.need("keys")
    assert isinstance(wait, KeyWait), wait
    assert wait.flight.done.wait(10)


def events(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "jwt_event", None) == name]


def only(caplog: pytest.LogCaptureFixture, name: str) -> logging.LogRecord:
    found = events(caplog, name)
    assert len(found) == 1, [r.getMessage() for r in found]
    return found[0]


def fields(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k.startswith("jwt_")}


def assert_clean(caplog: pytest.LogCaptureFixture, *secrets: str) -> None:
    """Every key-source record has its event name, and carries none of ``secrets``."""
    for record in caplog.records:
        if record.module in {"_jwks", "_fetch"}:
            assert isinstance(getattr(record, "jwt_event", None), str), record.getMessage()
        text = record.getMessage() + repr(fields(record))
        for secret in secrets:
            assert secret not in text


def test_loaded_then_refreshed_with_the_kids_that_changed(
    server: DocumentServer, k1: Signer, k2: Signer, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    server.set(JWKS, jwks_of(k1), headers=KEPT)
    verifier = build(server, clock)
    token = mint(k1)
    verifier.verify(token)
    loaded = only(caplog, "keys.loaded")
    assert loaded.levelno == logging.INFO
    assert fields(loaded) == {
        "jwt_event": "keys.loaded",
        "jwt_source": server.url(JWKS),
        "jwt_keys": 1,
        "jwt_keys_before": 0,
        "jwt_kids_added": ["k1"],
        "jwt_kids_removed": [],
        "jwt_ttl": 100.0,
        "jwt_recovered": False,
        "jwt_not_modified": False,
        "jwt_generation": 1,
    }
    assert events(caplog, "keys.refreshed") == []

    # The same document again: one DEBUG record, nothing changed.
    clock.now += 101
    refresh(source_of(verifier))
    same = only(caplog, "keys.refreshed")
    assert same.levelno == logging.DEBUG
    assert (same.jwt_kids_added, same.jwt_kids_removed, same.jwt_keys) == ([], [], 1)  # type: ignore[attr-defined]
    assert same.jwt_generation == 2  # type: ignore[attr-defined]

    # A rotation: k2 in, k1 out.
    caplog.clear()
    server.set(JWKS, jwks_of(k2), headers=KEPT)
    clock.now += 101
    refresh(source_of(verifier))
    rotated = only(caplog, "keys.refreshed")
    assert rotated.levelno == logging.INFO
    assert fields(rotated) == {
        "jwt_event": "keys.refreshed",
        "jwt_source": server.url(JWKS),
        "jwt_keys": 1,
        "jwt_keys_before": 1,
        "jwt_kids_added": ["k2"],
        "jwt_kids_removed": ["k1"],
        "jwt_ttl": 100.0,
        "jwt_recovered": False,
        "jwt_not_modified": False,
        "jwt_generation": 3,
    }
    assert events(caplog, "keys.loaded") == []
    assert_clean(caplog, token)
    verifier.close()


def test_failures_are_logged_once_per_interval_with_their_cause(
    server: DocumentServer, k1: Signer, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    server.set(JWKS, jwks_of(k1), headers=KEPT)
    verifier = build(server, clock)
    verifier.verify(mint(k1))
    source = source_of(verifier)
    server.set(JWKS, "oops", status=500)
    caplog.clear()
    clock.now += 70  # the keys expire at NOW + 100: fetches are due from there
    # Four failures within the log interval (100 s): one record.
    for _ in range(4):
        clock.now += 31  # past the longest backoff pause (the 30 s cooldown)
        refresh(source)
    failed = only(caplog, "keys.fetch_failed")
    assert failed.levelno == logging.WARNING
    assert failed.jwt_failures == 1  # type: ignore[attr-defined]
    assert failed.jwt_error == source.state.last_error  # type: ignore[attr-defined]
    assert "500" in failed.jwt_error  # type: ignore[attr-defined]
    assert failed.jwt_keys == 1  # type: ignore[attr-defined]  # the last good keys serve
    assert failed.jwt_suppressed == 0  # type: ignore[attr-defined]
    assert failed.jwt_retry_in > 0  # type: ignore[attr-defined]
    # Past the interval: the next failure is logged, with the three left out.
    clock.now += 31
    refresh(source)
    second = events(caplog, "keys.fetch_failed")[1:]
    assert len(second) == 1
    assert (second[0].jwt_failures, second[0].jwt_suppressed) == (5, 3)  # type: ignore[attr-defined]
    # Recovery: one WARNING record saying so, and a new failure run logs at once.
    server.set(JWKS, jwks_of(k1), headers=KEPT)
    clock.now += 31
    refresh(source)
    recovered = only(caplog, "keys.refreshed")
    assert (recovered.levelno, recovered.jwt_recovered) == (logging.WARNING, True)  # type: ignore[attr-defined]
    server.set(JWKS, "oops", status=500)
    clock.now += 101
    refresh(source)
    assert len(events(caplog, "keys.fetch_failed")) == 3
    verifier.close()


def test_stale_uses_are_logged_at_most_once_per_interval_then_withdrawn_once(
    server: DocumentServer, k1: Signer, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    server.set(JWKS, jwks_of(k1), headers=KEPT)
    verifier = build(server, clock)
    token = mint(k1)
    verifier.verify(token)
    server.set(JWKS, "oops", status=500)
    # Expired at NOW + 100; uses at +101, +141, +181 (within 100 s of the
    # first record), then +221 (past it).
    for offset in (101, 141, 181, 221):
        clock.now = NOW + offset
        assert verifier.verify(token)["sub"] == "user-1"
        settle(verifier)
    stale = events(caplog, "keys.stale_use")
    assert [r.levelno for r in stale] == [logging.WARNING] * 2
    assert fields(stale[0]) == {
        "jwt_event": "keys.stale_use",
        "jwt_source": server.url(JWKS),
        "jwt_stale_for": 1.0,
        "jwt_withdrawn_in": 599.0,
        "jwt_stale_uses": 1,
        "jwt_suppressed": 0,
    }
    assert (stale[1].jwt_stale_uses, stale[1].jwt_suppressed) == (4, 2)  # type: ignore[attr-defined]
    assert verifier.health().stale_uses == 4
    assert events(caplog, "keys.withdrawn") == []
    # Past expiry + max_stale (600 s): withdrawn, once, however often asked.
    for offset in (701, 702, 733):
        clock.now = NOW + offset
        with pytest.raises(KeysUnavailableError):
            verifier.verify(token)
        settle(verifier)
    withdrawn = only(caplog, "keys.withdrawn")
    assert withdrawn.levelno == logging.ERROR
    assert fields(withdrawn) == {
        "jwt_event": "keys.withdrawn",
        "jwt_source": server.url(JWKS),
        "jwt_cause": "max-stale",
        "jwt_keys_before": 1,
        "jwt_last_error": source_of(verifier).state.last_error,
        "jwt_generation": 2,  # loaded (1), withdrawn (2)
    }
    assert_clean(caplog, token)
    verifier.close()


def test_an_empty_key_list_is_kept_once_then_withdraws(
    server: DocumentServer, k1: Signer, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    server.set(JWKS, jwks_of(k1), headers=KEPT)
    verifier = build(server, clock)
    verifier.verify(mint(k1))
    source = source_of(verifier)
    server.set(JWKS, {"keys": []})
    clock.now += 101
    refresh(source)
    kept = only(caplog, "keys.empty")
    assert (kept.levelno, kept.jwt_keys) == (logging.WARNING, 1)  # type: ignore[attr-defined]
    assert events(caplog, "keys.withdrawn") == []
    clock.now += 31
    refresh(source)
    withdrawn = only(caplog, "keys.withdrawn")
    assert (withdrawn.levelno, withdrawn.jwt_cause, withdrawn.jwt_keys_before) == (  # type: ignore[attr-defined]
        logging.ERROR,
        "empty-key-list",
        1,
    )
    # Seen again with no keys held: an ERROR record, not a second withdrawal.
    clock.now += 31
    refresh(source)
    empty = events(caplog, "keys.empty")
    assert [(r.levelno, r.jwt_keys) for r in empty] == [(logging.WARNING, 1), (logging.ERROR, 0)]  # type: ignore[attr-defined]
    assert len(events(caplog, "keys.withdrawn")) == 1
    verifier.close()


def test_discovery_moving_the_jwks_uri_is_one_record(
    server: DocumentServer, k1: Signer, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    issuer = server.url("/idp")
    metadata = "/idp/.well-known/openid-configuration"
    server.set(metadata, {"issuer": issuer, "jwks_uri": server.url("/a")}, headers=KEPT)
    server.set("/a", jwks_of(k1), headers=KEPT)
    server.set("/b", jwks_of(k1), headers=KEPT)
    verifier = build(server, clock, jwks_url=None, discover=issuer, issuer=issuer)
    source = source_of(verifier)
    refresh(source)
    assert only(caplog, "keys.loaded").jwt_source == issuer  # type: ignore[attr-defined]
    assert events(caplog, "discovery.moved") == []
    server.set(metadata, {"issuer": issuer, "jwks_uri": server.url("/b")}, headers=KEPT)
    clock.now += 101
    refresh(source)
    moved = only(caplog, "discovery.moved")
    assert moved.levelno == logging.WARNING
    assert fields(moved) == {
        "jwt_event": "discovery.moved",
        "jwt_source": issuer,
        "jwt_jwks_uri": server.url("/b"),
        "jwt_jwks_uri_before": server.url("/a"),
    }
    assert only(caplog, "keys.refreshed").jwt_source == issuer  # type: ignore[attr-defined]
    verifier.close()


def test_a_skipped_key_names_the_providers_kid_and_why(
    server: DocumentServer, k1: Signer, caplog: pytest.LogCaptureFixture
) -> None:
    document = jwks_of(k1)
    document["keys"].append({"kty": "XYZ", "kid": "odd"})
    server.set(JWKS, document, headers=KEPT)
    clock = FakeClock()
    verifier = build(server, clock)
    source = source_of(verifier)
    refresh(source)
    skipped = only(caplog, "keys.key_skipped")
    assert (skipped.jwt_kid, skipped.jwt_source) == ("odd", server.url(JWKS))  # type: ignore[attr-defined]
    assert skipped.jwt_reason  # type: ignore[attr-defined]
    assert skipped.jwt_reason in skipped.getMessage()  # type: ignore[attr-defined]
    assert only(caplog, "keys.loaded").jwt_keys == 1  # type: ignore[attr-defined]
    # The same document again: nothing new to say (not one record per fetch).
    clock.now += 101
    refresh(source)
    assert server.count(JWKS) == 2
    assert len(events(caplog, "keys.key_skipped")) == 1
    # Another key skipped: said once, for that key only.
    document["keys"].append({"kty": "XYZ", "kid": "odder"})
    server.set(JWKS, document, headers=KEPT)
    clock.now += 101
    refresh(source)
    assert [r.jwt_kid for r in events(caplog, "keys.key_skipped")] == ["odd", "odder"]  # type: ignore[attr-defined]
    verifier.close()


def test_an_unexpected_error_is_one_record_with_its_traceback(
    server: DocumentServer, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(request: httpx.Request) -> httpx.Response:
        raise ZeroDivisionError  # a bug in the transport the app gave: not a provider fault

    with httpx.Client(transport=httpx.MockTransport(broken)) as client:
        verifier = build(server, FakeClock(), client=client)
        source = source_of(verifier)
        refresh(source)
        error = only(caplog, "keys.internal_error")
        assert (error.levelno, error.jwt_error) == (logging.ERROR, "ZeroDivisionError")  # type: ignore[attr-defined]
        assert error.exc_info is not None
        assert error.exc_info[0] is ZeroDivisionError
        failed = only(caplog, "keys.fetch_failed")
        assert failed.jwt_error == "internal error (ZeroDivisionError)"  # type: ignore[attr-defined]
        assert only(caplog, "keys.fetch").jwt_result == "error"  # type: ignore[attr-defined]
        assert source.health().failure_count == 1
        verifier.close()


def test_no_record_carries_a_token_or_a_kid_taken_from_one(
    server: DocumentServer, k1: Signer, k2: Signer, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    server.set(JWKS, jwks_of(k1), headers=KEPT)
    options = dataclasses.replace(FAST, log_interval=0)  # every failure and stale use logged
    verifier = build(server, clock, fetch=options)
    good = mint(k1)
    verifier.verify(good)
    invented = private_key("RS256", kid="invented-by-caller-7f3a", seed=13)
    probe = mint(invented)
    clock.now += 5  # the keys held predate the probe: it gets a fetch
    with pytest.raises(UnknownKeyError):
        verifier.verify(probe)
    server.set(JWKS, "oops", status=500)
    clock.now = NOW + 150
    verifier.verify(good)
    settle(verifier)
    clock.now = NOW + 800
    with pytest.raises(KeysUnavailableError):
        verifier.verify(probe)
    settle(verifier)
    names = {getattr(r, "jwt_event", None) for r in caplog.records}
    assert {"keys.loaded", "keys.stale_use", "keys.fetch_failed", "keys.withdrawn"} <= names
    assert_clean(caplog, good, probe, "invented-by-caller-7f3a", *good.split("."))
    verifier.close()


# -- one-time warnings about how the verifier is used ------------------------------


def test_many_verifiers_for_one_url_warn_once(
    server: DocumentServer, caplog: pytest.LogCaptureFixture
) -> None:
    from grelmicro.jwt._build import MANY_SOURCES  # noqa: PLC0415

    url = server.url("/many-verifiers.json")  # a URL no other test builds verifiers for
    built = []
    for count in range(1, MANY_SOURCES + 3):
        built.append(build(server, FakeClock(), jwks_url=url))
        warned = events(caplog, "verifier.many_per_source")
        assert len(warned) == (count >= MANY_SOURCES), count
    (record,) = warned
    assert record.levelno == logging.WARNING
    assert fields(record) == {
        "jwt_event": "verifier.many_per_source",
        "jwt_source": url,
        "jwt_verifiers": MANY_SOURCES,
    }
    assert server.count("/many-verifiers.json") == 0  # building fetched nothing
    for verifier in built:
        verifier.close()


def app_for(verifier: JWTVerifier, *, install: bool) -> Any:
    from fastapi import Depends, FastAPI  # noqa: PLC0415

    from grelmicro.jwt import Claims  # noqa: PLC0415
    from grelmicro.jwt.fastapi import JWTBearer  # noqa: PLC0415

    auth = JWTBearer(verifier)
    app = FastAPI()
    if install:
        auth.install(app)

    @app.get("/me")
    def me(claims: Claims = Depends(auth)) -> dict[str, Any]:  # noqa: B008
        return {"sub": claims.subject}

    @app.get("/maybe")
    def maybe(claims: Claims | None = Depends(auth.optional)) -> dict[str, Any]:  # noqa: B008
        return {"sub": None if claims is None else claims.subject}

    return app


@pytest.mark.parametrize("install", [False, True])
def test_serving_with_network_keys_never_started_warns_once(
    server: DocumentServer, k1: Signer, caplog: pytest.LogCaptureFixture, install: bool
) -> None:
    pytest.importorskip("fastapi")
    from servers import serve  # noqa: PLC0415

    server.set(JWKS, jwks_of(k1), headers=KEPT)
    verifier = JWTVerifier(
        jwks_url=server.url(JWKS),
        allow_insecure_loopback=True,
        fetch=FAST,
        audience=AUD,
        issuer=ISS,
        clock=lambda: NOW,
    )
    token = mint(k1)
    headers = {"Authorization": f"Bearer {token}"}
    with serve(app_for(verifier, install=install)) as client:
        for path in ("/me", "/me", "/maybe", "/maybe"):
            answer = client.get(path, headers=headers)
            assert answer.status_code == 200, answer.text
    warned = events(caplog, "verifier.not_started")
    if install:
        assert warned == []
    else:
        (record,) = warned
        assert record.levelno == logging.WARNING
        assert record.jwt_sources == [server.url(JWKS)]  # type: ignore[attr-defined]
        assert "install" in record.getMessage()
    assert_clean(caplog, token)
    verifier.close()


def test_static_keys_never_warn_about_starting(caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("fastapi")
    from forge import SECRET, hmac_key  # noqa: PLC0415
    from servers import serve  # noqa: PLC0415

    from grelmicro.jwt import Key  # noqa: PLC0415

    verifier = JWTVerifier([Key.secret(SECRET, "HS256")], audience=AUD, clock=lambda: NOW)
    token = hmac_key().mint({"aud": AUD, "sub": "user-1", "exp": NOW + 60})
    with serve(app_for(verifier, install=False)) as client:
        assert client.get("/me", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    assert events(caplog, "verifier.not_started") == []
