"""Build the grelmicro-core wheel for one interpreter: the one place that does it.

    python scripts/corewheel.py PYTHON [--install] [--bench | --test-hooks] [--pgo] [--platform P]

It prints the wheel's path.

Imported by ``noxfile.py`` and ``bench/run.py``, run by ``scripts/setup.sh``;
standard library only (Python 3.11+, for ``tomllib``).

A wheel is built with maturin into ``dist/core/<tag>[-<features>][-sdist]/``
from this tree (or from the unpacked core sdist) and reused as long as the
inputs of the build are unchanged: a stamp beside it records their digest, so
a full test run builds each interpreter's wheel once.

``--test-hooks`` adds the cargo feature of the hooks only the test suite
reads (``TokenCache._entry``, ...): the dev venv and the test sessions ask
for it, a release never does (the workflows build the default features),
and a profile-guided build refuses it.

``--pgo`` makes a profile-guided build, the one the benchmarks measure and a
release ships: an instrumented wheel is built, runs ``scripts/pgo_train.py``
(a service's mix of full verifications, cache hits and refusals) with that
interpreter, and the counts it leaves steer the final build (which code is
hot, inlined and packed together). It needs rustup's ``llvm-tools``
component (``bash scripts/prereqs.sh llvm-tools``); without it the wheel is
built as usual and says so (``grelmicro_core.PGO == "off"``). Installing never
consults a package index (``--no-index``: another project owns the names
``grelmicro`` and ``grelmicro-core`` on PyPI). Versions are read from the
packages' metadata (``pyproject.toml``, ``Cargo.toml``), never written here.
"""

# A build tool: it runs the interpreters and maturin it is given, and prints.
# ruff: noqa: S603, T201
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import core_source
import tomllib

ROOT = Path(__file__).resolve().parent.parent

CORE = ROOT / "grelmicro-core"
DIST = ROOT / "dist"
# One cargo target directory for every core build (tree and sdist, every
# interpreter): the dependencies (aws-lc) are compiled once.
TARGET = CORE / "target"
# The feature the benchmark's own build asks for when the core declares it.
BENCH_FEATURE = "bench-hooks"
# The feature of the hooks only the test suite reads (never in a shipped wheel).
TEST_FEATURE = "test-hooks"
# The workload a profile-guided build is trained on.
PGO_TRAINER = ROOT / "scripts" / "pgo_train.py"
#: A folder of published profiles (``<key>.profdata`` and ``<key>.json``) to
#: build with instead of training: a release's ``pgo/`` (scripts/release.py).
PROFILES_ENV = "GRELMICRO_PGO_PROFILES"

Log = Callable[[str], None]


def _log(message: str) -> None:
    print(f"[corewheel] {message}", file=sys.stderr, flush=True)


def read_toml(path: Path) -> dict[str, Any]:
    """The parsed TOML file at ``path``."""
    with path.open("rb") as handle:
        return tomllib.load(handle)


def core_version() -> str:
    """The grelmicro-core version (local label included), from its pyproject.toml."""
    return str(read_toml(CORE / "pyproject.toml")["project"]["version"])


def version() -> str:
    """The grelmicro version (local label included), from the top pyproject.toml."""
    return str(read_toml(ROOT / "pyproject.toml")["project"]["version"])


def requirement_name(spec: str) -> str:
    """``"pydantic>=2.7"`` -> ``"pydantic"`` (the distribution name of a requirement)."""
    return re.split(r"[\s\[<>=!~;]", spec, maxsplit=1)[0].lower()


def runtime_requirements() -> list[str]:
    """The jwt extra's dependencies from pyproject.toml, grelmicro-core aside (it is ours)."""
    extra = read_toml(ROOT / "pyproject.toml")["project"]["optional-dependencies"]["jwt"]
    return [str(spec) for spec in extra if requirement_name(str(spec)) != "grelmicro-core"]


def declared_features(manifest_dir: Path = CORE) -> set[str]:
    """The cargo features ``Cargo.toml`` declares."""
    return set(read_toml(manifest_dir / "Cargo.toml").get("features", {}))


def bench_features() -> tuple[str, ...]:
    """``("bench-hooks",)`` when the core declares that feature, else nothing."""
    return (BENCH_FEATURE,) if BENCH_FEATURE in declared_features() else ()


