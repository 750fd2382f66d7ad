"""Run the stages of ``examples/Dockerfile`` on this machine, without docker.

    python scripts/check_dockerfile.py [--keep]      # the dev venv's python runs it

Each stage gets a directory standing for its filesystem root under a temp
dir; ``ENV`` values that are absolute paths are moved under it, so the
``RUN`` commands (which use those variables) run unchanged with bash.
``COPY`` copies from the checkout (minus ``Dockerfile.dockerignore``) or from
an earlier stage's root; ``WORKDIR`` sets where the next commands run. A
``RUN`` whose comment line above says ``# check: host`` installs what this
machine already has (a compiler, Rust) and is left out, said in the log.
The base images are not pulled: the stages run with this machine's
``python3``. The build caches of this checkout (``dist/core``, ``dist/py``)
are copied into the wheels stage's source tree first, as docker's layer
cache would be (``--no-cache`` builds from scratch, minutes).

Then the final stage's ``CMD`` is started on 127.0.0.1 with a free port and a
``JWKS_URL`` that nothing answers: ``/health`` must answer 200 and ``/ready``
503 (no keys yet), from a server with two worker processes.
"""

# A build check: it runs the Dockerfile's commands and prints what it does.
# ruff: noqa: S603, S607, T201
from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "examples" / "Dockerfile"
IGNORE = ROOT / "examples" / "Dockerfile.dockerignore"
CACHES = ("dist/core", "dist/py")


def log(message: str) -> None:
    """One line of progress on stderr."""
    print(f"[check-dockerfile] {message}", file=sys.stderr, flush=True)


def instructions(text: str) -> list[tuple[str, str, bool]]:
    """``(keyword, arguments, host_only)`` per instruction, continuation lines joined."""
    found: list[tuple[str, str, bool]] = []
    host_only = False
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and line.startswith("#"):
            host_only = host_only or line.startswith("# check: host")
            continue
        if not line and not pending:
            continue
        pending += (" " if pending else "") + line.removesuffix("\\").strip()
        if line.endswith("\\"):
            continue
        keyword, _, args = pending.partition(" ")
        found.append((keyword.upper(), args.strip(), host_only))
        pending, host_only = "", False
    return found


def ignored(patterns: list[str], relative: str) -> bool:
    """Whether a ``.dockerignore`` pattern excludes ``relative`` (a checkout path)."""
    for pattern in patterns:
        bare = pattern.removeprefix("**/")
        if fnmatch.fnmatch(relative, pattern) or (
            pattern.startswith("**/") and fnmatch.fnmatch(Path(relative).name, bare)
        ):
            return True
    return False


