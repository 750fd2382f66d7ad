#!/usr/bin/env bash
# The main job: set everything up, then run the FastAPI demo on its embedded
# defaults: keys generated at start, their JWKS served on 127.0.0.1, a service
# guarded by the verifier under uvicorn on 127.0.0.1, and a client sending it a
# valid, an expired, a wrong-audience, an under-scoped and a forged token.
# (The verifier-only demo stays available: python -m grelmicro.jwt demo.)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
printf '\n=== FastAPI demo: a service guarded by grelmicro.jwt\n'
exec "$ROOT/.venv/bin/python" "$ROOT/examples/fastapi_demo.py" "$@"
