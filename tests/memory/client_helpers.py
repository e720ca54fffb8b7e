"""Small helpers shared by the model-client tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

from memory.clients.base import ChatStreamEvent


async def consume(stream: AsyncIterator[ChatStreamEvent], into: list[ChatStreamEvent]) -> None:
    """Append each event of ``stream`` to ``into`` (so a test sees what came before a failure)."""
    async for event in stream:
        into.append(event)


async def wait_for(condition: Callable[[], object], timeout_s: float = 3.0) -> None:
    """Poll ``condition`` (set by the server's thread) until true; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("the condition did not become true in time")
        await asyncio.sleep(0.01)