def test_features() -> tuple[str, ...]:
    """``("test-hooks",)`` when the core declares that feature, else nothing."""
    return (TEST_FEATURE,) if TEST_FEATURE in declared_features() else ()


def fuzz_targets() -> list[str]:
    """Every cargo-fuzz target (``[[bin]]`` name) of ``grelmicro-core/fuzz``."""
    bins = read_toml(CORE / "fuzz" / "Cargo.toml").get("bin", [])
    names = [str(entry["name"]) for entry in bins]
    if not names:
        raise SystemExit("grelmicro-core/fuzz/Cargo.toml declares no [[bin]] target")
    return names


def source_hash(src: Path = CORE / "src") -> str:
    """The core's ``SOURCE_HASH`` for ``src``, as build.rs computes it (core_source.py)."""
    return core_source.source_hash(src)


def _files(base: Path, entries: Iterable[str]) -> list[Path]:
    found: list[Path] = []
    for entry in entries:
        path = base / entry
        if path.is_dir():
            found += (p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        elif path.is_file():
            found.append(path)
    return sorted(found)


def digest(base: Path, entries: Iterable[str], *extra: str) -> str:
    """SHA-256 over the named files and directories under ``base`` (names and bytes)."""
    h = hashlib.sha256()
    for path in _files(base, entries):
        h.update(path.relative_to(base).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    for item in extra:
        h.update(item.encode() + b"\0")
    return h.hexdigest()


# What a core build reads (the sdist carries the same set).
CORE_INPUTS = ("src", "python", "build.rs", "Cargo.toml", "Cargo.lock", "pyproject.toml")
# What the grelmicro sdist and wheel are made of.
PY_INPUTS = ("grelmicro", "pyproject.toml", "README.md", "LICENSE")


def interpreter_tag(python: str | Path) -> str:
    """``cp311``, ``cp313t``, ...: the wheel tag of an interpreter."""
    probe = (
        "import sys, sysconfig; t = 't' if sysconfig.get_config_var('Py_GIL_DISABLED') else ''; "
        "print(f'cp{sys.version_info[0]}{sys.version_info[1]}{t}')"
    )
    return subprocess.run(
        [str(python), "-c", probe], check=True, capture_output=True, text=True
    ).stdout.strip()


def interpreter_version(python: str | Path) -> str:
    """``3.11``, ``3.13t``, ...: the version of an interpreter as maturin names it."""
    tag = interpreter_tag(python)
    return f"{tag[2]}.{tag[3:]}"


#: The supported CPythons besides the dev venv's 3.11 (3.13t: the free-threaded build).
OTHER_INTERPRETERS = ("3.10", "3.12", "3.13", "3.14")


def find_python(version: str) -> Path | None:
    """CPython ``version`` from pyenv, /opt/python<version> or PATH."""
    candidates = sorted(Path.home().glob(f".pyenv/versions/{version}.*/bin/python{version}"))
    candidates.append(Path(f"/opt/python{version}/bin/python{version}"))
    found = shutil.which(f"python{version}")
    if found:
        candidates.append(Path(found))
    return next((c for c in candidates if os.access(c, os.X_OK)), None)


def find_maturin() -> str:
    """Maturin beside the running interpreter, else the dev venv's, else PATH."""
    for candidate in (Path(sys.executable).parent / "maturin", ROOT / ".venv" / "bin" / "maturin"):
        if candidate.exists():
            return str(candidate)
    found = shutil.which("maturin")
    if found is None:
        raise SystemExit("maturin not found: run scripts/setup.sh (it installs the build tools)")
    return found


def _run(cmd: Sequence[str | Path], log: Log, **kwargs: object) -> None:
    log("$ " + " ".join(str(part) for part in cmd))
    subprocess.run([str(part) for part in cmd], check=True, **kwargs)  # type: ignore[call-overload]


def _only_wheel(out: Path) -> Path | None:
    wheels = sorted(out.glob("grelmicro_core-*.whl"))
    return wheels[0] if len(wheels) == 1 else None


#: The portable platforms a release ships (``--platform``), built with maturin's
#: zig support (``ziglang``, scripts/release.sh): ``COMPAT-ARCH`` -> ``(triple, compat)``.
PLATFORMS = {
    f"{compat}-{arch}": (f"{arch}-unknown-linux-{libc}", compat)
    for compat, libc in (("manylinux2014", "gnu"), ("musllinux_1_2", "musl"))
    for arch in ("x86_64", "aarch64")
}


def _maturin(
    python: str | Path,
    source: Path,
    features: Sequence[str],
    out: Path,
    log: Log,
    *,
    rustflags: str = "",
    target: Path = TARGET,
    platform: str = "",
    pgo_named: bool = False,
) -> Path:
    """``maturin build --release`` into ``out`` (emptied first); the one wheel made.

    A build with the test hooks uses the ``hooks`` profile instead (release
    code generation without fat LTO; see ``grelmicro-core/Cargo.toml``).

    With ``platform`` (a key of ``PLATFORMS``) the wheel is linked by zig for
    that target and tagged for it (manylinux2014 = glibc 2.17, musllinux_1_2).
    With ``pgo_named`` (and no platform) it is this machine's own build, linked
    by the system linker, with the target and the cargo settings a zig build
    has (``ZIG_CARGO_SETTINGS``): a profile is keyed by symbol names, which
    carry cargo's hash of those settings (see ``pgo_profile``).
    """
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, CARGO_TARGET_DIR=str(target))
    if platform:
        triple, compat = PLATFORMS[platform]
        # A cross target gets maturin's bundled sysconfig for the version (a
        # path would make it ask the host's interpreter, a glibc one).
        interpreter: str | Path = f"python{interpreter_version(python)}"
        zig = ["--zig", "--target", triple, "--compatibility", compat]
    elif pgo_named:
        interpreter, zig = python, ["--target", host_triple()]
        env.update(ZIG_CARGO_SETTINGS)
    else:
        interpreter, zig = python, []
    # A build with the test hooks never ships: Cargo.toml's quicker `hooks` profile.
    profile = ["--profile", "hooks"] if TEST_FEATURE in features else ["--release"]
    cmd: list[str | Path] = [
        find_maturin(), "build", *profile, "-q",
        "-m", source / "Cargo.toml", "-i", interpreter, "-o", out, *zig,
    ]  # fmt: skip
    if features:
        cmd += ["--features", ",".join(features)]
    if rustflags:
        env["RUSTFLAGS"] = " ".join(filter(None, (os.environ.get("RUSTFLAGS", ""), rustflags)))
    # From the checkout, whatever the caller's directory: rustup reads the
    # pinned toolchain from rust-toolchain.toml there; cargo keeps Cargo.lock as is.
    _run([*cmd, "--locked"], log, env=env, cwd=ROOT)
    wheel = _only_wheel(out)
    if wheel is None:
        raise SystemExit(f"maturin left no single grelmicro-core wheel in {out}")
    return wheel


#: What maturin's zig support (cargo-zigbuild) sets for every cargo run it makes,
#: besides the compilers and the linker: host units (build scripts, proc
#: macros) built apart from the target's, a cargo setting that needs its
#: unstable gate opened. Cargo hashes it into every crate's metadata, and the
#: metadata into every symbol name: a profile-guided build (instrumented, then
#: the final wheels, native and zig-linked) sets the same, or the profile is
#: keyed by names the zig-linked build does not have and applies to nothing.
ZIG_CARGO_SETTINGS = {
    "CARGO_TARGET_APPLIES_TO_HOST": "false",
    "CARGO_UNSTABLE_TARGET_APPLIES_TO_HOST": "true",
    "__CARGO_TEST_CHANNEL_OVERRIDE_DO_NOT_USE_THIS": "nightly",
}


# Stands in for cargo on maturin's PATH: passes every call through to the real
# cargo but the build's (`cargo rustc`), whose environment it writes out instead.
_CARGO_SPY = """#!/bin/sh
for arg in "$@"; do
    if [ "$arg" = rustc ]; then
        env -0 >"$SPY_OUT"
        exit 3
    fi
done
exec "$SPY_CARGO" "$@"
"""


def zig_cargo_settings(work: Path, log: Log = _log) -> dict[str, str]:
    """What maturin's zig mode sets of ``ZIG_CARGO_SETTINGS`` for this machine's target.

    Maturin is run as a zig build would be, with a stand-in for cargo that
    stops it at the compilation (nothing is built): a few seconds.
    """
    cargo = shutil.which("cargo")
    if cargo is None:
        raise SystemExit("no cargo on PATH: bash scripts/prereqs.sh release")
    shutil.rmtree(work, ignore_errors=True)
    spy = work / "bin"
    spy.mkdir(parents=True)
    (spy / "cargo").write_text(_CARGO_SPY)
    (spy / "cargo").chmod(0o755)
    seen = work / "env"
    env = dict(
        os.environ,
        PATH=os.pathsep.join((str(spy), os.environ.get("PATH", ""))),
        SPY_CARGO=cargo,
        SPY_OUT=str(seen),
        CARGO_TARGET_DIR=str(work / "target"),
    )
    cmd = [
        find_maturin(), "build", "--release", "-q", "-m", CORE / "Cargo.toml",
        "-i", f"python{sys.version_info[0]}.{sys.version_info[1]}", "-o", work / "out",
        "--zig", "--target", host_triple(), "--compatibility", "manylinux2014", "--locked",
    ]  # fmt: skip
    log("$ " + " ".join(str(part) for part in cmd) + "  (cargo stopped before compiling)")
    subprocess.run([str(part) for part in cmd], env=env, cwd=ROOT, capture_output=True, check=False)
    if not seen.exists():
        raise SystemExit("maturin --zig never reached `cargo rustc`: cannot read its settings")
    found = dict(item.split("=", 1) for item in seen.read_text().split("\0") if "=" in item)
    return {name: found[name] for name in ZIG_CARGO_SETTINGS if name in found}


def host_triple() -> str:
    """This machine's Rust target triple (``rustc -vV`` of the pinned toolchain)."""
    shown = subprocess.run(
        ["rustc", "-vV"],  # noqa: S607 (rustup's rustc: the toolchain of rust-toolchain.toml)
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout
    return next(
        line.split(":", 1)[1].strip() for line in shown.splitlines() if line.startswith("host:")
    )


def llvm_profdata(log: Log = _log) -> Path | None:
    """The ``llvm-profdata`` of the active Rust toolchain (rustup's ``llvm-tools``).

    None when it is not installed (``scripts/prereqs.sh llvm-tools`` adds it;
    nothing here changes the machine). Its LLVM must be rustc's own: another
    one may not read the counts rustc writes.
    """
    rustc = shutil.which("rustc")
    if rustc is None:
        return None

    def locate() -> Path:
        def ask(*args: str) -> str:
            return subprocess.run(
                [rustc, *args], check=True, capture_output=True, text=True, cwd=ROOT
            ).stdout

        host = next(
            line.split(":", 1)[1].strip()
            for line in ask("-vV").splitlines()
            if line.startswith("host:")
        )
        sysroot = Path(ask("--print", "sysroot").strip())
        return sysroot / "lib" / "rustlib" / host / "bin" / "llvm-profdata"

    tool = locate()
    if not tool.exists():
        log("no llvm-profdata: `bash scripts/prereqs.sh llvm-tools` adds rustup's llvm-tools")
        return None
    return tool


def can_train(python: str | Path) -> bool:
    """Whether ``python`` has the jwt extra's dependencies, which the PGO training imports.

    Asked of the installed distributions, not by importing ``grelmicro.jwt``:
    a fresh environment has no core yet to import it with.
    """
    needs = [requirement_name(spec) for spec in runtime_requirements()]
    probe = "import importlib.metadata as m, sys\nfor name in sys.argv[1:]: m.distribution(name)"
    found = subprocess.run([str(python), "-c", probe, *needs], capture_output=True, check=False)
    return found.returncode == 0


def pgo_profile(
    python: str | Path, source: Path, features: Sequence[str], work: Path, log: Log
) -> Path | None:
    """The merged profile of ``scripts/pgo_train.py`` run on an instrumented build.

    None (and a log line) when no ``llvm-profdata`` can be had. The training
    runs ``python`` with the instrumented core first on its path and this
    tree's ``grelmicro``: that interpreter needs the jwt extra's dependencies
    (and ``cryptography`` to train the asymmetric algorithms).
    """
    profdata = llvm_profdata(log)
    if profdata is None:
        log("no llvm-profdata for this Rust toolchain: building without PGO")
        return None
    shutil.rmtree(work, ignore_errors=True)
    counts = work / "counts"
    counts.mkdir(parents=True)
    log("PGO 1/3: the instrumented wheel")
    wheel = _maturin(
        python,
        source,
        features,
        work / "wheel",
        log,
        rustflags=f"-Cprofile-generate={counts}",
        target=TARGET / "pgo-instrumented",
        pgo_named=True,
    )
    site = work / "site"
    _run(
        [python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", site, wheel],
        log,
    )
    log("PGO 2/3: training (scripts/pgo_train.py)")
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, (str(site), os.environ.get("PYTHONPATH")))),
        LLVM_PROFILE_FILE=str(counts / "train-%p-%m.profraw"),
    )
    # Run from "/" (nothing in the working directory shadows the install), so a
    # relative interpreter path is made absolute first (not resolved: a venv's
    # python is a symlink that must stay one).
    trainer_python = Path.cwd() / python if os.sep in str(python) else python
    _run([trainer_python, PGO_TRAINER], log, env=env, cwd="/")
    raw = sorted(counts.glob("train-*.profraw"))
    if not raw:
        raise SystemExit(f"PGO training left no counts in {counts}")
    merged = work / "merged.profdata"
    _run([profdata, "merge", "-o", merged, *raw], log)
    return merged


