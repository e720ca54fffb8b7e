"""Tool-result clearing before summarising (issue 28, point 5).

With ``clear_tool_results`` on, a memory at its threshold first replaces tool
results older than the newest K with one-line stubs, and summarises only when
that is not enough. The clearing is a log record applied live and on restore,
and undoable.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from memory import (
    ChatMessage,
    CompactionError,
    CompactionMemory,
    CompactionMemoryConfig,
    ConfigurationError,
    InMemoryLogStore,
    JSONLLogStore,
)
from memory.log import LogStore

from .conftest import answer, calls, result, user

BIG = "order 771-20394-5 shipped from warehouse W-17, tracking 1Z999AA10123456784. " * 20


def summarise(messages: list[ChatMessage], system_prompt: str) -> str:
    return f"Summary of {len(messages)} messages."


def memory_with(
    store: LogStore, *, threshold: int, clear: bool = True, keep: int = 2, **config: Any
) -> CompactionMemory:
    memory = CompactionMemory(
        config=CompactionMemoryConfig(
            session_id="s",
            token_threshold=threshold,
            clear_tool_results=clear,
            clear_keep_tool_results=keep,
            **config,
        ),
        log_store=store,
        model_name="gpt-4o",
        compact_fn=summarise,
    )
    memory.set_system_prompt("Be precise.")
    return memory


async def tool_rounds(memory: CompactionMemory, count: int, *, name: str = "lookup") -> None:
    await memory.add_message(ChatMessage.from_dict(user("Where are my orders?")))
    for n in range(count):
        await memory.add_message(ChatMessage.from_dict(calls(f"call_{n}", name=name)))
        await memory.add_message(ChatMessage.from_dict(result(f"call_{n}", f"#{n} " + BIG, name)))
    await memory.add_message(ChatMessage.from_dict(answer("All shipped.")))


def types_of(store: LogStore) -> list[str]:
    return [r["type"] for r in store.read("s") if r["type"] != "message"]


def dicts(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    return [m.to_dict() for m in messages]


async def test_it_clears_old_tool_results_instead_of_summarising_when_that_is_enough() -> None:
    store = InMemoryLogStore()
    memory = memory_with(store, threshold=1_500, keep=2)
    await tool_rounds(memory, 6)

    assert memory.compaction_count == 0
    assert memory.summary is None
    assert "tool_results_cleared" in types_of(store)
    assert memory.estimate_context_tokens() <= 1_500
    results = [m for m in memory.get_context() if m.role == "tool"]
    assert [m.tool_call_id for m in results] == [f"call_{n}" for n in range(6)]
    stubs, whole = results[:-2], results[-2:]
    for message in stubs:
        assert message.text.startswith("[tool result cleared: lookup call ")
        assert f"call {message.tool_call_id} returned" in message.text
        assert "tokens" in message.text
        assert "bytes" in message.text
        assert "full result is in the session log" in message.text
        assert message.name == "lookup"
    assert all(BIG in m.text for m in whole)
    # Still valid: every result right after the call it answers, in order.
    context = memory.get_context()
    for n in range(6):
        position = next(i for i, m in enumerate(context) if m.tool_call_id == f"call_{n}")
        assert [c.id for c in context[position - 1].tool_calls] == [f"call_{n}"]
    # The log keeps every full result.
    logged = [r["message"] for r in store.read("s") if r["type"] == "message"]
    assert sum(m["role"] == "tool" and BIG in m["content"] for m in logged) == 6


async def test_without_the_policy_the_same_conversation_is_summarised() -> None:
    store = InMemoryLogStore()
    memory = memory_with(store, threshold=1_500, clear=False)
    await tool_rounds(memory, 6)
    assert memory.compaction_count >= 1
    assert "tool_results_cleared" not in types_of(store)


async def test_it_summarises_when_clearing_is_not_enough() -> None:
    store = InMemoryLogStore()
    memory = memory_with(store, threshold=1_200, keep=0)
    for n in range(4):
        # Long requests: clearing the results cannot bring the context under 1,200.
        await memory.add_message(ChatMessage.from_dict(user(f"Request {n}: " + "detail " * 250)))
        await memory.add_message(ChatMessage.from_dict(calls(f"call_{n}")))
        await memory.add_message(ChatMessage.from_dict(result(f"call_{n}", "x" * 1_200)))
        await memory.add_message(ChatMessage.from_dict(answer(f"Done {n}.")))
    kinds = types_of(store)
    # At least one step cleared and went on to summarise at once.
    assert ("tool_results_cleared", "compaction") in set(itertools.pairwise(kinds))
    assert memory.compaction_count >= 1


async def test_a_restore_reproduces_the_cleared_context_exactly(tmp_path: Path) -> None:
    store = JSONLLogStore(tmp_path)
    memory = memory_with(store, threshold=1_500)
    await tool_rounds(memory, 6)
    await memory.flush()
    restored = CompactionMemory.restore_from_log("s", log_store=store, compact_fn=summarise)
    assert dicts(restored.get_context()) == dicts(memory.get_context())
    assert restored.estimate_context_tokens() == memory.estimate_context_tokens()
    assert memory.clearing_in_force is not None
    assert restored.clearing_in_force == memory.clearing_in_force
    assert restored.restore_problems == []
    # And the restored memory goes on exactly as the live one does.
    await memory.add_message(ChatMessage.from_dict(user("One more?")))
    await restored.add_message(ChatMessage.from_dict(user("One more?")))
    assert dicts(restored.get_context()) == dicts(memory.get_context())


async def test_undo_gives_the_results_back_live_and_on_restore(tmp_path: Path) -> None:
    store = JSONLLogStore(tmp_path)
    memory = memory_with(store, threshold=1_500)
    await tool_rounds(memory, 2)  # under the threshold: nothing cleared yet
    before = dicts(memory.get_context())
    cleared = memory.clear_tool_results(keep=0)
    assert cleared is not None
    assert [i["seq"] for i in cleared.cleared or []] == [2, 4]
    assert dicts(memory.get_context()) != before

    assert memory.restore_tool_results("operator wants them back", number=1) == 1
    assert dicts(memory.get_context()) == before
    assert memory.clearing_in_force is None
    await memory.flush()
    restored = CompactionMemory.restore_from_log("s", log_store=store)
    assert dicts(restored.get_context()) == before
    with pytest.raises(CompactionError, match="no clearing is in force"):
        memory.restore_tool_results()


async def test_undoing_a_compaction_brings_back_the_stubs_it_folded_and_then_the_results(
    tmp_path: Path,
) -> None:
    store = JSONLLogStore(tmp_path)
    memory = memory_with(store, threshold=100_000)
    await tool_rounds(memory, 3)
    whole = dicts(memory.get_context())
    memory.clear_tool_results(keep=0)
    stubbed = dicts(memory.get_context())
    assert await memory.compact() is not None
    assert memory.clearing_in_force is None  # the compaction folded every stub

    memory.revert_last_compaction()
    assert dicts(memory.get_context()) == stubbed
    memory.restore_tool_results()
    assert dicts(memory.get_context()) == whole

    # The same from the log: a restore starts at the compaction's checkpoint and
    # reads what came before it when the compaction is undone.
    await memory.flush()
    assert dicts(CompactionMemory.restore_from_log("s", log_store=store).get_context()) == whole


async def test_excluded_tools_and_the_newest_results_stay_whole() -> None:
    store = InMemoryLogStore()
    memory = memory_with(store, threshold=100_000, clear_exclude_tools=["read_policy"])
    await memory.add_message(ChatMessage.from_dict(user("Check.")))
    for n, name in enumerate(["read_policy", "lookup", "lookup", "lookup"]):
        await memory.add_message(ChatMessage.from_dict(calls(f"c{n}", name=name)))
        await memory.add_message(ChatMessage.from_dict(result(f"c{n}", BIG, name)))
    await memory.add_message(ChatMessage.from_dict(answer("Done.")))
    record = memory.clear_tool_results(keep=1)
    assert record is not None
    assert [(i["name"], i["tool_call_id"]) for i in record.cleared or []] == [
        ("lookup", "c1"),
        ("lookup", "c2"),
    ]
    assert record.tokens_after is not None
    assert record.tokens_before is not None
    assert record.tokens_after < record.tokens_before


async def test_a_clearing_that_frees_less_than_the_minimum_is_not_made() -> None:
    store = InMemoryLogStore()
    memory = memory_with(store, threshold=100_000, clear_at_least_tokens=1_000_000)
    await tool_rounds(memory, 3)
    assert memory.clear_tool_results(keep=0) is None
    assert "tool_results_cleared" not in types_of(store)


async def test_the_turn_a_compaction_keeps_is_never_cleared() -> None:
    memory = memory_with(InMemoryLogStore(), threshold=100_000)
    await memory.add_message(ChatMessage.from_dict(user("Check.")))
    await memory.add_message(ChatMessage.from_dict(calls("a", "b")))
    await memory.add_message(ChatMessage.from_dict(result("a", BIG)))
    await memory.add_message(ChatMessage.from_dict(result("b", BIG)))
    # The batch is the newest turn unit: a compaction would keep it verbatim.
    assert memory.clear_tool_results(keep=0) is None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("clear_keep_tool_results", -1),
        ("clear_at_least_tokens", 1.5),
        ("clear_exclude_tools", "lookup"),
        ("clear_tool_results", "yes"),
    ],
)
def test_a_bad_clearing_setting_is_refused_at_construction(field: str, value: object) -> None:
    with pytest.raises(ConfigurationError, match=field):
        CompactionMemoryConfig(**{field: value})  # type: ignore[arg-type]


def test_the_clearing_settings_round_trip_through_the_session_meta_config() -> None:
    config = CompactionMemoryConfig(
        clear_tool_results=True, clear_keep_tool_results=5, clear_exclude_tools=("read_policy",)
    )
    assert CompactionMemoryConfig.from_dict(config.to_dict()) == config


def test_the_clearing_records_round_trip_and_keep_what_a_newer_library_adds() -> None:
    from memory.log.records import ToolResultsCleared, ToolResultsRestored, record_from_dict

    cleared = {
        "type": "tool_results_cleared",
        "ts": "2026-12-02T04:00:00+00:00",
        "clearing_number": 2,
        "trigger": "auto",
        "through_seq": 41,
        "keep": 3,
        "cleared": [{"seq": 7, "tool_call_id": "c1", "name": "lookup", "stub": "[...]"}],
        "tokens_before": 5_100,
        "tokens_after": 2_300,
        "newer_field": {"x": 1},
    }
    restored = {"type": "tool_results_restored", "reverts": 2, "through_seq": 45}
    assert isinstance(record_from_dict(cleared), ToolResultsCleared)
    assert isinstance(record_from_dict(restored), ToolResultsRestored)
    assert record_from_dict(cleared).to_dict() == cleared
    assert record_from_dict(restored).to_dict() == restored
