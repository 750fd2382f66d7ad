"""The soak's verdict: per-request records, the class of every refused valid token, the rules.

Pure functions over plain data, no servers and no clocks, so that
``tests/test_soak_harness.py`` can feed them a table of made-up records.

What goes in:

- :class:`Record`: one request as the client saw it (sent and answered at,
  which worker it was sent to, token kind, ``kid``, status, the 503's
  ``Retry-After``, the ``wait`` member of its problem body, and the
  worker's ``health()`` read as that 503 was sent);
- :class:`Facts`: what the rest of the run tells about the keys: when the
  provider published each ``kid``, when it was up, and, from each worker's
  key-state records (the library's ``jwt_event`` log records, one JSON
  object a line), when that worker installed and dropped each ``kid`` and
  when it was in a run of failed fetches.

Why a 503 was answered is read from the verifier itself (the ``wait`` of
its :class:`~grelmicro.jwt.KeysUnavailableError` and its health), never
from log text: the library logs a wait at most once per ``log_interval``,
and a key dropped at ``max_stale`` is not a provider failure.

What comes out: a :class:`Verdict` per 503 to a token the provider signed
(``valid``, and ``early``: signed before its key is published), the failed
rules (:func:`judge`), and the tables of the report.

Times are seconds since the start of the load, on one monotonic clock (the
driver's and the workers' ``time.monotonic()``: the same clock on Linux).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Token kinds signed by the provider's own key with the right claims.
SIGNED = ("valid", "early")

#: The classes of a 503 to a signed token, in the order of the report.
CLASSES = {
    "held": "key held",
    "installed-in-flight": "key installed while in flight",
    "unpublished": "not yet published",
    "withdrawn": "keys withdrawn",
    "provider-failing": "provider failing",
    "fetch-in-flight": "fetch in flight",
    "budget": "unknown-kid budget",
    "key-pending": "key pending",
    "backoff": "backoff after failures",
    "config": "configuration error",
    "closed": "verifier closed",
    "unknown-wait": "unknown wait",
}

#: The ``wait`` values of ``KeysUnavailableError`` the harness knows, to their class.
#: Any other value is class ``unknown-wait`` (counted and listed in the report) until
#: it is added here: a new wait is never taken for another.
WAITS = {
    "fetch-in-flight": "fetch-in-flight",
    "budget": "budget",
    "key-pending": "key-pending",
    "backoff": "backoff",
    "provider-failing": "provider-failing",
    "config": "config",
    "closed": "closed",
}

#: Defaults of the rules (``--grace``, ``--idle``).
GRACE = 2.5
IDLE = 10.0


@dataclass(frozen=True)
class Record:
    """One request, as the client saw it."""

    t: float  # sent
    done: float  # answered (or given up)
    worker: str  # the worker it was sent to (its pid)
    kind: str
    kid: str
    status: int  # 0: no answer
    reason: str = ""  # the problem body's ``reason``, or the client's error
    retry_after: str = ""
    said: str = ""  # what the 503's body says beyond ``reason``: its detail, extra members
    answered_by: str = ""  # the ``X-Soak-Worker`` header of the answer
    wait: str = ""  # the 503 body's ``wait`` member ("": none)
    #: The worker's ``health()`` as the 503 was sent (``X-Soak-Health``): ``ready``,
    #: ``generation``, ``key_count``, ``last_success``, ``last_error``, ``config_error``.
    health: dict[str, Any] | None = None


@dataclass
class Facts:
    """What the run tells about keys, besides the requests."""

    published: dict[str, float] = field(default_factory=dict)  # kid: first published at
    #: kid: first signed with (a token naming it can arrive); absent: from publication.
    used: dict[str, float] = field(default_factory=dict)
    #: ``(at, mode)`` changes of the provider, in order; ``up`` is the only healthy mode.
    modes: list[tuple[float, str]] = field(default_factory=lambda: [(-math.inf, "up")])
    #: worker: kid: ``[(installed, dropped)]`` (``inf``: still held at the end).
    installs: dict[str, dict[str, list[tuple[float, float]]]] = field(default_factory=dict)
    #: worker: ``[(first failure, next accepted fetch)]``.
    failing: dict[str, list[tuple[float, float]]] = field(default_factory=dict)

    def up_since(self, t: float) -> float | None:
        """When the provider's current healthy period began, or None if it is not up at ``t``."""
        since: float | None = None
        for at, mode in self.modes:
            if at > t:
                break
            since = (at if since is None else since) if mode == "up" else None
        return since

    def installed(self, worker: str, kid: str) -> list[tuple[float, float]]:
        return self.installs.get(worker, {}).get(kid, [])

    def in_failing_run(self, worker: str, t: float) -> bool:
        return any(start <= t < end for start, end in self.failing.get(worker, []))


