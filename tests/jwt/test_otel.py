"""OpenTelemetry metrics and traces (grelmicro.jwt.otel) with the real SDK.

Every verifier reports to its own ``MeterProvider`` with an in-memory reader
and its own ``TracerProvider`` with an in-memory exporter: names, units and
attributes are checked as an exporter would see them, after real
verifications, real fetches from a loopback JWKS server and real requests
through uvicorn. Attribute values must come from bounded sets only.
"""

import asyncio
import contextlib
import gc
import json
import re
import socket
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import httpx
import pytest
from fastapi import Depends, FastAPI
from forge import NOW, SECRET, hmac_key, private_key, tamper
from servers import DocumentServer, jwks_of, serve
from support import HANG_GUARD

from grelmicro.jwt import (
    Claims,
    ConfigurationError,
    JWTVerifier,
    Key,
    KeysUnavailableError,
    TokenRejectedError,
    _events,
)
from grelmicro.jwt.errors import REASONS
from grelmicro.jwt.fastapi import JWTBearer
from grelmicro.jwt.otel import METER_NAME, Telemetry

otel_sdk = pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import StatusCode  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
AUDIENCE = "https://api.example.com"
ISSUER = "https://idp.example.com/"
#: Values a token carries that no attribute may ever hold.
SECRET_SUB = "user-7f3a9c-never-an-attribute"
SECRET_KID = "kid-attacker-chosen-9d1e"
FOREIGN_ISSUER = "https://evil.example.net/"


@dataclass
class Sinks:
    """The providers a verifier reports to, and what they collected."""

    telemetry: Telemetry
    reader: InMemoryMetricReader
    spans: InMemorySpanExporter
    tracer_provider: TracerProvider

    def metrics(self) -> dict[str, tuple[str, list[tuple[dict[str, Any], Any]]]]:
        """name -> (unit, [(attributes, value or histogram count)])."""
        found: dict[str, tuple[str, list[tuple[dict[str, Any], Any]]]] = {}
        assert _events.flush(HANG_GUARD)  # what the loop handed to the observers, heard
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                assert scope.scope.name == METER_NAME
                for metric in scope.metrics:
                    points = [
                        (
                            dict(p.attributes or {}),
                            getattr(p, "value", None) or getattr(p, "count", 0),
                        )
                        for p in metric.data.data_points
                    ]
                    found[metric.name] = (metric.unit or "", points)
        return found

    def finished(self) -> list[ReadableSpan]:
        assert _events.flush(HANG_GUARD)
        return list(self.spans.get_finished_spans())


def sinks(*, latency: bool = False) -> Sinks:
    reader = InMemoryMetricReader()
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry = Telemetry(
        meter_provider=MeterProvider(metric_readers=[reader]),
        tracer_provider=tracer_provider,
        latency=latency,
    )
    return Sinks(telemetry, reader, exporter, tracer_provider)


@pytest.fixture
def sink() -> Sinks:
    return sinks()


def mint(**claims: Any) -> str:
    claims.setdefault("aud", AUDIENCE)
    claims.setdefault("iss", ISSUER)
    claims.setdefault("sub", SECRET_SUB)
    claims.setdefault("exp", NOW + 3600)
    return hmac_key().mint(claims)


def static_verifier(sink: Sinks, **settings: Any) -> JWTVerifier:
    settings.setdefault("audience", AUDIENCE)
    settings.setdefault("issuer", ISSUER)
    return JWTVerifier(
        [Key.secret(SECRET, "HS256")], clock=lambda: NOW, telemetry=sink.telemetry, **settings
    )


def points(sink: Sinks, name: str) -> list[tuple[dict[str, Any], Any]]:
    return sink.metrics()[name][1]


def value_of(sink: Sinks, name: str, **attributes: Any) -> Any:
    """The one point of ``name`` whose attributes are ``grelmicro.jwt.<keyword>``."""
    attributes = {f"grelmicro.jwt.{key}": value for key, value in attributes.items()}
    matching = [value for found, value in points(sink, name) if found == attributes]
    assert len(matching) == 1, (name, attributes, points(sink, name))
    return matching[0]


def every_attribute_value(sink: Sinks) -> list[object]:
    values: list[object] = []
    for _unit, found in sink.metrics().values():
        for attributes, _value in found:
            values.extend(attributes.values())
    for span in sink.finished():
        values.extend((span.attributes or {}).values())
        for event in span.events:
            values.extend((event.attributes or {}).values())
    return values


# -- verifications and the cache -------------------------------------------------------


