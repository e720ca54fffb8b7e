"""``upgrade_records`` leaves a log the current library wrote as it is, whatever
the memory did: rewinds and their undo, undone compactions, corrected
summaries, a forced compaction, a fork's first records, a reset. (An import
upgrades every Motus log it reads: a record it had to change or could not
apply would make an export fail to import back unchanged.)"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from memory import (
    ChatMessage,
    CompactionMemory,
    CompactionMemoryConfig,
    InMemoryLogStore,
    LogPoint,
    LogProblem,
    upgrade_records,
)

Act = Callable[[CompactionMemory], Awaitable[CompactionMemory]]


async def talk(memory: CompactionMemory, turns: int, start: int = 0) -> None:
    for turn in range(start, start + turns):
        await memory.add_message(ChatMessage.user(f"Where is booking B{turn}?"))
        await memory.add_message(ChatMessage.assistant(f"B{turn} flies to city {turn}. " * 20))


async def compacted(log: InMemoryLogStore) -> CompactionMemory:
    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="s1", token_threshold=600),
        log_store=log,
        model_name="gpt-4o",
    )
    memory.set_system_prompt("You are a booking assistant.")
    await talk(memory, 8)
    assert memory.compaction_count >= 2
    return memory


async def rewind(memory: CompactionMemory) -> CompactionMemory:
    memory.rewind(LogPoint("after_message", 5), reason="back")
    await talk(memory, 2, start=20)
    return memory


async def undo_rewind(memory: CompactionMemory) -> CompactionMemory:
    number = memory.rewind(LogPoint("after_message", 3))
    await talk(memory, 1, start=30)
    memory.rewind(LogPoint("before_rewind", number))
    return memory


async def rewind_before_a_compaction(memory: CompactionMemory) -> CompactionMemory:
    memory.rewind(LogPoint("before_compaction", 2))
    return memory


async def undo_twice(memory: CompactionMemory) -> CompactionMemory:
    memory.revert_last_compaction("undo")
    memory.revert_last_compaction("undo again")
    await talk(memory, 1, start=40)
    return memory


async def correct(memory: CompactionMemory) -> CompactionMemory:
    memory.correct_summary("B1 flies to city 1.", reason="fix")
    return memory


async def compact_now(memory: CompactionMemory) -> CompactionMemory:
    await memory.compact(instructions="Keep the booking ids.")
    return memory


async def fork(memory: CompactionMemory) -> CompactionMemory:
    child = memory.fork(session_id="s2")
    await talk(child, 1, start=50)
    return child


async def reset(memory: CompactionMemory) -> CompactionMemory:
    memory.reset()
    await talk(memory, 5, start=60)
    return memory


ACTS: list[Act] = [
    rewind,
    undo_rewind,
    rewind_before_a_compaction,
    undo_twice,
    correct,
    compact_now,
    fork,
    reset,
]


def as_json(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [json.loads(json.dumps(record)) for record in records]


@pytest.mark.parametrize("act", ACTS, ids=lambda act: act.__name__)
async def test_a_log_the_memory_wrote_is_current_whatever_it_did(act: Act) -> None:
    log = InMemoryLogStore()
    memory = await act(await compacted(log))
    records = list(log.read(memory.session_id))
    problems: list[LogProblem] = []

    upgraded = upgrade_records(records, problems=problems)

    assert problems == []
    assert as_json(upgraded) == records
    again = InMemoryLogStore()
    for record in upgraded:
        again.append(memory.session_id, record)
    restored = CompactionMemory.restore_from_log(memory.session_id, log_store=again)
    assert restored.get_context() == memory.get_context()
