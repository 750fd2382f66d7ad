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
    """An unknown-kid fetch started at ``t`` that brought keys (it spends the budget)."""
    return ("kid", t, {})


def kid_failed(t: float) -> tuple[str, float, dict[str, Any]]:
    """An unknown-kid fetch started at ``t`` that failed (paced, spends no budget)."""
    return ("kid-failed", t, {})


CASES = [
    # With no keys held, a token naming any kid needs a load: it is a load.
    Case("nothing yet: load", [], 0, (True, "load", 0), (True, "load", 0), serves=False),
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
    # No keys held: a load about every second after a failure (jitter drawn
    # by the owner; spread 0.5 here: exactly 1 s), never doubling.
    Case("first failure: 1 s", [fail(0)], 0.5, (False, "backoff", 1), (False, "backoff", 1), False),
    Case(
        "no keys held: third failure still 1 s, no doubling",
        [fail(0), fail(1), fail(2)],
        2.5,
        (False, "backoff", 3),
        (False, "backoff", 3),
        serves=False,
    ),
    Case(
        "no keys held: many failures, still 1 s (never the cooldown)",
        [fail(t) for t in range(60)],
        59.5,
        (False, "backoff", 60),
        (False, "backoff", 60),
        serves=False,
    ),
    # Keys held: the refresh backs off 1 s, 2 s, 4 s... up to the cooldown;
    # an unknown-kid fetch waits one load pace after a failure (never back to
    # back with it), not the doubling: a key published during an outage is
    # fetched about a second after the provider returns.
    Case(
        "keys held, third failure: 4 s",
        [ok(0), fail(100), fail(101), fail(103)],
        104,
        (False, "backoff", 107),
        (True, "unknown-kid", 104),
        serves=True,
        stale=True,
    ),
    Case(
        "keys held, many failures: capped at the cooldown",
        [ok(0), *(fail(t) for t in (100, 101, 103, 107, 115, 131, 161))],
        162,
        (False, "backoff", 191),
        (True, "unknown-kid", 162),
        serves=True,
        stale=True,
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
        "Retry-After with keys held holds unknown-kid fetches back too",
        [ok(0), fail(100, retry_after=12)],
        105,
        (False, "backoff", 112),
        (False, "backoff", 112),
        serves=True,
        stale=True,
    ),
    Case(
        "a success resets the backoff",
        [ok(0), fail(100), fail(101), ok(103)],
        104,
        (False, "fresh", 203),
        (True, "unknown-kid", 104),
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
    # Unknown-kid fetches: 2 successful ones per 20 s window, paced (one per 10 s).
    Case(
        "pace: the next fetch waits window / budget",
        [ok(0), kid(5)],
        8,
        (False, "fresh", 105),
        (False, "budget", 15),
        serves=True,
    ),
    Case(
        "budget spent",
        [ok(0), kid(5), kid(15)],
        17,
        (False, "fresh", 115),
        (False, "budget", 25),
        serves=True,
    ),
    Case(
        "budget back once the first start leaves the window",
        [ok(0), kid(5), kid(15)],
        25,
        (False, "fresh", 115),
        (True, "unknown-kid", 25),
        serves=True,
    ),
    Case(
        "budget spent: the answer says when the pace allows the next one",
        [ok(0), kid(5), kid(18)],
        22,
        (False, "fresh", 118),
        (False, "budget", 28),
        serves=True,
    ),
    Case(
        "a failed unknown-kid fetch still paces the next one",
        [ok(0), kid_failed(5)],
        8,
        (False, "fresh", 100),
        (False, "budget", 15),
        serves=True,
    ),
    Case(
        "failed unknown-kid fetches: the pace alone, not the doubling backoff",
        [ok(0), *(kid_failed(t) for t in (5, 15, 25, 35))],
        45,
        (False, "fresh", 100),
        (True, "unknown-kid", 45),
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
            assert decision == Decision(fetch=True, why="unknown-kid", at=t), (case.name, t)
            schedule.started(t, decision)
            if event == "kid":
                schedule.succeeded(started=t, now=t, ttl=100, spread=0.0, why="unknown-kid")
            else:
                schedule.failed(t)
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


def test_unknown_kid_fetches_default_to_one_a_second() -> None:
    options = FetchOptions(cooldown=7)
    assert (options.unknown_kid_budget, options.unknown_kid_window) == (1, 1.0)
    assert FetchOptions(cooldown=7, unknown_kid_interval=None).unknown_kid_window == 7
    assert FetchOptions(cooldown=7, unknown_kid_interval=3).unknown_kid_window == 3


def test_by_default_an_unknown_kid_may_be_fetched_a_second_after_the_last() -> None:
    schedule = Schedule(FetchOptions(jitter=0.0))
    schedule.succeeded(started=0, now=0, ttl=900, spread=0.0)
    first = schedule.may_fetch(10, unknown_kid=True)
    assert first == Decision(fetch=True, why="unknown-kid", at=10)
    schedule.started(10, first)
    schedule.succeeded(started=10, now=10.2, ttl=900, spread=0.0, why="unknown-kid")
    assert schedule.may_fetch(10.5, unknown_kid=True) == Decision(fetch=False, why="budget", at=11)
    assert schedule.may_fetch(11, unknown_kid=True) == Decision(
        fetch=True, why="unknown-kid", at=11
    )


@pytest.mark.parametrize(("spread", "pause"), [(0.0, 0.75), (0.5, 1.0), (1.0, 1.25)])
def test_with_no_keys_held_the_pause_after_a_failure_is_about_a_second(
    spread: float, pause: float
) -> None:
    schedule = Schedule(OPTIONS)
    for t in range(5):
        assert schedule.failed(float(t), spread=spread) == pause
    assert schedule.may_fetch(4 + pause) == Decision(fetch=True, why="load", at=4 + pause)
