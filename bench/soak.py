"""Soak: a real service under load for minutes while its JWKS provider misbehaves.

A benchmark, not a test: it measures what the code does and reports it.
The service is ``examples/fastapi_service.py`` (``bench/soak/service.py``)
under uvicorn with two workers, its keys from ``jwks_url=`` on 127.0.0.1.
The provider (``bench/soak/provider.py``) is driven from here on a fixed
schedule: announced and unannounced key rotations (some faster than the
unknown-kid cooldown, one signing before it publishes), slow answers, 5xx,
garbage, and an outage with the port closed. A few asyncio clients send
valid, expired and forged tokens throughout.

    python bench/soak.py                 # 300 s, writes docs/soak.md results + docs/img/soak.png
    python bench/soak.py --quick         # 60 s, writes bench/.work/soak/
    python bench/soak.py --duration 10 --no-plot   # the smoke check (nox -s bench-smoke)

Needs the dev venv (``bash scripts/setup.sh``: fastapi, uvicorn, httpx,
cryptography); the picture needs matplotlib (``bench/requirements/soak.txt``).
Exit status: 1 when an invalid token was accepted (or, with ``--strict``, a
valid token was answered 401), 2 when the harness itself failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH / "soak"))
from provider import AUDIENCE, ISSUER, Hit, Provider  # noqa: E402

WORK = BENCH / ".work" / "soak"
PAGE = ROOT / "docs" / "soak.md"
PICTURE = ROOT / "docs" / "img" / "soak.png"
MARK_START = "<!-- soak-results:start -->"
MARK_END = "<!-- soak-results:end -->"

#: Token kinds the clients send, with their share of the requests. Only
#: ``valid`` must be accepted; ``early`` is reported on its own (see DEFINITIONS).
KINDS = {
    "valid": 70,
    "expired": 6,
    "wrong-key": 5,
    "bad-signature": 5,
    "unknown-kid": 5,
    "other-issuer": 5,
    "wrong-audience": 4,
}
INVALID = tuple(kind for kind in KINDS if kind != "valid")

DEFINITIONS = """\
- **valid**: signed by the provider's current signing key, unexpired, right
  `iss` and `aud`, and the key's `kid` is in the provider's key set *when the
  request is sent*: the set its JWKS answers while up, and would answer
  while down, slow or failing (a key rotated in during an outage is in it).
  Must never be answered 401.
