"""The soak harness can fail: its classes of refused valid tokens and its rules.

``bench/soak/judge.py`` is pure (records and log lines in, classes and failed
rules out), so a table of made-up records pins what each class means: the
key's installs come from the workers' key-state records, why a 503 was
answered from the verifier (the body's ``wait``, the worker's ``health()``
sent with the 503), never from log text. One
short real run shows the whole harness failing on a service whose JWKS URL
answers nothing (no key is ever loaded): a soak that cannot fail proves
nothing. No test here asserts a speed.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import math
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from grelmicro.jwt import KeySourceHealth

ROOT = Path(__file__).resolve().parents[1]
SOAK = ROOT / "bench" / "soak.py"


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


judge = _load("soak_judge", ROOT / "bench" / "soak" / "judge.py")
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


def r503(t, kid, worker=W1, *, done=None, kind="valid", wait="", health=None):
    done = t + 0.01 if done is None else done
    return Record(t, done, worker, kind, kid, 503, wait=wait, health=health)


#: ``health()`` fields as the worker sends them with a 503 (``X-Soak-Health``).
SERVING = {"ready": True, "generation": 3, "key_count": 2, "last_success": 1.0e9}
WITHDRAWN = {"ready": False, "generation": 4, "key_count": 0, "last_success": 1.0e9}
NEVER_LOADED = {"ready": False, "generation": 0, "key_count": 0, "last_success": None}
MISCONFIGURED = {**NEVER_LOADED, "config_error": "the discovery document names another issuer"}

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
    # The verifier says why (the body's wait): it wins over the inference.
    (r503(23.0, "k2", W2, wait="fetch-in-flight"), "fetch-in-flight", True),
    (r503(21.0, "k2", W2, wait="backoff", health=SERVING), "backoff", False),
    (r503(21.0, "k2", W2, wait="key-pending", health=SERVING), "key-pending", False),
    (r503(45.0, "k2", W2, wait="backoff", health=SERVING), "backoff", False),
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
    stated = cls not in ("held", "installed-in-flight", "unpublished") and bool(record.wait)
    assert verdict.stated == stated
    assert verdict.wait == record.wait


# The verifier's state, with the provider failing (40-60 s) and k3 published at 50 s.
# (wait, health, class)
STATED = [
    # Keys dropped at max_stale: whatever the wait, the worker held no key, by its health.
    ("backoff", WITHDRAWN, "withdrawn"),
    ("provider-failing", WITHDRAWN, "withdrawn"),
    ("fetch-in-flight", WITHDRAWN, "withdrawn"),
    ("", WITHDRAWN, "withdrawn"),
    # Keys held (or never loaded): the wait names the class.
    ("backoff", SERVING, "backoff"),
    ("budget", SERVING, "budget"),
    ("provider-failing", NEVER_LOADED, "provider-failing"),
    ("backoff", NEVER_LOADED, "backoff"),
    ("provider-failing", None, "provider-failing"),
    # A configuration error, or a closed verifier: neither is an outage.
    ("config", None, "config"),
    ("provider-failing", MISCONFIGURED, "config"),
    ("closed", WITHDRAWN, "closed"),
    # A wait the harness does not know is its own class, whatever the health says.
    ("waiters", WITHDRAWN, "unknown-wait"),
    ("no-sync-client", SERVING, "unknown-wait"),
    ("no-sync-client", None, "unknown-wait"),
]


@pytest.mark.parametrize(("wait", "health", "cls"), STATED)
def test_the_verifiers_state_names_the_class(facts, wait, health, cls):
    verdict = judge.classify(r503(55.0, "k3", W2, wait=wait, health=health), facts)
    assert (verdict.cls, verdict.stated, verdict.wait) == (cls, True, wait)


def test_keys_withdrawn_at_max_stale_are_not_a_provider_failure():
    """max_stale 0: keys dropped at expiry, the provider failing, were "provider failing"."""
    facts = judge.facts_from(
        [
            {"t": 0.0, "worker": W1, "jwt_event": "keys.loaded", "jwt_kids_added": ["k1"]},
            {"t": 10.0, "worker": W1, "jwt_event": "keys.fetch_failed"},
            {"t": 12.0, "worker": W1, "jwt_event": "keys.withdrawn", "jwt_cause": "max-stale"},
        ],
        {"k1": -5.0},
        [(9.0, "5xx")],
    )
    dropped = r503(12.5, "k1", wait="backoff", health=WITHDRAWN)
    verdict = judge.classify(dropped, facts)
    assert (verdict.cls, verdict.stated, verdict.late) == ("withdrawn", True, False)
    # The same 503 from a service that states nothing: inferred from the provider.
    assert judge.classify(r503(12.5, "k1"), facts).cls == "provider-failing"


def test_an_unknown_wait_is_never_another_class(facts):
    """A new wait (no-sync-client, waiters) is counted and listed, not taken for another."""
    records = [
        r503(55.0, "k3", W2, wait="waiters", health=SERVING),
        r503(10.0, "k2", W2, wait="waiters"),  # not yet published: still its own class
        r503(5.0, "k1", wait="no-sync-client"),  # a held key: the rule fails, the wait is listed
        r503(21.0, "k2", W2, wait="backoff"),
    ]
    verdicts = {i: judge.classify(r, facts) for i, r in enumerate(records)}
    classes = [v.cls for v in verdicts.values()]
    assert classes == ["unknown-wait", "unknown-wait", "held", "backoff"]
    assert judge.unknown_waits(verdicts) == {"waiters": 2, "no-sync-client": 1}
    table = judge.class_table(records, verdicts, [W1, W2])
    assert "| unknown wait | 2 | 0 | 2 | 0 | 2 | 0 |" in table
    assert "`waiters`: 2, `no-sync-client`: 1" in table


def test_every_known_wait_has_a_class_and_every_class_a_row(facts):
    assert set(judge.WAITS.values()) <= set(judge.CLASSES)
    table = judge.class_table([], {}, [W1])
    assert all(f"| {name} |" in table for name in judge.CLASSES.values())


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
            {"t": 9.5, "worker": W1, "jwt_event": "keys.waiting", "jwt_wait": "budget"},
        ],
        {"a": 0.0, "b": 0.0},
        [],
    )
    assert facts.installs[W1] == {"a": [(0.0, 9.0)], "b": [(0.0, 5.0), (5.0, 9.0)]}
    # After the withdrawal the key is not held; a log line names no class (it is
    # written once per log_interval): the answer's own health does.
    verdict = judge.classify(Record(9.4, 9.6, W1, "valid", "a", 503), facts)
    assert (verdict.cls, verdict.stated, verdict.late) == ("budget", False, True)
    said = Record(9.4, 9.6, W1, "valid", "a", 503, wait="budget", health=WITHDRAWN)
    assert judge.classify(said, facts).cls == "withdrawn"


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


def test_a_503_carries_the_verifiers_wait_and_health_to_the_record():
    """The worker's middleware adds its health to a 503; the client reads it and the wait."""
    pytest.importorskip("fastapi")
    httpx = pytest.importorskip("httpx")
    service = _load("soak_service", ROOT / "bench" / "soak" / "service.py")
    driver = _load("soak_driver", SOAK)

    class Withdrawn:
        def health(self):
            return KeySourceHealth(ready=False, last_success=1.0e9, generation=4)

    async def refuse(scope, receive, send):
        body = json.dumps({"status": 503, "reason": "keys-unavailable", "wait": "backoff"})
        headers = [(b"content-type", b"application/problem+json")]
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": body.encode()})

    app = service.SoakHeaders(refuse, Withdrawn())
    load = driver.Load(None, ["http://w"], ["101"], 0.0, 0.0, 0, 1, 1)

    async def one() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://w") as http:
            await load.send(http, "101", "valid", "k1", "token")

    asyncio.run(one())
    (record,) = load.results
    assert (record.status, record.wait) == (503, "backoff")
    assert record.health == {
        "ready": False,
        "generation": 4,
        "key_count": 0,
        "last_success": 1.0e9,
        "last_error": None,
        "config_error": None,
    }
    assert judge.stated_class(record) == "withdrawn"


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
