"""A wheelhouse a service installs grelmicro[jwt] from, with no index, no network, no Rust.

    bash scripts/wheelhouse.sh [--from DIR] [--out DIR] [PYTHON ...]

Into ``dist/wheelhouse/`` (or ``--out``): the grelmicro wheel, the
grelmicro-core wheel of each interpreter, and the wheels of the runtime
dependencies of the release extras (``lock.RELEASE_EXTRAS``) for each of
those interpreters, downloaded with ``--require-hashes`` from the hash lock of
that interpreter (``locks/<tag>.txt``, ``scripts/lock.sh``), plus a PEP 503
simple index beside them (``simple/<name>/index.html``, each link with the
file's SHA-256) and the release's install locks (``requirements-<tag>.txt``,
every extra; ``requirements-<tag>-<set>.txt``, one extra set). Then, in a
fresh virtualenv::

    pip install --no-index --find-links dist/wheelhouse "grelmicro[jwt]"
    pip install --index-url file:///…/dist/wheelhouse/simple "grelmicro[jwt]"
    pip install --require-hashes -r dist/wheelhouse/requirements-cp311-flask.txt

Our two wheels are built by ``scripts/corewheel.py`` (the ``dist/core`` and
``dist/py`` caches: unchanged sources are not rebuilt) for the interpreters
named, by default the dev venv's only (said in the log: each interpreter is
about ten CPU-minutes). It is the quick, local form of ``scripts/release.sh``
(a plain core for this machine's glibc). With ``--from DIR`` the wheels already in DIR (a
release's files, every platform) are used and only a missing package is
built. The dependencies are downloaded for each core wheel's own tags
(``pip download --platform ... --only-binary=:all:``), so a wheelhouse for
macOS or Windows is assembled on Linux. ``grelmicro`` and ``grelmicro-core``
are never asked of an index: another project owns those names on PyPI.
"""

# A build tool: it runs pip and prints what it did.
# ruff: noqa: S603, T201
from __future__ import annotations

import argparse
import hashlib
import html
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import corewheel
import lock

ROOT = corewheel.ROOT
OUT = ROOT / "dist" / "wheelhouse"
DEV_PYTHON = ROOT / ".venv" / "bin" / "python"
LOCKS = ROOT / "locks"
OURS = ("grelmicro", "grelmicro-core")


def _log(message: str) -> None:
    print(f"[wheelhouse] {message}", file=sys.stderr, flush=True)


def normalize(name: str) -> str:
    """The PEP 503 normalized form of a project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(tag: str = "cp311") -> list[str]:
    """The pinned names of ``locks/<tag>.txt``: what is asked of an index (never ours)."""
    text = (LOCKS / f"{tag}.txt").read_text()
    return [
        line.split(" ", 1)[0]
        for line in text.splitlines()
        if "==" in line and not line.startswith((" ", "#", "-"))
    ]


def wheel_tags(wheel: Path) -> tuple[str, str, list[str]]:
    """``(python_tag, abi_tag, platforms)`` from a wheel's file name (PEP 427)."""
    parts = wheel.name.removesuffix(".whl").split("-")
    return parts[-3], parts[-2], parts[-1].split(".")


def compatible_platforms(platform: str) -> list[str]:
    """``platform`` and the older manylinux tags a machine of it also runs (PEP 600).

    pip widens a macOS tag by itself but not a ``manylinux_2_Y`` or
    ``musllinux_1_Y`` one: a ``manylinux_2_34`` core wheel needs the
    ``manylinux_2_17`` wheels of its dependencies too.
    """
    musl = re.fullmatch(r"musllinux_1_(\d+)_(\w+)", platform)
    if musl is not None:
        newest, arch = int(musl.group(1)), musl.group(2)
        return [f"musllinux_1_{minor}_{arch}" for minor in range(newest, -1, -1)]
    match = re.fullmatch(r"manylinux_2_(\d+)_(\w+)", platform)
    if match is None:
        return [platform]
    glibc, arch = int(match.group(1)), match.group(2)
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    found = [f"manylinux_2_{minor}_{arch}" for minor in range(glibc, 4, -1)]
    found += [f"{legacy[minor]}_{arch}" for minor in legacy if minor <= glibc]
    return found


def download_dependencies(core_wheel: Path, out: Path) -> bool:
    """The dependency wheels for the interpreter and platform of ``core_wheel``; False if none."""
    python_tag, abi, tags = wheel_tags(core_wheel)
    platforms = [p for tag in tags for p in compatible_platforms(tag)]
    version = f"{python_tag[2]}.{python_tag[3:]}"
    lock = LOCKS / f"{abi}.txt"
    if not lock.exists():
        _log(f"no hash lock {lock.relative_to(ROOT)} for {abi} (bash scripts/lock.sh writes them)")
        return False
    cmd = [
        str(DEV_PYTHON), "-m", "pip", "download", "-q", "--disable-pip-version-check",
        "--no-deps", "--require-hashes", "--only-binary=:all:", "--implementation", "cp",
        "--python-version", version, "--abi", abi,
        *(arg for platform in platforms for arg in ("--platform", platform)),
        "-d", str(out), "-r", str(lock),
    ]  # fmt: skip
    _log(f"dependencies for {python_tag}-{abi} on {' '.join(tags)}")
    return subprocess.run(cmd, check=False).returncode == 0


def extras_for(tag: str, extra_set: str | None = None) -> list[str]:
    """The extras an install lock asks for: a set's, else every release extra's.

    No ``testing`` on a free-threaded interpreter (no cryptography wheel there).
    """
    extras = list(lock.EXTRA_SETS[extra_set]) if extra_set else lock.extras_present()
    return [e for e in extras if not (tag.endswith("t") and e == "testing")]


