#!/usr/bin/env bash
# The release's own core against ryjwt: bench/cold_ratio.py run on the wheels
# of a release tarball, installed the way a team installs them.
#   bash bench/release_ratio.sh dist/release/grelmicro-VERSION-linux-ARCH.tar.gz PYTHON [cold_ratio args]
#   bash bench/release_ratio.sh dist/release/grelmicro-*.tar.gz ~/.pyenv/versions/3.12.1/bin/python3.12 --processes 3 --algs HS256
# The tarball's checksum and SHA256SUMS are checked; a fresh venv of PYTHON
# (3.12+: ryjwt's floor) installs requirements-<tag>.txt from the tarball with
# --no-index --require-hashes (grelmicro and its core come from the tarball
# only), then ryjwt at the pin of bench/requirements/py312.txt from PyPI; the
# timing runs from an empty directory, so nothing of this checkout is imported
# but the benchmark's own helpers (bench/, tests/forge.py).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TARBALL="$(cd "$(dirname "${1:?usage: release_ratio.sh TARBALL PYTHON [cold_ratio args]}")" && pwd)/$(basename "$1")"
PYTHON="${2:?usage: release_ratio.sh TARBALL PYTHON [cold_ratio args]}"
shift 2
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
say() { printf '[release-ratio] %s\n' "$*" >&2; }

(cd "$(dirname "$TARBALL")" && sha256sum --quiet -c "$(basename "$TARBALL").sha256")
tar -xzf "$TARBALL" -C "$WORK"
DIR="$(find "$WORK" -mindepth 1 -maxdepth 1 -type d)"
(cd "$DIR" && sha256sum --quiet -c SHA256SUMS)
TAG="$("$PYTHON" -c 'import sys, sysconfig; print(f"cp{sys.version_info[0]}{sys.version_info[1]}" + ("t" if sysconfig.get_config_var("Py_GIL_DISABLED") else ""))')"
REQS="$DIR/requirements-$TAG.txt"
[ -f "$REQS" ] || { say "no requirements-$TAG.txt in $(basename "$TARBALL")"; exit 1; }
"$PYTHON" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
"$VPY" -m pip install -q --disable-pip-version-check --no-index --require-hashes -r "$REQS"
RYJWT="$(grep -E '^ryjwt==' "$HERE/requirements/py312.txt")"
"$VPY" -m pip install -q --disable-pip-version-check "$RYJWT"
say "$(basename "$TARBALL"): $("$VPY" -c 'import grelmicro_core, importlib.metadata as m, os; print(os.path.basename(os.path.dirname(grelmicro_core.__file__)), m.version("grelmicro-core"), "PGO", grelmicro_core.PGO)') in a fresh venv, $RYJWT"
cd "$WORK" && "$VPY" "$HERE/cold_ratio.py" "$@"
