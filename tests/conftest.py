"""Test-session set-up shared by ``tests/core`` and ``tests/jwt``.

Its presence puts ``tests/`` on ``sys.path`` (pytest's rootdir-relative
import mode), so every test imports the shared helpers the same way:
``import forge`` (the one token forge) and ``from support import ...`` (the
per-layer verify-and-classify helpers).
"""
