"""Full verification (cache off) against ryjwt, same interpreter, same process.

The canonical token of ``shared/bench-token.md`` for each algorithm; both
lanes check signature, ``exp``, ``nbf``, ``aud`` and ``iss``, and are checked
to return the same claims before anything is timed. Rounds alternate the
two lanes (order flipped every round), gc off, each call on the token
decoded fresh from ``bytes``. One process is one sample of the machine's
layout and load, so ``--processes N`` runs N of them one after another and
reports, per algorithm, the median over processes of each process's median
ratio, with the range::

    python bench/cold_ratio.py --processes 6          # needs ryjwt, CPython 3.12+
    python bench/cold_ratio.py --algs HS256 --rounds 41

Needs ``cryptography`` and ``ryjwt`` (``bench/requirements/py312.txt``) and
this tree's grelmicro with its core wheel installed: the profile-guided one
(``scripts/corewheel.py PYTHON --pgo --install``) is what a release ships and
what the figures in the design notes were taken with; the header says which.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1] / "tests"))
import forge

from grelmicro.jwt import JWTVerifier, Key
from grelmicro.jwt._demo import AUDIENCE, ISSUER, canonical_payload

ALGORITHMS = ("HS256", "RS256", "PS256", "ES256", "EdDSA")
# Calls per round: a round lasts ~30 ms for either lane.
CALLS = {"HS256": 20_000}
ASYMMETRIC_CALLS = 2_000


def lanes(alg: str) -> tuple[bytes, Callable[[str], Any], Callable[[str], Any]]:
    """The token, our verify and ryjwt's decode, both checked on it."""
    import ryjwt  # noqa: PLC0415

    payload = canonical_payload(int(time.time()))
    key = forge.generate(alg)
    token = forge.mint({"alg": alg, "typ": "JWT", "kid": "k1"}, payload, key).encode()
    common = {"audience": AUDIENCE, "issuer": ISSUER}
    if alg.startswith("HS"):
        ours = JWTVerifier([Key.secret(key, alg, kid="k1")], cache_size=0, **common)
        theirs = ryjwt.SecretKey(key, algorithms=[alg], **common)
    else:
        pem = forge.spki_pem(key)
        ours = JWTVerifier([Key.pem(pem, alg, kid="k1")], cache_size=0, **common)
        theirs = ryjwt.PublicKey(pem, algorithms=[alg], **common)
    mine = {k: list(v) if isinstance(v, tuple) else v for k, v in ours.verify(token).items()}
    if mine != theirs.decode(token.decode()) or mine != payload:
        raise SystemExit(f"{alg}: the two lanes disagree on the claims")
    return token, ours.verify, theirs.decode


def timed(verify: Callable[[str], Any], token: bytes, calls: int) -> float:
    """Nanoseconds per call over one round."""
    tokens = [token] * calls
    start = time.perf_counter_ns()
    for raw in tokens:
        verify(raw.decode())
    return (time.perf_counter_ns() - start) / calls


def one_process(algorithms: list[str], rounds: int) -> dict[str, dict[str, float]]:
    """Per algorithm: both lanes' medians and fastest rounds, and the ratios."""
    out = {}
    gc.disable()
    for alg in algorithms:
        token, ours, theirs = lanes(alg)
        calls = CALLS.get(alg, ASYMMETRIC_CALLS)
        for _ in range(3):
            timed(ours, token, calls // 10)
            timed(theirs, token, calls // 10)
        mine: list[float] = []
        peer: list[float] = []
        for round_ in range(rounds):
            pair = [(mine, ours), (peer, theirs)]
            for into, verify in pair if round_ % 2 else pair[::-1]:
                into.append(timed(verify, token, calls))
        out[alg] = {
            "ours": statistics.median(mine),
            "ryjwt": statistics.median(peer),
            "ratio": statistics.median(mine) / statistics.median(peer),
            "fastest": min(mine) / min(peer),
        }
    gc.enable()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algs", default=",".join(ALGORITHMS))
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="one process, results as JSON")
    args = parser.parse_args()
    algorithms = args.algs.split(",")
    if args.json:
        print(json.dumps(one_process(algorithms, args.rounds)))
        return
    from importlib.metadata import version  # noqa: PLC0415

    child = [sys.executable, __file__, "--json", "--algs", args.algs, "--rounds", str(args.rounds)]
    runs = [
        json.loads(
            subprocess.run(
                child,
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        )
        for _ in range(args.processes)
    ]
    import grelmicro_core  # noqa: PLC0415
    from timing import core_build  # noqa: PLC0415

    print(
        f"# CPython {platform.python_version()}, grelmicro-core {version('grelmicro-core')} "
        f"({core_build(grelmicro_core)}), ryjwt {version('ryjwt')}; "
        f"{args.processes} process(es) x {args.rounds} alternating rounds, cache off, "
        "canonical token"
    )
    print(
        "| algorithm | ours (ns) | ryjwt (ns) | ours/ryjwt (median of processes) "
        "| range | fastest rounds |"
    )
    print("|---|---:|---:|---:|---|---:|")
    for alg in algorithms:
        ratios = [run[alg]["ratio"] for run in runs]
        print(
            f"| {alg} | {statistics.median(run[alg]['ours'] for run in runs):,.0f} "
            f"| {statistics.median(run[alg]['ryjwt'] for run in runs):,.0f} "
            f"| {statistics.median(ratios):.3f} | {min(ratios):.3f}-{max(ratios):.3f} "
            f"| {statistics.median(run[alg]['fastest'] for run in runs):.3f} |"
        )


if __name__ == "__main__":
    main()
