"""The tests' door to the core's source hash, whose one home is ``scripts/core_source.py``.

Build tooling never imports from ``tests/``; the tests import the build's
implementation instead, loaded here by its path (so ``from core_source import
...`` works wherever ``tests/`` is on ``sys.path``, in any interpreter).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "core_source.py"
_spec = importlib.util.spec_from_file_location("grelmicro_scripts_core_source", _SCRIPT)
assert _spec is not None
assert _spec.loader is not None
_module = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _module
_spec.loader.exec_module(_module)

CORE = _module.CORE
FNV_OFFSET = _module.FNV_OFFSET
fnv1a = _module.fnv1a
source_hash = _module.source_hash