def test_verifications_by_outcome_and_reason_and_the_cache_after_real_verifications(sink):
    verifier = static_verifier(sink)
    token = mint()

    verifier.verify(token)  # a miss: the full verification
    verifier.verify(token)  # a hit: served by the core
    verifier.verify(token)
    for bad in (tamper(token), mint(exp=NOW - 10), "not a token"):
        with pytest.raises(TokenRejectedError):
            verifier.verify(bad)

    metrics = sink.metrics()
    assert metrics["grelmicro.jwt.verifications"][0] == "{verification}"
    assert value_of(sink, "grelmicro.jwt.verifications", outcome="accepted", cache="hit") == 2
    assert (
        value_of(
            sink,
            "grelmicro.jwt.verifications",
            outcome="accepted",
            cache="miss",
            issuer=ISSUER,
            algorithm="HS256",
        )
        == 1
    )
    for reason in ("signature", "expired", "malformed"):
        assert value_of(sink, "grelmicro.jwt.verifications", outcome="rejected", reason=reason) == 1
    assert metrics["grelmicro.jwt.cache.hits"] == ("{lookup}", [({}, 2)])
    assert metrics["grelmicro.jwt.cache.misses"][0] == "{lookup}"
    assert metrics["grelmicro.jwt.cache.size"] == ("{entry}", [({}, 1)])
    assert metrics["grelmicro.jwt.cache.limit"] == ("{entry}", [({}, verifier.config.cache_size)])
    assert metrics["grelmicro.jwt.keys.ready"] == ("1", [({}, 1)])
    assert metrics["grelmicro.jwt.keys.count"] == ("{key}", [({}, 1)])
    # Latency is opt-in.
    assert "grelmicro.jwt.verification.duration" not in metrics


def test_telemetry_turns_the_cache_counters_on():
    verifier = static_verifier(sinks())
    verifier.verify(mint())
    assert verifier.cache_info().misses == 1


def test_without_a_cache_every_accepted_verification_is_a_counted_miss():
    sink = sinks()
    verifier = static_verifier(sink, cache_size=0)
    for _ in range(3):
        verifier.verify(mint())
    assert value_of(sink, "grelmicro.jwt.verifications", outcome="accepted", cache="hit") == 0
    accepted = [
        v
        for a, v in points(sink, "grelmicro.jwt.verifications")
        if a.get("grelmicro.jwt.cache") == "miss"
    ]
    assert accepted == [3]


def test_the_latency_histogram_times_full_verifications_when_asked_for():
    sink = sinks(latency=True)
    verifier = static_verifier(sink)
    token = mint()
    verifier.verify(token)
    verifier.verify(token)  # a hit: never timed
    with pytest.raises(TokenRejectedError):
        verifier.verify(tamper(token))
    unit, found = sink.metrics()["grelmicro.jwt.verification.duration"]
    assert unit == "s"
    assert found == [({}, 2)]


def test_an_accepted_token_of_an_unconfigured_issuer_is_counted_without_its_issuer():
    sink = sinks()
    verifier = JWTVerifier(
        [Key.secret(SECRET, "HS256")],
        audience=AUDIENCE,
        clock=lambda: NOW,
        telemetry=sink.telemetry,
    )
    verifier.verify(mint(iss=FOREIGN_ISSUER))
    assert (
        value_of(
            sink, "grelmicro.jwt.verifications", outcome="accepted", cache="miss", algorithm="HS256"
        )
        == 1
    )
    assert FOREIGN_ISSUER not in every_attribute_value(sink)


def test_a_template_issuer_counts_listed_tenants_only():
    from forge import private_key  # noqa: PLC0415

    key = private_key("RS256", kid="entra-1", seed=60)
    template = "https://login.microsoftonline.com/{tenantid}/v2.0"
    listed, unlisted = "tenant-one", "tenant-two"

    def entra(tenant: str) -> str:
        iss = template.replace("{tenantid}", tenant)
        return key.mint({"iss": iss, "tid": tenant, "aud": AUDIENCE, "exp": NOW + 60})

    for tenants, named in (([listed], listed), ("any", None), (lambda tenant: True, None)):
        sink = sinks()
        verifier = JWTVerifier(
            jwks={"keys": [key.public_jwk()]},
            issuer=template,
            tenants=tenants,
            audience=AUDIENCE,
            clock=lambda: NOW,
            telemetry=sink.telemetry,
        )
        verifier.verify(entra(listed))
        expected = {
            "issuer": template,
            "outcome": "accepted",
            "cache": "miss",
            "algorithm": "RS256",
        }
        if named is not None:
            expected["tenant"] = named
        assert value_of(sink, "grelmicro.jwt.verifications", **expected) == 1
        if tenants != [listed]:
            verifier.verify(entra(unlisted))
        values = every_attribute_value(sink)
        assert unlisted not in values
        assert template.replace("{tenantid}", listed) not in values  # never the token's iss
        if named is None:
            assert listed not in values


def test_the_algorithm_is_named_only_from_the_allowed_set():
    sink = sinks()
    es = private_key("ES256", kid="e1")
    verifier = JWTVerifier(
        [Key.secret(SECRET, "HS256"), Key.jwk(es.public_jwk())],
        audience=AUDIENCE,
        issuer=ISSUER,
        algorithms=["HS256", "ES256"],
        clock=lambda: NOW,
        telemetry=sink.telemetry,
    )
    verifier.verify(mint())
    verifier.verify(es.mint({"aud": AUDIENCE, "iss": ISSUER, "exp": NOW + 60}))
    algorithms = sorted(
        a["grelmicro.jwt.algorithm"]
        for a, _ in points(sink, "grelmicro.jwt.verifications")
        if "grelmicro.jwt.algorithm" in a
    )
    assert algorithms == ["ES256", "HS256"]