def given_profile(folder: Path, key: str, want: str, work: Path, log: Log) -> Path:
    """The profile of ``key`` published in ``folder`` (a release's ``pgo/``), used as it is.

    Two trainings never count alike (threads, the collector, random keys
    and hash seeds), so two builds that each train differ in their
    profile-guided core; two builds given the same profile do not. The
    profile must have been trained on these very sources (its ``.json`` is
    the stamp the training wrote): another commit's is refused, never half
    applied.
    """
    profile, stamp = folder / f"{key}.profdata", folder / f"{key}.json"
    if not profile.is_file() or not stamp.is_file():
        raise SystemExit(f"{PROFILES_ENV}={folder}: no {profile.name} with its {stamp.name}")
    if stamp.read_text() != want:
        raise SystemExit(
            f"{PROFILES_ENV}={folder}: {profile.name} was trained on other sources or "
            "settings than this checkout's (build the commit it was published with)"
        )
    work.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(profile, work / "merged.profdata")
    (work / ".stamp").write_text(want)
    log(f"PGO 1-2/3: the profile of {key} given in {folder} (no training)")
    return work / "merged.profdata"


def published_profile(key: str) -> tuple[Path, Path]:
    """The profile of ``key`` this checkout built with, and its stamp: what a release publishes."""
    work = DIST / "pgo" / key
    return work / "merged.profdata", work / ".stamp"


