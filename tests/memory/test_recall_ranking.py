"""Recall that earns its place: dates a later reader can use, names and recency in the score,
and the parts of each placed memory's score in the log (restorable)."""

from __future__ import annotations

from datetime import date

import pytest

from memory import BackgroundMemory, ChatMessage, InMemoryLogStore, Scope, SQLiteLongTermStore
from memory.background import Provenance
from memory.background.dates import parse_day, plain_when
from memory.background.recall import memory_line
from memory.background.scoring import asks_when, names_in

ANN = Scope(user_id="ann")


def _link(seq: int = 0) -> Provenance:
    return Provenance("s1", seq, seq, "offline", "2025-05-01T10:00:00+00:00")


@pytest.mark.parametrize(
    ("when", "plain"),
    [
        ("yesterday, said 1:56 pm on 8 May, 2023", "7 May 2023"),
        ("last night, said 2023-03-01", "28 February 2023"),
        ("today, said 8 May, 2023", "8 May 2023"),
        ("1:56 pm on 8 May, 2023", "8 May 2023"),
        ("2023-05-08", "8 May 2023"),
        ("last week, said 8 May, 2023", "the week before 8 May 2023"),
        ("last weekend, said May 8, 2023", "the weekend before 8 May 2023"),
        ("Friday, said 8 May, 2023", "the Friday before 8 May 2023"),
        ("last month, said 8 January, 2023", "December 2022"),
        ("last year, said 8 May, 2023", "2022"),
        ("next week, said 8 May, 2023", "the week after 8 May 2023"),
        # Not resolvable: kept as said, with the day it was said made plain.
        ("10 years ago, said 8 May, 2023", "10 years ago, said 8 May 2023"),
        # Absolute or partial dates stay as written; nothing is guessed.
        ("May 2022", "May 2022"),
        ("2022", "2022"),
        ("summer, said sometime", "summer, said sometime"),
    ],
)
def test_a_memorys_time_is_a_plain_date_resolved_against_the_day_it_was_said(
    when: str, plain: str
) -> None:
    assert plain_when(when) == plain


def test_an_impossible_day_is_no_date() -> None:
    assert parse_day("31 February, 2023") is None
    assert plain_when("yesterday, said 31 February, 2023") == "yesterday, said 31 February, 2023"
    assert parse_day("on 3rd of March, 2021") == date(2021, 3, 3)


def test_the_block_line_carries_the_resolved_date() -> None:
    store = SQLiteLongTermStore()
    memory, _ = store.add(
        ANN,
        text="I went to the support group.",
        kind="event",
        provenance=_link(),
        when="yesterday, said 1:56 pm on 8 May, 2023",
    )
    assert (
        memory_line(memory) == f"- [{memory.id}] (event, 7 May 2023) I went to the support group."
    )


def test_names_and_questions_of_time_are_recognised() -> None:
    assert names_in("When did Caroline's sister visit Boston?") == {"caroline", "boston"}
    assert names_in("What did I say?") == set()  # "What" and "I" are stopwords
    assert asks_when("When did she move?")
    assert asks_when("In what year was it?")
    assert not asks_when("What does she like?")


async def _told(memory: BackgroundMemory, *said: str) -> None:
    for text in said:
        await memory.add_message(ChatMessage.user(text))
        await memory.add_message(ChatMessage.assistant("I see."))
    await memory.drain()


async def test_the_request_s_names_rank_a_memory_about_them_first() -> None:
    store = SQLiteLongTermStore()
    first = BackgroundMemory(store=store, scope=ANN, log_store=InMemoryLogStore())
    await _told(
        first,
        "My brother Tom plays the guitar in a band every weekend.",
        "My friend Maria plays tennis with me in Porto on Sundays.",
    )
    ranked = BackgroundMemory(store=store, scope=ANN).ranked("What does Maria play?")
    best, parts = ranked[0]
    assert "Maria" in best.memory.text
    assert parts.entities == 1.0
    # Both share "play"; the name decides between them.
    other = next(p for h, p in ranked if "Tom" in h.memory.text)
    assert other.entities == 0.0
    assert parts.total > other.total


async def test_the_newest_memories_are_candidates_even_without_a_shared_word() -> None:
    store = SQLiteLongTermStore()
    for index in range(30):
        store.add(
            ANN,
            text=f"Old note number {index} about gardening.",
            kind="fact",
            provenance=_link(index),
        )
    newest, _ = store.add(
        ANN, text="I adopted a cat named Pixel.", kind="fact", provenance=_link(99)
    )
    ranked = BackgroundMemory(store=store, scope=ANN).ranked("Anything new lately?")
    assert ranked[0][0].memory.id == newest.id
    assert ranked[0][1].text == 0.0
    assert ranked[0][1].recency == 1.0


async def test_each_placed_memory_s_score_parts_are_logged_and_restored() -> None:
    store = SQLiteLongTermStore()
    await _told(
        BackgroundMemory(store=store, scope=ANN, log_store=InMemoryLogStore()),
        "I moved to Lisbon in 2019 with my sister Jane.",
    )
    log = InMemoryLogStore()
    memory = BackgroundMemory(store=store, scope=ANN, log_store=log)
    await memory.add_message(ChatMessage.user("When did I move to Lisbon?"))
    (record,) = [r for r in log.read(memory.session_id) if r["type"] == "memory_recall"]
    assert record["memory_ids"]
    scores = record["scores"]
    assert [s["memory_id"] for s in scores] == record["memory_ids"]
    top = scores[0]
    assert set(top) == {"memory_id", "text", "entities", "time", "recency", "importance", "total"}
    assert top["text"] == 1.0
    assert top["entities"] == 1.0
    assert top["time"] == 1.0
    expected = 1.0 * top["text"] + 0.5 * top["entities"] + 0.25 * top["time"]
    expected += 0.35 * top["recency"] + 0.1 * top["importance"]
    assert top["total"] == pytest.approx(expected, abs=1e-3)
    restored = BackgroundMemory.restore_from_log(memory.session_id, store=store, log_store=log)
    events = restored.get_memory_trace()["events"]
    (traced,) = [e for e in events if e["type"] == "memory_recall"]
    assert traced["scores"] == scores
