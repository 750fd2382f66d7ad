"""Run ``examples/Dockerfile`` on this machine, without docker, from a release tarball.

    python scripts/check_dockerfile.py [--keep] [--release TARBALL]   # with the dev venv

The Dockerfile installs a release tarball (``scripts/release.sh``) and nothing
else of this repository. The check gives it a build context as a team would:
a temp directory with the tarball and its ``.sha256``, and the service's
files from ``examples/`` (what ``Dockerfile.dockerignore`` lets through).
The tarball is ``--release`` (or ``$RELEASE_TARBALL``), a real release;
without one, a check tarball of the same layout is assembled in seconds from
this checkout's build caches (``dist/core``, ``dist/py``) and the hash
locks: its core is the dev build, not profile-guided, so the check passes
``REQUIRE_PGO=0`` and says so (a release build takes minutes per interpreter
and stays out of the test command).

The stage gets a directory standing for its filesystem root; ``ENV`` values
that are absolute paths are moved under it, so the ``RUN`` commands (which
use those variables) run unchanged with bash and this machine's ``python3``;
``ARG`` defaults are set, ``RELEASE`` and ``TAG`` given the tarball's name
and this interpreter's tag. ``COPY`` copies from the context; ``WORKDIR``
sets where the next commands run. Then the ``CMD`` is started on 127.0.0.1
with a free port and a ``GRELMICRO_JWT_JWKS_URL`` that nothing answers: ``/health`` must
answer 200, ``/ready`` 503 (no keys yet), the ``HEALTHCHECK`` command must
report the service unhealthy, and the library's key-fetch warning must
reach stderr as a JSON line (``log-config.json``), from a server with two
worker processes. The Dockerfile must install the release from its
tarball only: no ``curl``, no Rust, no checkout (``COPY .``), checked first.
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

import corewheel
import release
import wheelhouse

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
DOCKERFILE = EXAMPLES / "Dockerfile"
IGNORE = EXAMPLES / "Dockerfile.dockerignore"
BUILDER = EXAMPLES / "release" / "Dockerfile"
DEV_PYTHON = ROOT / ".venv" / "bin" / "python"
#: Where the check tarball is assembled (the downloaded dependencies stay between runs).
CHECK_DIR = ROOT / "dist" / "dockerfile-check"
#: What the Dockerfile must never do: it installs the release, not a build.
FORBIDDEN = {
    r"curl[^|]*\|\s*(ba)?sh": "a `curl | sh`",
    r"rustup|cargo |maturin": "a Rust toolchain",
    r"(?m)^COPY\s+\.\s": "the repository as build context (`COPY .`)",
    r"build-essential|gcc|apt-get": "a compiler or system packages",
}


def log(message: str) -> None:
    """One line of progress on stderr."""
    print(f"[check-dockerfile] {message}", file=sys.stderr, flush=True)


def instructions(text: str) -> list[tuple[str, str]]:
    """``(keyword, arguments)`` per instruction, continuation lines joined."""
    found: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (line.startswith("#") or not line):
            continue
        pending += (" " if pending else "") + line.removesuffix("\\").strip()
        if line.endswith("\\"):
            continue
        keyword, _, args = pending.partition(" ")
        found.append((keyword.upper(), args.strip()))
        pending = ""
    return found


def allowed(patterns: list[str], name: str) -> bool:
    """Whether ``.dockerignore`` ``patterns`` send ``name`` (the last matching one decides)."""
    sent = True
    for pattern in patterns:
        negated = pattern.startswith("!")
        if fnmatch.fnmatch(name, pattern.removeprefix("!")):
            sent = negated
    return sent


def static_checks(text: str) -> None:
    """The Dockerfile installs a release tarball, hash-checked, and builds nothing."""
    for pattern, what in FORBIDDEN.items():
        if re.search(pattern, text):
            raise SystemExit(f"examples/Dockerfile must not use {what}")
    for needed in ("sha256sum -c", "--require-hashes", "--no-index", "HEALTHCHECK", "USER "):
        if needed not in text:
            raise SystemExit(f"examples/Dockerfile lacks {needed!r}")
    log("static: no curl | sh, no Rust, no compiler, no checkout; checksums, hashes, healthcheck")


def check_builder() -> None:
    """The maintainer's builder (examples/release/Dockerfile), statically: it runs only in docker.

    Its base pins the Rust release that ``rust-toolchain.toml`` names, it
    copies that file into its checkout, keeps the cargo registry and target
    in cache mounts, and runs ``scripts/release.sh`` (tools from the hashed
    lock), never a ``curl | sh``.
    """
    text = BUILDER.read_text()
    toolchain = corewheel.read_toml(BUILDER.with_name("rust-toolchain.toml"))["toolchain"]
    base = re.search(r"(?m)^ARG BUILDER=rust:(\d+\.\d+\.\d+)-", text)
    if base is None or base.group(1) != toolchain["channel"]:
        raise SystemExit("examples/release/Dockerfile: rust:X.Y.Z is not rust-toolchain.toml's")
    for needed in (
        "rust-toolchain.toml $SRC/rust-toolchain.toml",
        "--mount=type=cache,target=/usr/local/cargo/registry",
        "--mount=type=cache,target=/src/grelmicro-core/target",
        "bash scripts/release-tools.sh",
        "bash scripts/release.sh",
    ):
        if needed not in text:
            raise SystemExit(f"examples/release/Dockerfile lacks {needed!r}")
    if re.search(r"curl|wget", text):
        raise SystemExit("examples/release/Dockerfile must not download with curl or wget")
    log(f"builder: rust {toolchain['channel']} pinned, cache mounts, scripts/release.sh (static)")


def check_tarball() -> Path:
    """A tarball of the release's layout from this checkout's build caches (dev core, not PGO)."""
    tag = corewheel.interpreter_tag(DEV_PYTHON)
    core = corewheel.build_core_wheel(DEV_PYTHON, log=log)
    main = corewheel.build_grelmicro_dists(DEV_PYTHON, log=log)
    name = f"grelmicro-{corewheel.version().replace('+', '-')}-linux-{release.arch()}"
    out = CHECK_DIR / name
    out.mkdir(parents=True, exist_ok=True)
    for stale in [*out.glob("grelmicro*.whl"), *out.glob("requirements-*.txt"), out / "SHA256SUMS"]:
        stale.unlink(missing_ok=True)
    for wheel in (core, main):
        shutil.copy2(wheel, out / wheel.name)
    if not wheelhouse.download_dependencies(out / core.name, out):
        raise SystemExit(f"the locked dependencies of {tag} could not be downloaded")
    tarball = release.assemble(out, main, {tag: [out / core.name]}, with_sbom=False)
    log(f"check tarball {tarball.name}: the dev core (not profile-guided), locked dependencies")
    return tarball


def build_context(work: Path, tarball: Path) -> Path:
    """A build context as a team has it: the tarball, its checksum, the service's files."""
    context = work / "context"
    context.mkdir()
    patterns = [
        line.strip()
        for line in IGNORE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for source in (tarball, tarball.with_name(tarball.name + ".sha256"), *EXAMPLES.iterdir()):
        if source.is_file() and allowed(patterns, source.name):
            shutil.copy2(source, context / source.name)
    log(f"build context: {', '.join(sorted(p.name for p in context.iterdir()))}")
    return context


class Stage:
    """One ``FROM``: its root directory, environment and working directory."""

    def __init__(self, name: str, work: Path, args: dict[str, str]) -> None:
        self.name = name
        self.root = work / name
        self.root.mkdir(parents=True)
        self.env: dict[str, str] = dict(args)
        self.workdir = self.root
        self.cmd: list[str] = []
        self.healthcheck: list[str] = []

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

    def apply(self, keyword: str, rest: str, context: Path) -> None:
        """One instruction after ``FROM`` (``ARG`` aside)."""
        if keyword in {"EXPOSE", "USER", "LABEL"}:
            return
        if keyword == "ENV":
            self.set_env(rest)
        elif keyword == "WORKDIR":
            self.workdir = self.path(rest) if rest.startswith("/") else Path(self.expand(rest))
            self.workdir.mkdir(parents=True, exist_ok=True)
        elif keyword == "COPY":
            copy(self, context, rest)
        elif keyword == "RUN":
            log(f"RUN {rest[:100]}{'...' if len(rest) > 100 else ''}")
            env = dict(os.environ, **self.env)
            subprocess.run(
                ["bash", "-euo", "pipefail", "-c", rest], cwd=self.workdir, env=env, check=True
            )
        elif keyword == "CMD":
            self.cmd = [self.container(a) for a in json.loads(rest)]
        elif keyword == "HEALTHCHECK":
            exec_form = rest[rest.index("CMD") + 3 :].strip()
            self.healthcheck = [self.container(a) for a in json.loads(exec_form)]
        else:
            raise SystemExit(f"check_dockerfile.py does not know {keyword}")

    def container(self, value: str) -> str:
        """An absolute container path of an exec-form command, moved under the root."""
        return str(self.path(value)) if value.startswith("/") else value


def copy(stage: Stage, context: Path, args: str) -> None:
    """``COPY SRC... DEST`` from the build context into ``stage``."""
    words = [stage.expand(w) for w in shlex.split(args) if not w.startswith("--")]
    *sources, dest = words
    target = Path(dest)
    target.mkdir(parents=True, exist_ok=True)
    for source in sources:
        found = context / source
        if not found.is_file():
            raise SystemExit(f"COPY {source}: not in the build context")
        log(f"COPY {source} -> {target}")
        shutil.copy2(found, target / found.name)


def run_stages(work: Path, context: Path, overrides: dict[str, str]) -> Stage:
    """Every instruction of the Dockerfile in order; the (one) stage."""
    args: dict[str, str] = {}
    stage: Stage | None = None
    for keyword, rest in instructions(DOCKERFILE.read_text()):
        if keyword == "ARG":
            name, _, default = rest.partition("=")
            args[name] = overrides.get(name, default)
            if stage is not None:
                stage.env[name] = args[name]
            continue
        if keyword == "FROM":
            image = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), ""), rest.split()[0])
            name = rest.split()[-1] if " AS " in rest.upper() else "stage"
            stage = Stage(name, work, {})
            log(f"stage {name} (base image {image} not pulled: this machine's python3)")
            continue
        if stage is None:
            raise SystemExit(f"{keyword} before FROM")
        stage.apply(keyword, rest, context)
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


