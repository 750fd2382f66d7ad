"""The hash locks: what a release installs, per supported Python, and the release's own tools.

    bash scripts/lock.sh            # rewrite locks/*.txt (uv pip compile --generate-hashes)
    bash scripts/lock.sh --check    # fail when a lock is stale (the unit tests run this, seconds)

``locks/runtime.in`` is written from ``pyproject.toml``: every runtime
dependency of the extras a release carries (``RELEASE_EXTRAS``; ``redis`` too
when the pyproject declares it), ours left out, constrained to the versions
``scripts/requirements-dev.txt`` tests. It is locked once per supported
Python (``locks/cp310.txt`` ... ``locks/cp313t.txt``) for Linux, every
distribution pinned with the SHA-256 of each of its files: the wheelhouse
downloads them with ``--require-hashes``. Each extra set of ``EXTRA_SETS``
(what one kind of service installs: ``flask``, ``django``, ``fastapi``,
``jwt``) is locked per Python too (``locks/cp312-flask.txt``), within that
Python's whole lock (``-c locks/<tag>.txt``): the same versions, the same
files, so one wheelhouse serves every set, and a Flask service installs no
FastAPI, Starlette, Redis or OpenTelemetry. ``locks/tools.txt`` locks
``locks/tools.in``, the tools ``scripts/release.sh`` installs (maturin, zig,
auditwheel, cyclonedx-bom, uv) with ``--require-hashes``.

Resolving asks PyPI for third-party names only: ``grelmicro`` and
``grelmicro-core`` are never in a ``.in`` file (another project owns them there).
"""

# A build tool: it runs uv and prints what it did.
# ruff: noqa: S603, T201
from __future__ import annotations

import argparse
import difflib
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import corewheel

ROOT = corewheel.ROOT
LOCKS = ROOT / "locks"
DEV_REQS = ROOT / "scripts" / "requirements-dev.txt"
#: The dev venv's lock (pip, hatchling, requirements-dev.txt), for every Python.
DEV_IN = LOCKS / "dev.in"
#: The documentation tools (prereqs.sh docs installs their lock into the dev venv).
DOCS_REQS = ROOT / "docs" / "requirements.txt"
DOCS_PYTHON = "3.11.7"
OURS = ("grelmicro", "grelmicro-core")
#: The extras whose runtime dependencies a release carries (``redis`` only if declared).
RELEASE_EXTRAS = ("jwt", "fastapi", "otel", "testing", "redis", "flask", "django", "drf")
#: The extra sets a release locks on their own, per Python: name -> extras.
#: ``requirements-<tag>-<name>.txt`` installs ``grelmicro[<extras>]`` and only
#: what they need; ``requirements-<tag>.txt`` stays every release extra.
EXTRA_SETS = {
    "jwt": ("jwt",),  # the verifier alone: grelmicro.jwt.wsgi, grelmicro.jwt.asgi
    "flask": ("jwt", "flask"),
    "django": ("jwt", "django", "drf"),
    "fastapi": ("jwt", "fastapi"),
}
#: What a set's lock never pins (FastAPI itself requires opentelemetry-api).
_FOREIGN = ("fastapi", "starlette", "redis", "opentelemetry-api", "cryptography")
SET_NEVER = {
    "jwt": (*_FOREIGN, "flask", "django"),
    "flask": (*_FOREIGN, "django", "djangorestframework"),
    "django": (*_FOREIGN, "flask", "werkzeug"),
    "fastapi": ("redis", "cryptography", "flask", "django"),
}
#: Interpreter tag -> (python version, free-threaded).
PYTHONS = {
    "cp310": "3.10",
    "cp311": "3.11",
    "cp312": "3.12",
    "cp313": "3.13",
    "cp313t": "3.13",
}
#: On free-threaded 3.13: the last pydantic whose core builds there (as noxfile.py),
#: and no cryptography (no wheel for it): the testing extra's asymmetric keys are
#: not offered there (HMAC test tokens need nothing more).
FT_OVERRIDES = ("pydantic<2.12",)
FT_LEFT_OUT = ("cryptography",)
PLATFORM = "x86_64-manylinux_2_17"
#: The example service's own needs (uvicorn), for the image's Python, kept to
#: the versions of that interpreter's release lock.
SERVICE_IN = ROOT / "examples" / "requirements.in"
SERVICE_LOCK = ROOT / "examples" / "requirements.txt"
SERVICE_TAG, SERVICE_PYTHON = "cp312", "3.12"
HEADER = "# Written by scripts/lock.sh from {source}: do not edit (bash scripts/lock.sh).\n"


