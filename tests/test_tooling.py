"""Build tooling depends on nothing in ``tests/``; the arrow runs from the tests to ``scripts/``.

The core's source hash (``scripts/core_source.py``) and the JWS minting of
the PGO workload (``scripts/jws.py``) live with the build; the tests reach
them through ``tests/core_source.py`` and ``tests/forge.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import core_source
import forge
import pytest

tomllib = pytest.importorskip("tomllib")  # scripts/ need Python 3.11+

ROOT = Path(__file__).resolve().parents[1]
BUILD_MODULES = ("corewheel", "wheelhouse", "pgo_train", "jws", "core_source", "check_dockerfile")

# Isolated mode (-I): no current directory, no PYTHONPATH; only scripts/ is added.
PROBE = """
import importlib, json, sys
sys.path.insert(0, sys.argv[1])
for name in sys.argv[2:]:
    importlib.import_module(name)
print(json.dumps(sorted({getattr(m, "__file__", None) or "" for m in list(sys.modules.values())})))
"""


def test_build_scripts_import_nothing_from_the_tests() -> None:
    run = subprocess.run(
        [sys.executable, "-I", "-c", PROBE, str(ROOT / "scripts"), *BUILD_MODULES],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd="/",
    )
    assert run.returncode == 0, run.stderr
    files = [Path(f) for f in json.loads(run.stdout) if f]
    tests = ROOT / "tests"
    assert [f for f in files if f.is_relative_to(tests)] == []
    assert ROOT / "scripts" / "jws.py" in files


def test_the_tests_use_the_build_implementations() -> None:
    assert core_source.source_hash is sys.modules["grelmicro_scripts_core_source"].source_hash
    assert Path(sys.modules["jws"].__file__ or "") == ROOT / "scripts" / "jws.py"
    assert forge.mint is sys.modules["jws"].mint


# -- the test hooks: in the test builds, never in a shipped one --------------------------------


def _corewheel() -> Any:
    sys.path.append(str(ROOT / "scripts"))
    import corewheel  # noqa: PLC0415

    return corewheel


def test_a_profile_guided_build_refuses_the_test_hooks() -> None:
    corewheel = _corewheel()

    with pytest.raises(SystemExit, match="never with test-hooks"):
        corewheel.build_core_wheel(sys.executable, features=("test-hooks",), pgo=True)


@pytest.mark.parametrize(
    ("args", "features", "pgo"),
    [
        ([], (), False),
        (["--pgo"], (), True),
        (["--test-hooks"], ("test-hooks",), False),
        (["--bench", "--pgo"], ("bench-hooks",), True),
    ],
)
def test_the_command_line_adds_the_test_hooks_only_when_asked(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    features: tuple[str, ...],
    pgo: bool,
) -> None:
    corewheel = _corewheel()
    asked: list[tuple[tuple[str, ...], bool]] = []

    def build(
        python: str, *, features: tuple[str, ...] = (), pgo: bool = False, platform: str = ""
    ) -> Path:
        asked.append((tuple(features), pgo))
        return Path("core.whl")

    monkeypatch.setattr(corewheel, "build_core_wheel", build)
    assert corewheel.main([sys.executable, *args]) == 0

    assert asked == [(features, pgo)]
    assert capsys.readouterr().out.strip() == "core.whl"


def test_test_hooks_and_bench_hooks_are_not_asked_together() -> None:
    with pytest.raises(SystemExit):
        _corewheel().main([sys.executable, "--bench", "--test-hooks"])


@pytest.mark.parametrize(
    ("features", "profile"),
    [
        (("test-hooks",), ["--profile", "hooks"]),
        ((), ["--release"]),
        (("bench-hooks",), ["--release"]),
    ],
)
def test_only_builds_with_the_test_hooks_take_the_quick_profile(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, features: tuple[str, ...], profile: list[str]
) -> None:
    corewheel = _corewheel()
    ran: list[list[str]] = []
    out = tmp_path / "out"

    def run(cmd: list[Any], log: object, **kw: object) -> None:
        ran.append([str(part) for part in cmd])
        out.mkdir()
        (out / "grelmicro_core-0-cp311-cp311-linux_x86_64.whl").touch()

    monkeypatch.setattr(corewheel, "_run", run)
    corewheel._maturin(sys.executable, corewheel.CORE, features, out, print)
    (cmd,) = ran
    assert cmd[2 : 2 + len(profile)] == profile
    assert ("--release" in cmd) != (profile == ["--profile", "hooks"])


def test_a_profile_guided_build_names_its_target_as_the_zig_build_does(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A profile is keyed by symbol names, and cargo hashes the target and
    # maturin's zig settings (target-applies-to-host) into every name: the
    # instrumented build and the native final one name both, or the profile
    # trained here applies to nothing of the zig-linked core that ships.
    corewheel = _corewheel()
    maturin_runs: list[tuple[list[str], dict[str, str]]] = []

    def run(cmd: list[Any], log: object, **kw: Any) -> None:
        cmd = [str(part) for part in cmd]
        env = kw.get("env") or {}
        if "build" in cmd[1:2]:
            maturin_runs.append((cmd, env))
            out = Path(cmd[cmd.index("-o") + 1])
            out.mkdir(parents=True)
            (out / "grelmicro_core-0-cp311-cp311-linux_x86_64.whl").touch()
        elif "LLVM_PROFILE_FILE" in env:  # the training leaves its counts
            Path(env["LLVM_PROFILE_FILE"]).with_name("train-1.profraw").touch()

    monkeypatch.setattr(corewheel, "_run", run)
    monkeypatch.setattr(corewheel, "DIST", tmp_path)
    monkeypatch.setattr(corewheel, "can_train", lambda python: True)
    monkeypatch.setattr(corewheel, "llvm_profdata", lambda log=None: Path("llvm-profdata"))
    corewheel.build_core_wheel(sys.executable, pgo=True)

    (_, instrumented_env), (_, final_env) = maturin_runs
    host = corewheel.host_triple()
    for cmd, env in maturin_runs:
        assert cmd[cmd.index("--target") + 1] == host
        assert "--zig" not in cmd
        assert {k: env.get(k) for k in corewheel.ZIG_CARGO_SETTINGS} == corewheel.ZIG_CARGO_SETTINGS
    assert "-Cprofile-generate=" in instrumented_env["RUSTFLAGS"]
    assert "-Cprofile-use=" in final_env["RUSTFLAGS"]


def test_a_plain_build_keeps_cargo_as_it_is(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    corewheel = _corewheel()
    runs: list[tuple[list[str], dict[str, str]]] = []

    def run(cmd: list[Any], log: object, **kw: Any) -> None:
        runs.append(([str(part) for part in cmd], kw["env"]))
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "grelmicro_core-0-cp311-cp311-linux_x86_64.whl").touch()

    monkeypatch.setattr(corewheel, "_run", run)
    for name in corewheel.ZIG_CARGO_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    corewheel._maturin(sys.executable, corewheel.CORE, (), tmp_path / "out", print)
    ((cmd, env),) = runs
    assert "--target" not in cmd
    assert not set(corewheel.ZIG_CARGO_SETTINGS) & set(env)


def test_the_quick_profile_is_the_release_one_without_whole_program_lto() -> None:
    profiles = tomllib.loads((ROOT / "grelmicro-core" / "Cargo.toml").read_text())["profile"]
    assert profiles["release"]["lto"] == "fat"  # what ships
    assert profiles["hooks"]["inherits"] == "release"
    assert set(profiles["hooks"]) == {"inherits", "lto", "codegen-units"}


def test_a_wheel_made_under_another_source_date_epoch_is_built_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A release sets SOURCE_DATE_EPOCH to its commit's time: a wheel stamped
    # under another clock (an earlier build of the same files) has other
    # archive times and must not slip into the release.
    corewheel = _corewheel()
    builds: list[str] = []

    def run(cmd: list[Any], log: object, **kw: object) -> None:
        out = Path(str(cmd[cmd.index("-o") + 1]))
        builds.append(corewheel._epoch())
        out.mkdir(parents=True, exist_ok=True)
        (out / "grelmicro-0-py3-none-any.whl").touch()
        (out / "grelmicro-0.tar.gz").touch()

    monkeypatch.setattr(corewheel, "_run", run)
    monkeypatch.setattr(corewheel, "ROOT", tmp_path)  # the inputs: none here, the clock only
    monkeypatch.setattr(corewheel, "DIST", tmp_path / "dist")
    for epoch in ("1700000000", "1700000000", "1800000000"):
        monkeypatch.setenv("SOURCE_DATE_EPOCH", epoch)
        corewheel.build_grelmicro_dists(sys.executable, log=print)
    assert builds == ["1700000000", "1800000000"]


def test_a_published_profile_rebuilds_without_training(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Two trainings never count alike, so a rebuild that trains again ships
    # another core; a release publishes its profiles (pgo/) and a rebuild
    # given them (release.py --profiles) trains nothing and uses those bytes.
    corewheel = _corewheel()
    import release  # noqa: PLC0415 - scripts/ is on the path now

    steps: list[str] = []

    def run(cmd: list[Any], log: object, **kw: Any) -> None:
        cmd = [str(part) for part in cmd]
        env = kw.get("env") or {}
        if "build" in cmd[1:2]:
            flags = env.get("RUSTFLAGS", "")
            steps.append("instrumented" if "profile-generate" in flags else flags)
            out = Path(cmd[cmd.index("-o") + 1])
            out.mkdir(parents=True, exist_ok=True)
            (out / "grelmicro_core-0-cp311-cp311-linux_x86_64.whl").touch()
        elif "LLVM_PROFILE_FILE" in env:
            steps.append("training")
            Path(env["LLVM_PROFILE_FILE"]).with_name("train-1.profraw").touch()
        elif cmd[1:2] == ["merge"]:
            Path(cmd[cmd.index("-o") + 1]).write_bytes(b"counts of the first training")

    monkeypatch.setattr(corewheel, "_run", run)
    monkeypatch.setattr(corewheel, "can_train", lambda python: True)
    monkeypatch.setattr(corewheel, "llvm_profdata", lambda log=None: Path("llvm-profdata"))
    monkeypatch.setattr(corewheel, "DIST", tmp_path / "first")
    monkeypatch.delenv(corewheel.PROFILES_ENV, raising=False)
    corewheel.build_core_wheel(sys.executable, pgo=True, log=print)
    assert steps[:2] == ["instrumented", "training"]
    key = f"{corewheel.interpreter_tag(sys.executable)}-pgo"
    published = release.publish_profile(key, tmp_path / "release")
    assert published.read_bytes() == b"counts of the first training"
    assert (tmp_path / "release" / "pgo" / f"{key}.json").is_file()

    steps.clear()
    monkeypatch.setattr(corewheel, "DIST", tmp_path / "rebuild")  # a clean clone
    monkeypatch.setenv(corewheel.PROFILES_ENV, str(published.parent))
    corewheel.build_core_wheel(sys.executable, pgo=True, log=print)
    [final] = steps  # no instrumented build, no training
    used = Path(final.split("-Cprofile-use=", 1)[1].split()[0])
    assert used.read_bytes() == b"counts of the first training"

    # Another commit's profile (its stamp names other inputs) is refused.
    stamp = published.with_suffix(".json")
    stamp.write_text(stamp.read_text().replace('"inputs": "', '"inputs": "0'))
    monkeypatch.setattr(corewheel, "DIST", tmp_path / "stale")
    with pytest.raises(SystemExit, match="trained on other sources"):
        corewheel.build_core_wheel(sys.executable, pgo=True, log=print)
    published.unlink()
    with pytest.raises(SystemExit, match=r"no \S+\.profdata"):
        corewheel.build_core_wheel(sys.executable, pgo=True, log=print)