@dataclass(frozen=True)
class Verdict:
    cls: str  # a key of CLASSES
    late: bool  # sent more than the grace after the key was published, in use, and the provider up
    stated: bool  # the class came from the verifier (the 503's ``wait``, its health), not inferred
    wait: str = ""  # the 503's ``wait`` member as answered


def withdrawn(health: Mapping[str, Any] | None) -> bool:
    """The worker's health says it had keys and serves none now.

    Not ready, with keys accepted before: past ``max_stale``, or withdrawn
    by an empty key set. A worker that never loaded keys is not "withdrawn".
    """
    if not health or health.get("ready", True) or health.get("config_error"):
        return False
    return health.get("last_success") is not None


def stated_class(record: Record) -> str | None:
    """The class the verifier states for a 503: its health first, then its ``wait``.

    None when the answer carries neither (a service that predates them).
    """
    wait = WAITS.get(record.wait) if record.wait else None
    if record.wait and wait is None:
        return "unknown-wait"
    if wait in ("config", "closed"):
        return wait
    if record.health and record.health.get("config_error"):
        return "config"
    if withdrawn(record.health):
        return "withdrawn"
    return wait


def classify(record: Record, facts: Facts, grace: float = GRACE) -> Verdict | None:
    """The class of a 503 to a signed token; None for any other answer.

    The key's own facts come first (the worker held it, installed it while
    the request was in, the provider had not published it); then what the
    verifier states (:func:`stated_class`); only when it states nothing, an
    inference from the provider's mode and the worker's failed fetches.
    """
    if record.status != 503 or record.kind not in SIGNED:
        return None
    spans = facts.installed(record.worker, record.kid)
    published = facts.published.get(record.kid)
    up_since = facts.up_since(record.t)
    stated = False
    if any(start <= record.t and end >= record.done for start, end in spans):
        cls = "held"
    elif any(record.t < start <= record.done for start, _ in spans):
        cls = "installed-in-flight"
    elif record.wait and record.wait not in WAITS:
        cls, stated = "unknown-wait", True  # before "unpublished": never hidden in another class
    elif published is None or published > record.t:
        cls = "unpublished"
    elif (said := stated_class(record)) is not None:
        cls, stated = said, True
    elif up_since is None:
        cls = "provider-failing"
    elif facts.in_failing_run(record.worker, record.t):
        cls = "backoff"
    else:
        cls = "budget"
    late = (
        cls != "held"
        and published is not None
        and published <= record.t
        and up_since is not None
        and record.t - max(published, facts.used.get(record.kid, published), up_since) > grace
    )
    return Verdict(cls, late, stated, record.wait)


# -- facts from the run's logs ---------------------------------------------------------------


