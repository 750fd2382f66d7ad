"""Signature checks run with the GIL released (design §2).

A second thread counts loop iterations while this thread works. Each of its
iterations ends with ``time.sleep(0)``, which hands the GIL back: the counter
therefore moves only as fast as this thread lets go of the GIL.

- Baseline: this thread runs a pure-Python busy loop, holding the GIL except
  when the interpreter forces a switch (every ``sys.getswitchinterval()``),
  so the counter barely moves.
- Verification: this thread runs RSA-4096 verifications. If the core
  releases the GIL around the signature check, the counter runs freely.

(A counter that never yields would get about half the GIL in the baseline
through forced switches, which caps the contrast near 2x; yielding every
iteration measures who holds the GIL instead of how the scheduler splits it.)
On an idle 2-core machine the ratio is in the tens; 3x is required.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable

import forge
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from grelmicro_core import Key
from support import NOW, verifier

PHASE_SECONDS = 1.0
MIN_RATIO = 3.0

pytestmark = [
    pytest.mark.skipif(
        not getattr(sys, "_is_gil_enabled", lambda: True)(),
        reason="free-threaded interpreter without a GIL: nothing to release",
    ),
    pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two CPU cores to run both threads"),
]


class Counter:
    """A thread that counts its own loop iterations until stopped."""

    def __init__(self) -> None:
        self.count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.count += 1
            time.sleep(0)  # hand the GIL back to whoever wants it

    def __enter__(self) -> Counter:
        self._thread.start()
        while self.count == 0:
            time.sleep(0.001)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def progress_during(counter: Counter, work: Callable[[], object]) -> tuple[int, int]:
    """(counter progress, calls of ``work``) over one phase."""
    start = counter.count
    calls = 0
    deadline = time.perf_counter() + PHASE_SECONDS
    while time.perf_counter() < deadline:
        work()
        calls += 1
    return counter.count - start, calls


def busy_python() -> int:
    total = 0
    for i in range(2_000):
        total += i
    return total


def test_rsa_4096_verification_releases_the_gil() -> None:
    private = rsa.generate_private_key(public_exponent=65537, key_size=4096)
    check = verifier(Key.pem(forge.spki_pem(private), "RS256"))
    token = forge.Signer("RS256", private).mint({"sub": "gil", "exp": NOW + 60})
    assert check.verify(token, NOW)["sub"] == "gil"

    with Counter() as counter:
        baseline, _ = progress_during(counter, busy_python)
        during, verifications = progress_during(counter, lambda: check.verify(token, NOW))

    # Each call waits for the GIL to come back from the counter thread (up to
    # the 5 ms switch interval), so a loaded machine manages few calls a phase.
    assert verifications >= 10, f"only {verifications} RSA-4096 verifications ran"
    assert during >= MIN_RATIO * max(baseline, 1), (
        f"the other thread advanced {during} times during {verifications} verifications "
        f"but {baseline} times during a pure-Python loop: the GIL looks held"
    )