def copy_context(source: Path, target: Path, patterns: list[str]) -> None:
    """``source`` (in the checkout) to ``target``, leaving out what the ignore file names."""

    def skip(directory: str, names: list[str]) -> set[str]:
        base = Path(directory).relative_to(ROOT)
        return {n for n in names if ignored(patterns, (base / n).as_posix().removeprefix("./"))}

    if source.is_dir():
        shutil.copytree(source, target, ignore=skip, dirs_exist_ok=True, symlinks=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


class Stage:
    """One ``FROM``: its root directory, environment and working directory."""

    def __init__(self, name: str, work: Path) -> None:
        self.name = name
        self.root = work / name
        self.root.mkdir(parents=True)
        self.env: dict[str, str] = {}
        self.workdir = self.root
        self.cmd: list[str] = []

    def path(self, container_path: str) -> Path:
        """Where ``container_path`` (absolute) lives on this machine."""
        return self.root / container_path.lstrip("/")

    def expand(self, text: str) -> str:
        """``$NAME`` and ``${NAME}`` replaced by this stage's (moved) values."""
        return re.sub(
            r"\$\{?(\w+)\}?",
            lambda m: self.env.get(m.group(1), os.environ.get(m.group(1), "")),
            text,
        )

    def set_env(self, args: str) -> None:
        """``ENV A=/x B=y``: absolute paths moved under the stage root; PATH left alone."""
        for item in shlex.split(args):
            name, _, value = item.partition("=")
            if name == "PATH":
                continue
            self.env[name] = str(self.path(value)) if value.startswith("/") else value


def copy(
    stage: Stage, stages: dict[str, Stage], args: str, patterns: list[str], *, reuse_cache: bool
) -> None:
    """``COPY [--from=STAGE] SRC... DEST`` into ``stage``."""
    words = shlex.split(args)
    origin = next((w.split("=", 1)[1] for w in words if w.startswith("--from=")), None)
    *sources, dest = [w for w in words if not w.startswith("--")]
    target = Path(stage.expand(dest))
    for source in sources:
        if origin is not None:
            log(f"COPY --from={origin} {source} -> {target}")
            shutil.copytree(stages[origin].path(source), target, dirs_exist_ok=True)
            continue
        into = target / Path(source).name if dest.endswith("/") else target
        log(f"COPY {source} -> {into}")
        copy_context(ROOT / source, into, patterns)
        if source == "." and reuse_cache:
            for cache in CACHES:
                if (ROOT / cache).is_dir():
                    log(f"  build cache {cache} (what docker's layer cache would hold)")
                    shutil.copytree(ROOT / cache, target / cache, dirs_exist_ok=True)


def run_stages(work: Path, *, reuse_cache: bool) -> Stage:
    """Every stage of the Dockerfile in order; the last one."""
    patterns = [
        line.strip()
        for line in IGNORE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    stages: dict[str, Stage] = {}
    stage: Stage | None = None
    for keyword, args, host_only in instructions(DOCKERFILE.read_text()):
        if keyword == "FROM":
            name = args.split()[-1] if " AS " in args.upper() else f"stage{len(stages)}"
            stage = stages[name] = Stage(name, work)
            log(f"stage {name} (base image {args.split()[0]} not pulled: this machine's python3)")
            continue
        if stage is None or keyword in {"ARG", "EXPOSE", "USER", "LABEL"}:
            continue
        if keyword == "ENV":
            stage.set_env(args)
        elif keyword == "WORKDIR":
            stage.workdir = stage.path(args) if args.startswith("/") else Path(stage.expand(args))
            stage.workdir.mkdir(parents=True, exist_ok=True)
        elif keyword == "COPY":
            copy(stage, stages, args, patterns, reuse_cache=reuse_cache)
        elif keyword == "RUN":
            if host_only:
                log(f"RUN left out (# check: host): {args[:70]}...")
                continue
            log(f"RUN {args[:100]}{'...' if len(args) > 100 else ''}")
            env = dict(os.environ, **stage.env)
            subprocess.run(
                ["bash", "-euo", "pipefail", "-c", args], cwd=stage.workdir, env=env, check=True
            )
        elif keyword == "CMD":
            stage.cmd = [str(stage.path(a)) if a.startswith("/") else a for a in json.loads(args)]
        else:
            raise SystemExit(f"check_dockerfile.py does not know {keyword}")
    if stage is None:
        raise SystemExit("no FROM in the Dockerfile")
    return stage


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def status(url: str) -> int:
    """The HTTP status of GET ``url`` (0 when nothing answers)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - loopback only
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError:
        return 0


def serve(stage: Stage) -> None:
    """The final ``CMD`` on 127.0.0.1: /health 200, /ready 503 without keys, then stopped."""
    cmd = list(stage.cmd)
    port = free_port()
    cmd[cmd.index("--host") + 1] = "127.0.0.1"
    cmd[cmd.index("--port") + 1] = str(port)
    env = dict(
        os.environ,
        **stage.env,
        JWKS_URL=f"https://127.0.0.1:{free_port()}/jwks.json",  # nothing listens there
        GRELMICRO_JWT_AUDIENCE="https://api.example.com",
        GRELMICRO_JWT_ISSUER="https://idp.example.com/",
    )
    log("CMD " + " ".join(cmd))
    server = subprocess.Popen(cmd, cwd=stage.workdir, env=env)
    try:
        deadline = time.monotonic() + 60
        while status(f"http://127.0.0.1:{port}/health") != 200:
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the service did not answer /health with 200")
            time.sleep(0.5)
        ready = status(f"http://127.0.0.1:{port}/ready")
        if ready != 503:
            raise SystemExit(f"/ready answered {ready} with no keys reachable, not 503")
        log("the service answers /health 200 and /ready 503 (no keys reachable): OK")
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> int:
    """Run the stages in a temp dir (kept with ``--keep``), then start the service."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the stage directories")
    parser.add_argument("--no-cache", action="store_true", help="build the wheels from scratch")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="grelmicro-dockerfile."))
    try:
        final = run_stages(work, reuse_cache=not args.no_cache)
        serve(final)
    finally:
        if args.keep:
            log(f"stages kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    log("examples/Dockerfile: every stage ran")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