def test_counting_goes_on_across_rotation(sink):
    verifier = static_verifier(sink)
    token = mint()
    verifier.verify(token)
    verifier.verify(token)
    verifier.rotate([Key.secret(SECRET + b"-next", "HS256", kid="next")])  # removal: fresh cache
    with pytest.raises(TokenRejectedError):
        verifier.verify(token)
    assert value_of(sink, "grelmicro.jwt.verifications", outcome="accepted", cache="hit") == 1
    assert sink.metrics()["grelmicro.jwt.cache.size"][1] == [({}, 0)]


def test_a_refusal_is_an_event_on_the_current_span_carrying_the_reason(sink):
    seen: list[str] = []
    verifier = static_verifier(sink, on_reject=lambda error: seen.append(error.reason))
    token = mint()
    tracer = sink.tracer_provider.get_tracer("test")
    with tracer.start_as_current_span("request"):
        verifier.verify(token)
        with pytest.raises(TokenRejectedError):
            verifier.verify(tamper(token))
    (request,) = sink.finished()  # no span per verification
    assert [(e.name, dict(e.attributes or {})) for e in request.events] == [
        ("grelmicro.jwt.refusal", {"grelmicro.jwt.reason": "signature"})
    ]
    assert seen == ["signature"]  # the user's hook still runs


def test_the_observers_hold_the_verifier_weakly(sink):
    verifier = static_verifier(sink)
    verifier.verify(mint())
    del verifier
    gc.collect()
    assert sink.metrics() == {} or all(not found for _unit, found in sink.metrics().values())


@pytest.mark.parametrize("option", ["yes", 1, object()])
def test_a_telemetry_option_that_is_not_a_flag_or_telemetry_is_refused(option):
    with pytest.raises(ConfigurationError, match="telemetry must be"):
        JWTVerifier([Key.secret(SECRET, "HS256")], telemetry=option)


# -- key fetches -----------------------------------------------------------------------


def network_verifier(url: str, sink: Sinks, **options: Any) -> JWTVerifier:
    options.setdefault("telemetry", sink.telemetry)
    return JWTVerifier(
        jwks_url=url,
        allow_insecure_loopback=True,
        audience=AUDIENCE,
        issuer=options.pop("issuer", ISSUER),
        clock=lambda: NOW,
        **options,
    )


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_key_fetch_is_a_span_a_duration_and_a_count_and_the_keys_are_gauged(
    server: DocumentServer, sink: Sinks
):
    signer = private_key("ES256", kid=SECRET_KID)
    server.set("/jwks.json", jwks_of(signer))
    url = server.url("/jwks.json")
    verifier = network_verifier(url, sink)
    try:
        verifier.verify(
            signer.mint({"aud": AUDIENCE, "iss": ISSUER, "sub": SECRET_SUB, "exp": NOW + 60})
        )
    finally:
        verifier.close()

    (span,) = sink.finished()
    assert span.name == "grelmicro.jwt.key_fetch"
    assert dict(span.attributes or {}) == {
        "grelmicro.jwt.source": url,
        "grelmicro.jwt.discovery": False,
        "grelmicro.jwt.outcome": "success",
    }
    assert span.status.status_code is StatusCode.UNSET
    metrics = sink.metrics()
    assert metrics["grelmicro.jwt.key_fetches"] == (
        "{fetch}",
        [({"grelmicro.jwt.outcome": "success", "grelmicro.jwt.source": url}, 1)],
    )
    assert metrics["grelmicro.jwt.key_fetch.duration"] == (
        "s",
        [({"grelmicro.jwt.outcome": "success", "grelmicro.jwt.source": url}, 1)],
    )
    assert metrics["grelmicro.jwt.keys.ready"] == ("1", [({"grelmicro.jwt.source": url}, 1)])
    assert metrics["grelmicro.jwt.keys.count"] == ("{key}", [({"grelmicro.jwt.source": url}, 1)])
    assert metrics["grelmicro.jwt.keys.stale_uses"] == (
        "{verification}",
        [({"grelmicro.jwt.source": url}, 0)],
    )
    # Dated on the verifier's clock (NOW here), like health().last_success.
    assert metrics["grelmicro.jwt.keys.age"] == ("s", [({"grelmicro.jwt.source": url}, 0)])
    assert (
        value_of(
            sink,
            "grelmicro.jwt.verifications",
            outcome="accepted",
            cache="miss",
            issuer=ISSUER,
            algorithm="ES256",
        )
        == 1
    )


