"""The ledger: identifiers and instructions carried verbatim from summary to summary."""

from __future__ import annotations

from typing import Any

import pytest

from memory import ChatMessage, CompactionMemory, CompactionMemoryConfig, InMemoryLogStore
from memory.compaction.ledger import (
    LEDGER_HEADING,
    PINNED_RANK,
    TOOL_RANK,
    Ledger,
    compose,
    narrative_of,
)
from memory.tokens import TokenCounter

from .conftest import FakeClient, answer, calls, result, user

TRAVEL = {
    "booking reference": "ZFA04Y",
    "hotel code": "HX7781",
    "flight": "BA0117",
    "passport number": "P4829173",
    "loyalty number": "LY-55310",
    "seat": "14C",
    "car rental code": "CR9921Q",
    "insurance policy": "INS-300845",
    "visa number": "V88217T",
    "ferry ticket": "FT-0412",
    "train reservation": "TR55K1",
    "museum pass": "MP-7731",
    "restaurant booking": "RB2208",
    "tour code": "TC-90211",
    "lounge pass": "LG4410",
    "emergency contact phone": "+44 7700 900461",
}
COUNTER = TokenCounter.for_model("gpt-4o")


def the_user_lists_them() -> dict[str, Any]:
    listed = "; ".join(f"my {label} is {value}" for label, value in TRAVEL.items())
    return user(f"Here are my travel details: {listed}. Please remember that.")


async def chat_on(memory: CompactionMemory, turns: int) -> list[int]:
    """Small talk that makes the memory compact; the count after each turn."""
    counts = []
    for n in range(turns):
        await memory.add_message(user(f"Tell me something about city number {n}. " + "So " * 40))
        await memory.add_message(answer(f"City {n} has a nice old town. " + "Yes " * 60))
        counts.append(memory.compaction_count)
    return counts


def in_context(memory: CompactionMemory) -> set[str]:
    text = "\n".join(m.text for m in memory.get_context())
    return {value for value in TRAVEL.values() if value in text}


@pytest.mark.parametrize("threshold", [600, 1_200])
async def test_sixteen_identifiers_the_user_asked_to_remember_survive_five_compactions(
    threshold: int,
) -> None:
    compactions: list[dict[str, Any]] = []
    memory = CompactionMemory(
        config=CompactionMemoryConfig(token_threshold=threshold), on_compact=compactions.append
    )
    await memory.add_message(the_user_lists_them())
    await memory.add_message(answer("Noted, I will keep all of them."))
    seen: set[int] = set()
    while memory.compaction_count < 5:
        await chat_on(memory, 1)
        if memory.compaction_count not in seen:
            seen.add(memory.compaction_count)
            assert in_context(memory) == set(TRAVEL.values()), memory.compaction_count
    assert all(not c.get("ledger_given_way") for c in compactions)


async def test_the_model_compactor_gets_back_what_its_summary_dropped() -> None:
    # The model's summaries keep only the first identifier; the ledger restores the rest.
    client = FakeClient(["The user shared travel details, starting with ZFA04Y."] * 20)
    memory = CompactionMemory(
        config=CompactionMemoryConfig(token_threshold=700), client=client, model_name="gpt-4o"
    )
    await memory.add_message(the_user_lists_them())
    await memory.add_message(answer("Noted."))
    for _ in range(12):
        await chat_on(memory, 1)
        if memory.compaction_count:
            assert in_context(memory) == set(TRAVEL.values())
    assert memory.compaction_count >= 3


def test_a_corrected_value_replaces_the_old_one_and_the_summary_says_so() -> None:
    ledger = Ledger().updated([(0, ChatMessage.user("My passport number is P1111111."))])
    ledger = ledger.updated(
        [(4, ChatMessage.user("Sorry, actually my passport number is P2222222."))]
    )
    [entry] = [e for e in ledger.entries if e.label == "passport number"]
    assert (entry.value, entry.replaces, entry.seq) == ("P2222222", "P1111111", 4)
    block = ledger.render()
    assert "passport number: P2222222 (corrected from P1111111, #4)" in block
    assert "P1111111." not in block.replace("from P1111111", "")


def test_two_values_of_one_label_in_one_message_both_stay() -> None:
    ledger = Ledger().updated([(0, ChatMessage.user("I fly flight BA0117, then flight BA0118."))])
    assert {e.value for e in ledger.entries} >= {"BA0117", "BA0118"}


def test_a_tools_values_are_labelled_by_their_keys_and_never_supersede_each_other() -> None:
    listing = '[{"flight_number": "HAT136", "origin": "JFK"}, {"flight_number": "HAT208"}]'
    later = '{"flight_number": "HAT301", "status": "available"}'
    ledger = Ledger().updated(
        [
            (0, ChatMessage.from_dict(result("c1", listing))),
            (1, ChatMessage.from_dict(result("c2", later))),
        ]
    )
    lines = {entry.line() for entry in ledger.entries}
    assert {"flight number: HAT136", "flight number: HAT208", "flight number: HAT301"} <= lines
    assert all(entry.replaces is None for entry in ledger.entries)


def test_a_value_on_its_own_line_takes_no_label_from_the_line_before() -> None:
    log = "0629d16 feat: heartbeat and TTL registry\n9dd68ea fix: pane lookup"
    ledger = Ledger().updated([(0, ChatMessage.from_dict(result("c1", log, name="Bash")))])
    [entry] = [e for e in ledger.entries if e.value == "9dd68ea"]
    assert entry.label == ""


def test_instructions_are_carried_and_chat_about_habits_is_not() -> None:
    ledger = Ledger().updated(
        [
            (0, ChatMessage.user("Never book red-eye flights for me. I always loved painting.")),
            (1, ChatMessage.user("Please always confirm the price before you book.")),
        ]
    )
    instructions = [e.value for e in ledger.entries if e.kind == "instruction"]
    assert instructions == [
        "Never book red-eye flights for me.",
        "Please always confirm the price before you book.",
    ]


