"""The soak harness can fail: its classes of refused valid tokens and its rules.

``bench/soak/judge.py`` is pure (records and log lines in, classes and failed
rules out), so a table of made-up records pins what each class means. One
short real run shows the whole harness failing on a service whose JWKS URL
answers nothing (no key is ever loaded): a soak that cannot fail proves
nothing. No test here asserts a speed.
"""

from __future__ import annotations

import importlib.util
import math
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOAK = ROOT / "bench" / "soak.py"


def _load_judge():
    spec = importlib.util.spec_from_file_location(
        "soak_judge", ROOT / "bench" / "soak" / "judge.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


judge = _load_judge()
Record = judge.Record

W1, W2 = "101", "202"

# The run these records come from: k1 published before the start, k2 at 20 s,
# k3 at 50 s, k4 never; the provider fails from 40 s to 60 s; worker 101 holds
# k1 throughout, installs k2 at 21.0 s and k3 at 61.5 s; its fetches fail from
# 40.5 s until 61.5 s; worker 202 never installs k2.
EVENTS = [
    {"t": -1.0, "worker": W1, "jwt_event": "keys.loaded", "jwt_kids_added": ["k1"]},
    {"t": -1.0, "worker": W2, "jwt_event": "keys.loaded", "jwt_kids_added": ["k1"]},
    {"t": 21.0, "worker": W1, "jwt_event": "keys.refreshed", "jwt_kids_added": ["k2"]},
    {"t": 40.5, "worker": W1, "jwt_event": "keys.fetch_failed", "jwt_retry_in": 1.0},
    {
        "t": 61.5,
        "worker": W1,
        "jwt_event": "keys.refreshed",
        "jwt_kids_added": ["k3"],
        "jwt_kids_removed": [None],  # a key without a kid: skipped
        "jwt_recovered": True,
    },
    {"t": 30.0, "worker": W2, "jwt_event": "keys.key_skipped", "jwt_reason": "budget-ish"},
]
PUBLISHED = {"k1": -5.0, "k2": 20.0, "k3": 50.0}
MODES = [(-5.0, "up"), (40.0, "5xx"), (60.0, "up")]


@pytest.fixture(scope="module")
def facts():
    return judge.facts_from(EVENTS, PUBLISHED, MODES)


def r503(t, kid, worker=W1, *, done=None, kind="valid", said=""):
    return Record(t, t + 0.01 if done is None else done, worker, kind, kid, 503, said=said)


# (record, class, late)
TABLE = [
    # k1 held by both workers since before the start: a 503 is the held-key failure.
    (r503(5.0, "k1"), "held", False),
    (r503(45.0, "k1", W2), "held", False),
    # k2 installed by 101 at 21.0: a request in flight at that moment.
    (r503(20.5, "k2", done=21.2), "installed-in-flight", False),
    # Sent before 101 had it, within the grace: the budget (no failure run, nothing said).
    (r503(20.4, "k2"), "budget", False),
    # Worker 202 never installs k2: past the grace with the provider up, late.
    (r503(23.0, "k2", W2), "budget", True),
    # The service says why: its words win over the inference.
    (r503(23.0, "k2", W2, said='{"wait": "fetch in flight"}'), "fetch-in-flight", True),
    (r503(21.0, "k2", W2, said="next fetch after the backoff"), "backoff", False),
    # Not published (yet, or ever): never late.
    (r503(10.0, "k2", W2, kind="early"), "unpublished", False),
    (r503(70.0, "k4"), "unpublished", False),
    # The provider failing: never late, whatever the key.
    (r503(55.0, "k3"), "provider-failing", False),
    (r503(45.0, "k2", W2), "provider-failing", False),
    # The provider is back at 60 s; 101 is still in its failure run until 61.5 s.
    (r503(61.0, "k3"), "backoff", False),
    (r503(61.0, "k3", done=61.6), "installed-in-flight", False),
    # 2.5 s after the provider's return (not after publication at 50 s): late.
    (r503(62.6, "k3", W2), "budget", True),
    (r503(62.4, "k3", W2), "budget", False),
]


@pytest.mark.parametrize(("record", "cls", "late"), TABLE)
def test_classify_a_table_of_records(facts, record, cls, late):
    verdict = judge.classify(record, facts)
    assert (verdict.cls, verdict.late) == (cls, late)
    assert verdict.stated == bool(record.said)


def test_an_announced_key_is_late_from_its_first_use():
    """Published at 20 s, signed with from 30 s: the grace runs from 30 s."""
    facts = judge.facts_from([], {"k2": 20.0}, [], used={"k2": 30.0})
    assert not judge.classify(r503(32.4, "k2"), facts).late
    assert judge.classify(r503(32.6, "k2"), facts).late


def test_only_503s_to_signed_tokens_are_classified(facts):
    assert judge.classify(Record(5.0, 5.1, W1, "valid", "k1", 200), facts) is None
    assert judge.classify(Record(5.0, 5.1, W1, "valid", "k1", 401), facts) is None
    assert judge.classify(Record(5.0, 5.1, W1, "unknown-kid", "forged-1", 503), facts) is None


def test_facts_from_the_workers_log_lines(facts):
    assert facts.installs[W1]["k1"] == [(-1.0, math.inf)]
    assert facts.installs[W1]["k2"] == [(21.0, math.inf)]
    assert facts.installs[W1]["k3"] == [(61.5, math.inf)]
    assert "k2" not in facts.installs[W2]
    assert facts.failing == {W1: [(40.5, 61.5)]}
    assert facts.waits == {}  # key-state events never state a wait
    assert facts.up_since(10.0) == -math.inf
    assert facts.up_since(50.0) is None
    assert facts.up_since(70.0) == 60.0


def test_withdrawal_and_replacement_end_a_key():
    facts = judge.facts_from(
        [
            {"t": 0.0, "worker": W1, "jwt_event": "keys.loaded", "jwt_kids_added": ["a", "b"]},
            {
                "t": 5.0,
                "worker": W1,
                "jwt_event": "keys.refreshed",
                "jwt_kids_added": ["b"],
                "jwt_kids_removed": ["b"],  # replaced under the same kid
            },
            {"t": 9.0, "worker": W1, "jwt_event": "keys.withdrawn", "jwt_cause": "max-stale"},
            {"t": 9.5, "worker": W1, "jwt_event": "keys.unavailable", "jwt_wait": "budget"},
        ],
        {"a": 0.0, "b": 0.0},
        [],
    )
    assert facts.installs[W1] == {"a": [(0.0, 9.0)], "b": [(0.0, 5.0), (5.0, 9.0)]}
    # After the withdrawal the key is not held; the worker's own line names the wait.
    verdict = judge.classify(Record(9.4, 9.6, W1, "valid", "a", 503), facts)
    assert (verdict.cls, verdict.stated, verdict.late) == ("budget", True, True)


def _rules(records, facts, workers=(W1, W2), duration=30.0):
    verdicts = {i: v for i, r in enumerate(records) if (v := judge.classify(r, facts)) is not None}
    return sorted(f.rule for f in judge.judge(records, verdicts, workers, duration))


def _steady(duration=30.0, kid="k1", status=200):
    """Each worker answers every 0.5 s."""
    return [
        Record(t / 2, t / 2 + 0.01, w, "valid", kid, status)
        for t in range(int(duration * 2))
        for w in (W1, W2)
    ]


def test_a_clean_run_passes(facts):
    invalid_503 = [Record(3.0, 3.1, W1, "unknown-kid", "forged-2", 503)]
    invalid_401 = [Record(3.0, 3.1, W2, "expired", "k1", 401)]
    assert _rules(_steady() + invalid_503 + invalid_401, facts) == []


def test_each_rule_fails_the_run(facts):
    steady = _steady()
    assert _rules([*steady, r503(5.0, "k1")], facts) == ["held-key-503"]
    assert _rules([*steady, r503(23.0, "k2", W2)], facts) == ["late-503"]
    quiet = [r for r in steady if not (r.worker == W2 and 10.0 < r.t < 21.0)]
    assert _rules(quiet, facts) == ["idle-worker"]
    no_answer = [
        r if r.worker == W1 else Record(r.t, r.t + 30, W2, "valid", "k1", 0) for r in steady
    ]
    assert _rules(no_answer, facts) == ["idle-worker"]
    accepted = Record(4.0, 4.1, W1, "bad-signature", "k1", 200)
    assert _rules([*steady, accepted], facts) == ["invalid-accepted"]
    assert _rules([*steady, Record(4.0, 4.1, W1, "valid", "k1", 401)], facts) == ["valid-401"]


def test_a_service_that_answers_503_to_everything_fails(facts):
    # Every answer 503, invalid tokens included: those are not "not accepted", they
    # are counted apart; the valid ones fail the held-key rule and no-valid-accepted.
    everything = [*_steady(status=503), Record(1.0, 1.1, W1, "expired", "k1", 503)]
    assert _rules(everything, facts) == ["held-key-503", "none-accepted"]
    table = judge.answers_table(everything)
    assert "| invalid | 1 | 0 | 0 | 1 | 0 |" in table


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_soak_fails_on_a_service_that_never_loads_keys(tmp_path):
    """A 3 s run against a dead JWKS URL: exit 1, naming the rules."""
    pytest.importorskip("uvicorn")
    pytest.importorskip("fastapi")
    # fmt: off
    command = [
        sys.executable, str(SOAK), "--duration", "3", "--schedule", "none",
        "--workers", "1", "--concurrency", "2", "--rate", "40", "--no-plot",
        "--jwks-url", f"http://127.0.0.1:{_closed_port()}/jwks.json", "--out", str(tmp_path),
    ]
    # fmt: on
    run = subprocess.run(command, capture_output=True, text=True, timeout=240, check=False)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    failed = [line for line in run.stdout.splitlines() if line.startswith("SOAK FAIL")]
    assert any("[none-accepted]" in line for line in failed), failed
    assert any("[late-503]" in line for line in failed), failed
    assert (tmp_path / "requests.jsonl").stat().st_size > 0
