"""Rewind in place, undo of every compaction in turn, summary corrections, compaction on demand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from memory import (
    ChatMessage,
    CompactionError,
    CompactionMemory,
    CompactionMemoryConfig,
    InMemoryLogStore,
    JSONLLogStore,
    LogPoint,
    PointNotFoundError,
)
from memory.log import LogStore

from .conftest import answer, calls, result, user


def dicts(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    return [m.to_dict() for m in messages]


def summarise(messages: list[ChatMessage], system_prompt: str) -> str:
    return f"Summary of {len(messages)} messages ending {messages[-1].text[-20:]!r}"


def logged_memory(store: LogStore, threshold: int = 250, **kwargs: Any) -> CompactionMemory:
    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="s", token_threshold=threshold),
        log_store=store,
        model_name="gpt-4o",
        compact_fn=summarise,
        **kwargs,
    )
    memory.set_system_prompt("Be precise.")
    return memory


async def turns(memory: CompactionMemory, start: int, count: int) -> None:
    for n in range(start, start + count):
        await memory.add_message(user(f"Question {n} about booking B{n:03d}? " + "pad " * 30))
        await memory.add_message(answer(f"Answer {n}: booking B{n:03d} is fine. " + "pad " * 30))


def restored(store: LogStore) -> CompactionMemory:
    return CompactionMemory.restore_from_log("s", log_store=store)


async def test_a_rewind_continues_the_session_in_place_from_an_earlier_message(
    tmp_path: Path,
) -> None:
    store = JSONLLogStore(tmp_path)
    memory = logged_memory(store, threshold=10_000)
    await turns(memory, 0, 4)  # seqs 0..7
    at_seq_3 = memory.state_at(LogPoint("after_message", 3)).get_context()

    assert memory.rewind(LogPoint("after_message", 3), reason="wrong turn") == 1

    assert memory.get_context() == at_seq_3
    await memory.add_message(user("A different question."))
    assert memory.next_seq == 9  # seqs keep growing: 4..7 stay in the log, no longer in force
    assert [m.text for m in memory.messages][-1] == "A different question."
    assert dicts(restored(store).get_context()) == dicts(memory.get_context())
    full = CompactionMemory.restore_from_log("s", log_store=store, full_replay=True)
    assert dicts(full.get_context()) == dicts(memory.get_context())
    logged = [orjson.loads(line) for line in (tmp_path / "s.jsonl").read_bytes().splitlines()]
    assert [r["seq"] for r in logged if r["type"] == "message"] == list(range(9))
    [rewind] = [r for r in logged if r["type"] == "rewind"]
    assert rewind["target"] == {"after_message": 3}
    assert (rewind["through_seq"], rewind["reason"]) == (7, "wrong turn")


async def test_a_rewind_can_be_undone_by_rewinding_to_just_before_it() -> None:
    store = InMemoryLogStore()
    memory = logged_memory(store, threshold=10_000)
    await turns(memory, 0, 3)
    before = memory.get_context()
    memory.rewind(LogPoint("after_message", 1))
    assert memory.get_context() != before

    memory.rewind(LogPoint("before_rewind", 1))

    assert memory.get_context() == before
    assert dicts(restored(store).get_context()) == dicts(before)


async def test_a_rewind_to_before_a_compaction_brings_back_what_it_folded() -> None:
    store = InMemoryLogStore()
    memory = logged_memory(store)
    await turns(memory, 0, 8)
    assert memory.compaction_count >= 2
    before_first = memory.state_at(LogPoint("before_compaction", 1)).get_context()
    assert not any(m.text.startswith("This session is being continued") for m in before_first)

    memory.rewind(LogPoint("before_compaction", 1))

    assert memory.get_context() == before_first
    assert memory.summary is None
    await turns(memory, 10, 3)  # compacts again, with a new number
    assert memory.compaction_count > 2
    assert dicts(restored(store).get_context()) == dicts(memory.get_context())


async def test_a_rewind_means_the_compaction_it_could_see_after_a_reset_renumbers(
    tmp_path: Path,
) -> None:
    # reset() numbers compactions from 1 again: a full read of the log must
    # take the rewind's "before compaction 1" as the one before the rewind,
    # not the newer compaction 1 after the reset.
    store = JSONLLogStore(tmp_path)
    memory = logged_memory(store)
    await turns(memory, 0, 4)
    assert memory.compaction_count >= 1
    memory.rewind(LogPoint("before_compaction", 1))
    # A compaction that keeps messages only the rewind brought back.
    memory.record_external_compaction("Earlier turns, summarised.", replayed_seqs=[4, 5])
    memory.reset()
    await turns(memory, 4, 4)  # compaction 1 again
    assert memory.compaction_count >= 1
    await memory.flush()

    full = CompactionMemory.restore_from_log("s", log_store=store, full_replay=True)
    fast = restored(store)

    assert full.restore_problems == fast.restore_problems == []
    assert dicts(full.get_context()) == dicts(fast.get_context()) == dicts(memory.get_context())


async def test_a_rewind_inside_a_tool_round_is_refused_naming_the_open_calls() -> None:
    store = InMemoryLogStore()
    memory = logged_memory(store, threshold=10_000)
    await memory.add_message(user("Look both up."))
    await memory.add_message(calls("c1", "c2"))
    await memory.add_message(result("c1"))
    await memory.add_message(result("c2"))

    with pytest.raises(CompactionError, match="c2"):
        memory.rewind(LogPoint("after_message", 2))
    with pytest.raises(PointNotFoundError):
        memory.rewind(LogPoint("after_message", 99))
    memory.rewind(LogPoint("after_message", 3))  # the end of the round is a boundary
    assert memory.at_boundary


async def test_a_memory_without_a_log_cannot_rewind() -> None:
    memory = CompactionMemory(config=CompactionMemoryConfig(token_threshold=10_000))
    await memory.add_message(user("hi"))
    with pytest.raises(CompactionError, match="no log"):
        memory.rewind(LogPoint("after_message", 0))


async def test_every_compaction_can_be_undone_in_turn_down_to_the_first() -> None:
    store = InMemoryLogStore()
    memory = logged_memory(store)
    await turns(memory, 0, 20)
    numbers = memory.compaction_count
    assert numbers >= 5  # more than the memory holds snapshots for

    for number in range(numbers, 0, -1):
        since = memory.messages[1:]  # what came after the summary: the kept and newer messages
        before = memory.state_at(LogPoint("before_compaction", number))
        assert memory.revert_last_compaction(f"undo {number}", number=number) == number
        # The context before that compaction, then every message added since it,
        # each once.
        kept_again = [m for m in since if m not in before.messages]
        assert memory.messages == [*before.messages, *kept_again]
        assert dicts(restored(store).get_context()) == dicts(memory.get_context())
    assert memory.summary is None
    with pytest.raises(CompactionError, match="no compaction is in force"):
        memory.revert_last_compaction()


async def test_an_undo_names_its_target_and_refuses_another() -> None:
    store = InMemoryLogStore()
    memory = logged_memory(store)
    await turns(memory, 0, 6)
    latest = memory.compaction_in_force
    assert latest is not None
    with pytest.raises(CompactionError, match=f"compaction {latest} is the one in force"):
        memory.revert_last_compaction(number=latest - 1)


async def test_a_corrected_summary_is_what_the_context_and_every_restore_carry() -> None:
    store = InMemoryLogStore()
    memory = logged_memory(store)
    await turns(memory, 0, 4)
    original = memory.summary
    assert original is not None

    memory.correct_summary("The user booked B000 and B001; keep both.", reason="missing ids")

    assert memory.summary == "The user booked B000 and B001; keep both."
    assert "B000 and B001" in memory.get_context()[1].text
    for again in (
        restored(store),
        CompactionMemory.restore_from_log("s", log_store=store, full_replay=True),
    ):
        assert dicts(again.get_context()) == dicts(memory.get_context())
    records = list(store.read("s"))
    number = memory.compaction_in_force
    [compaction] = [
        r for r in records if r["type"] == "compaction" and r["compaction_number"] == number
    ]
    assert compaction["summary"] == original  # the original stays on its record
    [correction] = [r for r in records if r["type"] == "summary_correction"]
    assert (correction["compaction_number"], correction["reason"]) == (number, "missing ids")
    with pytest.raises(CompactionError, match="must not be empty"):
        memory.correct_summary("  ")


async def test_compact_now_passes_its_instructions_and_the_budget_to_the_summariser() -> None:
    asked: list[dict[str, Any]] = []

    def summariser(
        messages: list[ChatMessage], system_prompt: str, *, budget_tokens: int, instructions: str
    ) -> str:
        asked.append({"budget": budget_tokens, "instructions": instructions})
        return "Booking references: B000, B001."

    store = InMemoryLogStore()
    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="s", token_threshold=10_000),
        log_store=store,
        model_name="gpt-4o",
        compact_fn=summariser,
    )
    await turns(memory, 0, 2)

    assert await memory.compact(instructions="keep every booking reference") is not None

    assert asked[0]["instructions"] == "keep every booking reference"
    assert 64 <= asked[0]["budget"] <= memory.config.summary_max_tokens
    [record] = [r for r in store.read("s") if r["type"] == "compaction"]
    assert (record["trigger"], record["instructions"]) == (
        "manual",
        "keep every booking reference",
    )


async def test_a_restore_of_a_session_snapshot_can_still_undo_its_compaction() -> None:
    store = InMemoryLogStore()
    memory = logged_memory(store)
    await turns(memory, 0, 4)
    again = CompactionMemory.restore(memory.get_session_state(), log_store=store)
    memory.revert_last_compaction()
    assert again.revert_last_compaction() == memory.compaction_count
    assert again.get_context() == memory.get_context()


async def test_tool_schemas_are_logged_and_restored_with_the_session() -> None:
    store = InMemoryLogStore()
    memory = logged_memory(store, threshold=10_000)
    schema = {"type": "function", "function": {"name": "lookup", "parameters": {}}}
    memory.set_tools([schema])
    await turns(memory, 0, 1)
    other = {"type": "function", "function": {"name": "book", "parameters": {}}}
    memory.set_tools([schema, other])
    await turns(memory, 1, 1)

    records = list(store.read("s"))
    assert records[0]["tools"] == [schema]
    [change] = [r for r in records if r["type"] == "tools"]
    assert change["schemas"] == [schema, other]
    assert change["tokens"] == memory.tool_schema_tokens
    back = restored(store)
    assert back.tool_schemas == [schema, other]
    assert back.estimate_context_tokens() == memory.estimate_context_tokens()
    assert memory.state_at(LogPoint("after_message", 1)).tool_schemas == [schema]
