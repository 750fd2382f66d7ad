"""Side-by-side JWT verification benchmarks: one command, results page included.

    python bench/run.py            # full run (~20 min here), writes docs/benchmarks.md
    python bench/run.py --smoke    # ~1 min check of every lane (+ a few rounds), no timing asserted

It sets up everything it needs: one venv per interpreter under bench/.venvs
(peers pinned in bench/requirements/), the grelmicro core wheel built from this
tree for each interpreter (by scripts/corewheel.py, the project's one builder:
profile-guided like a release, reused while the sources are unchanged, with the
core's ``bench-hooks`` feature when it declares one), the Rust lanes (cargo,
bench/rust) and the JavaScript lanes (npm, bench/js; Node and Bun). Then it
makes the keys and tokens once, runs each runtime's lanes, and writes the page
with its charts. Needs only the standard library to start.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
VENVS = BENCH / ".venvs"
WORK = BENCH / ".work"
REQS = BENCH / "requirements"

sys.path.insert(0, str(ROOT / "scripts"))
import corewheel  # noqa: E402  (the one core-wheel builder, scripts/corewheel.py)

FULL_SUITES = "algs,algs-extra,sizes,secrets,reject,keysource,threads,memory"

# name: (interpreter candidates, requirements file, suites in a full run, extra env)
ENVS: dict[str, tuple[list[str], str, str, dict[str, str]]] = {
    "py311": (
        ["~/.pyenv/versions/3.11.*/bin/python3.11", "python3.11"],
        "py311.txt",
        FULL_SUITES,
        {},
    ),
    "py312": (
        ["~/.pyenv/versions/3.12.*/bin/python3.12", "python3.12"],
        "py312.txt",
        "algs,algs-extra,sizes,reject,threads,memory",
        {},
    ),
    "py310": (["~/.pyenv/versions/3.10.*/bin/python3.10", "python3.10"], "py310.txt", "algs", {}),
    # PYTHON_GIL=0: an extension that does not declare free-threading support
    # would otherwise switch the GIL back on at import.
    "py313t": (
        [
            "/opt/python3.13t/bin/python3.13t",
            "~/.pyenv/versions/3.13*t/bin/python3.13t",
            "python3.13t",
        ],
        "py313t.txt",
        "algs,threads",
        {"PYTHON_GIL": "0"},
    ),
}
MAIN = "py311"


def log(msg: str) -> None:
    print(f"[run] {msg}", file=sys.stderr, flush=True)


class SetupError(Exception):
    """A setup step failed; the message carries the tool's own error line."""


def sh(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess:
    log("$ " + " ".join(str(c) for c in cmd))
    return subprocess.run(cmd, check=True, **kwargs)


def setup_step(cmd: list[str], **kwargs: object) -> None:
    """Runs a setup command; on failure, raises with its most telling error line."""
    log("$ " + " ".join(str(c) for c in cmd))
    res = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if res.returncode == 0:
        return
    text = res.stdout + res.stderr
    sys.stderr.write(text[-4000:])
    lines = [ln.strip() for ln in text.splitlines() if "error" in ln.lower()]
    telling = [ln for ln in lines if "does not support" in ln or "No matching" in ln]
    raise SetupError((telling or lines or [f"exit {res.returncode}"])[0][:300])


def find_interpreter(name: str) -> str | None:
    override = os.environ.get(f"BENCH_{name.upper()}")
    if override:
        return override
    for pattern in ENVS[name][0]:
        if "/" in pattern:
            expanded = str(Path(pattern).expanduser())
            found = sorted(Path("/").glob(expanded.lstrip("/")))
            if found:
                return str(found[-1])
        else:
            found_path = shutil.which(pattern)
            if found_path:
                return found_path
    return None


def venv_python(name: str) -> Path:
    return VENVS / name / "bin" / "python"


def setup_env(name: str, interpreter: str) -> Path:
    """The bench venv ``name`` set up; the core wheel installed there."""
    py = venv_python(name)
    if not py.exists():
        sh([interpreter, "-m", "venv", str(VENVS / name)])
    reqs = REQS / ENVS[name][1]
    stamp_text = "".join(p.read_text() for p in sorted(REQS.glob("*.txt")))
    stamp = VENVS / name / ".requirements-stamp"
    digest = hashlib.sha256(stamp_text.encode()).hexdigest()
    if not stamp.exists() or stamp.read_text() != digest:
        setup_step([str(py), "-m", "pip", "install", "-q", "--upgrade", "pip"])
        setup_step([str(py), "-m", "pip", "install", "-q", "-r", str(reqs)])
        if name == MAIN:
            target = VENVS / name / "pyjwt-old"
            shutil.rmtree(target, ignore_errors=True)
            setup_step(
                [
                    str(py),
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    "--no-deps",
                    "--target",
                    str(target),
                    "-r",
                    str(REQS / "pyjwt213.txt"),
                ]
            )
        stamp.write_text(digest)
    # The Python layer is imported from this tree (never from an index).
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "grelmicro_tree.pth").write_text(str(ROOT) + "\n")
    # The core wheel: built by the project's one builder, profile-guided like a
    # release (reused while its inputs are unchanged), with the bench-only
    # hooks when the core declares that feature; installed with --no-index.
    # The training runs in this venv: one without the jwt extra's dependencies
    # (3.13t: no pydantic there) gets a plain build, and the page says so.
    wheel = corewheel.build_core_wheel(py, features=corewheel.bench_features(), pgo=True, log=log)
    try:
        corewheel.install_core(py, wheel, log=log)
        log(corewheel.check_installed(py))
    except (subprocess.CalledProcessError, SystemExit) as exc:
        raise SetupError(f"installing {wheel.name}: {exc}") from exc
    return wheel