def _profile(
    python: str | Path, source: Path, *, features: Sequence[str], key: str, inputs: str, log: Log
) -> Path | None:
    """The PGO profile of ``key``: trained once per change, shared by every platform's build."""
    work = DIST / "pgo" / key
    profile = work / "merged.profdata"
    stamp = work / ".stamp"
    want = json.dumps({"inputs": inputs, "features": sorted(features), "source": key})
    given = os.environ.get(PROFILES_ENV)
    if given:
        return given_profile(Path(given), key, want, work, log)
    if profile.exists() and stamp.exists() and stamp.read_text() == want:
        log(f"PGO 1-2/3: the profile of {key} is up to date, {profile.relative_to(ROOT)}")
        return profile
    found = pgo_profile(python, source, features, work, log)
    if found is not None:
        stamp.write_text(want)
    return found


def _epoch() -> str:
    """``SOURCE_DATE_EPOCH`` (the clock of every archive a build writes), empty when unset."""
    return os.environ.get("SOURCE_DATE_EPOCH", "")


def build_core_wheel(
    python: str | Path,
    *,
    source: Path = CORE,
    features: Sequence[str] = (),
    pgo: bool = False,
    platform: str = "",
    log: Log = _log,
) -> Path:
    """The grelmicro-core wheel for ``python``, built from ``source`` unless up to date.

    ``source`` is this tree's ``grelmicro-core`` or an unpacked core sdist;
    ``features`` are cargo features added to the default ones; ``pgo`` asks
    for a profile-guided build (see the module documentation), which an
    interpreter without the jwt extra's dependencies (the training imports
    ``grelmicro.jwt``) gets as a plain build, said in the log. ``platform``
    (a key of ``PLATFORMS``) links with zig for that portable target; the
    profile is trained once per interpreter on this machine's own build and
    used by every platform's (the Rust code is the same; musl wheels cannot
    be loaded by this machine's glibc interpreter to train them).
    A profile-guided build is the shipped kind: it never has the test hooks.
    """
    if pgo and TEST_FEATURE in features:
        raise SystemExit(f"a profile-guided build is what ships: never with {TEST_FEATURE}")
    if pgo and not can_train(python):
        log(f"{python}: no jwt extra dependencies to train with: a plain build, not PGO")
        pgo = False
    tag = interpreter_tag(python)
    key = tag + "".join(f"-{feature}" for feature in sorted(features))
    if source.resolve() != CORE.resolve():
        key += "-sdist"
    if pgo:
        key += "-pgo"
    pgo_key = key
    if platform:
        key += f"-{platform}"
    out = DIST / "core" / key
    stamp = out / ".stamp"
    inputs = digest(source, CORE_INPUTS)
    if pgo:
        # The settings the symbol names depend on: a change retrains.
        settings = json.dumps(ZIG_CARGO_SETTINGS, sort_keys=True)
        inputs = digest(ROOT, ["scripts/pgo_train.py", "scripts/jws.py"], inputs, settings)
    # The archive's times come from SOURCE_DATE_EPOCH (a release sets it): a
    # wheel made under another clock is not reused.
    want = json.dumps(
        {"inputs": inputs, "features": sorted(features), "source": key, "epoch": _epoch()}
    )
    wheel = _only_wheel(out)
    if wheel is not None and stamp.exists() and stamp.read_text() == want:
        log(f"{key}: up to date, {wheel.relative_to(ROOT)}")
        return wheel
    log(f"{key}: building the grelmicro-core wheel from {source}")
    profile = (
        _profile(python, source, features=features, key=pgo_key, inputs=inputs, log=log)
        if pgo
        else None
    )
    if profile is None:
        wheel = _maturin(python, source, features, out, log, platform=platform)
    else:
        log("PGO 3/3: the wheel built with the profile")
        wheel = _maturin(
            python,
            source,
            features,
            out,
            log,
            rustflags=f"-Cprofile-use={profile}",
            target=TARGET / "pgo-trained",
            platform=platform,
            pgo_named=True,
        )
    if not pgo or profile is not None:  # a PGO build that fell back is retried next time
        stamp.write_text(want)
    return wheel


