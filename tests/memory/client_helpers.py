"""Small helpers shared by the model-client tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Literal

from memory.clients.base import ChatStreamEvent
from memory.testing.scripted_server import ScriptedReply, ScriptedServer


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


def strict_server(
    api: Literal["openai", "anthropic"], script: Sequence[ScriptedReply | Mapping[str, Any]]
) -> ScriptedServer:
    """A strict scripted server (it refuses what a strict provider would) playing
    ``script`` on ``api``."""
    if api == "openai":
        return ScriptedServer(openai=script, strict=True)
    return ScriptedServer(anthropic=script, strict=True)
