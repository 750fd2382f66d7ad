"""Verification outcomes as events (grelmicro.jwt._outcomes), heard through ``verifier.observe``.

A refusal (401 or 503) is one ``token.refused`` event; with telemetry on, an
accepted full verification is one ``token.accepted`` event; a cache hit is
never an event. Fields hold bounded values only, never token text.
"""

import logging
import socket
from typing import Any

import pytest
from forge import NOW, SECRET, hmac_key, tamper

from grelmicro.jwt import (
    ConfigurationError,
    JWTVerifier,
    Key,
    KeysUnavailableError,
    TokenRejectedError,
)
from grelmicro.jwt._events import Event

AUDIENCE = "https://api.example.com"
ISSUER = "https://idp.example.com/"
SECRET_SUB = "user-never-in-an-event"


def mint(**claims: Any) -> str:
    claims.setdefault("aud", AUDIENCE)
    claims.setdefault("iss", ISSUER)
    claims.setdefault("sub", SECRET_SUB)
    claims.setdefault("exp", NOW + 3600)
    return hmac_key().mint(claims)


def verifier_heard(**options: Any) -> tuple[JWTVerifier, list[Event]]:
    verifier = JWTVerifier(
        [Key.secret(SECRET, "HS256")],
        audience=AUDIENCE,
        issuer=ISSUER,
        clock=lambda: NOW,
        **options,
    )
    heard: list[Event] = []
    verifier.observe(heard.append)
    return verifier, heard


def tokens_of(heard: list[Event]) -> list[tuple[str, dict[str, Any]]]:
    return [(e.name, e.fields) for e in heard if e.name.startswith("token.")]


def test_a_refusal_is_one_event_with_its_reason_and_error_class_never_the_token():
    verifier, heard = verifier_heard()
    token = mint()
    verifier.verify(token)
    verifier.verify(token)  # a hit
    bad = tamper(token)
    with pytest.raises(TokenRejectedError):
        verifier.verify(bad)

    # Without telemetry, accepted tokens are not announced (no frame per miss).
    assert tokens_of(heard) == [
        ("token.refused", {"reason": "signature", "error": "InvalidSignatureError"})
    ]
    text = repr([(e.source, e.fields, e.message, [str(a) for a in e.args]) for e in heard])
    for segment in (*bad.split("."), SECRET_SUB):
        assert segment not in text


def test_with_telemetry_an_accepted_miss_is_one_event_and_a_hit_none():
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.metrics import MeterProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415

    from grelmicro.jwt.otel import Telemetry  # noqa: PLC0415

    telemetry = Telemetry(meter_provider=MeterProvider(), tracer_provider=TracerProvider())
    verifier, heard = verifier_heard(telemetry=telemetry)
    token = mint()
    for _ in range(3):
        verifier.verify(token)

    assert tokens_of(heard) == [
        ("token.accepted", {"issuer": ISSUER, "algorithm": "HS256", "tenant": None})
    ]


def test_a_refusal_is_a_debug_record_with_the_event_fields(caplog: pytest.LogCaptureFixture):
    verifier, _ = verifier_heard()
    with caplog.at_level(logging.DEBUG, logger="grelmicro.jwt"):
        with pytest.raises(TokenRejectedError):
            verifier.verify(mint(exp=NOW - 10))
    (record,) = caplog.records
    assert record.levelno == logging.DEBUG
    assert record.getMessage().startswith("token rejected: expired: ")
    assert record.__dict__["jwt_event"] == "token.refused"
    assert record.__dict__["jwt_reason"] == "expired"
    assert record.__dict__["jwt_error"] == "ExpiredTokenError"


def test_keys_unavailable_is_a_refusal_event_too():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    verifier = JWTVerifier(
        jwks_url=f"http://127.0.0.1:{port}/jwks.json",
        allow_insecure_loopback=True,
        audience=AUDIENCE,
        issuer=ISSUER,
        clock=lambda: NOW,
    )
    heard: list[Event] = []
    verifier.observe(heard.append)
    try:
        with pytest.raises(KeysUnavailableError):
            verifier.verify(mint())
    finally:
        verifier.close()
    assert ("token.refused", {"reason": "keys-unavailable", "error": "KeysUnavailableError"}) in (
        tokens_of(heard)
    )
    assert "keys.fetch" in [e.name for e in heard]  # the key source's events, same observer


def test_an_observer_that_raises_changes_no_outcome(capsys: pytest.CaptureFixture[str]):
    verifier, _ = verifier_heard()

    def broken(event: Event) -> None:
        raise RuntimeError("backend down")

    verifier.observe(broken)
    for _ in range(2):
        with pytest.raises(TokenRejectedError):
            verifier.verify(tamper(mint()))
    # Said once, on stderr: never through the logging it may be part of.
    notes = [line for line in capsys.readouterr().err.splitlines() if "observer" in line]
    assert len(notes) == 1
    assert "RuntimeError" in notes[0]


def test_an_observer_must_be_callable():
    verifier, _ = verifier_heard()
    with pytest.raises(ConfigurationError, match="observer must be a callable"):
        verifier.observe("log")  # type: ignore[arg-type]