def test_a_failed_fetch_is_an_error_span_a_failure_count_and_not_ready(sink):
    url = f"http://127.0.0.1:{closed_port()}/jwks.json"
    verifier = network_verifier(url, sink)
    try:
        with pytest.raises(KeysUnavailableError):
            verifier.verify(mint())
    finally:
        verifier.close()

    (span,) = sink.finished()
    assert span.name == "grelmicro.jwt.key_fetch"
    assert span.attributes is not None
    assert span.attributes["grelmicro.jwt.outcome"] == "failure"
    assert span.status.status_code is StatusCode.ERROR
    metrics = sink.metrics()
    assert metrics["grelmicro.jwt.key_fetches"][1] == [
        ({"grelmicro.jwt.outcome": "failure", "grelmicro.jwt.source": url}, 1)
    ]
    assert metrics["grelmicro.jwt.keys.ready"][1] == [({"grelmicro.jwt.source": url}, 0)]
    assert "grelmicro.jwt.keys.age" not in metrics or metrics["grelmicro.jwt.keys.age"][1] == []
    assert (
        value_of(sink, "grelmicro.jwt.verifications", outcome="rejected", reason="keys-unavailable")
        == 1
    )


def test_discovery_is_inside_the_fetch_span_and_httpx_spans_fall_within_it(
    server: DocumentServer, sink: Sinks
):
    """The fetch span is recorded from the ``keys.fetch`` event, after the fact.

    No method is patched, so the HTTP client's spans do not nest under it;
    they fall within its real start and end times.
    """
    instrumentation = pytest.importorskip("opentelemetry.instrumentation.httpx")
    signer = private_key("RS256", kid="r1", seed=62)
    issuer = server.url("/")
    server.set(
        "/.well-known/openid-configuration", {"issuer": issuer, "jwks_uri": server.url("/k")}
    )
    server.set("/k", jwks_of(signer))
    instrumentor = instrumentation.HTTPXClientInstrumentor()
    instrumentor.instrument(tracer_provider=sink.tracer_provider)
    try:
        verifier = JWTVerifier(
            discover=issuer,
            allow_insecure_loopback=True,
            audience=AUDIENCE,
            clock=lambda: NOW,
            telemetry=sink.telemetry,
        )
        try:
            verifier.verify(signer.mint({"aud": AUDIENCE, "iss": issuer, "exp": NOW + 60}))
        finally:
            verifier.close()
    finally:
        instrumentor.uninstrument()

    spans = sink.finished()
    (fetch,) = [s for s in spans if s.name == "grelmicro.jwt.key_fetch"]
    assert fetch.attributes is not None
    assert fetch.attributes["grelmicro.jwt.discovery"] is True
    assert fetch.attributes["grelmicro.jwt.source"] == issuer
    requests = [s for s in spans if s is not fetch]
    assert len(requests) == 2  # the discovery document, then the JWKS
    assert fetch.context is not None
    assert fetch.parent is None  # verify() ran outside any span
    assert all(s.parent is None or s.parent.span_id != fetch.context.span_id for s in requests)
    assert fetch.start_time is not None
    assert fetch.end_time is not None
    for request in sorted(requests, key=lambda s: s.start_time or 0):
        assert request.start_time is not None
        assert request.end_time is not None
        assert fetch.start_time <= request.start_time <= request.end_time <= fetch.end_time
    assert (
        value_of(
            sink,
            "grelmicro.jwt.verifications",
            outcome="accepted",
            cache="miss",
            issuer=issuer,
            algorithm="RS256",
        )
        == 1
    )


@pytest.mark.anyio
async def test_an_async_fetch_is_one_span(server: DocumentServer, sink: Sinks):
    signer = private_key("ES256", kid="k1")
    server.set("/jwks.json", jwks_of(signer))
    verifier = network_verifier(server.url("/jwks.json"), sink)
    async with verifier:
        claims = await verifier.verify_async(
            signer.mint({"aud": AUDIENCE, "iss": ISSUER, "exp": NOW + 60})
        )
    assert claims["aud"] == AUDIENCE
    assert [s.name for s in sink.finished()] == ["grelmicro.jwt.key_fetch"]


# -- FastAPI -----------------------------------------------------------------------------


def test_fastapi_refusals_by_status_and_reason_through_uvicorn(sink):
    verifier = static_verifier(sink)
    auth = JWTBearer(verifier)
    # FastAPI's own request spans, to the test's tracer provider.
    app = FastAPI(
        telemetry={"tracer_provider": sink.tracer_provider, "metrics": False, "logs": False}
    )

    @app.get("/me")
    def me(claims: Annotated[Claims, Depends(auth)]) -> dict[str, Any]:
        return {"sub": claims["sub"]}

    @app.get("/admin")
    def admin(claims: Annotated[Claims, Depends(auth)]) -> dict[str, Any]:
        return {}

    token = mint()
    with serve(app) as client:
        assert client.get("/me", headers={"Authorization": f"Bearer {token}"}).status_code == 200
        assert client.get("/me").status_code == 401
        bad = {"Authorization": f"Bearer {tamper(token)}"}
        assert client.get("/me", headers=bad).status_code == 401
        assert client.get("/me", headers=bad).status_code == 401

    refusals = sink.metrics()["grelmicro.jwt.http.refusals"]
    assert refusals[0] == "{response}"
    assert sorted(refusals[1], key=str) == sorted(
        [
            ({"http.response.status_code": 401, "grelmicro.jwt.reason": "missing-token"}, 1),
            ({"http.response.status_code": 401, "grelmicro.jwt.reason": "signature"}, 2),
        ],
        key=str,
    )
    assert (
        value_of(sink, "grelmicro.jwt.verifications", outcome="rejected", reason="signature") == 2
    )
    # The refusal is an event on the request's span, not a span of its own.
    events = [
        (event.name, dict(event.attributes or {}))
        for span in sink.finished()
        for event in span.events
        if event.name.startswith("grelmicro.")
    ]
    assert events == [("grelmicro.jwt.refusal", {"grelmicro.jwt.reason": "signature"})] * 2
    assert not [span for span in sink.finished() if span.name.startswith("grelmicro.")]