- **early**: signed like a valid token by a key the provider publishes only
  a few seconds later (the schedule's "signs before publishing" rotation).
  Reported apart: the verifier may answer 401 `unknown-key` once a
  document fetched after the token arrived lacks its `kid`.
- **invalid**: expired; signed by another key under the current `kid`
  (wrong-key); one signature bit flipped (bad-signature); another key under
  a `kid` never published (unknown-kid, fresh each time); the provider's own
  key but another `iss` (other-issuer) or `aud` (wrong-audience). Must never
  be answered 200.
"""


# -- the schedule --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    t: float
    label: str  # shown on the timeline
    action: Callable[[Provider], None]


@dataclass(frozen=True)
class Window:
    start: float
    end: float
    mode: str
    label: str
    delay: float = 0.0


@dataclass
class Schedule:
    events: list[Event] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)


def schedule(duration: float) -> Schedule:
    """The run's script, as shares of ``duration`` (times below are for 300 s)."""

    def at(share: float) -> float:
        return round(share * duration, 2)

    plan = Schedule()
    kids = iter(f"k{n}" for n in range(2, 100))

    def announced(publish: float, sign: float) -> None:
        kid = next(kids)
        plan.events.append(Event(at(publish), f"publish {kid}", lambda p: _publish(p, kid)))
        plan.events.append(Event(at(sign), f"sign {kid}", lambda p: p.sign_with(kid)))

    def unannounced(share: float) -> None:
        kid = next(kids)
        plan.events.append(Event(at(share), f"new {kid}", lambda p: _rotate_now(p, kid)))

    def early(sign: float, publish: float) -> None:
        kid = next(kids)
        plan.events.append(
            Event(at(sign), f"sign {kid} (unpublished)", lambda p: _sign_new(p, kid))
        )
        plan.events.append(Event(at(publish), f"publish {kid}", lambda p: _publish(p, kid)))

    announced(0.08, 0.13)  # 24 s / 39 s: published 15 s before use
    unannounced(0.20)  # 60 s: published and used at once
    unannounced(0.25)  # 75 s: again, 15 s later (inside the 30 s cooldown)
    plan.windows.append(Window(at(0.30), at(0.34), "slow", "slow 3 s", 3.0))
    plan.windows.append(Window(at(0.34), at(0.37), "slow", "slow 7 s (> read timeout)", 7.0))
    unannounced(0.33)  # 99 s: while the provider is slow
    plan.windows.append(Window(at(0.40), at(0.45), "5xx", "5xx"))
    unannounced(0.42)  # 126 s: while the provider answers 5xx
    plan.windows.append(Window(at(0.47), at(0.52), "garbage", "garbage"))
    unannounced(0.49)  # 147 s: while the provider answers garbage
    early(0.55, 0.56)  # 165 s: signs 3 s before it publishes
    plan.windows.append(Window(at(0.60), at(0.75), "down", "down (refused)"))
    unannounced(0.65)  # 195 s: a new key while the provider is down
    announced(0.85, 0.90)  # 255 s / 270 s
    plan.events.sort(key=lambda event: event.t)
    return plan


#: The provider withdraws older keys; the signing key is always among these newest ones
#: (at most one key is published ahead of its use).
KEEP_PUBLISHED = 4


def _publish(provider: Provider, kid: str) -> None:
    provider.publish(kid)
    for old in provider.published()[:-KEEP_PUBLISHED]:
        provider.withdraw(old)


def _rotate_now(provider: Provider, kid: str) -> None:
    _publish(provider, kid)
    provider.sign_with(kid)


def _sign_new(provider: Provider, kid: str) -> None:
    provider.new_key(kid)
    provider.sign_with(kid)


# -- the service ---------------------------------------------------------------------------------


class Service:
    """uvicorn with two workers in its own process group; stopped for sure on exit."""

    def __init__(
        self, provider: Provider, fetch: dict[str, float], log_path: Path, python: str
    ) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {
            **os.environ,
            "SOAK_JWKS_URL": provider.jwks_url,
            "SOAK_ISSUER": ISSUER,
            "SOAK_AUDIENCE": AUDIENCE,
            "SOAK_FETCH": json.dumps(fetch),
            "PYTHONUNBUFFERED": "1",
        }
        self.log_path = log_path
        self._log = log_path.open("wb")
        # fmt: off
        command = [
            python, "-m", "uvicorn", "service:build", "--factory",
            "--app-dir", str(BENCH / "soak"), "--host", "127.0.0.1", "--port", str(self.port),
            "--workers", "2", "--no-access-log", "--log-level", "warning",
        ]
        # fmt: on
        # cwd: grelmicro is imported from the interpreter's installation, never from a cwd.
        self.process = subprocess.Popen(
            command,
            env=env,
            cwd=BENCH / "soak",
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def workers(self) -> list[int]:
        """The worker processes (children of the uvicorn master)."""
        children: list[int] = []
        for task in Path(f"/proc/{self.process.pid}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                children += [int(pid) for pid in task.read_text().split()]
        workers = []
        for pid in children:
            with contextlib.suppress(OSError):
                command = Path(f"/proc/{pid}/cmdline").read_bytes()
                if b"resource_tracker" not in command:  # multiprocessing's helper, not a worker
                    workers.append(pid)
        return sorted(workers)

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"uvicorn exited with {self.process.returncode}")
            with contextlib.suppress(httpx.HTTPError):
                up = httpx.get(f"{self.url}/health", timeout=1).status_code == 200
                if up and len(self.workers()) >= 2:
                    return
            time.sleep(0.2)
        raise RuntimeError(f"the service was not up after {timeout} s")

    def stop(self) -> None:
        """SIGTERM to the master (it stops the workers), SIGKILL to our group if it lingers."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=15)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)  # our own session: workers left behind
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        self._log.close()


def rss_kib(pid: int) -> int | None:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None


# -- the clients ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    t: float  # sent, seconds since the start
    latency: float  # seconds
    kind: str
    kid: str
    status: int  # 0: no answer (timeout, connection error)
    reason: str  # the problem body's reason, or the error
    retry_after: str
    worker: str


@dataclass
class Load:
    provider: Provider
    url: str
    t0: float
    end: float
    rate: float
    concurrency: int
    seed: int
    results: list[Result] = field(default_factory=list)

    async def client(self, index: int) -> None:
        rng = random.Random(self.seed * 1000 + index)
        kinds, weights = list(KINDS), list(KINDS.values())
        interval = self.concurrency / self.rate if self.rate > 0 else 0.0
        next_send = time.monotonic() + rng.random() * interval
        held: tuple[str, str, float] | None = None  # a valid token reused for up to 2 s
        while time.monotonic() < self.end:
            async with httpx.AsyncClient(base_url=self.url, timeout=30) as http:
                for _ in range(200):  # a new connection now and then: both workers get load
                    if time.monotonic() >= self.end:
                        break
                    if interval:
                        delay = next_send - time.monotonic()
                        if delay > 0:
                            await asyncio.sleep(delay)
                        next_send = max(next_send + interval, time.monotonic() - interval)
                    kind = rng.choices(kinds, weights)[0]
                    now = time.monotonic()
                    if kind == "valid":
                        if held and held[1] == self.provider.signing_kid and now - held[2] < 2:
                            token, kid = held[0], held[1]
                        else:
                            token, kid = self.provider.token(kind)
                            held = (token, kid, now)
                        # Judged after minting (a rotation may run meanwhile, in another
                        # thread) and just before sending: keys are only added until sent.
                        if kid not in self.provider.published():
                            kind = "early"
                    else:
                        token, kid = self.provider.token(kind)
                    await self.send(http, kind, kid, token)

    async def send(self, http: httpx.AsyncClient, kind: str, kid: str, token: str) -> None:
        start = time.monotonic()
        try:
            answer = await http.get("/me", headers={"Authorization": f"Bearer {token}"})
            status = answer.status_code
            reason = ""
            if status != 200:
                with contextlib.suppress(ValueError):
                    reason = str(answer.json().get("reason", ""))
            retry_after = answer.headers.get("retry-after", "")
            worker = answer.headers.get("x-soak-worker", "")
        except httpx.HTTPError as exc:
            status, reason, retry_after, worker = 0, type(exc).__name__, "", ""
        done = time.monotonic()
        self.results.append(
            Result(
                round(start - self.t0, 4),
                done - start,
                kind,
                kid,
                status,
                reason,
                retry_after,
                worker,
            )
        )

    async def run(self) -> None:
        await asyncio.gather(*(self.client(i) for i in range(self.concurrency)))


async def drive(plan: Schedule, provider: Provider, t0: float, end: float) -> None:
    """Apply the schedule's events and windows at their times."""
    steps: list[tuple[float, Callable[[], None]]] = [
        (event.t, lambda e=event: e.action(provider)) for event in plan.events
    ]
    for window in plan.windows:
        steps.append(
            (window.start, lambda w=window: provider.set_mode(w.mode, w.delay)),
        )
        steps.append((window.end, lambda: provider.set_mode("up")))
    steps.sort(key=lambda step: step[0])
    for when, step in steps:
        delay = t0 + when - time.monotonic()
        if t0 + when >= end:
            break
        if delay > 0:
            await asyncio.sleep(delay)
        await asyncio.to_thread(step)  # closing/opening the port blocks a little


# -- the report ----------------------------------------------------------------------------------


def percentile(values: list[float], share: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def episodes(times: list[float], gap: float = 2.0) -> list[tuple[float, float, int]]:
    """Runs of times with no pause longer than ``gap``: ``(first, last, count)``."""
    runs: list[tuple[float, float, int]] = []
    for t in sorted(times):
        if runs and t - runs[-1][1] <= gap:
            first, _, count = runs[-1]
            runs[-1] = (first, t, count + 1)
        else:
            runs.append((t, t, 1))
    return runs


def near(t: float, plan: Schedule) -> str:
    """Where ``t`` falls relative to the fault windows and events."""
    for window in plan.windows:
        if window.start <= t <= window.end:
            return f"during {window.label} ({window.start:g}-{window.end:g} s)"
    after = [w for w in plan.windows if w.end < t]
    events = [e for e in plan.events if e.t <= t]
    notes = []
    if after:
        last = max(after, key=lambda w: w.end)
        notes.append(f"{t - last.end:.1f} s after {last.label} ended")
    if events:
        last_event = max(events, key=lambda e: e.t)
        notes.append(f"{t - last_event.t:.1f} s after '{last_event.label}'")
    return "; ".join(notes) or "before any fault"


def rotation_rows(
    results: list[Result], since: dict[str, tuple[float | None, float | None]]
) -> list[dict[str, Any]]:
    """Per signing key: when it was first used and published, when each worker first took it."""
    rows = []
    for kid, (signing, published) in since.items():
        if signing is None:
            continue
        own = [r for r in results if r.kid == kid and r.kind in ("valid", "early")]
        first_ok: dict[str, float] = {}
        for r in own:
            if r.status == 200 and r.worker not in first_ok:
                first_ok[r.worker] = r.t
        refused = [r for r in own if r.kind == "valid" and r.status == 401]
        rows.append(
            {
                "kid": kid,
                "signing": signing,
                "published": published,
                "first_200": dict(sorted(first_ok.items())),
                "valid_401": len(refused),
                "valid_401_last": max((r.t for r in refused), default=None),
                "valid_503": sum(1 for r in own if r.kind == "valid" and r.status == 503),
                "early": dict(sorted(Counter(r.status for r in own if r.kind == "early").items())),
            }
        )
    return rows


def analyse(
    results: list[Result],
    hits: list[Hit],
    plan: Schedule,
    rss: dict[str, dict[int, int | None]],
    health: list[dict[str, Any]],
    conditions: dict[str, Any],
    since: dict[str, tuple[float | None, float | None]],
) -> dict[str, Any]:
    by_kind: dict[str, Counter[int]] = defaultdict(Counter)
    for r in results:
        by_kind[r.kind][r.status] += 1
    valid_401 = [r for r in results if r.kind == "valid" and r.status == 401]
    accepted = [r for r in results if r.kind in INVALID and r.status == 200]
    fetches: dict[str, Counter[str]] = defaultdict(Counter)
    for hit in hits:
        fetches[hit.worker][
            f"{hit.mode}{f' {hit.delay:g}s' if hit.delay else ''} {hit.status}"
        ] += 1
    answered = [r.latency for r in results if r.status]
    valid_ok = [r.latency for r in results if r.kind == "valid" and r.status == 200]
    return {
        "conditions": conditions,
        "requests": len(results),
        "by_kind": {kind: dict(sorted(c.items())) for kind, c in sorted(by_kind.items())},
        "valid_401": len(valid_401),
        "rotations": rotation_rows(results, since),
        "valid_401_list": [
            {"t": r.t, "kid": r.kid, "reason": r.reason, "worker": r.worker} for r in valid_401
        ],
        "valid_401_episodes": [
            {
                "from": first,
                "to": last,
                "count": count,
                "reasons": dict(
                    Counter(r.reason for r in valid_401 if first <= r.t <= last).most_common()
                ),
                "kids": sorted({r.kid for r in valid_401 if first <= r.t <= last}),
                "where": near(first, plan),
            }
            for kid in sorted({r.kid for r in valid_401}, key=lambda k: (len(k), k))
            for first, last, count in episodes([r.t for r in valid_401 if r.kid == kid])
        ],
        "invalid_accepted": len(accepted),
        "invalid_accepted_list": [
            {"t": r.t, "kind": r.kind, "kid": r.kid, "worker": r.worker} for r in accepted[:50]
        ],
        "status_503": Counter(r.kind for r in results if r.status == 503),
        "episodes_503": [
            {
                "from": first,
                "to": last,
                "count": count,
                "valid": sum(
                    1
                    for r in results
                    if r.status == 503 and r.kind == "valid" and first <= r.t <= last
                ),
                "retry_after": _span(
                    [r.retry_after for r in results if r.status == 503 and first <= r.t <= last]
                ),
                "where": near(first, plan),
            }
            for first, last, count in episodes([r.t for r in results if r.status == 503])
        ],
        "no_answer": Counter(r.reason for r in results if r.status == 0),
        "early": dict(sorted(Counter(r.status for r in results if r.kind == "early").items())),
        "fetches": {worker: dict(c) for worker, c in sorted(fetches.items())},
        "fetch_total": len(hits),
        "fetch_times": [(h.t, h.worker, h.mode, h.status) for h in hits],
        "per_worker_requests": dict(Counter(r.worker for r in results if r.worker)),
        "latency_ms": {
            "p50": 1000 * percentile(answered, 0.50),
            "p99": 1000 * percentile(answered, 0.99),
            "valid_200_p50": 1000 * percentile(valid_ok, 0.50),
            "valid_200_p99": 1000 * percentile(valid_ok, 0.99),
            "max": 1000 * max(answered, default=float("nan")),
        },
        "rss_kib": rss,
        "health": health,
    }


def table(rows: list[tuple[str, str]]) -> str:
    lines = ["| measure | value |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines)


def report(summary: dict[str, Any], plan: Schedule, picture: str | None) -> str:
    c = summary["conditions"]
    lat = summary["latency_ms"]
    rss = summary["rss_kib"]
    statuses = Counter[int]()
    for counts in summary["by_kind"].values():
        statuses.update({int(k): v for k, v in counts.items()})
    rows = [
        ("requests", f"{summary['requests']:,} ({summary['requests'] / c['duration']:.0f}/s)"),
        ("answers by status", ", ".join(f"{k}: {v:,}" for k, v in sorted(statuses.items()))),
        ("**valid tokens answered 401** (must be 0)", f"**{summary['valid_401']}**"),
        ("**invalid tokens accepted** (must be 0)", f"**{summary['invalid_accepted']}**"),
        (
            "503 answers",
            ", ".join(f"{k}: {v:,}" for k, v in sorted(summary["status_503"].items())) or "0",
        ),
        ("early tokens (signed before publication)", _counts(summary["early"])),
        ("no answer (client error)", _counts(summary["no_answer"])),
        ("JWKS requests answered", f"{summary['fetch_total']}"),
        (
            "JWKS requests per worker",
            "; ".join(
                f"{w}: {sum(c_.values())} ({_counts(c_)})" for w, c_ in summary["fetches"].items()
            ),
        ),
        (
            "requests per worker",
            ", ".join(f"{w}: {n:,}" for w, n in sorted(summary["per_worker_requests"].items())),
        ),
        ("latency p50 / p99 (all answers)", f"{lat['p50']:.1f} / {lat['p99']:.1f} ms"),
        (
            "latency p50 / p99 (valid, 200)",
            f"{lat['valid_200_p50']:.1f} / {lat['valid_200_p99']:.1f} ms",
        ),
        ("latency max", f"{lat['max']:.0f} ms"),
        (
            "worker RSS start → end",
            ", ".join(
                f"{pid}: {_mib(rss['start'].get(pid))} → {_mib(rss['end'].get(pid))}"
                for pid in sorted(rss["start"])
            ),
        ),
    ]
    out = [
        f"Run of {c['date']} UTC, commit `{c['commit']}`: {c['duration']:.0f} s, "
        f"{c['concurrency']} clients capped at {c['rate']:.0f} requests/s, "
        f"uvicorn 2 workers, {c['machine']}.",
        "",
        table(rows),
        "",
    ]
    if picture:
        out += [f"![Soak timeline]({picture})", ""]
    out += [
        "Each signing key: when clients started signing with it and when the provider "
        "published it, when each worker first accepted it (seconds from the start), "
        "and what valid tokens signed with it got meanwhile:",
        "",
        "| kid | signing from | published | first 200 per worker | valid → 401 (last) "
        "| valid → 503 | early tokens |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in summary["rotations"]:
        last = row["valid_401_last"]
        out.append(
            f"| {row['kid']} | {_at(row['signing'])} | {_at(row['published'])} "
            f"| {', '.join(f'{w}: {t:.1f}' for w, t in row['first_200'].items()) or 'never'} "
            f"| {row['valid_401']}{f' ({last:.1f})' if last is not None else ''} "
            f"| {row['valid_503']} | {_counts(row['early']) if row['early'] else '-'} |"
        )
    out += ["", "Valid tokens answered 401, by key and episode:", ""]
    if summary["valid_401_episodes"]:
        out += [
            "| valid 401 from (s) | to (s) | count | reason | kid | where |",
            "|---|---|---|---|---|---|",
        ]
        out += [
            f"| {e['from']:.1f} | {e['to']:.1f} | {e['count']} | {_counts(e['reasons'])} "
            f"| {', '.join(e['kids'])} | {e['where']} |"
            for e in summary["valid_401_episodes"]
        ]
    else:
        out.append("- no valid token was answered 401.")
    out += ["", "503 episodes (all token kinds):", ""]
    if summary["episodes_503"]:
        out += [
            "| from (s) | to (s) | 503s | of which valid | Retry-After | where |",
            "|---|---|---|---|---|---|",
        ]
        out += [
            f"| {e['from']:.1f} | {e['to']:.1f} | {e['count']} | {e['valid']} "
            f"| {e['retry_after']} | {e['where']} |"
            for e in summary["episodes_503"]
        ]
    else:
        out.append("- none.")
    if summary["invalid_accepted_list"]:
        out += ["", "Invalid tokens accepted:", ""]
        out += [
            f"- {a['t']:.2f} s: {a['kind']} (kid {a['kid']}, worker {a['worker']})"
            for a in summary["invalid_accepted_list"]
        ]
    out += ["", "Token kinds:", "", DEFINITIONS.rstrip()]
    out += ["", "Per-worker `health()` at the end:", ""]
    for h in summary["health"]:
        out.append(
            f"- worker {h.get('pid')}: ready={h.get('ready')}, key_count={h.get('key_count')}, "
            f"fetch_count={h.get('fetch_count')}, failure_count={h.get('failure_count')}, "
            f"stale_uses={h.get('stale_uses')}"
        )
    out += ["", "Schedule (seconds from the start):", ""]
    out += [f"- {e.t:g} s: {e.label}" for e in plan.events]
    out += [f"- {w.start:g}-{w.end:g} s: provider {w.label}" for w in plan.windows]
    out += [
        "",
        f"Service settings: `FetchOptions({_kwargs(c['fetch'])})` (other fields default), "
        f"provider `Cache-Control: max-age={c['max_age']}`. Token kinds and shares: "
        + ", ".join(f"{k} {v}%" for k, v in KINDS.items())
        + ". Command: `"
        + c["command"]
        + "`.",
    ]
    if c["service_grelmicro"]:
        out.append(f"The service's grelmicro: `{c['service_grelmicro']}`.")
    return "\n".join(out) + "\n"


def _span(values: list[str]) -> str:
    """``Retry-After`` values seen: ``5``, ``1-22 s`` (numbers), or as given."""
    numbers = sorted({int(v) for v in values if v.isdigit()})
    others = sorted({v for v in values if not v.isdigit()})
    text = (
        []
        if not numbers
        else [f"{numbers[0]}" if len(numbers) == 1 else f"{numbers[0]}-{numbers[-1]}"]
    )
    return ", ".join(text + others) + (" s" if numbers and not others else "") or "-"


def _at(t: float | None) -> str:
    return "-" if t is None else f"{max(t, 0.0):.1f}"


def _counts(counter: dict[Any, int]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in counter.items()) or "0"


def _mib(kib: int | None) -> str:
    return "?" if kib is None else f"{kib / 1024:.1f} MiB"


def _kwargs(values: dict[str, float]) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in values.items())


def draw(
    results: list[Result], hits: list[Hit], plan: Schedule, duration: float, path: Path
) -> bool:
    """The timeline as a PNG; False (and a note) when matplotlib is missing."""
    try:
        import matplotlib  # noqa: PLC0415

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        print("matplotlib not installed (bench/requirements/soak.txt): no picture", file=sys.stderr)
        return False
    seconds = max(int(duration), 1)  # whole seconds; the last step is drawn to ``duration``
    xs = list(range(seconds + 1))
    series = {
        "200": "#4c9f70",
        "401, not a valid token": "#95a5a6",
        "401, valid token": "#d62728",
        "503": "#1f77b4",
        "no answer": "#2c3e50",
        "other": "#8e44ad",
    }
    per: dict[str, list[int]] = {name: [0] * seconds for name in series}
    valid: dict[int, list[int]] = {code: [0] * seconds for code in (401, 503)}
    for r in results:
        second = min(max(int(r.t), 0), seconds - 1)
        if r.status == 401:
            name = "401, valid token" if r.kind == "valid" else "401, not a valid token"
        elif r.status in (200, 503):
            name = str(r.status)
        else:
            name = "no answer" if r.status == 0 else "other"
        per[name][second] += 1
        if r.kind == "valid" and r.status in valid:
            valid[r.status][second] += 1
    fig, (top, middle, strip) = plt.subplots(
        3, 1, figsize=(12, 8), sharex=True, gridspec_kw={"height_ratios": [3, 2, 0.8]}
    )
    for counts in (*per.values(), *valid.values()):
        counts.append(counts[-1])  # the last second's step runs to the end of the axis
    top.stackplot(
        xs,
        *per.values(),
        labels=list(series),
        colors=list(series.values()),
        step="post",
    )
    top.set_ylabel("answers / s")
    top.legend(loc="lower left", ncols=6, fontsize=8, framealpha=0.9)
    middle.step(xs, valid[401], where="post", color="#d62728", label="valid token → 401")
    middle.step(xs, valid[503], where="post", color="#1f77b4", label="valid token → 503")
    middle.set_ylabel("valid tokens\nrefused / s")
    middle.legend(loc="upper right", fontsize=8, framealpha=0.9)
    workers = sorted({h.worker for h in hits})
    for row, worker in enumerate(workers):
        for ok in (True, False):
            times = [h.t for h in hits if h.worker == worker and _fetch_ok(h) is ok]
            strip.scatter(
                times,
                [row] * len(times),
                marker="o" if ok else "x",
                s=18,
                color="#2c3e50" if ok else "#c0392b",
            )
    strip.set_yticks(range(len(workers)), [f"worker {w}" for w in workers], fontsize=7)
    strip.set_ylim(-0.7, len(workers) - 0.3)
    strip.set_ylabel("JWKS\nrequests", fontsize=8)
    strip.set_xlabel(
        "seconds since start (o: keys served, x: fault answered; refused connections unseen)"
    )
    shades = {"slow": "#f1c40f", "5xx": "#e67e22", "garbage": "#9b59b6", "down": "#e74c3c"}
    for axis in (top, middle, strip):
        for window in plan.windows:
            axis.axvspan(
                window.start, window.end, color=shades.get(window.mode, "#999"), alpha=0.18
            )
        for event in plan.events:
            axis.axvline(event.t, color="#34495e", linestyle=":", linewidth=0.8)
    for index, window in enumerate(plan.windows):
        middle.annotate(
            window.label,
            ((window.start + window.end) / 2, 0.97 - 0.1 * (index % 2)),
            xycoords=("data", "axes fraction"),
            ha="center",
            va="top",
            fontsize=7,
        )
    for event in plan.events:
        top.annotate(
            event.label,
            (event.t, 1.01),
            xycoords=("data", "axes fraction"),
            rotation=60,
            ha="left",
            va="bottom",
            fontsize=7,
            color="#34495e",
        )
    strip.set_xlim(min([0.0, *[h.t for h in hits]]) - 0.5, duration)
    fig.suptitle("Soak timeline: answers by status, valid tokens refused, JWKS requests", y=0.995)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def _fetch_ok(hit: Hit) -> bool:
    """Whether the provider served keys the verifier could take (slow within the read timeout)."""
    return hit.status == 200 and (hit.mode == "up" or (hit.mode == "slow" and hit.delay < 5))


def write_page(page: Path, results_md: str) -> None:
    """Replace the results between the markers of ``page`` (the rest is hand-written)."""
    text = page.read_text(encoding="utf-8")
    start, end = text.index(MARK_START), text.index(MARK_END)
    page.write_text(
        text[: start + len(MARK_START)] + "\n\n" + results_md + "\n" + text[end:], encoding="utf-8"
    )


# -- main ----------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _commit() -> str:
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        return subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    return "?"


def _grelmicro_of(python: str) -> str:
    """Where the service's interpreter imports grelmicro from (its tree, for an editable one)."""
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        return subprocess.run(
            [python, "-c", "import grelmicro; print(grelmicro.__file__)"],
            capture_output=True,
            text=True,
            check=True,
            cwd=BENCH / "soak",
        ).stdout.strip()
    return "?"


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    python = platform.python_version()
    return f"{os.cpu_count()} CPUs ({cpu}), load average at start {load}, Python {python}"


def _quiet_cancel(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """An interrupted run's cancelled tasks are expected: no traceback for them."""
    if not isinstance(context.get("exception"), asyncio.CancelledError):
        loop.default_exception_handler(context)


@contextlib.contextmanager
def running(
    provider: Provider, fetch: dict[str, float], log: Path, python: str
) -> Iterator[Service]:
    provider.start()
    service: Service | None = None
    try:
        service = Service(provider, fetch, log, python)
        yield service
    finally:
        if service is not None:
            service.stop()
        provider.stop()


def collect_health(url: str) -> list[dict[str, Any]]:
    """Each worker's ``health()``: new connections until both answered (10 s at most)."""
    seen: dict[int, dict[str, Any]] = {}
    deadline = time.monotonic() + 10
    while len(seen) < 2 and time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
            body = httpx.get(f"{url}/soak/health", timeout=2).json()
            seen[int(body["pid"])] = body
    return [seen[pid] for pid in sorted(seen)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, help="seconds of load (default 300, --quick 60)")
    parser.add_argument("--quick", action="store_true", help="60 s; results in bench/.work/soak/")
    parser.add_argument("--concurrency", type=int, default=6, help="concurrent clients (6)")
    parser.add_argument("--rate", type=float, default=150, help="requests/s cap, 0: none (150)")
    parser.add_argument(
        "--max-age", type=int, default=60, help="provider Cache-Control max-age (60)"
    )
    parser.add_argument(
        "--min-ttl", type=float, default=30, help="service FetchOptions.min_ttl (30)"
    )
    parser.add_argument(
        "--fetch",
        type=json.loads,
        default={},
        help="more FetchOptions fields for the service, as JSON: '{\"cooldown\": 10}'",
    )
    parser.add_argument(
        "--service-python",
        default=sys.executable,
        help="interpreter of the service (another venv: that installation's grelmicro)",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--page", type=Path, help="page whose results section is rewritten")
    parser.add_argument("--picture", type=Path, help="where the PNG goes")
    parser.add_argument("--no-plot", action="store_true", help="no picture")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a valid token got 401")
    args = parser.parse_args()
    duration = args.duration or (60.0 if args.quick else 300.0)
    full = not args.quick and args.duration is None
    page = args.page or (PAGE if full else None)
    picture = args.picture or (PICTURE if full else WORK / "soak.png")
    WORK.mkdir(parents=True, exist_ok=True)

    fetch = {"min_ttl": args.min_ttl, **args.fetch}
    plan = schedule(duration)
    provider = Provider(max_age=args.max_age)
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    conditions = {
        "date": started,
        "commit": _commit(),
        "duration": duration,
        "concurrency": args.concurrency,
        "rate": args.rate,
        "fetch": fetch,
        "max_age": args.max_age,
        "machine": _machine(),
        "command": shlex.join(["python", "bench/soak.py", *sys.argv[1:]]),
        # Named in the report only when the service runs another installation.
        "service_grelmicro": (
            _grelmicro_of(args.service_python) if args.service_python != sys.executable else ""
        ),
    }
    # A SIGTERM (nox, CI) unwinds like Ctrl-C: the finally blocks stop uvicorn and the server.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    rss: dict[str, dict[int, int | None]] = {"start": {}, "end": {}}
    try:
        with running(provider, fetch, WORK / "service.log", args.service_python) as service:
            service.wait_ready(timeout=60)
            workers = service.workers()
            rss["start"] = {pid: rss_kib(pid) for pid in workers}
            t0 = time.monotonic()
            end = t0 + duration
            load = Load(provider, service.url, t0, end, args.rate, args.concurrency, args.seed)
            print(
                f"soak: {duration:.0f} s against {service.url} (workers {workers}), "
                f"JWKS at {provider.jwks_url}",
                file=sys.stderr,
            )

            async def both() -> None:
                asyncio.get_running_loop().set_exception_handler(_quiet_cancel)
                await asyncio.wait_for(
                    asyncio.gather(load.run(), drive(plan, provider, t0, end)),
                    timeout=duration + 45,  # a request may wait out a 30 s client timeout
                )

            asyncio.run(both())
            provider.set_mode("up")
            rss["end"] = {pid: rss_kib(pid) for pid in workers}
            health = collect_health(service.url)
    except KeyboardInterrupt:
        print("soak: interrupted; service and provider stopped", file=sys.stderr)
        return 130
    except (RuntimeError, TimeoutError, OSError) as exc:
        print(f"soak: harness failure: {exc}", file=sys.stderr)
        log = WORK / "service.log"
        if log.exists():
            print(log.read_text(errors="replace")[-3000:], file=sys.stderr)
        return 2

    hits = provider.hits(t0)
    since = provider.rotations(t0)
    summary = analyse(load.results, hits, plan, rss, health, conditions, since)
    drawn = False if args.no_plot else draw(load.results, hits, plan, duration, picture)
    (WORK / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    link = None
    if drawn:
        link = os.path.relpath(picture, (page or WORK / "report.md").parent)
    text = report(summary, plan, link)
    (WORK / "report.md").write_text(text)
    if page is not None:
        write_page(page, text)
    print(text)
    print(f"soak: report in {page or WORK / 'report.md'}, raw summary in {WORK / 'summary.json'}")
    print(f"SOAK valid_401={summary['valid_401']} invalid_accepted={summary['invalid_accepted']}")
    if summary["invalid_accepted"]:
        return 1
    if args.strict and summary["valid_401"]:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
