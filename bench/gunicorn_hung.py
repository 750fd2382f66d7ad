"""Held-key latency under ``gunicorn --preload -k gthread`` while the provider hangs.

The deployment of the Flask page (docs/frameworks.md): the test suite's
Flask app (``tests/jwt/apps/flask_app.py``) under ``gunicorn --preload``
with gthread workers and the guide's ``post_fork`` hook, keys from a
loopback JWKS server. Two kinds of run of the same open-loop traffic,
alternating in one process (``--rounds`` pairs, each on fresh workers
warmed with 60 uncounted held-key requests):

- ``healthy``: the provider answers; 90 % of tokens use key ``k1``, 10 %
  key ``k2``, both in the key set (each worker fetches ``k2`` once);
- ``hung``: the provider accepts connections and never answers, and the key
  set the workers hold has only ``k1``: the 10 % of ``k2`` tokens need a
  key no worker holds.

It prints, per run, the held-key (``k1``) answers' p50/p99 and the
``k2`` answers' statuses and slowest answer, then the ratio of the two
held-key p99s (the issue's bar: within 2x of the healthy run), the same
ratio for the requests sent in each run's first 2 s (the outage's first
fetch: the requests that joined it waited for it) and after them, and
whether every ``k2`` answer of the hung run came within ``key_wait`` plus
a margin.

``--compare TREE`` (repeatable) adds a kind of run, alternating with the
others: hung, the workers importing ``grelmicro`` from another checkout
(``git worktree add /tmp/before HEAD~1``), so a change's effect is
measured side by side with it in one run.

    python bench/gunicorn_hung.py [--rate 100] [--seconds 15] [--workers 3] [--threads 4]
                                  [--compare TREE]

Needs the framework test tools (``flask``, ``gunicorn``: the dev lock).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
sys.path[:0] = [str(TESTS), str(TESTS / "jwt")]

from daemons import gunicorn_preload  # noqa: E402 - the test suite's helpers
from forge import private_key  # noqa: E402
from servers import DocumentServer, jwks_of  # noqa: E402

from grelmicro.jwt import FetchOptions  # noqa: E402

K1 = private_key("RS256", kid="k1")
K2 = private_key("RS256", kid="k2", seed=1)
#: Seconds into a run within which the hung provider's first fetch has its waiters.
SETTLED = 2.0
CLAIMS = {
    "sub": "alice",
    "aud": "orders",
    "scope": "orders:read",
    "realm_access": {"roles": ["clerk"]},
}


@dataclass
class Run:
    """The answers of one run: (kind, status, seconds, sent) each; ``sent`` from the run's start."""

    name: str
    answers: list[tuple[str, int, float, float]] = field(default_factory=list)

    def times(self, kind: str, after: float = 0.0, before: float = math.inf) -> list[float]:
        return sorted(
            seconds for k, _, seconds, sent in self.answers if k == kind and after <= sent < before
        )

    def statuses(self, kind: str) -> dict[int, int]:
        counts: dict[int, int] = {}
        for k, status, _, _ in self.answers:
            if k == kind:
                counts[status] = counts.get(status, 0) + 1
        return counts


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return (
        statistics.quantiles(values, n=100, method="inclusive")[q - 1]
        if len(values) > 1
        else values[0]
    )


def warm(url: str, requests: int = 60) -> None:
    """Held-key requests, not counted: each worker's first requests (Flask, pools) warm up."""
    headers = {"Authorization": f"Bearer {K1.mint({**CLAIMS, 'exp': time.time() + 3600})}"}
    for _ in range(requests):  # a connection each: any worker may take the next one
        httpx.get(f"{url}/orders", headers=headers, timeout=30.0)


