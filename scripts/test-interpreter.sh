#!/usr/bin/env bash
# Test the product on ONE interpreter, against the wheels built for it:
#
#   bash scripts/test-interpreter.sh /path/to/python [pytest args...]
#
#  1. a fresh virtualenv for that interpreter (.venvs/<tag>);
#  2. the grelmicro-core wheel built from this tree for that interpreter and the
#     grelmicro wheel, both installed from dist/ only (--no-index: another
#     project owns these names on PyPI);
#  3. the runtime dependencies and test tools that install on that interpreter;
#  4. pytest on tests/ from outside the tree, so the installed wheels are what
#     gets imported.
#
# Used by the GitHub workflow's interpreter matrix and by scripts/test.sh for
# every interpreter this machine has (GRELMICRO_INTERPRETERS).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${1:?usage: test-interpreter.sh PYTHON [pytest args...]}"
shift
log() { printf '\n=== %s\n' "$*"; }

TAG="$("$PYTHON" -c 'import sys, sysconfig; t = "t" if sysconfig.get_config_var("Py_GIL_DISABLED") else ""; print(f"cp{sys.version_info[0]}{sys.version_info[1]}{t}")')"
VENV="$ROOT/.venvs/$TAG"
DIST="$ROOT/dist/$TAG"
CORE_VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' grelmicro-core/pyproject.toml | head -n 1)"
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -n 1)"

log "$TAG: fresh virtualenv $VENV"
rm -rf "$VENV" "$DIST"
"$PYTHON" -m venv "$VENV"
VPY="$VENV/bin/python"
export PATH="$VENV/bin:$PATH"  # the maturin backend runs the maturin binary
"$VPY" -m pip install -q --upgrade pip
"$VPY" -m pip install -q -c scripts/requirements-dev.txt maturin hatchling

log "$TAG: building the sdists from this tree, then the wheels from the sdists"
# One cargo target dir for every interpreter: the dependencies (aws-lc) are
# compiled once, not once per unpacked sdist.
export CARGO_TARGET_DIR="$ROOT/target/sdist-builds"
"$VENV/bin/maturin" sdist -m grelmicro-core/Cargo.toml -o "$DIST"
"$VPY" -m pip install -q -c scripts/requirements-dev.txt build
"$VPY" -m build -q --sdist --no-isolation -o "$DIST" .
"$VPY" -m pip wheel -q --no-deps --no-build-isolation -w "$DIST" "$DIST"/grelmicro_core-*.tar.gz
"$VPY" -m pip wheel -q --no-deps --no-build-isolation -w "$DIST" "$DIST"/grelmicro-*.tar.gz
bash scripts/check-wheel-size.sh "$DIST"
ls -l "$DIST"

log "$TAG: installing them (no index) with their runtime dependencies"
"$VPY" -m pip install -q --no-index --no-deps --find-links "$DIST" \
    "grelmicro-core==$CORE_VERSION" "grelmicro==$VERSION"
# Runtime dependencies of the jwt extra. pydantic-core releases after 2.33
# (pyo3 0.29+) refuse free-threaded 3.13: there, the last ones that build.
if [ "$TAG" = "cp313t" ]; then
    "$VPY" -m pip install -q httpx anyio "pydantic<2.12"
else
    "$VPY" -m pip install -q -c scripts/requirements-dev.txt httpx anyio pydantic
fi
"$VPY" -m pip check

log "$TAG: test tools"
if [ "${TAG%t}" = "$TAG" ]; then
    "$VPY" -m pip install -q -r scripts/requirements-dev.txt
    SELECT=(tests)
else
    # Free-threaded: the test minter (cryptography) may not build here; the
    # free-threaded subset mints with the core's own pieces.
    "$VPY" -m pip install -q -c scripts/requirements-dev.txt pytest
    SELECT=(tests/test_installed_core.py tests/core/test_freethreaded.py tests/jwt/test_concurrency.py)
fi

log "$TAG: pytest against the installed wheels"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
(cd "$WORK" && "$VPY" - "$VENV" <<'PY'
import sys, grelmicro.jwt, grelmicro_core
for module in (grelmicro.jwt, grelmicro_core):
    assert module.__file__.startswith(sys.argv[1]), f"{module.__name__} from {module.__file__}"
print("grelmicro.jwt and grelmicro_core imported from", sys.argv[1])
PY
)
(cd "$WORK" && "$VPY" -m pytest -q -p no:cacheprovider \
    -c "$ROOT/pyproject.toml" --rootdir "$ROOT" \
    "${SELECT[@]/#/$ROOT/}" "$@")
