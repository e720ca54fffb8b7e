"""Names and behaviours code written for the reference implementation relies on."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory import (
    BasicMemory,
    CompactionMemory,
    CompactionMemoryConfig,
    InMemoryLogStore,
    JSONLLogStore,
    SessionNotFoundError,
)
from memory.log import records

from .conftest import answer, calls, result, user

LONG = "word " * 250


def memory_with(store: InMemoryLogStore, threshold: int = 400) -> CompactionMemory:
    numbers = iter(range(1, 100))
    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="ref", token_threshold=threshold),
        compact_fn=lambda messages, system_prompt: f"summary {next(numbers)}",
        log_store=store,
        model_name="gpt-4o",
    )
    memory.set_system_prompt("You book flights.")
    return memory


async def test_clear_messages_empties_the_conversation_but_keeps_prompt_and_trace() -> None:
    store = InMemoryLogStore()
    memory = memory_with(store)
    for message in (user("q " + LONG), answer(LONG), user("next")):
        await memory.add_message(message)
    assert memory.compaction_count == 1
    events_before = memory.get_memory_trace()["total_events"]

    cleared = memory.clear_messages()

    assert cleared == 2  # the continuation and the pending request
    assert [m.role for m in memory.get_context()] == ["system"]
    assert memory.system_prompt == "You book flights."
    assert memory.summary is None
    trace = memory.get_memory_trace()
    assert trace["total_events"] == events_before + 1
    assert trace["events"][-1]["type"] == "messages_cleared"
    assert memory.compaction_count == 1  # numbering goes on
    (reset,) = [r for r in store.read("ref") if r["type"] == records.RESET]
    assert reset["scope"] == records.RESET_SCOPE_MESSAGES


async def test_after_clear_messages_compactions_go_on_numbering_and_restore_is_exact() -> None:
    store = InMemoryLogStore()
    memory = memory_with(store)
    for message in (user("q " + LONG), answer(LONG)):
        await memory.add_message(message)
    memory.clear_messages()
    for message in (user("again " + LONG), answer(LONG), user("and now?")):
        await memory.add_message(message)
    assert memory.compaction_count == 2

    restored = CompactionMemory.restore_from_log("ref", log_store=store)

    assert restored.get_context() == memory.get_context()
    assert restored.compaction_count == 2
    assert restored.restore_problems == []
    numbers = [r["compaction_number"] for r in store.read("ref") if r["type"] == "compaction"]
    assert numbers == [1, 2]


async def test_clear_messages_with_an_open_tool_batch_leaves_a_clean_boundary() -> None:
    memory = memory_with(InMemoryLogStore(), threshold=100_000)
    for message in (user("go"), calls("a", "b"), result("a")):
        await memory.add_message(message)
    assert not memory.at_boundary
    memory.clear_messages()
    assert memory.at_boundary
    await memory.add_message(result("b"))  # a late result is an orphan now
    assert [m.role for m in memory.get_context()] == ["system"]


async def test_reset_unlike_clear_messages_forgets_the_trace() -> None:
    memory = memory_with(InMemoryLogStore())
    await memory.add_message(user("hi"))
    memory.reset()
    assert memory.get_memory_trace()["total_events"] == 0


async def test_a_basic_memory_clears_its_messages_too() -> None:
    memory = BasicMemory(system_prompt="Be brief.")
    await memory.add_message(user("hi"))
    await memory.add_message(answer("hello"))
    assert memory.clear_messages() == 2
    assert [m.role for m in memory.get_context()] == ["system"]
    assert memory.get_memory_trace()["total_events"] == 3


async def test_a_tool_result_trace_event_names_its_tool() -> None:
    memory = BasicMemory()
    await memory.add_message(user("weather?"))
    await memory.add_message(calls("c1", name="weather"))
    await memory.add_message({"role": "tool", "tool_call_id": "c1", "content": "sunny"})
    await memory.add_message(result("c2", name="forecast"))
    events = [e for e in memory.get_memory_trace()["events"] if e.get("role") == "tool"]
    assert [e["tool_name"] for e in events] == [None, "forecast"]
    assert all("tool_name" not in e for e in memory.get_memory_trace()["events"][:2])


def test_restoring_an_unknown_session_raises_what_reference_code_catches(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no conversation log"):
        CompactionMemory.restore_from_log("never-existed", log_base_path=tmp_path)
    with pytest.raises(SessionNotFoundError):
        CompactionMemory.restore_from_log("never-existed", log_store=JSONLLogStore(tmp_path))
    with pytest.raises(LookupError):
        CompactionMemory.restore_from_log("never-existed", log_store=InMemoryLogStore())


def test_enable_memory_tools_is_accepted_by_every_memory_like_the_reference() -> None:
    assert BasicMemory(enable_memory_tools=False).build_tools() == []
    assert len(memory_with(InMemoryLogStore()).build_tools()) == 2
    off = CompactionMemory(log_store=InMemoryLogStore(), enable_memory_tools=False)
    assert off.build_tools() == []
