#!/usr/bin/env bash
# The main job: set everything up, then run the verifier demo on its embedded
# defaults (keys are generated, tokens minted and verified, refusals shown).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
exec "$ROOT/.venv/bin/python" -m grelmicro.jwt demo "$@"
