"""Steps that yield calls: one generator, a sync and an async driver.

A check or a fetch that needs I/O is written once, as a generator that
yields each call it needs made (a GET, a replay-store record) and gets the
answer sent back, or the call's error thrown in at the ``yield``. The
drivers make the calls:

- :func:`run_async` awaits them, on the caller's event loop;
- :func:`run_sync` makes them in this thread, by running :func:`run_async`
  with a call that answers at once: its coroutine never suspends, so one
  ``send`` runs it to its end. The loop is written once, for both.

The key path's steps (:mod:`grelmicro.jwt._steps`) wait on a shared fetch
instead of making a call, and have their own drivers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import TypeVar

__all__ = ["run_async", "run_sync"]

Call = TypeVar("Call")
Answer = TypeVar("Answer")
Result = TypeVar("Result")

#: The errors of a call that are thrown into the steps (the others end them).
Errors = type[Exception] | tuple[type[Exception], ...]


async def run_async(
    steps: Generator[Call, Answer, Result],
    call: Callable[[Call], Awaitable[Answer]],
    *,
    errors: Errors = Exception,
) -> Result:
    """Run ``steps``, awaiting ``call`` on each call they yield; their return value."""
    try:
        request = next(steps)
        while True:
            try:
                answer = await call(request)
            except errors as exc:  # noqa: PERF203 - a call a step; its error goes back in
                request = steps.throw(exc)
            else:
                request = steps.send(answer)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def run_sync(
    steps: Generator[Call, Answer, Result],
    call: Callable[[Call], Answer],
    *,
    errors: Errors = Exception,
) -> Result:
    """Run ``steps`` in this thread, ``call`` making each call they yield; their return value."""

    async def at_once(request: Call) -> Answer:
        return call(request)

    coroutine = run_async(steps, at_once, errors=errors)
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coroutine.close()  # pragma: no cover - at_once never suspends
    raise RuntimeError("a sync call suspended")  # pragma: no cover
