"""Soak: a real service under load for minutes while its JWKS provider misbehaves.

The service is ``examples/fastapi_service.py`` (``bench/soak/service.py``)
under uvicorn, one process per worker (two by default), each on its own port
with its own verifier, its keys from ``jwks_url=`` on 127.0.0.1. The provider
(``bench/soak/provider.py``) is driven from here on a fixed schedule:
announced and unannounced key rotations (some faster than the unknown-kid
cooldown, one signing before it publishes), slow answers, 5xx, garbage, and
an outage with the port closed. Asyncio clients, each pinned to one worker,
send valid, expired and forged tokens throughout.

Every request is recorded; every 503 to a token the provider signed is
classified (``bench/soak/judge.py``: key held, key installed while in
flight, not yet published, then what the verifier states: keys withdrawn,
provider failing, fetch in flight, budget, backoff... or an unknown wait)
from the key's installs (each worker's ``jwt_event`` records) and the
answer itself: the 503 body's ``wait`` and the worker's ``health()`` sent
with it. The run fails on the rules of ``judge.judge``.

    python bench/soak.py                 # 300 s, writes docs/soak.md results + docs/img/soak.png
    python bench/soak.py --quick         # 60 s, writes bench/.work/soak/
    python bench/soak.py --duration 10 --schedule smoke --no-plot   # nox -s bench-smoke

Needs the dev venv (``bash scripts/setup.sh``: fastapi, uvicorn, httpx,
cryptography); the picture needs matplotlib (``bench/requirements/soak.txt``).
Exit status: 1 when a rule failed (each failed rule is printed on a line
starting ``SOAK FAIL``), 2 when the harness itself failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
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
import judge  # noqa: E402
from judge import Record  # noqa: E402
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
DEFINITIONS = """\
- **valid**: signed by the provider's current signing key, unexpired, right
  `iss` and `aud`, and the key's `kid` is in the provider's key set *when the
  request is sent*: the set its JWKS answers while up, and would answer
  while down, slow or failing (a key rotated in during an outage is in it).
  Must never be answered 401.
