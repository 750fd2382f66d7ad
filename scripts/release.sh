#!/usr/bin/env bash
# Build the release tarball of this platform (scripts/release.py says what it holds):
#   bash scripts/release.sh python3.11                  # one interpreter (~26 min here)
#   bash scripts/release.sh python3.10 python3.11 python3.12 python3.13 python3.13t
# It names what it builds and about how long it takes before it starts; it
# never picks interpreters by itself. Tools come from locks/tools.txt with
# --require-hashes (scripts/release-tools.sh); the build runs under nice -n 19.
# PYTHON: a command (python3.12), a full path, or a version pyenv has (3.12).
# It installs what it needs first (bash scripts/prereqs.sh release: the Rust
# toolchain of rust-toolchain.toml with llvm-tools and the musl target).
# Then: bash scripts/smoke-release.sh dist/release/grelmicro-*.tar.gz python3.11
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ "$#" -eq 0 ] || [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    echo "usage: bash scripts/release.sh [--out DIR] [--platforms P,P] PYTHON [PYTHON ...]" >&2
    exit 2
fi
bash "$ROOT/scripts/prereqs.sh" release >&2
TOOLS="$(bash "$ROOT/scripts/release-tools.sh")"
# maturin finds zig as `python -m ziglang` of the tools' venv.
export PATH="$TOOLS:$PATH" CARGO_ZIGBUILD_PYTHON_PATH="$TOOLS/python"
exec nice -n 19 "$TOOLS/python" "$ROOT/scripts/release.py" "$@"