def extras_present() -> list[str]:
    """The release extras the pyproject declares, in ``RELEASE_EXTRAS`` order."""
    declared = corewheel.read_toml(ROOT / "pyproject.toml")["project"]["optional-dependencies"]
    return [extra for extra in RELEASE_EXTRAS if extra in declared]


def runtime_requirements(extras: Sequence[str] | None = None) -> list[str]:
    """Every runtime requirement of ``extras`` (the release's), ours left out, in order, once."""
    declared = corewheel.read_toml(ROOT / "pyproject.toml")["project"]["optional-dependencies"]
    found: list[str] = []
    for extra in extras_present() if extras is None else extras:
        for spec in map(str, declared[extra]):
            if corewheel.requirement_name(spec) not in OURS and spec not in found:
                found.append(spec)
    return found


def runtime_in(*, free_threaded: bool = False, extras: Sequence[str] | None = None) -> str:
    """The text of ``locks/runtime.in`` (or of its free-threaded variant, or of an extra set)."""
    specs = runtime_requirements(extras)
    if free_threaded:
        drop = {corewheel.requirement_name(s) for s in (*FT_OVERRIDES, *FT_LEFT_OUT)}
        specs = [s for s in specs if corewheel.requirement_name(s) not in drop]
        specs += FT_OVERRIDES
    extras = ",".join(extras_present() if extras is None else extras)
    return (
        HEADER.format(source="pyproject.toml")
        + f"# The runtime dependencies of grelmicro[{extras}], ours left out.\n"
        + "".join(f"{spec}\n" for spec in specs)
    )


def uv() -> str:
    """Uv from the release tools' venv (scripts/lock.sh installs it), else PATH."""
    tools = sorted(
        (ROOT / ".venvs").glob("release-tools-*/bin/uv"), key=lambda p: p.stat().st_mtime
    )
    for candidate in (*reversed(tools), shutil.which("uv")):
        if candidate and Path(candidate).exists():
            return str(candidate)
    raise SystemExit("no uv: run bash scripts/lock.sh (it installs locks/tools.txt)")


def compile_lock(
    source: Path, python: str, *, constrain: bool, out: Path, also: Sequence[str] = ()
) -> str:
    """``uv pip compile --generate-hashes`` of ``source`` for ``python`` on Linux; the text."""
    cmd = [
        uv(), "pip", "compile", "-q", "--generate-hashes", "--no-header", "--no-annotate",
        "--python-version", python, "--python-platform", PLATFORM, "--only-binary", ":all:",
        "--index-strategy", "first-index", str(source), "-o", str(out),
    ]  # fmt: skip
    if constrain:
        cmd[3:3] = ["-c", str(DEV_REQS)]
    cmd[3:3] = also
    subprocess.run(cmd, check=True, cwd=ROOT)
    return out.read_text()


def compile_dev(work: Path) -> str:
    """``locks/dev.txt``: ``locks/dev.in`` for every supported Python (one universal lock)."""
    out = work / "dev.txt"
    cmd = [
        uv(), "pip", "compile", "-q", "--generate-hashes", "--no-header", "--no-annotate",
        "--universal", "--python-version", "3.10", "--index-strategy", "first-index",
        str(DEV_IN), "-o", str(out),
    ]  # fmt: skip
    subprocess.run(cmd, check=True, cwd=ROOT)
    return out.read_text()


def compile_docs(work: Path) -> str:
    """``locks/docs.txt``: ``docs/requirements.txt`` for the dev venv, within ``locks/dev.txt``."""
    out = work / "docs.txt"
    cmd = [
        uv(), "pip", "compile", "-q", "--generate-hashes", "--no-header", "--no-annotate",
        "--python-version", DOCS_PYTHON, "--python-platform", PLATFORM,
        "--index-strategy", "first-index", "-c", str(LOCKS / "dev.txt"), str(DOCS_REQS),
        "-o", str(out),
    ]  # fmt: skip
    subprocess.run(cmd, check=True, cwd=ROOT)
    return out.read_text()