def test_dpop_checks_by_outcome_and_the_replay_store_through_uvicorn(sink):
    pytest.importorskip("cryptography", reason="DPoP proofs are signed with cryptography")
    from dpop_proofs import ProofSigner, access_token  # noqa: PLC0415

    from grelmicro.jwt import DPoPVerifier, ReplayStore  # noqa: PLC0415
    from grelmicro.jwt.fastapi_dpop import DPoPBearer  # noqa: PLC0415

    store = ReplayStore(4096)
    dpop = DPoPVerifier(replay_store=store, clock=lambda: NOW)
    signer = ProofSigner("ES256")
    bound = access_token(signer.jkt)
    app = FastAPI()
    # Two verifiers (one per route) sharing one replay store: counted once.
    for path in ("/a", "/b"):
        verifier = JWTVerifier(
            [Key.secret(SECRET, "HS256")], clock=lambda: NOW, telemetry=sink.telemetry
        )
        auth = DPoPBearer(verifier, dpop, trust_host_header=True)

        @app.get(path)
        def route(claims: Annotated[Claims, Depends(auth)]) -> dict[str, Any]:
            return {"sub": claims.subject}

    with serve(app) as client:
        uri = str(client.base_url).rstrip("/") + "/a"
        proof = signer.proof("GET", uri, bound)
        dpop_headers = {"Authorization": f"DPoP {bound}", "DPoP": proof}
        assert client.get("/a", headers=dpop_headers).status_code == 200
        assert client.get("/a", headers=dpop_headers).status_code == 401  # replayed
        no_proof = {"Authorization": f"DPoP {bound}"}
        assert client.get("/a", headers=no_proof).status_code == 401
        as_bearer = {"Authorization": f"Bearer {bound}"}
        assert client.get("/b", headers=as_bearer).status_code == 401
        unbound = {"Authorization": f"Bearer {access_token(None)}"}
        assert client.get("/b", headers=unbound).status_code == 200  # no proof to check

    proofs = sink.metrics()["grelmicro.jwt.dpop.proofs"]
    assert proofs[0] == "{proof}"
    assert sorted(proofs[1], key=str) == sorted(
        [
            ({"grelmicro.jwt.outcome": "accepted"}, 1),
            ({"grelmicro.jwt.outcome": "refused", "grelmicro.jwt.reason": "dpop-replay"}, 1),
            (
                {
                    "grelmicro.jwt.outcome": "refused",
                    "grelmicro.jwt.reason": "dpop-proof",
                    "grelmicro.jwt.check": "missing",
                },
                1,
            ),
            (
                {
                    "grelmicro.jwt.outcome": "refused",
                    "grelmicro.jwt.reason": "dpop-binding",
                    "grelmicro.jwt.check": "bearer",
                },
                1,
            ),
        ],
        key=str,
    )
    assert len(store) == 1
    size = sink.metrics()["grelmicro.jwt.dpop.replay_store.size"]
    assert size == ("{entry}", [({}, 1)])
    assert value_of(sink, "grelmicro.jwt.dpop.replay_store.limit") == 4096
    values = repr(every_attribute_value(sink))
    for forbidden in (bound, proof, signer.jkt, *proof.split(".")):
        assert forbidden not in values


def test_dpop_refusals_the_client_is_told_to_retry_are_counted_by_that_answer(sink):
    pytest.importorskip("cryptography", reason="DPoP proofs are signed with cryptography")
    from dpop_proofs import ProofSigner, access_token  # noqa: PLC0415

    from grelmicro.jwt import DPoPNonces, DPoPVerifier, ReplayStore  # noqa: PLC0415
    from grelmicro.jwt.fastapi_dpop import DPoPBearer  # noqa: PLC0415

    signer = ProofSigner("ES256")
    bound = access_token(signer.jkt)
    cases = [
        (DPoPVerifier(replay_store=ReplayStore(1, shards=1), clock=lambda: NOW), 503),
        (DPoPVerifier(replay_store=ReplayStore(64, max_per_key=1), clock=lambda: NOW), 429),
        (DPoPVerifier(nonces=DPoPNonces(clock=lambda: NOW), clock=lambda: NOW), 401),
    ]
    for dpop, status in cases:
        verifier = JWTVerifier(
            [Key.secret(SECRET, "HS256")], clock=lambda: NOW, telemetry=sink.telemetry
        )
        auth = DPoPBearer(verifier, dpop, trust_host_header=True)
        app = FastAPI()

        @app.get("/a")
        def route(claims: Annotated[Claims, Depends(auth)]) -> dict[str, Any]:
            return {"sub": claims.subject}

        with serve(app) as client:
            uri = str(client.base_url).rstrip("/") + "/a"
            answers = [
                client.get(
                    "/a",
                    headers={
                        "Authorization": f"DPoP {bound}",
                        "DPoP": signer.proof("GET", uri, bound),
                    },
                ).status_code
                for _ in range(2)
            ]
        assert answers[-1] == status

    refused = {
        (attributes["grelmicro.jwt.reason"], attributes.get("grelmicro.jwt.check")): value
        for attributes, value in points(sink, "grelmicro.jwt.dpop.proofs")
        if attributes["grelmicro.jwt.outcome"] == "refused"
    }
    assert refused == {
        ("dpop-replay-store-full", None): 1,
        ("dpop-replay-over-quota", None): 1,
        ("use-dpop-nonce", "nonce"): 2,
    }


