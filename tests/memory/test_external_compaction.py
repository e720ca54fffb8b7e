"""A compaction another program made, applied and logged by ``record_external_compaction``."""

from __future__ import annotations

import pytest

from memory import (
    ChatMessage,
    CompactionError,
    CompactionMemory,
    CompactionMemoryConfig,
    InMemoryLogStore,
)


async def memory_with(store: InMemoryLogStore, *texts: str) -> CompactionMemory:
    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="s1", auto_compact=False), log_store=store
    )
    memory.set_system_prompt("Be brief.")
    for number, text in enumerate(texts):
        role = "user" if number % 2 == 0 else "assistant"
        await memory.add_message({"role": role, "content": text})
    return memory


async def test_the_context_is_the_tools_continuation_and_the_kept_messages() -> None:
    store = InMemoryLogStore()
    memory = await memory_with(store, "one", "two", "three", "four")

    record = memory.record_external_compaction(
        "They talked.",
        continuation="Summary from the tool: they talked.",
        replayed_seqs=[2],
        trigger="auto",
        tokens_before=9000,
        extra={"source_compaction": {"line": 7}},
    )

    assert [m.text for m in memory.get_context()] == [
        "Be brief.",
        "Summary from the tool: they talked.",
        "three",
    ]
    assert record.tokens_before == 9000
    assert record.summarized_seqs == [0, 3]
    assert (record.messages_compacted, record.messages_replayed) == (3, 1)
    assert record.tokens_after == memory.estimate_context_tokens()
    assert memory.compaction_count == 1
    logged = list(store.read("s1"))[-1]
    assert logged["type"] == "compaction"
    assert logged["source_compaction"] == {"line": 7}


async def test_a_restore_rebuilds_the_same_context() -> None:
    store = InMemoryLogStore()
    memory = await memory_with(store, "one", "two")
    memory.record_external_compaction("They talked.", continuation="Tool summary.")
    await memory.add_message(ChatMessage.user("three"))

    restored = CompactionMemory.restore_from_log("s1", log_store=store)

    assert restored.get_context() == memory.get_context()
    assert restored.estimate_context_tokens() == memory.estimate_context_tokens()


async def test_without_a_continuation_the_summary_gets_the_librarys_wording() -> None:
    memory = await memory_with(InMemoryLogStore(), "one", "two")

    memory.record_external_compaction("They talked.")

    assert "They talked." in memory.get_context()[1].text
    assert memory.get_context()[1].text != "They talked."


async def test_a_replayed_seq_outside_the_context_is_refused() -> None:
    memory = await memory_with(InMemoryLogStore(), "one", "two")

    with pytest.raises(CompactionError, match=r"seqs \[7\]"):
        memory.record_external_compaction("x", replayed_seqs=[7])