def wanted(work: Path) -> dict[Path, str]:
    """Every lock file's wanted text, compiled into ``work``."""
    files: dict[Path, str] = {}
    files[LOCKS / "runtime.in"] = runtime_in()
    (work / "runtime.in").write_text(runtime_in())
    (work / "runtime-ft.in").write_text(runtime_in(free_threaded=True))
    for tag, version in PYTHONS.items():
        ft = tag.endswith("t")
        source = work / ("runtime-ft.in" if ft else "runtime.in")
        text = compile_lock(source, version, constrain=not ft, out=work / f"{tag}.txt")
        note = " (free-threaded: " + ", ".join(FT_OVERRIDES + FT_LEFT_OUT) + ")" if ft else ""
        header = HEADER.format(source=f"locks/runtime.in{note}")
        files[LOCKS / f"{tag}.txt"] = (
            header + f"# CPython {version}{'t' if ft else ''}, Linux.\n" + text
        )
    files[LOCKS / "dev.txt"] = HEADER.format(source="locks/dev.in") + compile_dev(work)
    (LOCKS / "dev.txt").write_text(files[LOCKS / "dev.txt"])  # the docs lock is kept within it
    files[LOCKS / "docs.txt"] = HEADER.format(source="docs/requirements.txt") + compile_docs(work)
    for tag, version in PYTHONS.items():
        for name, extras in EXTRA_SETS.items():
            ft = tag.endswith("t")
            source = work / f"{name}{'-ft' if ft else ''}.in"
            source.write_text(runtime_in(free_threaded=ft, extras=extras))
            text = compile_lock(
                source, version, constrain=False, out=work / f"{tag}-{name}.txt",
                also=("-c", str(work / f"{tag}.txt")),
            )  # fmt: skip
            header = HEADER.format(source=f"pyproject.toml, within locks/{tag}.txt")
            files[LOCKS / f"{tag}-{name}.txt"] = (
                header + f"# grelmicro[{','.join(extras)}] only: CPython {version}"
                f"{'t' if ft else ''}, Linux.\n" + text
            )
    tools = compile_lock(LOCKS / "tools.in", "3.11", constrain=False, out=work / "tools.txt")
    files[LOCKS / "tools.txt"] = HEADER.format(source="locks/tools.in") + tools
    service = compile_lock(
        SERVICE_IN, SERVICE_PYTHON, constrain=False, out=work / "service.txt",
        also=("-c", str(work / f"{SERVICE_TAG}.txt")),
    )  # fmt: skip
    files[SERVICE_LOCK] = HEADER.format(source="examples/requirements.in") + service
    return files


