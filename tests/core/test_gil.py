"""Signature checks run with the GIL released (design §2), shown without a clock.

The switch interval is raised far beyond the test's length, so the
interpreter never takes the GIL away from a running thread: the test thread
lets go of it only where it releases it itself. A watcher thread queues for
the GIL and, each time it holds it, looks whether the test thread is between
the two statements around ``verify``. Seeing it there proves the test thread
released the GIL inside ``verify``: nothing else between those statements
lets go of it. The outcome is decided by who holds the GIL, never by how
fast either thread runs; the loop's deadline only ends a run whose GIL is
never released (a hang guard, far beyond any machine's wake-up delay).

HMAC over a short token runs attached on purpose (releasing would cost more
than the check): the watcher never sees that call from inside, which shows
the check can fail.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

import forge
import pytest
from grelmicro_core import Key
from support import NOW, key_for, verifier

#: Longer than any run: no forced switch while the test thread holds the GIL.
NO_FORCED_SWITCH = 1000.0
#: Ends a run that never sees the inside of ``verify`` (a released GIL is
#: seen within one wake-up of the watcher: microseconds to milliseconds).
HANG_GUARD_SECONDS = 60.0
#: Calls of the attached control: the watcher cannot run during any of them.
ATTACHED_CALLS = 2_000

pytestmark = pytest.mark.skipif(
    not getattr(sys, "_is_gil_enabled", lambda: True)(),
    reason="free-threaded interpreter without a GIL: nothing to release",
)


class Watcher:
    """A thread that, whenever it holds the GIL, looks where the test thread is."""

    def __init__(self) -> None:
        self.inside = False  # written by the test thread around each verify
        self.seen_inside = threading.Event()
        self.stopped = False
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stopped:
            if self.inside:
                self.seen_inside.set()
                return
            time.sleep(0)  # hand the GIL back, and queue for it again

    def __enter__(self) -> Watcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped = True
        self._thread.join(timeout=10)
        assert not self._thread.is_alive()


def seen_inside(work: Callable[[], object], *, calls: int | None = None) -> bool:
    """Whether the watcher held the GIL while this thread was inside ``work()``.

    Calls ``work`` until the watcher sees it from inside, at most ``calls``
    times (None: until the hang guard).
    """
    previous = sys.getswitchinterval()
    sys.setswitchinterval(NO_FORCED_SWITCH)
    try:
        with Watcher() as watcher:
            guard = time.monotonic() + HANG_GUARD_SECONDS
            made = 0
            while not watcher.seen_inside.is_set():
                if calls is not None and made == calls:
                    break
                if calls is None and time.monotonic() > guard:
                    break
                watcher.inside = True
                work()
                watcher.inside = False
                made += 1
            return watcher.seen_inside.is_set()
    finally:
        sys.setswitchinterval(previous)


@pytest.mark.parametrize("alg", ["RS256", "PS256", "ES256", "EdDSA"])
def test_an_asymmetric_signature_check_releases_the_gil(alg: str) -> None:
    signer = forge.private_key(alg, seed=3)
    check = verifier(key_for(signer))
    token = signer.mint({"sub": "gil", "exp": NOW + 60})
    assert check.verify(token, NOW)["sub"] == "gil"

    assert seen_inside(lambda: check.verify(token, NOW))


def test_rsa_4096_verification_releases_the_gil() -> None:
    rsa = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.rsa")
    private = rsa.generate_private_key(public_exponent=65537, key_size=4096)
    check = verifier(Key.pem(forge.spki_pem(private), "RS256"))
    token = forge.Signer("RS256", private).mint({"sub": "gil", "exp": NOW + 60})
    assert check.verify(token, NOW)["sub"] == "gil"

    assert seen_inside(lambda: check.verify(token, NOW))


def test_hmac_over_a_long_token_releases_the_gil() -> None:
    signer = forge.hmac_key()
    check = verifier(key_for(signer))
    token = signer.mint({"exp": NOW + 60, "pad": "x" * 4096})
    assert check.verify(token, NOW)["pad"] == "x" * 4096

    assert seen_inside(lambda: check.verify(token, NOW))


def test_hmac_over_a_short_token_stays_attached() -> None:
    """The control: a call that keeps the GIL is never seen from inside."""
    signer = forge.hmac_key()
    check = verifier(key_for(signer))
    token = signer.mint({"exp": NOW + 60})
    assert check.verify(token, NOW)["exp"] == NOW + 60

    assert not seen_inside(lambda: check.verify(token, NOW), calls=ATTACHED_CALLS)