def _stamped(out: Path, want: str, pattern: str) -> list[Path] | None:
    """The files matching ``pattern`` in ``out`` when its stamp says ``want``."""
    found = sorted(out.glob(pattern))
    stamp = out / ".stamp"
    return found if found and stamp.exists() and stamp.read_text() == want else None


def build_core_sdist(*, log: Log = _log) -> Path:
    """The core sdist built from this tree (once per change), unpacked: a build source."""
    out = DIST / "sdist"
    want = digest(CORE, CORE_INPUTS)
    found = _stamped(out, want, "grelmicro_core-*.tar.gz")
    if found is None:
        shutil.rmtree(out, ignore_errors=True)
        _run([find_maturin(), "sdist", "-m", CORE / "Cargo.toml", "-o", out], log)
        found = sorted(out.glob("grelmicro_core-*.tar.gz"))
        if len(found) != 1:
            raise SystemExit(f"maturin sdist left {len(found)} core sdists in {out}")
        _run(["tar", "-xzf", found[0], "-C", out], log)
        (out / ".stamp").write_text(want)
    else:
        log(f"core sdist up to date: {found[0].relative_to(ROOT)}")
    unpacked = [path for path in out.iterdir() if path.is_dir()]
    if len(unpacked) != 1 or not (unpacked[0] / "Cargo.toml").exists():
        raise SystemExit(f"no single unpacked core sdist in {out}")
    return unpacked[0]


