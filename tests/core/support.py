"""Small helpers shared by the core tests: build a verifier, read an outcome."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from grelmicro_core import CoreError, Key, KeySet, Policy, Verifier

from .mint import Signer, signer, spki_pem

#: The clock every test pins (2023-11-14T22:13:20Z).
NOW = 1_700_000_000

#: A payload that passes the default policy at ``NOW``.
FRESH = {"sub": "user-1", "exp": NOW + 600}


def key_for(sig: Signer, kid: str | None = None) -> Key:
    """The core key matching a signer, built from its natural form."""
    if sig.alg.startswith("HS"):
        return Key.secret(sig.private, sig.alg, kid)
    return Key.pem(spki_pem(sig.private), sig.alg, kid)


def verifier(keys: Key | Sequence[Key], **policy: Any) -> Verifier:
    """A verifier over ``keys`` with ``Policy(**policy)``."""
    keys = [keys] if isinstance(keys, Key) else list(keys)
    return Verifier(KeySet(keys), Policy(**policy))


def hs256(kid: str | None = None, **policy: Any) -> tuple[Signer, Verifier]:
    """The HS256 signer and a verifier for it: the cheap default for claim tests."""
    sig = signer("HS256")
    return sig, verifier(key_for(sig, kid), **policy)


def outcome(call: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
    """``"ok"`` when the call succeeds, else the core error kind."""
    try:
        call(*args, **kwargs)
    except CoreError as exc:
        kind, message = exc.args
        assert isinstance(message, str)
        assert message
        return str(kind)
    return "ok"


def rejection(check: Verifier, token: str | bytes, now: float = NOW) -> str:
    """``"ok"`` or the error kind of ``check.verify(token, now)``."""
    return outcome(check.verify, token, now)


def error_of(call: Callable[..., Any], *args: Any, **kwargs: Any) -> CoreError:
    """The ``CoreError`` a call raises (fails the test if it raises none)."""
    try:
        call(*args, **kwargs)
    except CoreError as exc:
        return exc
    raise AssertionError(f"{call!r} raised nothing")
