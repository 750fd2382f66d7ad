#!/usr/bin/env bash
# Run scripts/test-interpreter.sh for each supported CPython found on this
# machine besides the main one (3.11 in .venv, 3.13t in test-freethreaded.sh):
# 3.10, 3.12 and 3.13 (pyenv or PATH) and 3.14 (/opt/python3.14, or installed
# by ../shared/tools/get-python314t.sh when that optional helper is present).
# Says which interpreters were tested and which were not found; an
# interpreter that is found and fails, fails the run.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
find_python() {
    local version="$1" candidate
    for candidate in "$HOME"/.pyenv/versions/"$version".*/bin/python"$version" \
        "/opt/python$version/bin/python$version" "$(command -v "python$version" || true)"; do
        if [ -n "$candidate" ] && [ -x "$candidate" ]; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}
if ! find_python 3.14 >/dev/null && [ -f "$ROOT/../shared/tools/get-python314t.sh" ]; then
    FT_GIL=1 bash "$ROOT/../shared/tools/get-python314t.sh" >/dev/null || true
fi
tested=()
missing=()
for version in ${GRELMICRO_INTERPRETERS:-3.10 3.12 3.13 3.14}; do
    if python="$(find_python "$version")"; then
        bash scripts/test-interpreter.sh "$python"
        tested+=("$version")
    else
        missing+=("$version")
    fi
done
echo "interpreters tested against their own wheels: ${tested[*]:-none}"
if [ "${#missing[@]}" -gt 0 ]; then
    echo "NOT FOUND on this machine (tested in the GitHub workflow only): ${missing[*]}"
fi