# -- what attributes may hold -------------------------------------------------------------


def test_no_attribute_carries_token_bytes_claim_values_or_kids(server: DocumentServer, sink: Sinks):
    signer = private_key("ES256", kid=SECRET_KID)
    server.set("/jwks.json", jwks_of(signer))
    verifier = network_verifier(server.url("/jwks.json"), sink, issuer=ISSUER)
    stranger = private_key("ES256", kid="kid-unknown-" + SECRET_KID, seed=3)
    tokens = [
        signer.mint({"aud": AUDIENCE, "iss": ISSUER, "sub": SECRET_SUB, "exp": NOW + 60}),
        signer.mint({"aud": AUDIENCE, "iss": FOREIGN_ISSUER, "sub": SECRET_SUB, "exp": NOW + 60}),
        stranger.mint({"aud": AUDIENCE, "iss": ISSUER, "sub": SECRET_SUB, "exp": NOW + 60}),
    ]
    tracer = sink.tracer_provider.get_tracer("test")
    try:
        with tracer.start_as_current_span("request"):
            for token in tokens:
                for _ in range(2):
                    # The stranger's second try comes within the unknown-kid
                    # pace: 503 key-pending (its reason is an attribute too).
                    with contextlib.suppress(TokenRejectedError, KeysUnavailableError):
                        verifier.verify(token)
    finally:
        verifier.close()

    values = every_attribute_value(sink)
    assert values
    text = repr(values)
    for forbidden in (
        SECRET_SUB,
        SECRET_KID,
        FOREIGN_ISSUER,
        *tokens,
        *(t.split(".")[1] for t in tokens),
    ):
        assert forbidden not in text
    allowed_strings = {
        *REASONS,
        "accepted",
        "rejected",
        "hit",
        "miss",
        "success",
        "failure",
        "error",
        ISSUER,
        "ES256",
        server.url("/jwks.json"),
    }
    assert {v for v in values if isinstance(v, str)} <= allowed_strings


# -- without the extra -------------------------------------------------------------------

_BLOCKED = """
import sys
from importlib.abc import MetaPathFinder

class NoOtel(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoOtel())
"""


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_without_the_extra_the_package_imports_and_verifies_unchanged():
    done = run_python(
        _BLOCKED
        + """
import time
from grelmicro.jwt import JWTVerifier, Key, ConfigurationError
import grelmicro.jwt.otel
import jwt as pyjwt
secret = b"s" * 32
verifier = JWTVerifier([Key.secret(secret, "HS256")], audience="a")
token = pyjwt.encode({"aud": "a", "exp": time.time() + 60}, secret, "HS256")
assert verifier.verify(token)["aud"] == "a"
assert verifier.verify(token)["aud"] == "a"
try:
    JWTVerifier([Key.secret(secret, "HS256")], telemetry=True)
except ConfigurationError as error:
    print("refused:", error)
assert not any(name.startswith("opentelemetry") for name in sys.modules)
print("ok")
"""
    )
    assert done.returncode == 0, done.stderr
    assert (
        "refused: telemetry needs opentelemetry-api: pip install 'grelmicro[jwt,otel]'"
        in done.stdout
    )
    assert done.stdout.strip().endswith("ok")


