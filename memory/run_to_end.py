"""``run_to_end``: finish a write even when the task awaiting it is cancelled.

A write to an asynchronous store runs on in its thread whatever the awaiting
task does, so abandoning it on cancellation leaves the caller unsure whether
the record is stored; the next write would then repeat or skip it. Awaiting
it to its end through any number of cancellations (Stop, then the socket
closing) and only then letting the cancellation through keeps the caller's
view of what is stored true.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def run_to_end(awaitable: Awaitable[T]) -> tuple[asyncio.Future[T], bool]:
    """Await ``awaitable`` to its end; returns it done (its result or exception
    to read) and whether the caller was cancelled meanwhile (the caller then
    raises ``CancelledError`` once it has taken the outcome into account)."""
    future = asyncio.ensure_future(awaitable)
    cancelled = False
    while not future.done():
        try:
            await asyncio.shield(future)
        except asyncio.CancelledError:
            cancelled = True
        except Exception:  # the awaitable's own failure: the caller reads it from the future
            break
    return future, cancelled