def test_what_gives_way_first_is_tool_data_then_the_assistants_and_it_is_returned() -> None:
    messages = [
        (0, ChatMessage.user("Please remember my user id mia_li_3668.")),
        (1, ChatMessage.from_dict(calls("c1", name="get_user"))),
        (2, ChatMessage.from_dict(result("c1", " ".join(f"pay_{n:04d}x" for n in range(60))))),
        (3, ChatMessage.assistant("Your reservations are HAT081 and HAT092.")),
    ]
    ledger = Ledger().updated(messages)
    kept, given_way = ledger.fit(60, COUNTER)
    assert given_way
    assert all(e.rank == TOOL_RANK for e in given_way)
    assert {"mia_li_3668", "HAT081", "HAT092"} <= {e.value for e in kept.entries}
    assert COUNTER.count(kept.render()) <= 60
    pinned = [e for e in kept.entries if e.value == "mia_li_3668"]
    assert pinned
    assert pinned[0].rank == PINNED_RANK


async def test_what_gave_way_is_recorded_on_the_compaction() -> None:
    store = InMemoryLogStore()
    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="s", token_threshold=700), log_store=store
    )
    await memory.add_message(user("Look up the ledger ids."))
    await memory.add_message(calls("c1"))
    await memory.add_message(result("c1", " ".join(f"ref_{n:05d}q" for n in range(400))))
    await memory.add_message(answer("Found them all."))
    await memory.compact()
    [record] = [r for r in store.read("s") if r["type"] == "compaction"]
    assert record["ledger_given_way"]
    kept = {e["value"] for e in record["ledger"]}
    assert not kept & {e["value"] for e in record["ledger_given_way"]}
    assert COUNTER.count(record["summary"]) <= record["summary_tokens"]


async def test_the_trace_says_when_the_ledgers_budget_was_full_and_what_gave_way() -> None:
    memory = CompactionMemory(config=CompactionMemoryConfig(session_id="s", token_threshold=700))
    await memory.add_message(user("Please remember my user id mia_li_3668."))
    await memory.add_message(calls("c1"))
    await memory.add_message(result("c1", " ".join(f"ref_{n:05d}q" for n in range(400))))
    await memory.add_message(answer("Found them all."))
    await memory.compact()
    [event] = [e for e in memory.get_memory_trace()["events"] if e["type"] == "compaction"]
    assert event["ledger_full"] is True
    assert event["ledger_given_way"] > 0
    assert event["ledger_given_way_by_user"] == []  # the tool's ids went first
    assert "what gives way first: identifiers only tool results named" in event["ledger_gives_way"]


async def test_the_trace_says_the_ledger_had_room_when_nothing_gave_way() -> None:
    memory = CompactionMemory(config=CompactionMemoryConfig(token_threshold=10_000))
    await memory.add_message(user("My booking reference is ZFA04Y."))
    await memory.add_message(answer("Noted."))
    await memory.compact()
    [event] = [e for e in memory.get_memory_trace()["events"] if e["type"] == "compaction"]
    assert event["ledger_full"] is False
    assert "ledger_given_way" not in event


def test_the_narrative_is_read_back_without_the_ledger_block() -> None:
    ledger = Ledger().updated([(0, ChatMessage.user("My booking reference is ZFA04Y."))])
    text = compose("They talked about a trip.", ledger)
    assert text.endswith(f"{LEDGER_HEADING}\n- booking reference: ZFA04Y")
    assert narrative_of(text) == "They talked about a trip."
    # What the narrative already quotes is not listed again.
    assert compose("The booking is ZFA04Y.", ledger) == "The booking is ZFA04Y."


async def test_a_users_compact_fn_owns_its_summary() -> None:
    memory = CompactionMemory(
        config=CompactionMemoryConfig(token_threshold=10_000), compact_fn=lambda m, p: "Short."
    )
    await memory.add_message(the_user_lists_them())
    await memory.add_message(answer("Noted."))
    assert await memory.compact() == "Short."


TRIVIA_CHAT = [
    "My booking reference is ZX81QP and my passport number is P4829173.",
    "Please find me a hotel in Lisbon near the river for three nights.",
    "I also need a car rental from the airport on the 14th of May.",
    "What is 1234 times 5678? Use the calculator.",
    "How much is 250 plus 17, and which is bigger, 40 or 400?",
]


@pytest.mark.parametrize("task", [False, True], ids=["conversation", "task agent"])
def test_a_questions_operands_and_ordinals_rank_below_the_users_ids(task: bool) -> None:
    messages: list[tuple[int | None, ChatMessage]] = [
        (seq, ChatMessage.user(text)) for seq, text in enumerate(TRIVIA_CHAT)
    ]
    if task:
        messages.append((len(messages), ChatMessage.from_dict(calls("c1", name="calculator"))))
    ledger = Ledger().updated(messages)

    entries = {e.value: e for e in ledger.entries}
    assert entries["ZX81QP"].label == "booking reference"
    assert entries["P4829173"].label == "passport number"
    assert "14th" not in entries  # the day of "the 14th of May", a date
    ids = [e.rank for e in ledger.entries if e.value in ("ZX81QP", "P4829173")]
    for operand in ("1234", "5678", "250", "17", "40", "400"):
        entry = entries.get(operand)
        assert entry is None or (entry.label == "" and entry.rank < min(ids)), entry
    kept, _ = ledger.fit(COUNTER.count(LEDGER_HEADING) + 40, COUNTER)
    assert {"ZX81QP", "P4829173"} <= {e.value for e in kept.entries}