def drive(url: str, run: Run, rate: float, seconds: float, clients: int) -> None:
    """Open-loop traffic: request i is due at i / rate; every tenth carries a k2 token."""
    k1 = K1.mint({**CLAIMS, "exp": time.time() + 3600})
    k2 = K2.mint({**CLAIMS, "exp": time.time() + 3600})
    total = int(rate * seconds)
    start = time.monotonic() + 0.2
    lock = threading.Lock()
    cursor = iter(range(total))

    def client() -> None:
        with httpx.Client(base_url=url, timeout=30.0) as http:
            while True:
                with lock:
                    index = next(cursor, None)
                if index is None:
                    return
                due = start + index / rate
                pause = due - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                kind, token = ("k2", k2) if index % 10 == 9 else ("k1", k1)
                sent = time.monotonic()
                status = http.get(
                    "/orders", headers={"Authorization": f"Bearer {token}"}
                ).status_code
                elapsed = time.monotonic() - sent
                with lock:
                    run.answers.append((kind, status, elapsed, sent - start))

    pool = [threading.Thread(target=client) for _ in range(clients)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()


def one_run(
    server: DocumentServer,
    run: Run,
    args: argparse.Namespace,
    *,
    keys: object,
    hang: bool,
    tree: str | None = None,
) -> None:
    """Fresh workers over ``keys``, warmed; the provider hung if ``hang``; then the traffic.

    ``tree``: the workers import ``grelmicro`` from that checkout instead
    (run there: ``python -m`` puts the working folder first on the path).
    """
    server.set("/jwks", keys)
    env = {}
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([tree, str(TESTS / "jwt"), str(TESTS)])
        # What gunicorn's workers will import, asked of the same interpreter there.
        found = subprocess.run(
            [sys.executable, "-c", "import grelmicro.jwt; print(grelmicro.jwt.__file__)"],
            cwd=tree,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if not Path(found).resolve().is_relative_to(Path(tree).resolve()):
            raise SystemExit(f"--compare {tree}: the workers would import {found}")
    with gunicorn_preload(
        "flask_app",
        server.url("/jwks"),
        worker="gthread",
        workers=args.workers,
        threads=args.threads,
        cwd=tree,
        **env,
    ) as url:
        warm(url)
        if hang:
            server.set("/jwks", b"", gate=threading.Event())
        drive(url, run, args.rate, args.seconds, args.clients)


def report(run: Run) -> None:
    held = run.times("k1")
    other = run.times("k2")
    print(
        f"{run.name:8} k1: {len(held)} answers {run.statuses('k1')}, "
        f"p50 {percentile(held, 50) * 1e3:.1f} ms, p99 {percentile(held, 99) * 1e3:.1f} ms; "
        f"k2: {len(other)} answers {run.statuses('k2')}, "
        f"p50 {percentile(other, 50) * 1e3:.1f} ms, max {(other[-1] if other else 0) * 1e3:.1f} ms"
    )


def ratios(run: Run, healthy: Run) -> str:
    """Held-key p99 against the healthy run's: whole run, first seconds, after them."""

    def ratio(after: float = 0.0, before: float = math.inf) -> float:
        return percentile(run.times("k1", after, before), 99) / percentile(
            healthy.times("k1", after, before), 99
        )

    early = run.times("k1", before=SETTLED)
    return (
        f"{run.name:8} held-key p99 / healthy: whole run {ratio():.2f}x (bar: <= 2x); "
        f"sent in the first {SETTLED:g} s {ratio(before=SETTLED):.2f}x "
        f"(slowest {max(early, default=0.0) * 1e3:.0f} ms, "
        f"healthy {max(healthy.times('k1', before=SETTLED), default=0.0) * 1e3:.0f} ms); "
        f"after them {ratio(after=SETTLED):.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=100.0, help="requests per second")
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--clients", type=int, default=32, help="client threads sending")
    parser.add_argument("--rounds", type=int, default=2, help="healthy/hung pairs, alternating")
    parser.add_argument(
        "--compare", metavar="TREE", action="append", default=[], help="another checkout, hung"
    )
    args = parser.parse_args()

    server = DocumentServer().start()
    healthy, hung = Run("healthy"), Run("hung")
    others = [(Run(f"hung@{Path(tree).name}"), tree) for tree in args.compare]
    try:
        for _ in range(args.rounds):
            # healthy: both keys served; a worker fetches k2 on its first k2 token.
            one_run(server, healthy, args, keys=jwks_of(K1, K2), hang=False)
            # hung: the workers load k1 only, then the provider stops answering.
            one_run(server, hung, args, keys=jwks_of(K1), hang=True)
            for other, tree in others:
                one_run(server, other, args, keys=jwks_of(K1), hang=True, tree=tree)
    finally:
        server.stop()

    print(
        f"gunicorn --preload -k gthread -w {args.workers} --threads {args.threads}, "
        f"{args.rate:g} req/s for {args.seconds:g} s x {args.rounds} rounds each, 10 % k2 tokens, "
        f"python {sys.version.split()[0]}, load {os.getloadavg()[0]:.1f}"
    )
    runs = [healthy, hung, *(other for other, _ in others)]
    for run in runs:
        report(run)
    for run in runs[1:]:
        print(ratios(run, healthy))
    bound = FetchOptions().key_wait + 0.5
    slowest = max(hung.times("k2"), default=0.0)
    print(
        f"k2 in the hung run: slowest {slowest:.3f} s, key_wait {FetchOptions().key_wait:g} s "
        f"(+0.5 s margin): {'within' if slowest <= bound else 'BEYOND'}; "
        f"statuses {hung.statuses('k2')}"
    )


if __name__ == "__main__":
    main()
