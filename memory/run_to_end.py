"""``run_to_end``: finish a write even when the task awaiting it is cancelled.

A write to an asynchronous store runs on in its thread whatever the awaiting
task does, so abandoning it on cancellation leaves the caller unsure whether
the record is stored; the next write would then repeat or skip it. Awaiting
it to its end through any number of cancellations (Stop, then the socket
closing) and only then letting the cancellation through keeps the caller's
view of what is stored true.

That wait is bounded: a write that never ends (a database lock never
released, a channel-layer call that never answers) would otherwise keep the
cancelled task alive for ever, and with it the socket, the worker's shutdown
or a test's teardown. ``grace_s`` seconds after the first cancellation the
awaitable is cancelled and the cancellation goes through; what it wrote is
then unknown to the caller, whose memory must be restored from the store
before it writes again (the live chat's is: every turn restores).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")
logger = logging.getLogger(__name__)

CANCEL_GRACE_S = 10.0  # a cancelled caller waits this long for its write, then gives up


async def run_to_end(
    awaitable: Awaitable[T], grace_s: float | None = None
) -> tuple[asyncio.Future[T], bool]:
    """Await ``awaitable`` to its end; returns it done (its result or exception
    to read) and whether the caller was cancelled meanwhile (the caller then
    raises ``CancelledError`` once it has taken the outcome into account).

    Raises ``CancelledError`` itself, the awaitable cancelled, when the caller
    was cancelled and the awaitable has not ended ``grace_s`` seconds later
    (``None``: ``CANCEL_GRACE_S``)."""
    grace_s = CANCEL_GRACE_S if grace_s is None else grace_s
    future = asyncio.ensure_future(awaitable)
    cancelled_at: float | None = None
    loop = asyncio.get_running_loop()
    while not future.done():
        try:
            if cancelled_at is None:
                await asyncio.shield(future)
            else:
                left = cancelled_at + grace_s - loop.time()
                await asyncio.wait_for(asyncio.shield(future), max(left, 0.0))
        except asyncio.CancelledError:
            if cancelled_at is None:
                cancelled_at = loop.time()
        except TimeoutError:
            if future.done():
                break  # the awaitable's own timeout: the caller reads it from the future
            logger.warning(
                "a write still running %.0f s after its cancellation is abandoned", grace_s
            )
            future.cancel()
            raise asyncio.CancelledError from None
        except Exception:  # the awaitable's own failure: the caller reads it from the future
            break
    return future, cancelled_at is not None


async def cancel_and_wait(task: asyncio.Task[object]) -> None:
    """Cancel ``task`` and wait for its clean-up, which may write (an interrupted
    turn stores its partial answer, through ``run_to_end``, not cancelled any
    more); a clean-up still running after ``CANCEL_GRACE_S`` is cancelled
    again, which ``run_to_end`` lets through after its own grace. Does not
    re-raise the task's outcome."""
    task.cancel()
    await asyncio.wait([task], timeout=CANCEL_GRACE_S)
    if not task.done():
        logger.warning("a cancelled task's clean-up is still running: cancelling it")
        task.cancel()
        await asyncio.wait([task])
