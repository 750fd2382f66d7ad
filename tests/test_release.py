"""The release's locks and rules (scripts/lock.py, scripts/release.py, scripts/release.sh).

The release build itself (minutes per interpreter) is never part of the test
command: ``scripts/release.sh`` runs by hand and in ``release.yml``, and
``scripts/smoke-release.sh`` installs its tarball. These check, in seconds,
what a stale lock or a wrong rule would only show at release time.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("tomllib")  # scripts/ need Python 3.11+

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
sys.path.append(str(SCRIPTS))
import corewheel  # noqa: E402
import lock  # noqa: E402
import release  # noqa: E402


def test_the_locks_are_fresh_and_hash_every_pin() -> None:
    assert lock.check() == 0, "run: bash scripts/lock.sh"


def test_a_lock_without_hashes_or_with_a_moved_pin_is_stale(tmp_path: Path) -> None:
    text = (ROOT / "locks" / "cp311.txt").read_text()
    assert not lock.unhashed(text)
    assert lock.unhashed("httpx==0.28.1\n") == ["httpx"]
    assert (
        lock.pins(text)["pydantic"]
        == lock.pins((SCRIPTS / "requirements-dev.txt").read_text(), python="3.11")["pydantic"]
    )
    assert lock.pins('fastapi==0.162.5; python_version < "3.11"\n', python="3.11") == {}
    assert lock.pins('fastapi==0.162.5; python_version < "3.11"\n', python="3.10") == {
        "fastapi": "0.162.5"
    }


def test_the_locks_carry_every_release_extra_and_never_our_names() -> None:
    declared = corewheel.read_toml(ROOT / "pyproject.toml")["project"]["optional-dependencies"]
    assert {"jwt", "fastapi", "otel", "testing"} <= set(lock.extras_present())
    assert ("redis" in lock.extras_present()) == ("redis" in declared)
    for tag in lock.PYTHONS:
        names = set(lock.pins((ROOT / "locks" / f"{tag}.txt").read_text()))
        assert not names & {"grelmicro", "grelmicro-core"}, tag
        assert {"httpx", "pydantic", "fastapi", "opentelemetry-api"} <= names, tag
        assert ("cryptography" in names) != tag.endswith("t"), tag


@pytest.mark.parametrize("tag", list(lock.PYTHONS))
def test_a_flask_or_django_set_brings_no_fastapi_starlette_redis_or_opentelemetry(
    tag: str,
) -> None:
    whole = lock.pins((ROOT / "locks" / f"{tag}.txt").read_text())
    for name in ("jwt", "flask", "django"):
        text = (ROOT / "locks" / f"{tag}-{name}.txt").read_text()
        pinned = lock.pins(text)
        assert not lock.unhashed(text), (tag, name)
        assert {"httpx", "pydantic"} <= set(pinned), (tag, name)
        assert not {"fastapi", "starlette", "redis", "opentelemetry-api"} & set(pinned), name
        assert all(whole[n] == v for n, v in pinned.items()), (tag, name)  # one wheelhouse
    assert "flask" in lock.pins((ROOT / "locks" / f"{tag}-flask.txt").read_text())
    assert "djangorestframework" in lock.pins((ROOT / "locks" / f"{tag}-django.txt").read_text())
    assert "starlette" in lock.pins((ROOT / "locks" / f"{tag}-fastapi.txt").read_text())


def test_a_set_lock_that_brings_a_foreign_package_or_moves_a_pin_is_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for path in (ROOT / "locks").glob("cp311*.txt"):
        (tmp_path / path.name).write_text(path.read_text())
    monkeypatch.setattr(lock, "LOCKS", tmp_path)
    whole = lock.pins((tmp_path / "cp311.txt").read_text())
    assert lock.check_sets("cp311", whole) == []

    flask = tmp_path / "cp311-flask.txt"
    fastapi = (tmp_path / "cp311-fastapi.txt").read_text()
    block = fastapi[fastapi.index("\nstarlette==") + 1 :].split("\n", 1)[0]
    flask.write_text(flask.read_text() + block + " \\\n    --hash=sha256:" + "0" * 64 + "\n")
    assert any("starlette" in p for p in lock.check_sets("cp311", whole))

    whole["flask"] = "0.0.1"
    assert any("cp311-flask.txt pins flask==" in p for p in lock.check_sets("cp311", whole))
    (tmp_path / "cp311-django.txt").unlink()
    assert any("cp311-django.txt is missing" in p for p in lock.check_sets("cp311", whole))


def test_the_tools_are_locked_by_hash() -> None:
    text = (ROOT / "locks" / "tools.txt").read_text()
    names = set(lock.pins(text))
    assert {"maturin", "ziglang", "auditwheel", "cyclonedx-bom", "uv"} <= names
    assert not lock.unhashed(text)


def test_a_core_platform_takes_dependencies_for_old_glibc_and_musl() -> None:
    assert release.platform_tags("manylinux2014-x86_64")[0] == "manylinux_2_17_x86_64"
    assert "manylinux2014_x86_64" in release.platform_tags("manylinux2014-x86_64")
    assert release.platform_tags("musllinux_1_2-aarch64")[0] == "musllinux_1_2_aarch64"
    assert corewheel.PLATFORMS["manylinux2014-x86_64"] == (
        "x86_64-unknown-linux-gnu",
        "manylinux2014",
    )
    assert corewheel.PLATFORMS["musllinux_1_2-aarch64"] == (
        "aarch64-unknown-linux-musl",
        "musllinux_1_2",
    )
    assert release.extras_for("cp313t") == [e for e in lock.extras_present() if e != "testing"]


def test_the_install_lock_pins_our_wheels_by_hash_then_the_lock(tmp_path: Path) -> None:
    ours = tmp_path / "grelmicro-0.90.0+jwt-py3-none-any.whl"
    core = tmp_path / "grelmicro_core-0.9.0+jwt-cp311-cp311-manylinux_2_17_x86_64.whl"
    ours.write_bytes(b"ours")
    core.write_bytes(b"core")

    path = release.install_lock("cp311", {"grelmicro": [ours], "grelmicro-core": [core]}, tmp_path)

    text = path.read_text()
    assert "--no-index\n--find-links .\n" in text
    extras = ",".join(lock.extras_present())
    assert (
        f"grelmicro[{extras}]=={corewheel.version()} --hash=sha256:{release.sha256(ours)}" in text
    )
    assert (
        f"grelmicro-core=={corewheel.core_version()} --hash=sha256:{release.sha256(core)}" in text
    )
    assert text.endswith((ROOT / "locks" / "cp311.txt").read_text())


def test_a_set_install_lock_asks_for_its_extras_only(tmp_path: Path) -> None:
    ours = tmp_path / "grelmicro-0.90.0+jwt-py3-none-any.whl"
    core = tmp_path / "grelmicro_core-0.9.0+jwt-cp312-cp312-manylinux_2_17_x86_64.whl"
    ours.write_bytes(b"ours")
    core.write_bytes(b"core")

    path = release.install_lock(
        "cp312", {"grelmicro": [ours], "grelmicro-core": [core]}, tmp_path, extra_set="flask"
    )

    assert path.name == "requirements-cp312-flask.txt"
    text = path.read_text()
    assert f"grelmicro[jwt,flask]=={corewheel.version()} --hash=sha256:" in text
    assert text.endswith((ROOT / "locks" / "cp312-flask.txt").read_text())
    assert "fastapi" not in text


def test_release_sh_without_interpreters_prints_its_usage_and_builds_nothing() -> None:
    done = subprocess.run(
        ["bash", str(SCRIPTS / "release.sh")], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    assert "usage: bash scripts/release.sh" in done.stderr
    assert "never picks interpreters" in done.stderr


def _shim(directory: Path, name: str) -> None:
    """A pyenv-like shim: the version is not selected, so it exits 127."""
    directory.mkdir(parents=True, exist_ok=True)
    shim = directory / name
    shim.write_text(f'#!/bin/sh\necho "pyenv: {name}: command not found" >&2\nexit 127\n')
    shim.chmod(0o755)


def test_an_unselected_pyenv_shim_falls_back_to_the_version_pyenv_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _shim(tmp_path / "shims", "python3.77")
    install = tmp_path / "pyenv" / "versions" / "3.77.2" / "bin"
    install.mkdir(parents=True)
    (install / "python3.77").symlink_to(sys.executable)
    monkeypatch.setenv("PATH", f"{tmp_path / 'shims'}:{os.environ['PATH']}")
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))

    for spec in ("python3.77", "3.77", "3.77.2", str(install / "python3.77")):
        assert release.resolve_python(spec) == str(install / "python3.77"), spec


def test_an_interpreter_that_cannot_run_stops_the_release_in_one_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _shim(tmp_path / "shims", "python3.77")
    monkeypatch.setenv("PATH", f"{tmp_path / 'shims'}:{os.environ['PATH']}")
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))

    with pytest.raises(SystemExit) as stopped:
        release.main(["python3.77"])

    message = str(stopped.value)
    assert message.startswith("release: python3.77 does not run here (exit 127: pyenv:")
    assert "\n" not in message
    assert "full path" in message


def test_release_sh_installs_its_own_prerequisites_first() -> None:
    text = (SCRIPTS / "release.sh").read_text()
    assert text.index('prereqs.sh" release') < text.index('"$ROOT/scripts/release.py"')
    readme = (ROOT / "README.md").read_text()
    assert "bash scripts/release.sh python3.12" in readme


def _tree(tmp_path: Path) -> Path:
    """The files release-check.sh reads, copied into a scratch tree."""
    for path in (
        "scripts/release-check.sh",
        "pyproject.toml",
        "grelmicro-core/pyproject.toml",
        "grelmicro-core/Cargo.toml",
        "CHANGELOG.md",
    ):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text((ROOT / path).read_text())
    return tmp_path


def _check(tree: Path, tag: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(tree / "scripts" / "release-check.sh"), tag],
        capture_output=True,
        text=True,
        check=False,
    )


def test_release_check_enforces_the_version_rule_of_both_distributions(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    main, core = corewheel.version(), corewheel.core_version()
    assert _check(tree, f"grelmicro-v{main}").stdout == "package=grelmicro\n"
    assert _check(tree, f"grelmicro-core-v{core}").stdout == "package=grelmicro-core\n"
    assert _check(tree, f"grelmicro-v{main.removesuffix('+jwt')}").returncode == 1

    pyproject = tree / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(f"grelmicro-core=={core}", "grelmicro-core"))
    stopped = _check(tree, f"grelmicro-v{main}")
    assert stopped.returncode == 1
    assert f"does not pin grelmicro-core=={core}" in stopped.stderr

    pyproject.write_text((ROOT / "pyproject.toml").read_text().replace(main, "0.91.0"))
    stopped = _check(tree, "grelmicro-v0.91.0")
    assert "grelmicro 0.91.0 is not MAJOR.MINOR.PATCH+jwt" in stopped.stderr


def test_the_tarball_is_the_same_bytes_whatever_the_files_times_and_modes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    sums = []
    for attempt, (mode, when) in enumerate([(0o600, 1), (0o664, 2_000_000_000)]):
        out = tmp_path / str(attempt) / "grelmicro-0.90.0-jwt-linux-x86_64"
        (out / "simple").mkdir(parents=True)
        for name in ("b.whl", "a.whl", "simple/index.html"):
            (out / name).write_text(name)
            (out / name).chmod(mode)
            os.utime(out / name, (when, when))
        sums.append(release.sha256(release.pack(out)))

    assert sums[0] == sums[1]
    with tarfile.open(tmp_path / "0" / "grelmicro-0.90.0-jwt-linux-x86_64.tar.gz") as tar:
        members = tar.getmembers()
    assert [m.name.split("/", 1)[-1] for m in members[1:]] == [
        "a.whl",
        "b.whl",
        "simple",
        "simple/index.html",
    ]
    assert {(m.mode, m.mtime, m.uid, m.uname) for m in members if m.isfile()} == {
        (0o644, 1_700_000_000, 0, "")
    }


def _core_wheel(path: Path, built_in: str, serial: str, when: str) -> Path:
    """A wheel shaped as maturin writes one: an extension, metadata, its Rust SBOM, RECORD."""
    dist = "grelmicro_core-0.9.0+jwt.dist-info"
    ref = f"path+file://{built_in}/grelmicro-core#0.9.0"
    sbom = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": serial,
        "metadata": {"timestamp": when, "component": {"bom-ref": ref, "name": "grelmicro-core"}},
        "dependencies": [{"ref": ref, "dependsOn": []}],
    }
    members = {
        "grelmicro_core/_core.so": b"\x7fELF not really",
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\n",
        f"{dist}/sboms/grelmicro-core.cyclonedx.json": json.dumps(sbom).encode(),
    }
    record = "".join(f"{name},sha256=x,{len(data)}\n" for name, data in members.items())
    members[f"{dist}/RECORD"] = (record + f"{dist}/RECORD,,\n").encode()
    with zipfile.ZipFile(path, "w") as wheel:
        for name, data in members.items():
            wheel.writestr(zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0)), data)
    return path


def test_the_rust_sbom_of_two_clean_clones_makes_the_same_core_wheel(tmp_path: Path) -> None:
    # cargo-cyclonedx writes the build folder, a random serial and the time.
    one = _core_wheel(tmp_path / "a.whl", "/home/ci/a", "urn:uuid:1", "2026-12-03T10:00:00Z")
    two = _core_wheel(tmp_path / "b.whl", "/tmp/clone-b", "urn:uuid:2", "2026-12-03T11:00:00Z")
    assert one.read_bytes() != two.read_bytes()
    assert release.stable_sbom(one, 1_764_000_000)
    assert release.stable_sbom(two, 1_764_000_000)
    assert one.read_bytes() == two.read_bytes()
    with zipfile.ZipFile(one) as wheel:
        names = wheel.namelist()
        sbom = wheel.read(names[2])
        record = wheel.read(names[3]).decode()
        assert wheel.read(names[0]) == b"\x7fELF not really"  # the rest is untouched
    doc = json.loads(sbom)
    assert doc["metadata"]["component"]["bom-ref"] == "path+file:///grelmicro-core#0.9.0"
    assert doc["dependencies"][0]["ref"] == "path+file:///grelmicro-core#0.9.0"
    assert doc["metadata"]["timestamp"] == "2025-11-24T16:00:00Z"
    assert doc["serialNumber"].startswith("urn:uuid:")
    assert doc["serialNumber"] != "urn:uuid:1"
    assert b"/home/ci" not in sbom
    assert b"/tmp/clone-b" not in sbom
    digest = base64.urlsafe_b64encode(hashlib.sha256(sbom).digest()).rstrip(b"=").decode()
    assert f"{names[2]},sha256={digest},{len(sbom)}" in record.splitlines()
    # Another build of the same sources with other contents gets another serial.
    other = _core_wheel(tmp_path / "c.whl", "/x", "urn:uuid:3", "2026-12-03T12:00:00Z")
    assert release.stable_sbom(other, 1_764_000_001)  # another time: another document
    with zipfile.ZipFile(other) as wheel:
        assert json.loads(wheel.read(names[2]))["serialNumber"] != doc["serialNumber"]


def test_a_wheel_without_a_rust_sbom_is_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "plain.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr("grelmicro/__init__.py", b"")
    before = path.read_bytes()
    assert not release.stable_sbom(path, 0)
    assert path.read_bytes() == before
