#!/usr/bin/env bash
# The training step of a profile-guided release build (.github/workflows/wheels.yml):
# for each interpreter, a fresh venv gets that interpreter's release lock
# (locks/<tag>.txt: the jwt extra's dependencies, cryptography where it
# installs; every file by hash, --require-hashes, pip as the interpreter
# ships it) and the instrumented grelmicro-core wheel from WHEELS (never an
# index), then runs scripts/pgo_train.py; an interpreter without a lock is
# not trained (its wheel gets the others' profile). The counts are merged
# into PROFILE with the llvm-profdata of the pinned Rust toolchain
# (rust-toolchain.toml, llvm-tools), the one that wrote them.
# scripts/corewheel.py --pgo does the same for one interpreter on this machine.
#   bash scripts/pgo-train-wheels.sh WHEELS PROFILE python3.12 python3.13t ...
set -euo pipefail
WHEELS="$(cd "${1:?usage: pgo-train-wheels.sh WHEELS PROFILE PYTHON...}" && pwd)"
PROFILE="${2:?usage: pgo-train-wheels.sh WHEELS PROFILE PYTHON...}"
shift 2
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d)"
COUNTS="$WORK/counts"
mkdir -p "$COUNTS"

trained=0
for python in "$@"; do
  venv="$WORK/venv-$python"
  "$python" -m venv "$venv"
  vpy="$venv/bin/python"
  tag="$("$vpy" -c 'import sys, sysconfig; print(f"cp{sys.version_info[0]}{sys.version_info[1]}" + ("t" if sysconfig.get_config_var("Py_GIL_DISABLED") else ""))')"
  if [ ! -f "$ROOT/locks/$tag.txt" ]; then
    echo "pgo: no locks/$tag.txt: $python not trained"
    continue
  fi
  "$vpy" -m pip install -q --disable-pip-version-check --require-hashes --only-binary=:all: \
    -r "$ROOT/locks/$tag.txt"
  "$vpy" -m pip install -q --no-index --no-deps --find-links "$WHEELS" grelmicro-core
  echo "pgo: training with $python"
  (cd / && LLVM_PROFILE_FILE="$COUNTS/train-%p-%m.profraw" "$vpy" "$ROOT/scripts/pgo_train.py")
  trained=$((trained + 1))
done
if [ "$trained" -eq 0 ]; then
  echo "pgo: no interpreter trained" >&2
  exit 1
fi

PROFDATA="$(cd "$ROOT" && rustc --print sysroot)/lib/rustlib/$(cd "$ROOT" && rustc -vV | sed -n 's/^host: //p')/bin/llvm-profdata"
if [ ! -x "$PROFDATA" ]; then
  echo "pgo: no llvm-profdata for this toolchain: bash scripts/prereqs.sh llvm-tools" >&2
  exit 1
fi
"$PROFDATA" merge -o "$PROFILE" "$COUNTS"/train-*.profraw
echo "pgo: merged $(find "$COUNTS" -name 'train-*.profraw' | wc -l) count files into $PROFILE"
rm -rf "$WORK"