def main(argv: Sequence[str] | None = None) -> int:
    """Write the locks, or with ``--check`` compare them (no network: the inputs only)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when a lock is stale")
    args = parser.parse_args(argv)
    if args.check:
        return check()
    with tempfile.TemporaryDirectory() as scratch:
        for path, text in wanted(Path(scratch)).items():
            path.write_text(text)
            print(f"[lock] {path.relative_to(ROOT)}", file=sys.stderr)
    return 0


def pins(text: str, *, python: str = "3.11") -> dict[str, str]:
    """``name -> version`` of a requirements file's pinned lines that apply to ``python``.

    Only the markers the dev requirements and uv's universal locks use are
    read: ``python_version`` (or ``python_full_version``) ``< "X.Y"`` and ``>= "X.Y"``.
    """
    found: dict[str, str] = {}
    want = tuple(int(part) for part in python.split("."))
    for line in text.splitlines():
        spec, _, marker = line.split("#", 1)[0].partition(";")
        if "==" not in spec or spec.lstrip().startswith("--"):
            continue
        bound = re.search(
            r"python(?:_full)?_version\s*(<|>=)\s*[\"'](\d+)\.(\d+)(?:\.\d+)?[\"']", marker
        )
        if bound is not None:
            limit = (int(bound.group(2)), int(bound.group(3)))
            if (want < limit) != (bound.group(1) == "<"):
                continue
        name, _, version = spec.partition("==")
        found[corewheel.requirement_name(name)] = version.strip().rstrip("\\").strip()
    return found


def unhashed(text: str) -> list[str]:
    """The pinned names of a lock not followed by at least one ``--hash=sha256:``."""
    blocks = re.split(r"\n(?=\S)", text)
    return [
        corewheel.requirement_name(block)
        for block in blocks
        if "==" in block.split("\n", 1)[0]
        and not block.startswith("#")
        and "--hash=sha256:" not in block
    ]


def check_sets(tag: str, whole: dict[str, str]) -> list[str]:
    """What is wrong with ``tag``'s extra-set locks, given its whole lock's pins ``whole``.

    Each pins every requirement of its extras, by hash, at the whole lock's
    version (the same wheelhouse serves both), and nothing another extra
    alone brings (``SET_NEVER``: a Flask set pins no FastAPI, Starlette, Redis or
    OpenTelemetry).
    """
    problems: list[str] = []
    for name, extras in EXTRA_SETS.items():
        path = LOCKS / f"{tag}-{name}.txt"
        if not path.exists():
            problems.append(f"locks/{path.name} is missing")
            continue
        text = path.read_text()
        locked = pins(text)
        wanted = {corewheel.requirement_name(s) for s in runtime_requirements(extras)}
        problems += [f"{path.name} does not pin {n}" for n in sorted(wanted - set(locked))]
        problems += [
            f"{path.name} pins {n}, which grelmicro[{','.join(extras)}] must not bring"
            for n in SET_NEVER[name]
            if n in locked
        ]
        problems += [f"{path.name}: {n} has no hash" for n in unhashed(text)]
        problems += [
            f"{path.name} pins {n}=={v}, {tag}.txt {whole.get(n)}"
            for n, v in locked.items()
            if whole.get(n) != v
        ]
    return problems


def check() -> int:
    """Offline: ``runtime.in`` matches the pyproject, and every lock pins each of its names.

    A version the dev requirements pin must be the version each (GIL) lock pins:
    the release ships what the tests test.
    """
    problems: list[str] = []
    have = (LOCKS / "runtime.in").read_text() if (LOCKS / "runtime.in").exists() else ""
    if have != runtime_in():
        diff = difflib.unified_diff(have.splitlines(), runtime_in().splitlines(), lineterm="")
        problems.append("locks/runtime.in is not the pyproject's extras:\n" + "\n".join(diff))
    names = [corewheel.requirement_name(s) for s in runtime_requirements()]
    for tag, version in PYTHONS.items():
        lock = LOCKS / f"{tag}.txt"
        if not lock.exists():
            problems.append(f"{lock.relative_to(ROOT)} is missing")
            continue
        text = lock.read_text()
        locked = pins(text)
        left_out = (
            {corewheel.requirement_name(s) for s in FT_LEFT_OUT} if tag.endswith("t") else set()
        )
        problems += [
            f"{lock.name} does not pin {name}"
            for name in names
            if name not in locked and name not in left_out
        ]
        problems += [f"{lock.name}: {name} has no hash" for name in unhashed(text)]
        problems += check_sets(tag, locked)
        if tag.endswith("t"):
            continue  # free-threaded: the newest that installs, not the tested pins
        dev = pins(DEV_REQS.read_text(), python=version)
        problems += [
            f"{lock.name} pins {name}=={pinned}, the tests {dev[name]}"
            for name, pinned in locked.items()
            if name in dev and dev[name] != pinned
        ]
    dev_lock = (LOCKS / "dev.txt").read_text() if (LOCKS / "dev.txt").exists() else ""
    problems += [f"locks/dev.txt: {name} has no hash" for name in unhashed(dev_lock)]
    for version in ("3.10", "3.11", "3.14"):
        want = pins(DEV_IN.read_text(), python=version) | pins(DEV_REQS.read_text(), python=version)
        got = pins(dev_lock, python=version)
        problems += [
            f"locks/dev.txt does not pin {name}=={pin} for Python {version}"
            for name, pin in want.items()
            if got.get(name) != pin
        ]
    docs_lock = (LOCKS / "docs.txt").read_text() if (LOCKS / "docs.txt").exists() else ""
    problems += [f"locks/docs.txt: {name} has no hash" for name in unhashed(docs_lock)]
    problems += [
        f"locks/docs.txt does not pin {name}=={pin}"
        for name, pin in pins(DOCS_REQS.read_text()).items()
        if pins(docs_lock).get(name) != pin
    ]
    service = SERVICE_LOCK.read_text() if SERVICE_LOCK.exists() else ""
    problems += [f"examples/requirements.txt: {name} has no hash" for name in unhashed(service)]
    wanted_service = pins(SERVICE_IN.read_text())
    locked_service = pins(service)
    problems += [
        f"examples/requirements.txt does not pin {name}=={pin}"
        for name, pin in wanted_service.items()
        if locked_service.get(name) != pin
    ]
    for problem in problems:
        print(f"[lock] STALE: {problem}", file=sys.stderr)
    if problems:
        print("[lock] run: bash scripts/lock.sh", file=sys.stderr)
        return 1
    print(
        f"[lock] locks/ up to date with pyproject.toml ({len(PYTHONS)} interpreters)",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