def test_with_the_extra_installed_and_telemetry_off_nothing_of_it_is_imported():
    done = run_python(
        """
import sys, time
import jwt as pyjwt
from grelmicro.jwt import JWTVerifier, Key
secret = b"s" * 32
verifier = JWTVerifier([Key.secret(secret, "HS256")], audience="a")
verifier.verify(pyjwt.encode({"aud": "a", "exp": time.time() + 60}, secret, "HS256"))
print(sorted(name for name in sys.modules if name.startswith("opentelemetry")))
"""
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# -- the Grafana dashboard ---------------------------------------------------------------


def test_the_dashboard_reads_metrics_and_labels_the_prometheus_exporter_writes(
    server: DocumentServer,
):
    exporter = pytest.importorskip("opentelemetry.exporter.prometheus")
    prometheus_client = pytest.importorskip("prometheus_client")
    from grelmicro.jwt import DPoPVerifier  # noqa: PLC0415
    from grelmicro.jwt.errors import DPoPReplayError  # noqa: PLC0415
    from grelmicro.jwt.otel import (  # noqa: PLC0415 - the FastAPI dependencies' hooks
        answered,
        dpop_checked,
        dpop_reporter,
    )

    dashboard = json.loads((ROOT / "examples" / "grafana-dashboard.json").read_text("utf-8"))
    expressions = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    provider = MeterProvider(metric_readers=[exporter.PrometheusMetricReader()])
    try:
        signer = private_key("ES256", kid="k1")
        server.set("/jwks.json", jwks_of(signer))
        verifier = network_verifier(
            server.url("/jwks.json"),
            sinks(),
            telemetry=Telemetry(meter_provider=provider, latency=True),
        )
        token = signer.mint({"aud": AUDIENCE, "iss": ISSUER, "exp": NOW + 60})
        try:
            verifier.verify(token)
            verifier.verify(token)
            with pytest.raises(TokenRejectedError):
                verifier.verify(tamper(token))
            answered(verifier, 401, "signature")
            dpop = dpop_reporter(verifier, DPoPVerifier())
            dpop_checked(dpop, None)
            dpop_checked(dpop, DPoPReplayError("replayed"))
            text = prometheus_client.generate_latest(prometheus_client.REGISTRY).decode()
        finally:
            verifier.close()
    finally:
        provider.shutdown()  # takes the exporter's collector out of the global registry

    written = set(re.findall(r"^(grelmicro_jwt_\w+?)(?:\{| )", text, flags=re.MULTILINE))
    # Metric names: what is left once the label groupings and selectors are taken out.
    bare = [re.sub(r"by \([^)]*\)|\{[^}]*\}", "", expr) for expr in expressions]
    read = {name for expr in bare for name in re.findall(r"grelmicro_jwt_\w+", expr)}
    assert read
    assert read <= written, read - written
    labels = set(re.findall(r"(\w+)=\"", text))
    used = {
        label
        for expr in expressions
        for group in re.findall(r"by \(([^)]*)\)", expr)
        for label in (part.strip() for part in group.split(","))
    }
    used |= {label for expr in expressions for label in re.findall(r"(\w+)=~?\"", expr)}
    # job: Prometheus adds it to every series it scrapes (one per service), the
    # exporter does not write it; every metric the panels read is filtered by it.
    assert "job" in used
    assert used - {"job"} <= labels, used - labels
    legends = {
        label
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for label in re.findall(r"\{\{(\w+)\}\}", target["legendFormat"])
    }
    assert legends <= labels, legends - labels
    selections = [
        found
        for expr in expressions
        for found in re.findall(r"grelmicro_jwt_\w+(\{[^}]*\})?", re.sub(r"by \([^)]*\)", "", expr))
    ]
    assert selections
    assert all(found.startswith('{job=~"$job"') for found in selections), selections
    assert [variable["name"] for variable in dashboard["templating"]["list"]] == ["job"]


# -- the demo ----------------------------------------------------------------------------


def test_the_demo_ends_with_its_metrics(demo: tuple[str, dict[str, str]]):
    pytest.importorskip("opentelemetry.exporter.prometheus")
    _out, blocks = demo
    lines = blocks["metrics"].splitlines()
    assert lines[1].startswith("GET /metrics")
    found = {line.rsplit(" ", 1)[0]: line.rsplit(" ", 1)[1] for line in lines[2:] if line}
    rejected = ",".join(
        f'grelmicro_jwt_{name}="{value}"'
        for name, value in (
            ("algorithm", ""),
            ("cache", ""),
            ("issuer", ""),
            ("outcome", "rejected"),
            ("reason", "expired"),
        )
    )
    assert found[f"grelmicro_jwt_verifications_total{{{rejected}}}"] == "1.0"
    replay = 'grelmicro_jwt_reason="dpop-replay",http_response_status_code="401"'
    assert found[f"grelmicro_jwt_http_refusals_total{{{replay}}}"] == "1.0"
    fetches = [v for k, v in found.items() if k.startswith("grelmicro_jwt_key_fetches_total{")]
    assert fetches == ["1.0"]
    ready = [v for k, v in found.items() if k.startswith("grelmicro_jwt_keys_ready{")]
    assert ready == ["1.0"]


@pytest.mark.anyio
async def test_an_async_fetch_through_a_sync_client_is_one_span(
    server: DocumentServer, sink: Sinks
):
    signer = private_key("ES256", kid="k1")
    server.set("/jwks.json", jwks_of(signer))
    with httpx.Client() as client:  # the fetch runs in a worker thread
        verifier = network_verifier(server.url("/jwks.json"), sink, client=client)
        async with verifier:
            assert verifier.health().ready
    assert [s.name for s in sink.finished()] == ["grelmicro.jwt.key_fetch"]
    assert points(sink, "grelmicro.jwt.key_fetches") == [
        ({"grelmicro.jwt.outcome": "success", "grelmicro.jwt.source": server.url("/jwks.json")}, 1)
    ]


def test_from_env_takes_the_telemetry_option(sink):
    verifier = JWTVerifier.from_env(
        [Key.secret(SECRET, "HS256")],
        environ={"GRELMICRO_JWT_AUDIENCE": AUDIENCE, "GRELMICRO_JWT_ISSUER": ISSUER},
        clock=lambda: NOW,
        telemetry=sink.telemetry,
    )
    verifier.verify(mint())
    assert "grelmicro.jwt.verifications" in sink.metrics()


def test_the_histograms_have_buckets_in_seconds(server: DocumentServer):
    sink = sinks(latency=True)
    signer = private_key("ES256", kid="k1")
    server.set("/jwks.json", jwks_of(signer))
    verifier = network_verifier(server.url("/jwks.json"), sink, telemetry=sink.telemetry)
    try:
        verifier.verify(signer.mint({"aud": AUDIENCE, "iss": ISSUER, "exp": NOW + 60}))
    finally:
        verifier.close()
    data = sink.reader.get_metrics_data()
    assert data is not None
    bounds = {
        metric.name: tuple(metric.data.data_points[0].explicit_bounds)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name.endswith(".duration")
    }
    assert bounds["grelmicro.jwt.key_fetch.duration"][0] == 0.005
    assert bounds["grelmicro.jwt.key_fetch.duration"][-1] == 10.0
    assert bounds["grelmicro.jwt.verification.duration"][0] == 1e-6


def test_verifiers_sharing_a_provider_are_added_up():
    sink = sinks()
    first, second = static_verifier(sink), static_verifier(sink, cache_size=0)
    first.verify(mint())
    first.verify(mint())  # a hit
    for _ in range(2):
        second.verify(mint())
    with pytest.raises(TokenRejectedError):
        second.verify(tamper(mint()))
    assert value_of(sink, "grelmicro.jwt.cache.misses") == 1  # the second has no cache
    assert value_of(sink, "grelmicro.jwt.verifications", outcome="accepted", cache="hit") == 1
    accepted = {"outcome": "accepted", "cache": "miss", "issuer": ISSUER, "algorithm": "HS256"}
    assert value_of(sink, "grelmicro.jwt.verifications", **accepted) == 1 + 2
    assert value_of(sink, "grelmicro.jwt.keys.count") == 2


def test_a_rotation_that_ends_200_counts_one_accepted_and_no_refusal(server: DocumentServer):
    """A refetch that ended 200 counted two keys-unavailable refusals and two span events.

    Telemetry wrapped the engine and counted attempts; each request's
    outcome is now reported once, at the end of its steps.
    """
    sink = sinks()
    old, new = private_key("ES256", kid="old", seed=5), private_key("ES256", kid="new", seed=6)
    server.set("/jwks.json", {"keys": [old.public_jwk()]})
    verifier = network_verifier(server.url("/jwks.json"), sink, cache_size=0)
    tracer = sink.tracer_provider.get_tracer("request")
    claims = {"aud": AUDIENCE, "iss": ISSUER, "sub": SECRET_SUB, "exp": NOW + 60}
    try:
        verifier.verify(old.mint(claims))
        server.set("/jwks.json", {"keys": [old.public_jwk(), new.public_jwk()]})

        async def request() -> Any:
            with tracer.start_as_current_span("request") as span:
                # An unannounced rotation on an event loop: one refetch, then 200.
                await verifier.verify_async(new.mint(claims))
            await verifier.aclose()
            return span

        span = asyncio.run(request())
    finally:
        verifier.close()
    assert list(span.events) == []
    outcomes = {
        found.get("grelmicro.jwt.outcome")
        for found, _ in points(sink, "grelmicro.jwt.verifications")
    }
    assert outcomes == {"accepted"}
    accepted = {"outcome": "accepted", "cache": "miss", "issuer": ISSUER, "algorithm": "ES256"}
    assert value_of(sink, "grelmicro.jwt.verifications", **accepted) == 2


# -- tenant lookups ----------------------------------------------------------------------


def test_tenant_lookups_are_counted_by_template_never_by_tenant(sink: Sinks) -> None:
    from test_jwks_providers import entra_v2  # noqa: PLC0415

    from grelmicro.jwt import Issuer, TenantUnavailableError  # noqa: PLC0415

    template = "https://login.microsoftonline.com/{tenantid}/v2.0"
    tenant = "0f6b3c4e-2a1d-4c8b-9e7f-1a2b3c4d5e6f"
    signer = private_key("RS256", kid="entra-1", seed=60)

    def directory(asked: str) -> bool:
        raise ConnectionError(asked)

    verifier = JWTVerifier(
        issuers=[Issuer(template, jwks=entra_v2([signer]), tenants=directory)],
        audience=AUDIENCE,
        clock=lambda: NOW,
        telemetry=sink.telemetry,
    )
    token = signer.mint(
        {"iss": template.replace("{tenantid}", tenant), "tid": tenant, "aud": AUDIENCE}
        | {"exp": NOW + 60}
    )
    with pytest.raises(TenantUnavailableError):
        verifier.verify(token)

    assert value_of(sink, "grelmicro.jwt.tenant_lookups", issuer=template) == 1
    assert value_of(sink, "grelmicro.jwt.tenant_lookup.failures", issuer=template) == 1
    assert value_of(sink, "grelmicro.jwt.tenant_lookup.failing", issuer=template) == 1
    assert tenant not in every_attribute_value(sink)
    verifier.close()