- **early**: signed like a valid token by a key the provider publishes only
  a few seconds later (the schedule's "signs before publishing" rotation).
  Reported apart: the verifier may answer 401 `unknown-key` once a
  document fetched after the token arrived lacks its `kid`; a 503 to one is
  classified like a valid token's (mostly "not yet published"), never late.
- **invalid**: expired; signed by another key under the current `kid`
  (wrong-key); one signature bit flipped (bad-signature); another key under
  a `kid` never published (unknown-kid, fresh each time); the provider's own
  key but another `iss` (other-issuer) or `aud` (wrong-audience). Must never
  be answered 200; a 503 to one is counted apart (neither checked nor
  accepted).
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


def schedule(duration: float, name: str = "full") -> Schedule:
    """The run's script: ``full`` (the issue's fault schedule), ``smoke`` or ``none``.

    ``full`` is written as shares of ``duration`` (times below are for 300 s).
    ``smoke`` is for a run of about 10 s against a provider whose keys are
    kept about a second (``--max-age 1 --min-ttl 1``, its defaults): an
    announced rotation (published at 10%, signed at 45% of the run, so each
    worker's refresh finds it first) and a 5xx window (60-80%) during which
    held keys must answer 200. ``none``: no rotation, no fault.
    """
    if name == "none":
        return Schedule()
    if name == "smoke":
        plan = Schedule()
        plan.events.append(
            Event(round(0.10 * duration, 2), "publish k2", lambda p: _publish(p, "k2"))
        )
        plan.events.append(Event(round(0.45 * duration, 2), "sign k2", lambda p: p.sign_with("k2")))
        plan.windows.append(
            Window(round(0.6 * duration, 2), round(0.8 * duration, 2), "5xx", "5xx")
        )
        return plan
    if name != "full":
        raise ValueError(f"unknown schedule {name!r}")

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
    """One uvicorn process per worker, each on its own port and in its own process group.

    A worker per port, with clients pinned to it, spreads the load evenly:
    uvicorn's ``--workers`` share one listening socket and the kernel gave
    one worker four fifths of the connections. Each process is what a
    ``--workers`` child is: its own app, its own verifier, its own keys.
    """

    def __init__(
        self,
        jwks_url: str,
        fetch: dict[str, float],
        work: Path,
        python: str,
        count: int,
    ) -> None:
        self.events = work / "events"
        self.events.mkdir(parents=True, exist_ok=True)
        for old in self.events.glob("*.jsonl"):
            old.unlink()
        env = {
            **os.environ,
            "SOAK_JWKS_URL": jwks_url,
            "SOAK_ISSUER": ISSUER,
            "SOAK_AUDIENCE": AUDIENCE,
            "SOAK_FETCH": json.dumps(fetch),
            "SOAK_EVENTS": str(self.events),
            "PYTHONUNBUFFERED": "1",
        }
        self.log_paths = [work / f"service-{i}.log" for i in range(count)]
        self._logs = [path.open("wb") for path in self.log_paths]
        self.ports = [_free_port() for _ in range(count)]
        self.processes: list[subprocess.Popen[bytes]] = []
        for port, log in zip(self.ports, self._logs, strict=True):
            # fmt: off
            command = [
                python, "-m", "uvicorn", "service:build", "--factory",
                "--app-dir", str(BENCH / "soak"), "--host", "127.0.0.1", "--port", str(port),
                "--no-access-log", "--log-level", "warning",
            ]
            # fmt: on
            # cwd: grelmicro is imported from the interpreter's installation, never a cwd.
            self.processes.append(
                subprocess.Popen(
                    command,
                    env=env,
                    cwd=BENCH / "soak",
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

    @property
    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{port}" for port in self.ports]

    def workers(self) -> list[str]:
        """The workers' pids, in the order of their ports."""
        return [str(process.pid) for process in self.processes]

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        pending = dict(zip(self.urls, self.processes, strict=True))
        while pending and time.monotonic() < deadline:
            for url, process in list(pending.items()):
                if process.poll() is not None:
                    raise RuntimeError(f"uvicorn exited with {process.returncode}")
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                        del pending[url]
            time.sleep(0.2)
        if pending:
            raise RuntimeError(f"the service was not up after {timeout} s")

    def stop(self) -> None:
        """SIGTERM to each worker, SIGKILL to its group if it lingers."""
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=15)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)  # our own session: anything left behind
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
        for log in self._logs:
            log.close()

    def tail(self, chars: int = 3000) -> str:
        return "".join(
            path.read_text(errors="replace")[-chars:] for path in self.log_paths if path.exists()
        )


def rss_kib(pid: int) -> int | None:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None


# -- the clients ---------------------------------------------------------------------------------


#: Members of a problem body that every refusal has: the rest, and ``detail``, may name a wait.
PROBLEM = frozenset({"type", "title", "status", "reason", "instance"})


@dataclass
class Load:
    provider: Provider
    urls: list[str]  # one per worker
    workers: list[str]  # the pid behind each url
    t0: float
    end: float
    rate: float
    concurrency: int
    seed: int
    results: list[Record] = field(default_factory=list)

    async def client(self, index: int) -> None:
        rng = random.Random(self.seed * 1000 + index)
        kinds, weights = list(KINDS), list(KINDS.values())
        interval = self.concurrency / self.rate if self.rate > 0 else 0.0
        next_send = time.monotonic() + rng.random() * interval
        held: tuple[str, str, float] | None = None  # a valid token reused for up to 2 s
        pinned = index % len(self.urls)  # clients are spread evenly over the workers
        worker = self.workers[pinned]
        async with httpx.AsyncClient(base_url=self.urls[pinned], timeout=30) as http:
            while time.monotonic() < self.end:
                if interval:
                    delay = next_send - time.monotonic()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    next_send = max(next_send + interval, time.monotonic() - interval)
                    if time.monotonic() >= self.end:
                        break
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
                await self.send(http, worker, kind, kid, token)

    async def send(
        self, http: httpx.AsyncClient, worker: str, kind: str, kid: str, token: str
    ) -> None:
        start = time.monotonic()
        reason = said = retry_after = answered_by = wait = ""
        health: dict[str, Any] | None = None
        try:
            answer = await http.get("/me", headers={"Authorization": f"Bearer {token}"})
            status = answer.status_code
            if status != 200:
                with contextlib.suppress(ValueError, AttributeError):
                    body = answer.json()
                    reason = str(body.get("reason", ""))
                    if status == 503:
                        extra = {k: v for k, v in body.items() if k not in PROBLEM}
                        said = json.dumps(extra, sort_keys=True) if extra else ""
                        wait = str(body.get("wait") or "")
            if status == 503:
                with contextlib.suppress(ValueError):
                    health = json.loads(answer.headers.get("x-soak-health", "null"))
            retry_after = answer.headers.get("retry-after", "")
            answered_by = answer.headers.get("x-soak-worker", "")
        except httpx.HTTPError as exc:
            status, reason = 0, type(exc).__name__
        done = time.monotonic()
        self.results.append(
            Record(
                t=round(start - self.t0, 4),
                done=round(done - self.t0, 4),
                worker=worker,
                kind=kind,
                kid=kid,
                status=status,
                reason=reason,
                retry_after=retry_after,
                said=said,
                answered_by=answered_by,
                wait=wait,
                health=health if isinstance(health, dict) else None,
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
    results: list[Record],
    since: dict[str, tuple[float | None, float | None]],
    facts: judge.Facts,
    workers: list[str],
) -> list[dict[str, Any]]:
    """Per signing key: when it was used and published, when each worker installed it."""
    rows = []
    for kid, (signing, published) in since.items():
        if signing is None:
            continue
        own = [r for r in results if r.kid == kid and r.kind in judge.SIGNED]
        installed = {}
        for w in workers:
            spans = facts.installed(w, kid)
            installed[w] = spans[0][0] if spans else None
        rows.append(
            {
                "kid": kid,
                "signing": signing,
                "published": published,
                "installed": installed,
                "valid_401": sum(1 for r in own if r.kind == "valid" and r.status == 401),
                "valid_503": sum(1 for r in own if r.kind == "valid" and r.status == 503),
                "early": dict(sorted(Counter(r.status for r in own if r.kind == "early").items())),
            }
        )
    return rows


def analyse(
    results: list[Record],
    hits: list[Hit],
    plan: Schedule,
    rss: dict[str, dict[str, int | None]],
    health: list[dict[str, Any]],
    conditions: dict[str, Any],
    since: dict[str, tuple[float | None, float | None]],
    facts: judge.Facts,
    verdicts: dict[int, judge.Verdict],
    workers: list[str],
) -> dict[str, Any]:
    grace, idle, duration = conditions["grace"], conditions["idle"], conditions["duration"]
    failures = judge.judge(results, verdicts, workers, duration, grace=grace, idle=idle)
    classes: dict[str, Counter[str]] = defaultdict(Counter)
    for i, v in verdicts.items():
        classes[v.cls][results[i].kind] += 1
        classes[v.cls]["late"] += v.late and results[i].kind == "valid"
    by_kind: dict[str, Counter[int]] = defaultdict(Counter)
    for r in results:
        by_kind[r.kind][r.status] += 1
    valid_401 = [r for r in results if r.kind == "valid" and r.status == 401]
    fetches: dict[str, Counter[str]] = defaultdict(Counter)
    for hit in hits:
        fetches[hit.worker][
            f"{hit.mode}{f' {hit.delay:g}s' if hit.delay else ''} {hit.status}"
        ] += 1
    answered = [r.done - r.t for r in results if r.status]
    valid_ok = [r.done - r.t for r in results if r.kind == "valid" and r.status == 200]
    late = [results[i] for i, v in verdicts.items() if v.late]
    return {
        "conditions": conditions,
        "requests": len(results),
        "failures": [{"rule": f.rule, "message": f.message} for f in failures],
        "answers_table": judge.answers_table(results),
        "class_table": judge.class_table(results, verdicts, workers),
        "worker_table": judge.worker_table(results, workers, duration),
        "classes": {cls: dict(c) for cls, c in classes.items()},
        "by_kind": {kind: dict(sorted(c.items())) for kind, c in sorted(by_kind.items())},
        "valid_401": len(valid_401),
        "invalid_accepted": sum(
            1 for r in results if r.kind not in judge.SIGNED and r.status == 200
        ),
        "invalid_503": sum(1 for r in results if r.kind not in judge.SIGNED and r.status == 503),
        "rotations": rotation_rows(results, since, facts, workers),
        "late_episodes": [
            {
                "from": first,
                "to": last,
                "count": count,
                "kids": sorted({r.kid for r in late if first <= r.t <= last}),
                "classes": dict(
                    Counter(
                        verdicts[i].cls
                        for i, r in enumerate(results)
                        if i in verdicts and verdicts[i].late and first <= r.t <= last
                    ).most_common()
                ),
                "retry_after": _span([r.retry_after for r in late if first <= r.t <= last]),
                "where": near(first, plan),
            }
            for first, last, count in episodes([r.t for r in late])
        ],
        "no_answer": Counter(r.reason for r in results if r.status == 0),
        "fetches": {worker: dict(c) for worker, c in sorted(fetches.items())},
        "fetch_total": len(hits),
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


def verdict_lines(summary: dict[str, Any]) -> list[str]:
    if not summary["failures"]:
        return ["SOAK PASS: every rule held"]
    return [judge.Failure(f["rule"], f["message"]).line() for f in summary["failures"]]


def report(summary: dict[str, Any], plan: Schedule, picture: str | None) -> str:
    c = summary["conditions"]
    lat = summary["latency_ms"]
    rss = summary["rss_kib"]
    rows = [
        ("requests", f"{summary['requests']:,} ({summary['requests'] / c['duration']:.0f}/s)"),
        ("**valid tokens answered 401** (rule)", f"**{summary['valid_401']}**"),
        ("**invalid tokens accepted** (rule)", f"**{summary['invalid_accepted']}**"),
        ("invalid tokens answered 503 (not checked, not accepted)", f"{summary['invalid_503']:,}"),
        ("no answer (client error)", _counts(summary["no_answer"])),
        ("JWKS requests answered", f"{summary['fetch_total']}"),
        (
            "JWKS requests per worker",
            "; ".join(
                f"{w}: {sum(c_.values())} ({_counts(c_)})" for w, c_ in summary["fetches"].items()
            ),
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
        f"Run of {c['date']} UTC, commit `{c['commit']}`: {c['duration']:.0f} s, schedule "
        f"`{c['schedule']}`, {c['concurrency']} clients capped at {c['rate']:.0f} requests/s, "
        f"{c['workers']} uvicorn workers (one port each), {c['machine']}.",
        "",
        "Verdict (rules: no 503 for a held key; no 503 more than "
        f"{c['grace']:g} s after the key was published and in use, with the provider up; "
        "no worker idle "
        f"{c['idle']:g} s; a valid token accepted; no invalid token accepted; no valid "
        "token answered 401):",
        "",
        *[f"- `{line}`" for line in verdict_lines(summary)],
        "",
        "Answers:",
        "",
        summary["answers_table"],
        "",
        "503s to tokens the provider signed, by class (*late*: sent more than "
        f"{c['grace']:g} s after the key was published and in use and the provider up; "
        "*said by the service*: the class comes from the 503's `wait` member or the "
        "worker's `health()` sent with it, not inferred):",
        "",
        summary["class_table"],
        "",
        "Load per worker:",
        "",
        summary["worker_table"],
        "",
        table(rows),
        "",
    ]
    if picture:
        out += [f"![Soak timeline]({picture})", ""]
    workers = c["worker_pids"]
    out += [
        "Each signing key: when clients started signing with it, when the provider "
        "published it and when each worker installed it (its `keys.loaded` / "
        "`keys.refreshed` log line), seconds from the start:",
        "",
        "| kid | signing from | published | installed per worker | valid → 401 "
        "| valid → 503 | early tokens |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in summary["rotations"]:
        installed = ", ".join(f"{w}: {_at(row['installed'].get(w))}" for w in workers)
        out.append(
            f"| {row['kid']} | {_at(row['signing'])} | {_at(row['published'])} "
            f"| {installed} | {row['valid_401']} "
            f"| {row['valid_503']} | {_counts(row['early']) if row['early'] else '-'} |"
        )
    out += ["", "Late 503s (valid tokens, the rule), by episode:", ""]
    if summary["late_episodes"]:
        out += [
            "| from (s) | to (s) | count | classes | kid | Retry-After | where |",
            "|---|---|---|---|---|---|---|",
        ]
        out += [
            f"| {e['from']:.1f} | {e['to']:.1f} | {e['count']} | {_counts(e['classes'])} "
            f"| {', '.join(e['kids'])} | {e['retry_after']} | {e['where']} |"
            for e in summary["late_episodes"]
        ]
    else:
        out.append("- none.")
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
    results: list[Record],
    verdicts: dict[int, judge.Verdict],
    hits: list[Hit],
    plan: Schedule,
    duration: float,
    path: Path,
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
    shades_of = {
        "held": "#d62728",
        "installed-in-flight": "#aec7e8",
        "unpublished": "#c5b0d5",
        "provider-failing": "#ff9896",
        "fetch-in-flight": "#17becf",
        "budget": "#1f77b4",
        "backoff": "#ff7f0e",
        "withdrawn": "#e377c2",
        "key-pending": "#9edae5",
        "config": "#8c564b",
        "closed": "#7f7f7f",
        "unknown-wait": "#bcbd22",
    }
    by_class: dict[str, list[int]] = {cls: [0] * seconds for cls in judge.CLASSES}
    late = [0] * seconds
    valid_401 = [0] * seconds
    for i, v in verdicts.items():
        r = results[i]
        if r.kind == "valid":
            second = min(max(int(r.t), 0), seconds - 1)
            by_class[v.cls][second] += 1
            late[second] += v.late
    for r in results:
        second = min(max(int(r.t), 0), seconds - 1)
        if r.status == 401:
            name = "401, valid token" if r.kind == "valid" else "401, not a valid token"
        elif r.status in (200, 503):
            name = str(r.status)
        else:
            name = "no answer" if r.status == 0 else "other"
        per[name][second] += 1
        if r.kind == "valid" and r.status == 401:
            valid_401[second] += 1
    fig, (top, middle, strip) = plt.subplots(
        3, 1, figsize=(12, 8), sharex=True, gridspec_kw={"height_ratios": [3, 2, 0.8]}
    )
    for counts in (*per.values(), *by_class.values(), late, valid_401):
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
    shown = [cls for cls in judge.CLASSES if any(by_class[cls])]
    if shown:
        middle.stackplot(
            xs,
            *(by_class[cls] for cls in shown),
            labels=[f"503: {judge.CLASSES[cls]}" for cls in shown],
            colors=[shades_of.get(cls, "#7f7f7f") for cls in shown],
            step="post",
        )
    middle.step(xs, late, where="post", color="#000000", linewidth=1.2, label="late 503 (rule)")
    if any(valid_401):
        middle.step(xs, valid_401, where="post", color="#8c564b", label="401")
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
    fig.suptitle(
        "Soak timeline: answers by status, valid tokens refused by class, JWKS requests", y=0.995
    )
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
    provider: Provider,
    jwks_url: str,
    fetch: dict[str, float],
    work: Path,
    python: str,
    count: int,
) -> Iterator[Service]:
    provider.start()
    service: Service | None = None
    try:
        service = Service(jwks_url, fetch, work, python, count)
        yield service
    finally:
        if service is not None:
            service.stop()
        provider.stop()


def collect_health(urls: list[str]) -> list[dict[str, Any]]:
    """Each worker's ``health()`` at the end."""
    seen = []
    for url in urls:
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
            seen.append(httpx.get(f"{url}/soak/health", timeout=5).json())
    return seen


def read_events(folder: Path, t0: float) -> list[dict[str, Any]]:
    """The workers' log lines, times in seconds since ``t0``."""
    events = []
    for path in sorted(folder.glob("worker-*.jsonl")):
        for text in path.read_text(encoding="utf-8", errors="replace").splitlines():
            with contextlib.suppress(ValueError, KeyError, TypeError):
                line = json.loads(text)
                line["t"] = round(float(line["t"]) - t0, 4)
                events.append(line)
    return events


def rejudge(work: Path, grace: float, idle: float) -> int:
    """Classes and rules again, from a finished run's files (its ``--out`` folder)."""
    summary = json.loads((work / "summary.json").read_text())
    c, known = summary["conditions"], summary["facts"]
    fields = {f.name for f in dataclasses.fields(Record)}
    with (work / "requests.jsonl").open(encoding="utf-8") as lines:
        records = [
            Record(**{k: v for k, v in json.loads(line).items() if k in fields}) for line in lines
        ]
    facts = judge.facts_from(
        read_events(work / "events", c["t0_monotonic"]),
        known["published"],
        [tuple(m) for m in known["modes"]],
        known["used"],
    )
    verdicts = {
        i: v for i, r in enumerate(records) if (v := judge.classify(r, facts, grace)) is not None
    }
    workers = c["worker_pids"]
    failures = judge.judge(records, verdicts, workers, c["duration"], grace=grace, idle=idle)
    print(judge.answers_table(records), end="\n\n")
    print(judge.class_table(records, verdicts, workers), end="\n\n")
    print(judge.worker_table(records, workers, c["duration"]), end="\n\n")
    for failure in failures:
        print(failure.line())
    if not failures:
        print("SOAK PASS: every rule held")
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, help="seconds of load (default 300, --quick 60)")
    parser.add_argument("--quick", action="store_true", help="60 s; results in bench/.work/soak/")
    parser.add_argument(
        "--schedule",
        choices=("full", "smoke", "none"),
        default="full",
        help="full: the fault schedule as shares of the run (default); smoke: for ~10 s; none",
    )
    parser.add_argument("--workers", type=int, default=2, help="worker processes, a port each (2)")
    parser.add_argument("--concurrency", type=int, default=6, help="concurrent clients (6)")
    parser.add_argument("--rate", type=float, default=150, help="requests/s cap, 0: none (150)")
    parser.add_argument("--max-age", type=int, help="provider Cache-Control max-age (60; smoke: 1)")
    parser.add_argument("--min-ttl", type=float, help="service FetchOptions.min_ttl (30; smoke: 1)")
    parser.add_argument(
        "--fetch",
        type=json.loads,
        default={},
        help="more FetchOptions fields for the service, as JSON: '{\"cooldown\": 10}'",
    )
    parser.add_argument(
        "--jwks-url",
        help="give the service this JWKS URL instead of the provider's (a dead one: the run "
        "must fail)",
    )
    parser.add_argument(
        "--grace",
        type=float,
        default=judge.GRACE,
        help="seconds a valid token may get 503 once its key is published and in use and the "
        "provider up (2.5)",
    )
    parser.add_argument(
        "--idle", type=float, default=judge.IDLE, help="seconds a worker may go unanswered (10)"
    )
    parser.add_argument(
        "--service-python",
        default=sys.executable,
        help="interpreter of the service (another venv: that installation's grelmicro)",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=WORK, help="work folder (bench/.work/soak)")
    parser.add_argument("--page", type=Path, help="page whose results section is rewritten")
    parser.add_argument(
        "--no-page", action="store_true", help="a 300 s run leaves docs/soak.md as it is"
    )
    parser.add_argument("--picture", type=Path, help="where the PNG goes")
    parser.add_argument("--no-plot", action="store_true", help="no picture")
    parser.add_argument(
        "--rejudge",
        type=Path,
        metavar="DIR",
        help="judge a finished run again from its files (DIR: its --out), with --grace/--idle",
    )
    args = parser.parse_args()
    if args.rejudge:
        return rejudge(args.rejudge, args.grace, args.idle)
    duration = args.duration or (60.0 if args.quick else 300.0)
    full = not args.quick and args.duration is None and args.schedule == "full"
    full = full and not args.no_page
    page = args.page or (PAGE if full else None)
    work = args.out.resolve()
    picture = args.picture or (PICTURE if full else work / "soak.png")
    work.mkdir(parents=True, exist_ok=True)
    smoke = args.schedule == "smoke"
    max_age = args.max_age if args.max_age is not None else (1 if smoke else 60)
    min_ttl = args.min_ttl if args.min_ttl is not None else (1.0 if smoke else 30.0)

    fetch = {"min_ttl": min_ttl, **args.fetch}
    plan = schedule(duration, args.schedule)
    provider = Provider(max_age=max_age)
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    conditions = {
        "date": started,
        "commit": _commit(),
        "duration": duration,
        "schedule": args.schedule,
        "workers": args.workers,
        "concurrency": args.concurrency,
        "rate": args.rate,
        "fetch": fetch,
        "max_age": max_age,
        "grace": args.grace,
        "idle": args.idle,
        "jwks_url": args.jwks_url,
        "machine": _machine(),
        "command": shlex.join(["python", "bench/soak.py", *sys.argv[1:]]),
        # Named in the report only when the service runs another installation.
        "service_grelmicro": (
            _grelmicro_of(args.service_python) if args.service_python != sys.executable else ""
        ),
    }
    # A SIGTERM (nox, CI) unwinds like Ctrl-C: the finally blocks stop uvicorn and the server.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    rss: dict[str, dict[str, int | None]] = {"start": {}, "end": {}}
    service: Service | None = None
    try:
        jwks_url = args.jwks_url or provider.jwks_url
        with running(provider, jwks_url, fetch, work, args.service_python, args.workers) as service:
            service.wait_ready(timeout=90)
            workers = service.workers()
            rss["start"] = {pid: rss_kib(int(pid)) for pid in workers}
            t0 = time.monotonic()
            conditions["t0_monotonic"] = t0  # the workers' log lines are on this clock
            end = t0 + duration
            load = Load(
                provider,
                service.urls,
                workers,
                t0,
                end,
                args.rate,
                args.concurrency,
                args.seed,
            )
            print(
                f"soak: {duration:.0f} s against {', '.join(service.urls)} (workers "
                f"{', '.join(workers)}), JWKS at {jwks_url}",
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
            rss["end"] = {pid: rss_kib(int(pid)) for pid in workers}
            health = collect_health(service.urls)
    except KeyboardInterrupt:
        print("soak: interrupted; service and provider stopped", file=sys.stderr)
        return 130
    except (RuntimeError, TimeoutError, OSError) as exc:
        print(f"soak: harness failure: {exc}", file=sys.stderr)
        if service is not None:
            print(service.tail(), file=sys.stderr)
        return 2

    hits = provider.hits(t0)
    since = provider.rotations(t0)
    events = read_events(service.events, t0)
    facts = judge.facts_from(
        events,
        {kid: pub for kid, (_, pub) in since.items() if pub is not None},
        provider.modes(t0),
        {kid: use for kid, (use, _) in since.items() if use is not None},
    )
    conditions["worker_pids"] = workers
    verdicts = {
        i: v
        for i, r in enumerate(load.results)
        if (v := judge.classify(r, facts, args.grace)) is not None
    }
    summary = analyse(
        load.results, hits, plan, rss, health, conditions, since, facts, verdicts, workers
    )
    with (work / "requests.jsonl").open("w", encoding="utf-8") as out:
        for i, r in enumerate(load.results):
            row = judge.record_row(r, verdicts.get(i), facts, workers)
            out.write(json.dumps(row) + "\n")
    drawn = False if args.no_plot else draw(load.results, verdicts, hits, plan, duration, picture)
    summary["facts"] = {  # what the verdicts were drawn from, besides the requests
        "published": facts.published,
        "used": facts.used,
        "modes": provider.modes(t0),
        "installs": facts.installs,
        "failing": facts.failing,
    }
    (work / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    link = None
    if drawn:
        link = os.path.relpath(picture, (page or work / "report.md").parent)
    text = report(summary, plan, link)
    (work / "report.md").write_text(text)
    if page is not None:
        write_page(page, text)
    print(text)
    print(
        f"soak: report in {page or work / 'report.md'}, every request in "
        f"{work / 'requests.jsonl'}, the workers' log lines in {service.events}"
    )
    for line in verdict_lines(summary):
        print(line)
    return 1 if summary["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