def install_lock(
    tag: str, ours: dict[str, list[Path]], out: Path, *, extra_set: str | None = None
) -> Path:
    """``requirements-<tag>[-<set>].txt``: our wheels by hash, then the lock; installs offline.

    Without ``extra_set``: every release extra (``locks/<tag>.txt``); with
    one of ``lock.EXTRA_SETS``: that set's extras only (``locks/<tag>-<set>.txt``,
    the same versions and files).
    """
    extras = ",".join(extras_for(tag, extra_set))
    suffix = f"-{extra_set}" if extra_set else ""
    lines = [
        f"# grelmicro[{extras}] for CPython {tag[2]}.{tag[3:]} on Linux: every file by SHA-256.",
        "# pip install --require-hashes -r THIS_FILE   (no index: the wheels beside this file)",
        "--no-index",
        "--find-links .",
    ]
    for name, files in ours.items():
        version = corewheel.version() if name == "grelmicro" else corewheel.core_version()
        hashes = " ".join(f"--hash=sha256:{sha256(f)}" for f in files)
        spec = f"grelmicro[{extras}]" if name == "grelmicro" else name
        lines.append(f"{spec}=={version} {hashes}")
    body = (LOCKS / f"{tag}{suffix}.txt").read_text()
    path = out / f"requirements-{tag}{suffix}.txt"
    path.write_text("\n".join(lines) + "\n" + body)
    return path


def sha256(path: Path) -> str:
    """The SHA-256 of a file, hex."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def install_locks(out: Path) -> list[Path]:
    """Every install lock for the wheels in ``out`` (per interpreter: all extras, each set)."""
    [main] = sorted(out.glob("grelmicro-*.whl"))
    cores: dict[str, list[Path]] = {}
    for core in sorted(out.glob("grelmicro_core-*.whl")):
        cores.setdefault(wheel_tags(core)[1], []).append(core)
    return [
        install_lock(tag, {"grelmicro": [main], "grelmicro-core": wheels}, out, extra_set=extra)
        for tag, wheels in cores.items()
        for extra in (None, *lock.EXTRA_SETS)
    ]


def write_index(out: Path) -> Path:
    """A PEP 503 simple index of the wheels in ``out``, at ``out/simple``; its path."""
    simple = out / "simple"
    shutil.rmtree(simple, ignore_errors=True)
    simple.mkdir()
    projects: dict[str, list[Path]] = {}
    for wheel in sorted(out.glob("*.whl")):
        projects.setdefault(normalize(wheel.name.split("-", 1)[0]), []).append(wheel)
    for name, wheels in projects.items():
        page = simple / name
        page.mkdir(parents=True)
        links = "".join(
            f'<a href="../../{html.escape(w.name)}#sha256='
            f'{hashlib.sha256(w.read_bytes()).hexdigest()}">{html.escape(w.name)}</a><br>\n'
            for w in wheels
        )
        (page / "index.html").write_text(
            f"<!DOCTYPE html>\n<html><body>\n<h1>Links for {name}</h1>\n{links}</body></html>\n"
        )
    listing = "".join(f'<a href="{name}/">{name}</a><br>\n' for name in sorted(projects))
    (simple / "index.html").write_text(f"<!DOCTYPE html>\n<html><body>\n{listing}</body></html>\n")
    return simple


def our_wheels(pythons: Sequence[str | Path], given: Path | None) -> list[Path]:
    """Our wheels: those in ``given`` (a release's files), the missing package built here."""
    found = sorted(given.glob("grelmicro*.whl")) if given else []
    cores = [w for w in found if w.name.startswith("grelmicro_core-")]
    mains = [w for w in found if w.name.startswith("grelmicro-")]
    if not mains:
        mains = [corewheel.build_grelmicro_dists(DEV_PYTHON, log=_log)]
    if not cores:
        cores = [corewheel.build_core_wheel(python, log=_log) for python in pythons]
    return mains + cores


def default_pythons() -> list[str]:
    """The dev venv's interpreter only, said in the log (never every CPython found)."""
    _log(
        f"no interpreter named: the core for {DEV_PYTHON} only (about ten CPU-minutes "
        "per interpreter); name others to add them: bash scripts/wheelhouse.sh PYTHON ..."
    )
    return [str(DEV_PYTHON)]


def main(argv: Sequence[str] | None = None) -> int:
    """Build (or gather) the wheels, download the dependencies, write the index."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pythons", nargs="*", help="interpreters to build the core for")
    parser.add_argument("--from", dest="given", type=Path, help="use the wheels in this dir")
    parser.add_argument("--out", type=Path, default=OUT, help=f"default {OUT}")
    parser.add_argument(
        "--skip-unavailable",
        action="store_true",
        help="leave out a core wheel whose dependencies have no wheels (logged), not fail",
    )
    args = parser.parse_args(argv)
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    pythons = args.pythons or ([] if args.given else default_pythons())
    ours = our_wheels(pythons, args.given)
    # Our files are replaced; downloaded dependencies stay (pip skips those present).
    for stale in out.glob("grelmicro*.whl"):
        stale.unlink()
    for wheel in ours:
        shutil.copy2(wheel, out / wheel.name)
    for core in sorted(out.glob("grelmicro_core-*.whl")):
        if download_dependencies(core, out):
            continue
        if not args.skip_unavailable:
            raise SystemExit(f"no dependency wheels for {core.name} (see pip's message)")
        _log(f"LEFT OUT {core.name}: its dependencies have no wheels for that platform")
        core.unlink()
    simple = write_index(out)
    for stale in out.glob("requirements-*.txt"):
        stale.unlink()
    locks = install_locks(out)
    _log(f"{len(list(out.glob('*.whl')))} wheels in {out}, index {simple}, {len(locks)} locks")
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