def facts_from(
    events: Iterable[Mapping[str, Any]],
    published: Mapping[str, float],
    modes: Sequence[tuple[float, str]],
    used: Mapping[str, float] | None = None,
) -> Facts:
    """Facts from the workers' log lines (``t``, ``worker`` and the ``jwt_*`` fields).

    ``keys.loaded`` / ``keys.refreshed`` install ``jwt_kids_added`` and drop
    ``jwt_kids_removed`` (a key replaced under its kid is in both: dropped,
    then installed), ``keys.withdrawn`` drops every key, ``keys.fetch_failed``
    opens a run of failures that the next accepted fetch closes. Other lines
    are not read: why a 503 was answered comes from the answer itself.
    """
    facts = Facts(
        published=dict(published),
        used=dict(used or {}),
        modes=[(-math.inf, "up"), *sorted(modes)],
    )
    held: dict[str, dict[str, float]] = defaultdict(dict)  # worker: kid: since
    failing_from: dict[str, float] = {}
    installs: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for line in sorted(events, key=lambda e: float(e["t"])):
        worker, t, event = str(line["worker"]), float(line["t"]), str(line.get("jwt_event", ""))
        mine = held[worker]
        dropped: list[str] = []
        if event in ("keys.loaded", "keys.refreshed"):
            dropped = [str(kid) for kid in line.get("jwt_kids_removed") or [] if kid is not None]
        elif event == "keys.withdrawn":
            dropped = list(mine)
        for kid in dropped:
            if kid in mine:
                installs[worker][kid].append((mine.pop(kid), t))
        if event in ("keys.loaded", "keys.refreshed"):
            for kid in line.get("jwt_kids_added") or []:
                if kid is not None and str(kid) not in mine:
                    mine[str(kid)] = t
            if worker in failing_from:
                facts.failing.setdefault(worker, []).append((failing_from.pop(worker), t))
        elif event == "keys.fetch_failed":
            failing_from.setdefault(worker, t)
    for worker, mine in held.items():
        for kid in list(mine):
            installs[worker][kid].append((mine.pop(kid), math.inf))
    for worker, start in failing_from.items():
        facts.failing.setdefault(worker, []).append((start, math.inf))
    facts.installs = {w: {k: sorted(v) for k, v in kids.items()} for w, kids in installs.items()}
    return facts


# -- the rules --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    rule: str
    message: str

    def line(self) -> str:
        return f"SOAK FAIL [{self.rule}] {self.message}"


def gaps(times: Sequence[float], start: float, end: float) -> tuple[float, float]:
    """The longest pause in ``times`` over ``[start, end]``, and where it begins."""
    edges = [start, *sorted(times), end]
    longest, where = 0.0, start
    for before, after in itertools.pairwise(edges):
        if after - before > longest:
            longest, where = after - before, before
    return longest, where


def judge(
    records: Sequence[Record],
    verdicts: Mapping[int, Verdict],
    workers: Sequence[str],
    duration: float,
    *,
    grace: float = GRACE,
    idle: float = IDLE,
) -> list[Failure]:
    """Every rule the run broke (empty: it passed). ``verdicts`` is keyed by record index."""
    failures: list[Failure] = []

    def first(indexes: list[int]) -> str:
        r = records[indexes[0]]
        return f"first at {r.t:.1f} s: worker {r.worker}, kid {r.kid}, {r.kind}"

    held = [i for i, v in verdicts.items() if v.cls == "held"]
    if held:
        failures.append(
            Failure(
                "held-key-503",
                f"{len(held)} tokens of a key the worker held were answered 503 ({first(held)})",
            )
        )
    late = sorted(i for i, v in verdicts.items() if v.late)
    if late:
        classes = Counter(verdicts[i].cls for i in late)
        failures.append(
            Failure(
                "late-503",
                f"{len(late)} valid tokens were answered 503 more than {grace:g} s after their "
                f"key was published and in use, with the provider up ("
                + ", ".join(f"{CLASSES[c]}: {n}" for c, n in classes.most_common())
                + f"; {first(late)})",
            )
        )
    for worker in workers:
        times = [r.t for r in records if r.worker == worker and r.status != 0]
        longest, where = gaps(times, 0.0, duration)
        if longest > idle:
            failures.append(
                Failure(
                    "idle-worker",
                    f"worker {worker} answered no request for {longest:.1f} s "
                    f"(from {where:.1f} s; limit {idle:g} s)",
                )
            )
    if not any(r.kind == "valid" and r.status == 200 for r in records):
        valid = sum(1 for r in records if r.kind == "valid")
        failures.append(Failure("none-accepted", f"no valid token was accepted ({valid} sent)"))
    accepted = [r for r in records if r.kind not in SIGNED and r.status == 200]
    if accepted:
        failures.append(
            Failure(
                "invalid-accepted",
                f"{len(accepted)} invalid tokens were accepted (first at {accepted[0].t:.1f} s: "
                f"{accepted[0].kind})",
            )
        )
    refused = [r for r in records if r.kind == "valid" and r.status == 401]
    if refused:
        failures.append(
            Failure(
                "valid-401",
                f"{len(refused)} valid tokens were answered 401 (first at {refused[0].t:.1f} s: "
                f"{refused[0].reason}, kid {refused[0].kid})",
            )
        )
    return failures


# -- the tables -------------------------------------------------------------------------------


def group(kind: str) -> str:
    return kind if kind in SIGNED else "invalid"


