"""The operator's word: what Compact now's instructions name is pinned, and a
corrected summary is authoritative, through later compactions and restores."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from memory import (
    ChatMessage,
    CompactionError,
    CompactionMemory,
    CompactionMemoryConfig,
    InMemoryLogStore,
)
from memory.compaction import pins
from memory.compaction.ledger import LEDGER_HEADING, Ledger
from memory.compaction.offline.layout import parse

from .conftest import answer, calls, result, user

IDS = ["JG7FMM", "LQ940Q", "2FBBAH", "X7BYG1", "EQ1G6C", "BOH180"]
INSTRUCTIONS = f"keep every reservation id ({', '.join(IDS)})"
SESSION = "pins"


def drops_things(messages: list[ChatMessage], system_prompt: str) -> str:
    """A careless summariser: it keeps one line and no identifier."""
    return "The user talked to the airline about their trips."


def new_memory(summariser: str, store: InMemoryLogStore) -> CompactionMemory:
    kwargs: dict[str, Any] = {"compact_fn": drops_things} if summariser == "compact_fn" else {}
    return CompactionMemory(
        config=CompactionMemoryConfig(session_id=SESSION, token_threshold=1_200),
        model_name="gpt-4o",
        log_store=store,
        **kwargs,
    )


def reservations(n: int) -> str:
    """A tool result naming the six reservations among many decoy ids."""
    rows = [
        {"reservation_id": rid, "flight": f"HAT{100 + n * 7 + i}", "seat": f"{i + 3}C"}
        for i, rid in enumerate(IDS)
    ]
    decoys = [{"reservation_id": f"ZZ{n}{i:03d}Q", "status": "cancelled"} for i in range(30)]
    return json.dumps({"reservations": rows, "others": decoys})


async def a_busy_turn(memory: CompactionMemory, n: int) -> None:
    await memory.add_message(user(f"Please look at my trips again, round {n}."))
    await memory.add_message(calls(f"c{n}"))
    await memory.add_message(result(f"c{n}", reservations(n)))
    await memory.add_message(answer(f"Round {n}: every trip is in business. " + "Noted. " * 30))


async def small_talk(memory: CompactionMemory, n: int) -> None:
    await memory.add_message(user(f"Tell me about lounge {n}. " + "Fine. " * 60))
    await memory.add_message(answer(f"Lounge {n} is quiet and has showers. " + "Yes. " * 80))


def auto(memory: CompactionMemory, *, on: bool) -> None:
    """Turn automatic compaction on or off (the session is set up by hand first)."""
    memory.config = dataclasses.replace(memory.config, auto_compact=on)


def context_text(memory: CompactionMemory) -> str:
    return "\n".join(m.text for m in memory.get_context())


async def compact_again(memory: CompactionMemory) -> None:
    """Talk until an automatic compaction happens, then talk once more and
    compact by hand: two later compactions."""
    start = memory.compaction_count
    n = 0
    while memory.compaction_count == start:
        await small_talk(memory, start * 100 + n)
        n += 1
    await small_talk(memory, start * 100 + n)
    assert await memory.compact() is not None
    assert memory.compaction_count == start + 2


@pytest.mark.parametrize("summariser", ["offline", "compact_fn"])
async def test_ids_the_instructions_name_stay_verbatim_through_two_later_compactions(
    summariser: str,
) -> None:
    store = InMemoryLogStore()
    memory = new_memory(summariser, store)
    auto(memory, on=False)
    for n in range(3):
        await a_busy_turn(memory, n)
    auto(memory, on=True)

    await memory.compact(instructions=INSTRUCTIONS)

    assert [p.value for p in memory.pins] == IDS
    assert {p.pinned_by for p in memory.pins} == {"instructions"}
    assert all(rid in (memory.summary or "") for rid in IDS)
    for later in range(2):
        await compact_again(memory)
        text = context_text(memory)
        assert [rid for rid in IDS if rid not in text] == [], later
    assert memory.compaction_count == 5
    # A restore keeps them, and its next compaction keeps them too.
    restored = CompactionMemory.restore_from_log(SESSION, log_store=store)
    assert [p.value for p in restored.pins] == IDS
    if summariser == "compact_fn":
        restored = CompactionMemory.restore_from_log(
            SESSION, log_store=store, compact_fn=drops_things
        )
    await small_talk(restored, 999)
    await restored.compact()
    assert [rid for rid in IDS if rid not in context_text(restored)] == []


@pytest.mark.parametrize("summariser", ["offline", "compact_fn"])
async def test_a_correction_is_followed_by_the_ledger_and_folded_by_later_compactions(
    summariser: str,
) -> None:
    store = InMemoryLogStore()
    memory = new_memory(summariser, store)
    auto(memory, on=False)
    await memory.add_message(user("My old booking is OLD7QX and my passport number is P4829173."))
    await memory.add_message(answer("Noted both."))
    await memory.add_message(user("What lounges are there?"))
    await memory.add_message(answer("Three lounges. " + "Yes. " * 40))
    await memory.add_message(user("And the showers?"))
    first = await memory.compact(instructions="keep the passport number P4829173")
    assert first is not None
    if summariser == "offline":
        assert "OLD7QX" in first
        assert any(e.value == "OLD7QX" for e in memory._state.head.ledger.entries)  # type: ignore[union-attr]
    auto(memory, on=True)
    # The operator rewrites the summary: the old booking goes, the new one comes.
    corrected = (
        "The user asked about lounges and showers; passport number P4829173.\n"
        "Operator note: the new booking is NEW4K8Z, paid with gift card GC7781X."
    )
    memory.correct_summary(corrected, reason="the booking changed")
    assert "OLD7QX" not in context_text(memory)
    assert {p.value: p.pinned_by for p in memory.pins} == {
        "P4829173": "instructions",
        "NEW4K8Z": "correction",
        "GC7781X": "correction",
    }

    seen: list[list[ChatMessage]] = []
    if summariser == "compact_fn":

        def watches(messages: list[ChatMessage], system_prompt: str) -> str:
            seen.append(messages)
            return drops_things(messages, system_prompt)

        memory._compact_fn = watches

    for later in range(2):
        await compact_again(memory)
        text = context_text(memory)
        assert "OLD7QX" not in text, later
        for value in ("NEW4K8Z", "GC7781X", "P4829173"):
            assert value in text, (later, value)
    if summariser == "compact_fn":
        # The next compaction folded the corrected text, not the original.
        assert "Operator note: the new booking is NEW4K8Z" in seen[0][0].text
        assert "OLD7QX" not in seen[0][0].text
    restored = CompactionMemory.restore_from_log(SESSION, log_store=store, full_replay=True)
    assert restored.get_context() == memory.get_context()
    assert restored.pins == memory.pins


@pytest.mark.parametrize("summariser", ["offline", "compact_fn"])
async def test_ids_an_operators_correction_lists_are_kept_by_later_compactions(
    summariser: str,
) -> None:
    # The case: Compact now, then the operator adds a line listing all six
    # reservations; the compactions after it must not fold that line away.
    store = InMemoryLogStore()
    memory = new_memory(summariser, store)
    auto(memory, on=False)
    for n in range(3):
        await a_busy_turn(memory, n)
    first = await memory.compact()
    assert first is not None
    auto(memory, on=True)

    memory.correct_summary(f"{first}\nThe user's reservations: {', '.join(IDS)}.")

    assert {p.value: p.pinned_by for p in memory.pins} == dict.fromkeys(IDS, "correction")
    for later in range(2):
        await compact_again(memory)
        assert [rid for rid in IDS if rid not in context_text(memory)] == [], later


async def test_unpinning_lets_a_later_compaction_drop_the_value_and_a_restore_agrees() -> None:
    store = InMemoryLogStore()
    memory = new_memory("compact_fn", store)
    auto(memory, on=False)
    await a_busy_turn(memory, 0)
    await memory.compact(instructions=INSTRUCTIONS)
    before = memory.get_context()

    memory.unpin(["LQ940Q"], reason="no longer needed")

    assert memory.get_context() == before  # the summary still holds it, for now
    assert [p.value for p in memory.pins] == [rid for rid in IDS if rid != "LQ940Q"]
    restored = CompactionMemory.restore_from_log(SESSION, log_store=store, compact_fn=drops_things)
    assert restored.pins == memory.pins
    for kept in (memory, restored):
        await small_talk(kept, 1)
        await kept.compact()
        text = context_text(kept)
        assert "LQ940Q" not in text
        assert [rid for rid in IDS if rid != "LQ940Q" and rid not in text] == []
    with pytest.raises(CompactionError, match="not pinned"):
        memory.unpin(["LQ940Q"])


def test_instructions_pin_ids_and_quoted_phrases_but_not_what_they_ask_to_drop() -> None:
    found = pins.pins_of(
        'Keep order HAT123 and "never book red-eye flights"; forget the voucher VX9911.', 4
    )

    assert [(p.kind, p.value) for p in found] == [
        ("phrase", "never book red-eye flights"),
        ("id", "HAT123"),
    ]
    assert {(p.pinned_by, p.pinned_at, p.role) for p in found} == {("instructions", 4, "operator")}


def test_pins_never_give_way_to_the_ledger_budget() -> None:
    from memory.tokens import TokenCounter

    ledger = pins.pinned(Ledger(), pins.pins_of(INSTRUCTIONS, 1))
    kept, given_way = ledger.fit(5, TokenCounter.for_model("gpt-4o"))
    assert [e.value for e in kept.entries] == IDS
    assert given_way == []


def test_lines_a_correction_adds_to_an_offline_summary_are_read_back() -> None:
    summary = (
        'Summary of the earlier conversation (4 messages; quoted, "..." where cut):\n'
        "User requests:\n"
        "- user: Change my flight to Seattle.\n"
        "Operator note: the refund goes to gift card GC7781X.\n"
    )
    texts = [piece.text for item in parse(summary).items for piece in item.pieces]
    assert "Operator note: the refund goes to gift card GC7781X." in texts
    assert "Change my flight to Seattle." in texts


def test_a_line_a_correction_adds_to_the_ledger_block_stays_with_the_narrative() -> None:
    from memory.compaction.ledger import compose, narrative_of

    ledger = Ledger().updated([(0, ChatMessage.user("My booking reference is ZFA04Y."))])
    text = compose("They talked about a trip.", ledger) + "\n- never rebook on a Monday"
    assert LEDGER_HEADING in text
    assert narrative_of(text, ledger) == "They talked about a trip.\n- never rebook on a Monday"