def serve(stage: Stage, work: Path) -> None:
    """The ``CMD`` on 127.0.0.1: /health 200, /ready 503 and unhealthy without keys, JSON logs."""
    cmd = list(stage.cmd)
    port = free_port()
    cmd[cmd.index("--host") + 1] = "127.0.0.1"
    cmd[cmd.index("--port") + 1] = str(port)
    jwks_url = f"https://127.0.0.1:{free_port()}/jwks.json"  # nothing listens there
    env = dict(
        os.environ,
        **stage.env,
        GRELMICRO_JWT_JWKS_URL=jwks_url,
        GRELMICRO_JWT_AUDIENCE="https://api.example.com",
        GRELMICRO_JWT_ISSUER="https://idp.example.com/",
    )
    log("CMD " + " ".join(cmd))
    errors = work / "stderr.log"
    with errors.open("w") as stderr:
        server = subprocess.Popen(cmd, cwd=stage.workdir, env=env, stderr=stderr)
    try:
        deadline = time.monotonic() + 60
        while status(f"http://127.0.0.1:{port}/health") != 200:
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the service did not answer /health with 200")
            time.sleep(0.5)
        ready = status(f"http://127.0.0.1:{port}/ready")
        if ready != 503:
            raise SystemExit(f"/ready answered {ready} with no keys reachable, not 503")
        probe = [a.replace(":8000/", f":{port}/") for a in stage.healthcheck]
        healthy = subprocess.run(probe, capture_output=True, check=False, timeout=30).returncode
        if healthy == 0:
            raise SystemExit("HEALTHCHECK said healthy with no keys reachable")
        log("/health 200, /ready 503 and HEALTHCHECK unhealthy (no keys reachable): OK")
        fetch_failed: list[dict[str, object]] = []
        while not fetch_failed and time.monotonic() < deadline:
            lines = [ln for ln in errors.read_text().splitlines() if ln.startswith("{")]
            fetch_failed = [
                record
                for record in map(json.loads, lines)
                if record.get("jwt_event") == "keys.fetch_failed"
            ]
            time.sleep(0.5)
        if not fetch_failed or fetch_failed[0].get("jwt_source") != jwks_url:
            raise SystemExit(f"no JSON keys.fetch_failed line on stderr:\n{errors.read_text()}")
        pids = {str(record["pid"]) for record in fetch_failed}
        log(f"the key-fetch warning is a JSON line (level, logger, time, pid {sorted(pids)})")
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> int:
    """Static checks, the stage in a temp dir (kept with ``--keep``), then the service."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the stage directories")
    parser.add_argument(
        "--release",
        type=Path,
        default=os.environ.get("RELEASE_TARBALL") or None,
        help="a release tarball (default: a check tarball assembled from the dev build)",
    )
    args = parser.parse_args()
    static_checks(DOCKERFILE.read_text())
    check_builder()
    tarball = args.release.resolve() if args.release else check_tarball()
    overrides = {
        "RELEASE": tarball.name.removesuffix(".tar.gz"),
        "TAG": corewheel.interpreter_tag(sys.executable),
    }
    if not args.release:
        overrides["REQUIRE_PGO"] = "0"
        log("REQUIRE_PGO=0: the check tarball's core is the dev build, not profile-guided")
    work = Path(tempfile.mkdtemp(prefix="grelmicro-dockerfile."))
    try:
        context = build_context(work, tarball)
        final = run_stages(work, context, overrides)
        serve(final, work)
    finally:
        if args.keep:
            log(f"stages kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    log("examples/Dockerfile: installed from the release tarball and served")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
