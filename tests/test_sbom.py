"""The release SBOM (scripts/sbom.py): what it names, and that it is valid CycloneDX 1.6.

Built from small wheels made here (a release build takes minutes and stays
out of the test command); the schema check runs with the release's own
hashed tools (``scripts/release-tools.sh``, stamped: quick once installed).
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("tomllib")  # scripts/ need Python 3.11+

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
sys.path.append(str(SCRIPTS))
import sbom  # noqa: E402

RELEASE = "grelmicro-0.90.0-jwt-linux-x86_64"


def _wheel(directory: Path, file: str, name: str, version: str, *headers: str) -> Path:
    path = directory / file
    dist_info = f"{file.split('-', maxsplit=1)[0]}-{version}.dist-info"
    meta = "\n".join(["Metadata-Version: 2.4", f"Name: {name}", f"Version: {version}", *headers])
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{dist_info}/METADATA", meta + "\n\n")
    return path


@pytest.fixture
def wheelhouse(tmp_path: Path) -> Path:
    _wheel(tmp_path, "grelmicro-0.90.0+jwt-py3-none-any.whl", "grelmicro", "0.90.0+jwt",
           "License-Expression: MIT")  # fmt: skip
    for tag in ("manylinux_2_17_x86_64", "musllinux_1_2_x86_64"):
        _wheel(tmp_path, f"grelmicro_core-0.9.0+jwt-cp312-cp312-{tag}.whl", "grelmicro-core",
               "0.9.0+jwt", "License-Expression: MIT")  # fmt: skip
    _wheel(tmp_path, "httpx-0.28.1-py3-none-any.whl", "httpx", "0.28.1", "License: BSD-3-Clause")
    _wheel(tmp_path, "h11-0.16.0-py3-none-any.whl", "h11", "0.16.0",
           "Classifier: License :: OSI Approved :: MIT License")  # fmt: skip
    return tmp_path


def test_the_release_is_the_root_and_our_wheels_are_first_party(wheelhouse: Path) -> None:
    doc = sbom.document(wheelhouse, RELEASE, "0.90.0+jwt", "x86_64", 1_700_000_000)

    root = doc["metadata"]["component"]  # type: ignore[index]
    assert root["purl"] == "pkg:generic/grelmicro-jwt/grelmicro-release@0.90.0%2Bjwt?arch=x86_64"
    assert root["licenses"] == [{"expression": "MIT"}]
    by_name: dict[str, list[dict[str, object]]] = {}
    for component in doc["components"]:  # type: ignore[attr-defined]
        by_name.setdefault(component["name"], []).append(component)
        assert component["licenses"], component["name"]
        [digest] = component["hashes"]
        assert digest["alg"] == "SHA-256"
        assert len(digest["content"]) == 64
    assert len(by_name["grelmicro-core"]) == 2  # one component per wheel file
    for name in sbom.OURS:
        for component in by_name[name]:
            assert str(component["purl"]).startswith(f"pkg:generic/grelmicro-jwt/{name}@")
            assert component["publisher"] == "grelmicro[jwt]"
    assert by_name["httpx"][0]["purl"] == (
        "pkg:pypi/httpx@0.28.1?file_name=httpx-0.28.1-py3-none-any.whl"
    )
    assert by_name["h11"][0]["licenses"] == [{"license": {"name": "MIT License"}}]
    text = json.dumps(doc)
    assert "pkg:pypi/grelmicro" not in text
    assert "pypi.org" not in text
    assert "pythonhosted" not in text
    [root_deps] = [d for d in doc["dependencies"] if d["ref"] == RELEASE]  # type: ignore[attr-defined]
    assert len(root_deps["dependsOn"]) == 5


def test_the_sbom_is_the_same_bytes_every_time(wheelhouse: Path) -> None:
    first = sbom.write(wheelhouse, RELEASE, "0.90.0+jwt", "x86_64", 1_700_000_000).read_bytes()
    second = sbom.write(wheelhouse, RELEASE, "0.90.0+jwt", "x86_64", 1_700_000_000).read_bytes()
    assert first == second
    assert b'"timestamp": "2023-11-14T22:13:20Z"' in first


def test_a_wheel_without_a_licence_stops_the_build(wheelhouse: Path) -> None:
    _wheel(wheelhouse, "mystery-1.0-py3-none-any.whl", "mystery", "1.0")
    with pytest.raises(SystemExit, match=r"mystery-1\.0-py3-none-any\.whl: its metadata states no"):
        sbom.document(wheelhouse, RELEASE, "0.90.0+jwt", "x86_64", 0)


def _validate(path: Path) -> subprocess.CompletedProcess[str]:
    tools = subprocess.run(
        ["bash", str(SCRIPTS / "release-tools.sh")], capture_output=True, text=True, check=True
    ).stdout.strip()
    code = "import sys, sbom; from pathlib import Path; sbom.validate(Path(sys.argv[1]))"
    return subprocess.run(
        [f"{tools}/python", "-c", code, str(path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=SCRIPTS,
    )


def test_the_sbom_validates_against_the_cyclonedx_1_6_schema(wheelhouse: Path) -> None:
    path = sbom.write(wheelhouse, RELEASE, "0.90.0+jwt", "x86_64", 1_700_000_000)
    assert _validate(path).returncode == 0

    broken = json.loads(path.read_text())
    broken["components"][0]["hashes"][0]["alg"] = "SHA-257"
    path.write_text(json.dumps(broken))
    done = _validate(path)
    assert done.returncode != 0
    assert "not valid CycloneDX 1.6" in done.stderr
