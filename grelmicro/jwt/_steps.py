"""Verification as steps: one generator for the network miss path, two drivers.

A cache miss whose keys come from the network may need a fetch before it
has its answer: keys not loaded yet, or a token naming a ``kid`` the keys
held may predate. The key router writes that path once, as a generator
(:meth:`grelmicro.jwt._router.Slot.steps`) that yields a
:class:`~grelmicro.jwt._snapshot.KeyWait` ("wait for this fetch, at most
this long") and returns the engine's answer, or raises the refusal. The
fetch runs on its key source's runner, never in a driver: a driver only
waits, and sends back into the steps how the wait ended. Two drivers run it:

- :func:`drive_sync` in the caller's thread, which waits there. On a
  thread running an event loop it must not block: it raises
  :class:`Pending`, a 503 that carries the suspended steps.
- :func:`drive_async` on an event loop: ``verify_async`` and the FastAPI
  dependency finish a :class:`Pending` with it (``await pending.finish()``).

The token's arrival is taken once, when the miss starts, and travels inside
the generator; its outcome is reported once, by whoever ends the steps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator
from typing import Any

from grelmicro.jwt._snapshot import KeyWait, Wait
from grelmicro.jwt.errors import KeysUnavailableError

__all__ = ["Pending", "Result", "Steps", "drive_async", "drive_sync", "on_event_loop"]

#: The engine's answer: ``(payload, valid_until)``.
Result = tuple[Any, "float | None"]
Steps = Generator["Wait | KeyWait", "str | None", Result]


class Pending(KeysUnavailableError):  # noqa: N818 - a step of the flow, not a failure
    """A verification that waits for a fetch running on the event loop (HTTP 503 if dropped).

    Raised by :func:`drive_sync` on an event loop's thread, where blocking
    is not allowed. ``await pending.finish()`` (``verify_async`` and the
    FastAPI dependency do) waits for the fetch and returns the claims, or
    raises the final refusal; a caller that cannot await gets a plain 503.
    """

    def __init__(self, steps: Steps, wait: Wait | KeyWait, token: str | bytes, now: float) -> None:
        super().__init__("the keys this token needs are being fetched")
        self.token = token  # for the outcome's report and the cache; never in a message
        self.now = now  # the claims time the steps check against
        self.steps = steps
        self.first = wait
        self.retry_after = 1.0
        self.wait = "fetch-in-flight"
        self._finish: Callable[[Pending], Awaitable[Any]] | None = None

    def bind(self, finish: Callable[[Pending], Awaitable[Any]]) -> None:
        """How the verifier finishes it: drive, build the claims, store them, report once."""
        self._finish = finish

    async def finish(self) -> Any:
        """Wait for the fetch and return the claims (or raise the final refusal)."""
        if self._finish is None:  # not through a verifier's verify: the bare answer
            return await drive_async(self.steps, self.first)
        return await self._finish(self)


def on_event_loop() -> bool:
    """Whether this thread runs an event loop now (a sync call there must not block)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def drive_sync(steps: Steps, token: str | bytes, now: float = 0.0) -> Result:
    """Run ``steps`` in this thread (see the module docstring)."""
    try:
        wait = next(steps)
        while True:
            if on_event_loop():
                wait.hand_to_loop()
                raise Pending(steps, wait, token, now)
            wait = steps.send(wait.block())
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def drive_async(
    steps: Steps, wait: Wait | KeyWait, before_step: Callable[[], None] | None = None
) -> Result:
    """Run ``steps`` on this event loop, from ``wait`` on.

    ``before_step`` runs right before each resumption (the verifier notes
    which route the last step read from).
    """
    try:
        while True:
            sent = await wait.wait_async()
            if before_step is not None:
                before_step()
            wait = steps.send(sent)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
