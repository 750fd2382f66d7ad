#!/usr/bin/env bash
# The training step of a profile-guided release build (.github/workflows/wheels.yml):
# for each interpreter, a fresh venv gets the jwt extra's dependencies (and
# cryptography where it installs: the free-threaded ones train HMAC only) and
# the instrumented grelmicro-core wheel from WHEELS (never an index), then runs
# scripts/pgo_train.py; the counts are merged into PROFILE with the llvm-profdata
# of the active Rust toolchain (rustup's llvm-tools), the one that wrote them.
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

# The jwt extra's requirements, grelmicro-core aside (it is the wheel under
# training), as scripts/corewheel.py reads them (needs Python 3.11+).
REQUIREMENTS="$(cd "$ROOT/scripts" && python3 -c 'import corewheel; print("\n".join(corewheel.runtime_requirements()))')"

trained=0
for python in "$@"; do
  venv="$WORK/venv-$python"
  "$python" -m venv "$venv"
  vpy="$venv/bin/python"
  "$vpy" -m pip install -q --upgrade pip
  # An interpreter the dependencies do not install on is left out (its wheel
  # still gets the profile of the others: the core's code is the same).
  # shellcheck disable=SC2086  # one requirement per word
  if ! "$vpy" -m pip install -q $REQUIREMENTS; then
    echo "pgo: the jwt extra does not install on $python: not trained there"
    continue
  fi
  "$vpy" -m pip install -q cryptography || echo "pgo: no cryptography for $python (HMAC only)"
  "$vpy" -m pip install -q --no-index --no-deps --find-links "$WHEELS" grelmicro-core
  echo "pgo: training with $python"
  (cd / && LLVM_PROFILE_FILE="$COUNTS/train-%p-%m.profraw" "$vpy" "$ROOT/scripts/pgo_train.py")
  trained=$((trained + 1))
done
if [ "$trained" -eq 0 ]; then
  echo "pgo: no interpreter trained" >&2
  exit 1
fi

PROFDATA="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin/llvm-profdata"
if [ ! -x "$PROFDATA" ]; then
  echo "pgo: no llvm-profdata for this toolchain: bash scripts/prereqs.sh llvm-tools" >&2
  exit 1
fi
"$PROFDATA" merge -o "$PROFILE" "$COUNTS"/train-*.profraw
echo "pgo: merged $(find "$COUNTS" -name 'train-*.profraw' | wc -l) count files into $PROFILE"
rm -rf "$WORK"
