#!/usr/bin/env bash
# The security suite against the wheels a release would publish, then the
# fuzzers' smoke runs. Called by scripts/test.sh; runs on its own too.
#
#  1. build the grelmicro-core wheel (maturin, this tree) and the grelmicro
#     wheel into dist/;
#  2. create a FRESH virtualenv (recreated every run) and install both wheels
#     from dist/ only (--no-index: another project owns these names on PyPI),
#     the test tools from PyPI pinned by scripts/requirements-dev.txt;
#  3. run security-tests/ from a directory outside the source tree, so the
#     installed wheel is what gets imported (security-tests/conftest.py
#     refuses to run otherwise);
#  4. fuzz smoke: each cargo-fuzz target (grelmicro-core/fuzz) and the atheris
#     harness (security-tests/fuzz) for FUZZ_SECONDS (default 30) each,
#     starting from the committed seeds and replaying every kept regression.
#
# Environment: PYTHON (interpreter for the venv; default: the dev venv's),
# SECURITY_VENV (default: $TMPDIR/grelmicro-security-venv), FUZZ_SECONDS
# (0 skips fuzzing), HYPOTHESIS_PROFILE (security | security-long).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { printf '\n=== %s\n' "$*"; }

DIST="$ROOT/dist"
DEV_PY="$ROOT/.venv/bin/python"
PYTHON="${PYTHON:-$DEV_PY}"
VENV="${SECURITY_VENV:-${TMPDIR:-/tmp}/grelmicro-security-venv}"
FUZZ_SECONDS="${FUZZ_SECONDS:-30}"
ATHERIS_VERSION="3.0.0"
CARGO_FUZZ_VERSION="0.13.2"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/grelmicro-security.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

if [ ! -x "$DEV_PY" ]; then
    bash scripts/setup.sh
fi
TAG="$("$PYTHON" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"

if [ -n "${RELEASE_DIR:-}" ]; then
    # The release workflow: test the exact files it is about to publish.
    # Whichever of the two packages is not being released is built here.
    DIST="$(cd "$RELEASE_DIR" && pwd)"
    log "testing the release files in $DIST"
    ls -l "$DIST"
    if ! ls "$DIST"/grelmicro_core-*-"$TAG"-*manylinux*x86_64*.whl >/dev/null 2>&1; then
        "$ROOT/.venv/bin/maturin" build --release -q -m "$ROOT/grelmicro-core/Cargo.toml" -i "$PYTHON" -o "$DIST"
    fi
    if ! ls "$DIST"/grelmicro-*.whl >/dev/null 2>&1; then
        "$DEV_PY" -m pip wheel -q --no-deps -w "$DIST" "$ROOT"
    fi
else
    log "building the grelmicro-core wheel for $TAG (up to date after scripts/setup.sh)"
    rm -f "$DIST"/grelmicro_core-*-"$TAG"-*.whl
    "$ROOT/.venv/bin/maturin" build --release -q -m "$ROOT/grelmicro-core/Cargo.toml" -i "$PYTHON" -o "$DIST"

    log "building the grelmicro wheel"
    rm -f "$DIST"/grelmicro-*.whl
    "$DEV_PY" -m pip wheel -q --no-deps -w "$DIST" "$ROOT"
fi

log "fresh virtualenv $VENV"
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
VPY="$VENV/bin/python"
"$VPY" -m pip install -q --upgrade pip
# Test tools from PyPI, at the versions the dev environment pins.
"$VPY" -m pip install -q -c "$ROOT/scripts/requirements-dev.txt" \
    pytest hypothesis cryptography httpx anyio pydantic
# Our two packages from dist/ only, never from an index.
CORE_VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/grelmicro-core/pyproject.toml" | head -n 1)"
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/pyproject.toml" | head -n 1)"
"$VPY" -m pip install -q --no-index --no-deps --find-links "$DIST" \
    "grelmicro-core==$CORE_VERSION" "grelmicro==$VERSION"
"$VPY" -m pip check
(cd "$WORK" && "$VPY" - <<'PY'
import importlib.metadata as md, grelmicro.jwt, grelmicro_core
print("grelmicro", md.version("grelmicro"), "at", grelmicro.jwt.__file__)
print("grelmicro-core", md.version("grelmicro-core"), "source", grelmicro_core.SOURCE_HASH)
PY
)

log "security-tests/ against the installed wheels (from $WORK, outside the tree)"
(cd "$WORK" && "$VPY" -m pytest -c "$ROOT/security-tests/pytest.ini" \
    --rootdir "$ROOT/security-tests" "$ROOT/security-tests" -q)

if [ "$FUZZ_SECONDS" = "0" ]; then
    log "fuzzing skipped (FUZZ_SECONDS=0)"
    exit 0
fi

log "cargo-fuzz: lint and build (stable toolchain, sanitizer none)"
if ! command -v cargo-fuzz >/dev/null 2>&1; then
    cargo install -q --locked cargo-fuzz --version "$CARGO_FUZZ_VERSION"
fi
FUZZ="$ROOT/grelmicro-core/fuzz"
(cd "$FUZZ" && cargo fmt --check)
(cd "$FUZZ" && cargo clippy -q -- -D warnings)
(cd "$FUZZ" && cargo fuzz build -s none)
for target in verify jwks keys; do
    log "cargo-fuzz $target: ${FUZZ_SECONDS}s from seeds, regressions replayed first"
    mkdir -p "$FUZZ/corpus/$target" "$FUZZ/regressions/$target"
    (cd "$FUZZ" && cargo fuzz run -s none "$target" \
        "corpus/$target" "seeds/$target" "regressions/$target" -- \
        -max_total_time="$FUZZ_SECONDS" -timeout=5 -rss_limit_mb=2048 \
        -print_final_stats=1 2>"$WORK/cargo-fuzz-$target.log") || {
        tail -n 60 "$WORK/cargo-fuzz-$target.log"
        echo "cargo-fuzz $target found a crash: keep the artifact in" \
            "grelmicro-core/fuzz/regressions/$target/" >&2
        exit 1
    }
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb|INITED|DONE" \
        "$WORK/cargo-fuzz-$target.log" || true
done

log "atheris: JWTVerifier.verify for ${FUZZ_SECONDS}s (installed wheel)"
"$VPY" -m pip install -q "atheris==$ATHERIS_VERSION"
mkdir -p "$WORK/atheris-corpus" "$WORK/atheris-artifacts"
(cd "$WORK" && "$VPY" "$ROOT/security-tests/fuzz/fuzz_verify.py" \
    -max_total_time="$FUZZ_SECONDS" -timeout=5 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$WORK/atheris-artifacts/" \
    "$WORK/atheris-corpus" "$FUZZ/seeds/verify" "$ROOT/security-tests/fuzz/regressions" \
    2>"$WORK/atheris.log") || {
    tail -n 60 "$WORK/atheris.log"
    mkdir -p "$ROOT/security-tests/fuzz/regressions"
    cp "$WORK"/atheris-artifacts/* "$ROOT/security-tests/fuzz/regressions/" 2>/dev/null || true
    echo "atheris found a crash: copied to security-tests/fuzz/regressions/" >&2
    exit 1
}
grep -E "stat::number_of_executed_units|stat::peak_rss_mb|INITED|DONE" "$WORK/atheris.log" || true
echo "security suite and fuzz smoke: all passed"