def answers_table(records: Sequence[Record]) -> str:
    """Answers by token group and status."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for r in records:
        counts[group(r.kind)]["no answer" if r.status == 0 else str(r.status)] += 1
    columns = ["200", "401", "503", "no answer"]
    columns += sorted({s for c in counts.values() for s in c} - set(columns))
    lines = [
        "| tokens | sent | " + " | ".join(columns) + " |",
        "|---|---:|" + "---:|" * len(columns),
    ]
    for name in ("valid", "early", "invalid"):
        c = counts.get(name, Counter())
        lines.append(
            f"| {name} | {sum(c.values()):,} | " + " | ".join(f"{c[s]:,}" for s in columns) + " |"
        )
    return "\n".join(lines)


def class_table(
    records: Sequence[Record], verdicts: Mapping[int, Verdict], workers: Sequence[str]
) -> str:
    """503s to signed tokens by class: valid (late, stated), per worker, early."""
    rows: dict[str, Counter[str]] = {cls: Counter() for cls in CLASSES}
    for i, v in verdicts.items():
        r = records[i]
        row = rows[v.cls]
        row[r.kind] += 1
        if r.kind == "valid":
            row["late"] += v.late
            row["stated"] += v.stated
            row[f"w:{r.worker}"] += 1
    lines = [
        "| class of the 503 | valid | of which late (rule) | said by the service | "
        + " | ".join(f"worker {w}" for w in workers)
        + " | early |",
        "|---|---:|---:|---:|" + "---:|" * len(workers) + "---:|",
    ]
    total: Counter[str] = Counter()
    for cls, row in rows.items():
        total.update(row)
        lines.append(_class_row(CLASSES[cls], row, workers))
    lines.append(_class_row("**all**", total, workers))
    unknown = unknown_waits(verdicts)
    if unknown:
        lines += [
            "",
            "`wait` values the harness does not know (class *unknown wait*; add them to "
            "`judge.WAITS`): " + ", ".join(f"`{w}`: {n:,}" for w, n in unknown.most_common()),
        ]
    return "\n".join(lines)


def unknown_waits(verdicts: Mapping[int, Verdict]) -> Counter[str]:
    """Every ``wait`` value not in :data:`WAITS`, counted over all classified 503s."""
    return Counter(v.wait for v in verdicts.values() if v.wait and v.wait not in WAITS)


def _class_row(name: str, row: Counter[str], workers: Sequence[str]) -> str:
    cells = [row["valid"], row["late"], row["stated"], *(row[f"w:{w}"] for w in workers)]
    return f"| {name} | " + " | ".join(f"{n:,}" for n in cells) + f" | {row['early']:,} |"


def worker_table(records: Sequence[Record], workers: Sequence[str], duration: float) -> str:
    """Each worker's share of the load, its longest pause, answers from another worker."""
    total = max(len(records), 1)
    lines = [
        "| worker | requests | share | answered | longest pause (s) | answered by another |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for w in workers:
        mine = [r for r in records if r.worker == w]
        answered = [r.t for r in mine if r.status != 0]
        stray = sum(1 for r in mine if r.answered_by and r.answered_by != w)
        lines.append(
            f"| {w} | {len(mine):,} | {100 * len(mine) / total:.1f}% | {len(answered):,} "
            f"| {gaps(answered, 0.0, duration)[0]:.1f} | {stray} |"
        )
    return "\n".join(lines)


def record_row(
    record: Record, verdict: Verdict | None, facts: Facts, workers: Sequence[str]
) -> dict[str, Any]:
    """One line of ``requests.jsonl``: the record, its key's publication and installs, its class."""
    installed = {}
    for w in workers:
        spans = facts.installed(w, record.kid)
        installed[w] = round(spans[0][0], 3) if spans else None
    return {
        "t": round(record.t, 4),
        "done": round(record.done, 4),
        "worker": record.worker,
        "kind": record.kind,
        "kid": record.kid,
        "published": facts.published.get(record.kid),
        "installed": installed,
        "status": record.status,
        "reason": record.reason,
        "retry_after": record.retry_after,
        "said": record.said,
        "answered_by": record.answered_by,
        "wait": record.wait,
        "health": record.health,
        "class": verdict.cls if verdict else None,
        "late": verdict.late if verdict else None,
        "stated": verdict.stated if verdict else None,
    }
