#!/usr/bin/env bash
# The documentation site: install its pinned tools into the dev venv when
# missing, build it with warnings as errors into site/, run every Python
# example of the docs, and check the built site in headless Chromium
# (every page renders, no broken internal link, search finds "audience").
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="$ROOT/.venv/bin/python"
[ -x "$PY" ] || { echo "no dev venv: run scripts/setup.sh first" >&2; exit 1; }

# Pinned docs tools (never grelmicro or grelmicro-core: those come from this tree).
if ! "$PY" - docs/requirements.txt <<'PYEOF'
import sys
from importlib.metadata import PackageNotFoundError, version
missing = []
for line in open(sys.argv[1], encoding="utf-8"):
    line = line.split("#", 1)[0].strip()
    if line:
        name, wanted = line.split("==")
        try:
            if version(name) != wanted:
                missing.append(line)
        except PackageNotFoundError:
            missing.append(line)
sys.exit(1 if missing else 0)
PYEOF
then
    "$PY" -m pip install -q -r docs/requirements.txt
fi

# Headless Chromium and its driver, from Debian.
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends \
        chromium chromium-driver
fi

export NO_MKDOCS_2_WARNING=1
echo "--- mkdocs build --strict"
rm -rf site
"$PY" -m mkdocs build --strict --site-dir site

echo "--- documentation examples"
"$PY" -m pytest -q -p no:cacheprovider tests/test_docs_snippets.py

echo "--- site in headless Chromium"
"$PY" scripts/check_site.py site
