"""The release's SBOM: CycloneDX 1.6 JSON naming every wheel the tarball ships.

    sbom.write(directory, release_name, version)     # scripts/release.py calls it

Written here from the wheels themselves (standard library only), not by a
tool that resolves names, because two of them are ours and must not be
confused with the unrelated ``grelmicro`` and ``grelmicro-core`` on PyPI:

- the root component (``metadata.component``) is the release itself,
  ``pkg:generic/grelmicro-jwt/grelmicro-release@<version>?arch=<arch>``;
- our two distributions are first-party components whose purls say where
  they come from: ``pkg:generic/grelmicro-jwt/<name>@<version>?file_name=...``
  (the ``grelmicro-jwt`` namespace, the release's own files; no ``pkg:pypi``,
  no PyPI URL), published by ``grelmicro[jwt]``;
- every other wheel is ``pkg:pypi/<name>@<version>?file_name=...``: the
  third-party file the lock downloaded from PyPI;
- one component per wheel file, with its SHA-256 and its licence as the
  wheel's own metadata states it (``License-Expression``, else a short
  ``License``, else the ``License ::`` classifiers); a wheel that states
  none stops the build.

Nothing in it depends on the machine or the hour: the serial number is
derived from the wheels' hashes and the timestamp is ``SOURCE_DATE_EPOCH``.
``validate(path)`` checks it against the CycloneDX 1.6 JSON schema (with
cyclonedx-python-lib, one of the release's hashed tools).
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
import zipfile
from datetime import datetime, timezone
from email.message import Message
from email.parser import HeaderParser
from pathlib import Path
from urllib.parse import quote

#: Our distributions: never ``pkg:pypi`` (another project owns the names there).
OURS = ("grelmicro", "grelmicro-core")
#: The purl namespace of this project's own files.
NAMESPACE = "grelmicro-jwt"
PUBLISHER = "grelmicro[jwt]"
SPEC_VERSION = "1.6"


def normalize(name: str) -> str:
    """PEP 503 name: ``Grelmicro_Core`` -> ``grelmicro-core``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _purl_version(version: str) -> str:
    return quote(version, safe="")


def wheel_metadata(wheel: Path) -> Message:
    """The ``METADATA`` headers of a wheel."""
    with zipfile.ZipFile(wheel) as archive:
        [name] = [
            n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")
        ]
        return HeaderParser().parsestr(archive.read(name).decode("utf-8"))


def licences(meta: Message, wheel: str) -> list[dict[str, object]]:
    """The CycloneDX ``licenses`` of a wheel from its metadata; none stops the build."""
    expression = (meta.get("License-Expression") or "").strip()
    if expression:
        return [{"expression": expression}]
    stated = (meta.get("License") or "").strip()
    if stated and "\n" not in stated and len(stated) <= 80 and stated.upper() != "UNKNOWN":
        return [{"license": {"name": stated}}]
    classifiers = [
        c.split("::")[-1].strip()
        for c in meta.get_all("Classifier") or []
        if c.startswith("License ::") and c.count("::") >= 2
    ]
    if classifiers:
        return [{"license": {"name": name}} for name in sorted(set(classifiers))]
    raise SystemExit(f"{wheel}: its metadata states no licence (the SBOM needs one)")


def component(wheel: Path) -> dict[str, object]:
    """The CycloneDX component of one wheel file."""
    meta = wheel_metadata(wheel)
    name, version = normalize(meta["Name"]), meta["Version"]
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    ours = name in OURS
    purl = (
        f"pkg:generic/{NAMESPACE}/{name}@{_purl_version(version)}?file_name={quote(wheel.name)}"
        if ours
        else f"pkg:pypi/{name}@{_purl_version(version)}?file_name={quote(wheel.name)}"
    )
    found: dict[str, object] = {
        "type": "library",
        "bom-ref": wheel.name,
        "name": name,
        "version": version,
        "purl": purl,
        "hashes": [{"alg": "SHA-256", "content": digest}],
        "licenses": licences(meta, wheel.name),
    }
    if ours:
        found["publisher"] = PUBLISHER
        found["properties"] = [{"name": "grelmicro:first-party", "value": "true"}]
    return found


def document(
    directory: Path, release: str, version: str, arch: str, epoch: int
) -> dict[str, object]:
    """The SBOM of the wheels in ``directory`` (``release``: the tarball's directory name)."""
    wheels = sorted(directory.glob("*.whl"))
    components = [component(wheel) for wheel in wheels]
    ours = [c for c in components if c["name"] == "grelmicro"]
    if not ours:
        raise SystemExit(f"no grelmicro wheel in {directory}: nothing to name the release after")
    root_ref = release
    seed = "\n".join([release, *(f"{c['bom-ref']} {c['hashes']}" for c in components)])
    serial = uuid.uuid5(uuid.NAMESPACE_URL, seed)
    return {
        "bomFormat": "CycloneDX",
        "specVersion": SPEC_VERSION,
        "serialNumber": f"urn:uuid:{serial}",
        "version": 1,
        "metadata": {
            "timestamp": datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tools": {"components": [{"type": "application", "name": "scripts/sbom.py"}]},
            "component": {
                "type": "application",
                "bom-ref": root_ref,
                "name": "grelmicro-release",
                "version": version,
                "description": f"{release}: the grelmicro[jwt] release tarball for linux {arch}",
                "purl": f"pkg:generic/{NAMESPACE}/grelmicro-release@{_purl_version(version)}"
                f"?arch={arch}",
                "publisher": PUBLISHER,
                "licenses": ours[0]["licenses"],
            },
        },
        "components": components,
        "dependencies": [
            {"ref": root_ref, "dependsOn": [str(c["bom-ref"]) for c in components]},
            *({"ref": str(c["bom-ref"]), "dependsOn": []} for c in components),
        ],
    }


def write(directory: Path, release: str, version: str, arch: str, epoch: int) -> Path:
    """``directory/sbom.cdx.json``; its path."""
    path = directory / "sbom.cdx.json"
    body = document(directory, release, version, arch, epoch)
    path.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n")
    return path


def validate(path: Path) -> None:
    """Fail unless ``path`` is valid CycloneDX 1.6 JSON (cyclonedx-python-lib's strict schema)."""
    from cyclonedx.schema import SchemaVersion  # noqa: PLC0415 (a release tool, not a dependency)
    from cyclonedx.validation.json import JsonStrictValidator  # noqa: PLC0415

    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(path.read_text())
    if error is not None:
        raise SystemExit(f"{path}: not valid CycloneDX {SPEC_VERSION}: {error}")
