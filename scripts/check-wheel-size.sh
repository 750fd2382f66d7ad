#!/usr/bin/env bash
# Every grelmicro-core wheel in DIR is at most 3 MB (design.md §6).
set -euo pipefail
DIR="${1:-dist}"
LIMIT=$((3 * 1024 * 1024))
found=0
for wheel in "$DIR"/grelmicro_core-*.whl; do
    [ -e "$wheel" ] || continue
    found=1
    size=$(wc -c <"$wheel")
    printf '%10d bytes  %s\n' "$size" "$(basename "$wheel")"
    if [ "$size" -gt "$LIMIT" ]; then
        echo "wheel over 3 MB: $wheel" >&2
        exit 1
    fi
done
[ "$found" = 1 ] || { echo "no grelmicro-core wheel in $DIR" >&2; exit 1; }
