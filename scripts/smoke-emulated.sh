#!/usr/bin/env bash
# The core wheel of another architecture, run here under qemu-user: installed
# (no index, every dependency by hash) for that architecture's CPython, then
# scripts/smoke_core.py and a slice of the core's tests (tests/core) on it.
#   QEMU=qemu-aarch64-static SYSROOT=/path/to/arm64/root \
#     bash scripts/smoke-emulated.sh dist/core/cp311-manylinux2014-aarch64 [PYTEST ARGS]
# SYSROOT is a root holding that CPython and its libraries (Debian's
# python3.11:arm64 unpacked with dpkg -x, no system change: docs/shipping.md,
# "aarch64"); PYTHON is its path inside (default /usr/bin/python3.11). Without
# pytest arguments the slice is tests/core -k "api or algorithms or header".
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$(cd "${1:?usage: smoke-emulated.sh WHEEL-DIR [PYTEST ARGS]}" && pwd)"
shift
QEMU="${QEMU:-qemu-aarch64-static}"
SYSROOT="${SYSROOT:?the root of the emulated CPython (SYSROOT=...)}"
PYTHON="${PYTHON:-/usr/bin/python3.11}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
run() { "$QEMU" -L "$SYSROOT" "$SYSROOT$PYTHON" "$@"; }

tag="$(run -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"
machine="$(run -c 'import platform; print(platform.machine())')"
version="${tag:2:1}.${tag:3}"
wheel="$(find "$DIR" -maxdepth 1 -name "grelmicro_core-*-$tag-$tag-manylinux*_$machine.whl" | head -n 1)"
[ -n "$wheel" ] || { echo "smoke-emulated: no $tag $machine manylinux core wheel in $DIR" >&2; exit 1; }
target=(--target "$WORK/site" --platform "manylinux2014_$machine" --python-version "$version"
    --implementation cp --abi "$tag" --only-binary=:all: --no-deps)
python3 -m pip install -q --disable-pip-version-check --no-index "${target[@]}" "$wheel"
echo "smoke-emulated: $(basename "$wheel") under $("$QEMU" --version | head -n 1)"
(cd / && PYTHONPATH="$WORK/site" run "$ROOT/scripts/smoke_core.py")

# The tests' needs for that platform, by hash: the release lock of the
# interpreter (grelmicro.jwt's dependencies), then pytest's from the dev lock.
wanted="pytest iniconfig pluggy packaging pygments hypothesis sortedcontainers attrs"
python3 - "$ROOT/locks/dev.txt" "$ROOT/locks/$tag.txt" "$WORK/test-reqs.txt" $wanted <<'PY'
import re, sys
dev, release, out, *names = sys.argv[1:]
def blocks(path):
    return [b for b in re.split(r"\n(?=\S)", open(path).read()) if re.match(r"[\w.-]+==", b)]
have = {re.match(r"([\w.-]+)==", b)[1].lower() for b in blocks(release)}
keep = [b for b in blocks(dev) if (n := re.match(r"([\w.-]+)==", b)[1].lower()) in names and n not in have]
open(out, "w").write("\n".join(keep) + "\n")
PY
for reqs in "$ROOT/locks/$tag.txt" "$WORK/test-reqs.txt"; do
    python3 -m pip install -q --disable-pip-version-check --require-hashes --target "$WORK/site" \
        --platform "manylinux2014_$machine" --python-version "$version" --implementation cp \
        --abi "$tag" --only-binary=:all: --no-deps --upgrade -r "$reqs"
done
[ "$#" -gt 0 ] || set -- -q -p no:cacheprovider "$ROOT/tests/core" -k "api or algorithms or header"
(cd "$ROOT" && PYTHONPATH="$WORK/site" run -m pytest "$@")
