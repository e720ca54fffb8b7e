"""An explicit ``compact()`` does what it is asked, on any context with something to fold.

The reference compacts when asked; code written against the design's API (a
custom ``compact_fn``, a manual ``compact()``, an ``on_compact`` callback, a
trace that records the compaction) gets a compaction on a short context too.
A summary longer than what it folds is a warning, not a refusal; automatic
compaction keeps the guard (it would fire again at every boundary).
"""

from __future__ import annotations

from typing import Any

import pytest

from memory import ChatMessage, CompactionMemory, CompactionMemoryConfig, InMemoryLogStore
from memory.compaction.summariser.with_model import CONTINUATION_TEMPLATE

from .conftest import answer, user

THREE = [user("Book a table for two at 8."), answer("Booked: table 14 at 20:00."), user("Thanks!")]


def short_memory(**kwargs: Any) -> tuple[CompactionMemory, InMemoryLogStore]:
    store = InMemoryLogStore()
    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="short", token_threshold=100_000),
        model_name="gpt-4o",
        log_store=store,
        **kwargs,
    )
    return memory, store


async def three_messages(memory: CompactionMemory) -> None:
    for message in THREE:
        await memory.add_message(message)


def compactions_in(store: InMemoryLogStore) -> list[dict[str, Any]]:
    return [r for r in store.read("short") if r["type"] == "compaction"]


@pytest.mark.parametrize("summariser", ["default", "compact_fn"])
async def test_a_manual_compact_on_three_messages_compacts_and_says_it_did_not_shrink(
    summariser: str,
) -> None:
    calls: list[list[ChatMessage]] = []

    def compact_fn(messages: list[ChatMessage], system_prompt: str) -> str:
        calls.append(messages)
        return "The user booked table 14 for two at 20:00, and wanted it remembered. " * 3

    stats: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"on_compact": stats.append}
    if summariser == "compact_fn":
        kwargs["compact_fn"] = compact_fn
    memory, store = short_memory(**kwargs)
    await three_messages(memory)
    before = memory.estimate_context_tokens()

    summary = await memory.compact()

    assert summary is not None
    assert memory.compaction_count == 1
    context = memory.get_context()
    assert context[0].text.startswith(CONTINUATION_TEMPLATE.split("{summary}")[0])
    assert context[-1] == ChatMessage.from_dict(THREE[-1])  # the pending request stays
    assert len(calls) == (1 if summariser == "compact_fn" else 0)
    # on_compact, the log and the trace all have it, with the warning.
    (record,) = compactions_in(store)
    assert record["trigger"] == "manual"
    assert record["messages_compacted"] == 2
    assert [s["compaction_number"] for s in stats] == [1]
    events = [e for e in memory.get_memory_trace()["events"] if e["type"] == "compaction"]
    assert len(events) == 1
    if record["tokens_after"] >= before:
        assert "would not make the context smaller" in record["warning"]
        assert stats[0]["warning"] == record["warning"] == events[0]["warning"]
    else:
        assert "warning" not in record
    assert not [e for e in memory.get_memory_trace()["events"] if e["type"] == "compaction_failed"]


async def test_a_summary_longer_than_what_it_folds_is_a_warning_on_a_manual_compact() -> None:
    memory, store = short_memory(compact_fn=lambda messages, prompt: "long summary " * 200)
    await three_messages(memory)

    assert await memory.compact() == "long summary " * 200

    (record,) = compactions_in(store)
    assert record["tokens_after"] > record["tokens_before"]
    assert record["warning"].startswith("compacted as asked, but the summary would not make")
    restored = CompactionMemory.restore_from_log("short", log_store=store, full_replay=True)
    assert restored.get_context() == memory.get_context()
    (traced,) = [e for e in restored.get_memory_trace()["events"] if e["type"] == "compaction"]
    assert traced["warning"] == record["warning"]


async def test_automatic_compaction_still_refuses_a_summary_that_does_not_shrink() -> None:
    memory = CompactionMemory(
        config=CompactionMemoryConfig(token_threshold=200),
        model_name="gpt-4o",
        compact_fn=lambda messages, prompt: "long summary " * 200,
    )
    for message in (user("Tell me about Oslo."), answer("word " * 250), user("More?")):
        await memory.add_message(message)

    assert memory.compaction_count == 0
    failed = [e for e in memory.get_memory_trace()["events"] if e["type"] == "compaction_failed"]
    assert failed
    assert "would not make the context smaller" in failed[-1]["error"]
