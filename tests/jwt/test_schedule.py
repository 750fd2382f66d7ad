"""The refresh schedule: time in, decisions out (no clock, no I/O).

Each case is a story: events at given times, then the decisions asked at a
given time, compared with a table. Times are seconds from 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from grelmicro.jwt import FetchOptions
from grelmicro.jwt._schedule import Decision, Schedule

OPTIONS = FetchOptions(
    cooldown=30, max_stale=600, jitter=0.0, unknown_kid_budget=2, unknown_kid_interval=20
)


@dataclass(frozen=True)
class Case:
    """``events`` happen in order; then the questions are asked at ``at``."""

    name: str
    events: list[tuple[str, float, dict[str, Any]]]
    at: float
    may_fetch: tuple[bool, str, float]  # fetch, why, at
    unknown_kid: tuple[bool, str, float]
    serves: bool
    stale: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def ok(t: float, ttl: float = 100, **kw: Any) -> tuple[str, float, dict[str, Any]]:
    return ("ok", t, {"ttl": ttl, **kw})


def fail(t: float, **kw: Any) -> tuple[str, float, dict[str, Any]]:
    return ("fail", t, kw)


def kid(t: float) -> tuple[str, float, dict[str, Any]]:
    return ("kid", t, {})


CASES = [
    Case("nothing yet: load", [], 0, (True, "load", 0), (True, "unknown-kid", 0), serves=False),
    Case(
        "fresh keys",
        [ok(0)],
        50,
        (False, "fresh", 100),
        (True, "unknown-kid", 50),
        serves=True,
    ),
    Case(
        "refresh due (at expiry)",
        [ok(0)],
        100,
        (True, "refresh", 100),
        (True, "unknown-kid", 100),
        serves=True,
        stale=True,
    ),
    Case(
        "past expiry, within the bound: serves, stale",
        [ok(0), fail(100)],
        150,
        (True, "refresh", 150),
        (True, "unknown-kid", 150),
        serves=True,
        stale=True,
    ),
    Case(
        "past the bound",
        [ok(0)],
        700,
        (True, "refresh", 700),
        (True, "unknown-kid", 700),
        serves=False,
        stale=True,
    ),
    # Failure backoff: 1 s, 2 s, 4 s... up to the cooldown; it gates every fetch.
    Case("first failure: 1 s", [fail(0)], 0.5, (False, "backoff", 1), (False, "backoff", 1), False),
    Case(
        "third failure: 4 s",
        [fail(0), fail(1), fail(3)],
        4,
        (False, "backoff", 7),
        (False, "backoff", 7),
        serves=False,
    ),
    Case(
        "many failures: capped at the cooldown",
        [fail(t) for t in (0, 1, 3, 7, 15, 31, 61)],
        62,
        (False, "backoff", 91),
        (False, "backoff", 91),
        serves=False,
    ),
    Case(
        "Retry-After lengthens the pause",
        [fail(0, retry_after=12)],
        5,
        (False, "backoff", 12),
        (False, "backoff", 12),
        serves=False,
    ),
    Case(
        "Retry-After within the cooldown",
        [fail(0, retry_after=3600)],
        5,
        (False, "backoff", 30),
        (False, "backoff", 30),
        serves=False,
    ),
    Case(
        "a success resets the backoff",
        [fail(0), fail(1), ok(3)],
        4,
        (False, "fresh", 103),
        (True, "unknown-kid", 4),
        serves=True,
    ),
    Case(
        "failure with keys held: look again after the pause",
        [ok(0), fail(100)],
        100.5,
        (False, "backoff", 101),
        (False, "backoff", 101),
        serves=True,
        stale=True,
    ),
    # Unknown-kid budget: 2 per 20 s window, spread (one per 10 s at most).
    Case(
        "budget spread: the next fetch waits window / budget",
        [ok(0), kid(5)],
        8,
        (False, "fresh", 100),
        (False, "budget", 15),
        serves=True,
    ),
    Case(
        "budget spent",
        [ok(0), kid(5), kid(15)],
        17,
        (False, "fresh", 100),
        (False, "budget", 25),
        serves=True,
    ),
    Case(
        "budget back once the first start leaves the window",
        [ok(0), kid(5), kid(15)],
        25,
        (False, "fresh", 100),
        (True, "unknown-kid", 25),
        serves=True,
    ),
    # Empty key lists: kept once, withdrawn the second time in a row.
    Case(
        "empty once: keys kept, asked again soon",
        [ok(0), ("empty", 100, {})],
        100.5,
        (False, "fresh", 101),
        (True, "unknown-kid", 100.5),
        serves=True,
        stale=True,
        extra={"has_keys": True},
    ),
    Case(
        "empty twice: withdrawn",
        [ok(0), ("empty", 100, {}), ("empty", 101, {})],
        102,
        (False, "backoff", 131),
        (False, "backoff", 131),
        serves=False,
        extra={"has_keys": False},
    ),
    Case(
        "empty, then keys: the count restarts",
        [ok(0), ("empty", 100, {}), ok(101), ("empty", 201, {})],
        201.5,
        (False, "fresh", 202),
        (True, "unknown-kid", 201.5),
        serves=True,
        stale=True,
        extra={"has_keys": True},
    ),
]


def play(case: Case) -> Schedule:
    schedule = Schedule(OPTIONS)
    for event, t, kw in case.events:
        if event == "ok":
            schedule.succeeded(started=t, now=t, ttl=kw["ttl"], spread=0.0)
        elif event == "empty":
            schedule.succeeded(started=t, now=t, ttl=100, spread=0.0, empty=True)
        elif event == "fail":
            schedule.failed(t, kw.get("retry_after"))
        else:
            decision = schedule.may_fetch(t, unknown_kid=True)
            assert decision.fetch, (case.name, t, decision)
            schedule.started(t, decision)
    return schedule


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_schedule_table(case: Case) -> None:
    schedule = play(case)
    at = case.at
    assert schedule.may_fetch(at) == Decision(*case.may_fetch)  # type: ignore[arg-type]
    assert schedule.may_fetch(at, unknown_kid=True) == Decision(*case.unknown_kid)  # type: ignore[arg-type]
    assert schedule.serves(at) is case.serves
    assert schedule.stale(at) is case.stale
    for name, value in case.extra.items():
        assert getattr(schedule, name) == value


@pytest.mark.parametrize(
    ("fetched", "arrived", "answers"),
    [
        (10.0, 10.0, True),  # fetched as the token arrived
        (12.0, 10.0, True),  # after it
        (10.0, 10.001, False),  # a moment before it: may predate the token's key
        (10.0, 13.0, False),  # older still
    ],
)
def test_a_document_answers_for_tokens_that_arrived_before_it(
    fetched: float, arrived: float, answers: bool
) -> None:
    schedule = Schedule(OPTIONS)
    schedule.succeeded(started=fetched, now=fetched + 0.3, ttl=100, spread=0.0)
    assert schedule.answers_for(arrived) is answers


def test_no_keys_never_answer() -> None:
    assert Schedule(OPTIONS).answers_for(0.0) is False


def test_jitter_brings_the_refresh_forward_within_its_share() -> None:
    options = FetchOptions(jitter=0.1)
    schedule = Schedule(options)
    schedule.succeeded(started=0, now=0, ttl=1000, spread=1.0)
    assert schedule.refresh_at == 900
    assert schedule.expires_at == 1000
    assert schedule.stale_until == 1000 + options.max_stale


def test_unknown_kid_interval_defaults_to_the_cooldown() -> None:
    assert FetchOptions(cooldown=7).unknown_kid_window == 7
    assert FetchOptions(cooldown=7, unknown_kid_interval=3).unknown_kid_window == 3
