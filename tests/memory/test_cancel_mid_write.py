"""A turn torn down at any await point leaves a log that restores: no record written twice.

The live chat cancels a turn when its socket closes, and the agent cancels it
when Stop is pressed; both can land while a record is being written to an
asynchronous store (a database through a thread). The write then commits
whatever the caller does. Before the fix the record stayed queued in the
recorder, and the clean-up's flush (the partial answer, the cancelled tool
results) wrote it a second time: ``message seq N does not follow seq N`` on
the next restore (the ``LogCorruptError`` of issue 18).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from contextlib import aclosing
from typing import Any

import pytest

from memory import (
    ChatMessage,
    CompactionMemory,
    CompactionMemoryConfig,
    ReActAgent,
    ToolCall,
    calculator,
)
from memory.log.in_memory import InMemoryLogStore
from memory.log.records import LogRecord
from memory.testing.strict import request_problems

from .conftest import FakeClient


class KillingStore(InMemoryLogStore):
    """An asynchronous store (each write in a thread, as the database store does)
    that tears the turn down while its ``kill_at``-th write is in flight."""

    def __init__(self, kill_at: int, twice: bool) -> None:
        super().__init__()
        self.kill_at = kill_at
        self.twice = twice
        self.writes = 0
        self.victim: asyncio.Task[Any] | None = None
        self.agent: ReActAgent | None = None

    async def append_async(self, session_id: str, record: LogRecord | Mapping[str, Any]) -> None:
        self.writes += 1
        if self.writes == self.kill_at and self.victim is not None:
            loop = asyncio.get_running_loop()
            if self.twice and self.agent is not None:
                loop.call_soon(self.agent.interrupt)  # Stop pressed...
            loop.call_soon(self.victim.cancel)  # ...and the socket closed
        await asyncio.to_thread(self._slow_append, session_id, record)

    def _slow_append(self, session_id: str, record: LogRecord | Mapping[str, Any]) -> None:
        time.sleep(0.02)  # a database round trip: the cancellation lands mid-write
        self.append(session_id, record)


def replies() -> list[ChatMessage | str | BaseException]:
    call = ToolCall(id="c1", name="calculator", arguments=json.dumps({"expression": "6*7"}))
    return [ChatMessage.assistant(None, [call]), "It is 42."]


async def run_turn(store: KillingStore, session_id: str | None) -> str:
    config = CompactionMemoryConfig(token_threshold=50_000, session_id=session_id)
    if session_id is None:
        memory = CompactionMemory(config=config, log_store=store, model_name="gpt-4o")
        memory.set_system_prompt("Be brief.")
    else:
        memory = CompactionMemory.restore_from_log(
            session_id, log_store=store, config=config, model_name="gpt-4o"
        )
    agent = ReActAgent(
        client=FakeClient(replies()), model_name="gpt-4o", memory=memory, tools=[calculator]
    )
    store.agent = agent

    async def consume() -> None:
        async with aclosing(agent.stream("What is 6 times 7?")) as events:
            async for _ in events:
                pass

    task = asyncio.create_task(consume())
    store.victim = task
    await asyncio.wait([task])
    store.victim = None
    return memory.session_id


# A turn with a tool call writes about five records (meta, system prompt, user,
# call, result, answer); killing at each of the first eight covers every one.
@pytest.mark.parametrize("twice", [False, True], ids=["closed", "stopped-then-closed"])
@pytest.mark.parametrize("kill_at", range(1, 9))
async def test_a_turn_killed_at_any_write_leaves_a_log_that_restores(
    kill_at: int, twice: bool
) -> None:
    store = KillingStore(kill_at, twice)
    session_id = await run_turn(store, None)
    store.kill_at = 0
    restored = CompactionMemory.restore_from_log(session_id, log_store=store, model_name="gpt-4o")
    seqs = [r["seq"] for r in store.read(session_id) if r.get("type") == "message"]
    assert seqs == list(range(len(seqs)))
    context = [m.to_dict() for m in restored.get_context()]
    assert request_problems("openai", {"model": "gpt-4o", "messages": context}) == []
    # The next turn continues the same log.
    await run_turn(store, session_id)
    CompactionMemory.restore_from_log(session_id, log_store=store, model_name="gpt-4o")