def setup_rust() -> Path | None:
    cargo = shutil.which("cargo")
    if cargo is None:
        return None
    sh([cargo, "build", "--release", "--locked", "-q"], cwd=BENCH / "rust")
    return BENCH / "rust" / "target" / "release" / "grelmicro-bench-rust"


def setup_js() -> dict[str, str]:
    """Runtimes found, by name; the reason instead of a path where one is missing."""
    js = BENCH / "js"
    npm = shutil.which("npm")
    if npm and not (js / "node_modules" / "fast-jwt").exists():
        sh([npm, "ci", "--no-audit", "--no-fund"], cwd=js)
    found = {}
    node = shutil.which("node")
    found["node"] = node or "missing: no node on PATH"
    bun = js / "node_modules" / ".bin" / "bun"
    if bun.exists():
        res = subprocess.run([str(bun), "--version"], capture_output=True, text=True)
        found["bun"] = (
            str(bun) if res.returncode == 0 else f"missing: bun fails: {res.stderr[:200]}"
        )
    else:
        found["bun"] = "missing: the bun npm package did not install a binary"
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="check every lane and time a few rounds (~1 min); no page written",
    )
    parser.add_argument(
        "--all", action="store_true", help="with --smoke: every interpreter, Rust and JS too"
    )
    parser.add_argument("--envs", help=f"interpreters to run (of {', '.join(ENVS)})")
    parser.add_argument("--suites", help="override the suites run on every interpreter")
    parser.add_argument("--rounds", type=int, help="timing rounds per case (full: 15)")
    parser.add_argument("--round-ms", type=float, help="length of one lane's round (full: 20)")
    parser.add_argument("--no-rust", action="store_true")
    parser.add_argument("--no-js", action="store_true")
    parser.add_argument("--skip-setup", action="store_true", help="use the venvs as they are")
    parser.add_argument("--out", type=Path, help="results page (full: docs/benchmarks.md)")
    args = parser.parse_args()

    started = time.time()
    smoke = args.smoke
    rounds = args.rounds or (3 if smoke else 15)
    round_ms = args.round_ms or (2.0 if smoke else 20.0)
    if args.envs:
        env_names = args.envs.split(",")
    elif smoke and not args.all:
        env_names = [MAIN]
    else:
        env_names = list(ENVS)
    with_rust = not args.no_rust and (not smoke or args.all)
    with_js = not args.no_js and (not smoke or args.all)
    out_page = args.out or (WORK / "smoke.md" if smoke else ROOT / "docs" / "benchmarks.md")
    run_dir = WORK / ("smoke" if smoke else "full")
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)

    missing: dict[str, str] = {}
    ready: dict[str, str] = {}
    wheels: dict[str, int] = {}
    for name in [MAIN] + [n for n in env_names if n != MAIN]:
        interpreter = find_interpreter(name)
        if interpreter is None:
            missing[name] = f"interpreter not found (set BENCH_{name.upper()})"
            log(f"{name}: {missing[name]}")
            continue
        if not args.skip_setup:
            try:
                wheel = setup_env(name, interpreter)
                wheels[wheel.name] = wheel.stat().st_size
            except (subprocess.CalledProcessError, SetupError) as exc:
                missing[name] = f"setup failed: {exc}"
                log(f"{name}: {missing[name]}")
                continue
        ready[name] = interpreter
    if MAIN not in ready:
        raise SystemExit(f"the main interpreter ({MAIN}) is needed for fixtures and the report")
    setup_seconds = time.time() - started

    fixtures = run_dir / "fixtures.json"
    sh([str(venv_python(MAIN)), str(BENCH / "fixtures.py"), str(fixtures)])

    parts: list[Path] = []
    loads: dict[str, list[list[float]]] = {}
    for name in env_names:
        if name not in ready:
            continue
        suites = args.suites or ENVS[name][2]
        if smoke:
            suites = ",".join(s for s in suites.split(",") if s != "algs-extra" or args.all)
        out = run_dir / f"{name}.json"
        env = dict(os.environ, **ENVS[name][3])
        if name == MAIN:
            env["BENCH_PYJWT_OLD"] = str(VENVS / MAIN / "pyjwt-old")
        cmd = [
            str(venv_python(name)),
            str(BENCH / "worker.py"),
            "--fixtures",
            str(fixtures),
            "--out",
            str(out),
            "--env",
            name,
            "--suites",
            suites,
            "--rounds",
            str(rounds),
            "--round-ms",
            str(round_ms),
        ]
        if smoke:
            cmd += [
                "--thread-ms",
                "20",
                "--thread-rounds",
                "2",
                "--mem-calls",
                "20000",
                "--mem-seconds",
                "0.2",
                "--keysource-cases",
                "RS256",
                "--reject-cases",
                "HS256",
            ]
        try:
            sh(cmd, env=env, cwd=str(BENCH))
            parts.append(out)
        except subprocess.CalledProcessError as exc:
            missing[name] = f"worker failed ({exc.returncode})"

    if with_rust:
        try:
            binary = setup_rust()
            if binary is None:
                missing["rust"] = "cargo not found"
            else:
                out = run_dir / "rust.json"
                load0 = os.getloadavg()
                sh([str(binary), str(fixtures), str(out), str(rounds), str(round_ms)])
                loads["rust"] = [list(load0), list(os.getloadavg())]
                parts.append(out)
        except subprocess.CalledProcessError as exc:
            missing["rust"] = f"failed ({exc.returncode})"
    if with_js:
        try:
            runtimes = setup_js()
        except subprocess.CalledProcessError as exc:
            runtimes = {"node": f"missing: npm ci failed ({exc.returncode})"}
        for runtime, path in runtimes.items():
            if path.startswith("missing"):
                missing[runtime] = path.removeprefix("missing: ")
                continue
            out = run_dir / f"{runtime}.json"
            load0 = os.getloadavg()
            try:
                sh(
                    [
                        path,
                        str(BENCH / "js" / "bench.mjs"),
                        str(fixtures),
                        str(out),
                        str(rounds),
                        str(round_ms),
                    ],
                    cwd=str(BENCH / "js"),
                )
                loads[runtime] = [list(load0), list(os.getloadavg())]
                parts.append(out)
            except subprocess.CalledProcessError as exc:
                missing[runtime] = f"failed ({exc.returncode})"

    run_info = {
        "smoke": smoke,
        "rounds": rounds,
        "round_ms": round_ms,
        "seconds_total": time.time() - started,
        "seconds_setup": setup_seconds,
        "missing": missing,
        "loads": loads,
        "command": "python bench/run.py" + (" --smoke" if smoke else ""),
        "parts": [str(p) for p in parts],
        "wheels": wheels,
    }
    (run_dir / "run.json").write_text(json.dumps(run_info, indent=1))
    sh(
        [str(venv_python(MAIN)), str(BENCH / "report.py"), str(run_dir), "--page", str(out_page)]
        + (["--no-charts"] if smoke else [])
    )
    log(f"done in {time.time() - started:.0f}s; page: {out_page}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