def build_grelmicro_dists(python: str | Path, *, log: Log = _log) -> Path:
    """The grelmicro sdist and its wheel (built from the sdist), once per change; the wheel."""
    out = DIST / "py"
    want = digest(ROOT, PY_INPUTS, _epoch())
    found = _stamped(out, want, "grelmicro-*.whl")
    if found is None:
        shutil.rmtree(out, ignore_errors=True)
        log("building the grelmicro sdist, then its wheel from the sdist")
        # No isolation: hatchling comes from the caller's hashed lock, not an index.
        _run([python, "-m", "build", "-q", "--no-isolation", "-o", out, ROOT], log)
        found = sorted(out.glob("grelmicro-*.whl"))
        if len(found) != 1 or not list(out.glob("grelmicro-*.tar.gz")):
            raise SystemExit(f"python -m build left no single grelmicro wheel and sdist in {out}")
        (out / ".stamp").write_text(want)
    else:
        log(f"grelmicro wheel up to date: {found[0].relative_to(ROOT)}")
    return found[0]


def _prefix(python: str | Path) -> Path:
    return Path(
        subprocess.run(
            [str(python), "-c", "import sys; print(sys.prefix)"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )


def install_core(python: str | Path, wheel: Path, *, log: Log = _log) -> None:
    """Install ``wheel`` into ``python``'s environment (no index, no dependencies).

    Skipped when that very wheel (by SHA-256) is already installed there.
    """
    marker = _prefix(python) / ".grelmicro-core-wheel"
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    probe = subprocess.run(
        [str(python), "-c", "import grelmicro_core"], capture_output=True, cwd="/", check=False
    )
    if probe.returncode == 0 and marker.exists() and marker.read_text() == sha:
        log(f"{wheel.name} already installed in {marker.parent}")
        return
    pip = [python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--force-reinstall"]
    _run([*pip, wheel], log)
    marker.write_text(sha)


def check_installed(python: str | Path, *, wheels_only: bool = False) -> str:
    """Fail unless ``python`` imports this tree's grelmicro-core (version, source hash).

    With ``wheels_only``, grelmicro must import too, at this tree's version, and
    both from that interpreter's own environment (installed wheels, not this
    tree). Run from ``/``, so the working directory cannot shadow anything.
    """
    probe = (
        "import sys, importlib, importlib.metadata as md\n"
        "wheels_only = sys.argv[1] == '1'\n"
        "for name in ('grelmicro_core', 'grelmicro.jwt') if wheels_only else ('grelmicro_core',):\n"
        "    where = importlib.import_module(name).__file__ or ''\n"
        "    if wheels_only and not where.startswith(sys.prefix):\n"
        "        sys.exit(f'{name} imported from {where}, outside {sys.prefix}')\n"
        "import grelmicro_core\n"
        "print(md.version('grelmicro-core'), grelmicro_core.SOURCE_HASH,\n"
        "      md.version('grelmicro') if wheels_only else '-', sys.prefix)\n"
    )
    flag = "1" if wheels_only else "0"
    res = subprocess.run(
        [str(python), "-c", probe, flag], check=False, capture_output=True, text=True, cwd="/"
    )
    if res.returncode:
        raise SystemExit(f"{python}: {(res.stderr.strip().splitlines() or ['failed'])[-1]}")
    got = res.stdout.split()
    want = [core_version(), source_hash(), version() if wheels_only else "-"]
    if got[:3] != want:
        raise SystemExit(f"installed {got[:3]} is not this tree's {want}")
    ours = f"grelmicro {got[2]} and " if wheels_only else ""
    return f"{ours}grelmicro-core {got[0]} (source {got[1]}) in {got[3]}"


def main(argv: Sequence[str] | None = None) -> int:
    """Build (and with ``--install`` install) the wheel for one interpreter; print its path."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("python", help="the interpreter to build for")
    parser.add_argument("--install", action="store_true", help="install it into that interpreter")
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--bench", action="store_true", help=f"with {BENCH_FEATURE} if declared")
    kind.add_argument(
        "--test-hooks", action="store_true", help=f"with {TEST_FEATURE} (for the test suite)"
    )
    parser.add_argument("--pgo", action="store_true", help="a profile-guided build")
    parser.add_argument(
        "--platform", default="", choices=sorted(PLATFORMS), help="a portable target (zig)"
    )
    args = parser.parse_args(argv)
    features = bench_features() if args.bench else test_features() if args.test_hooks else ()
    wheel = build_core_wheel(
        args.python,
        features=features,
        pgo=args.pgo,
        platform=args.platform,
    )
    if args.install:
        install_core(args.python, wheel)
        _log(check_installed(args.python))
    print(wheel)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
