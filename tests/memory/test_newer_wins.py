"""Newer wins, history kept: a statement that updates or contradicts an earlier
one supersedes it, recall never places the older one alone, and reading the
conversation again does not bring the older one back."""

from __future__ import annotations

import pytest

from memory import BackgroundMemory, ChatMessage, InMemoryLogStore, Scope, SQLiteLongTermStore
from memory.background import Filters
from memory.background.changes import replaces

ANN = Scope(user_id="ann")

UPDATES = [
    ("I live in Porto with my two cats.", "I moved to Lisbon last spring.", "Where do I live?"),
    ("I work at Acme as an engineer.", "I now work at Globex.", "Where do I work?"),
    ("I work at Acme as an engineer.", "I left Acme last month.", "Where do I work, Acme?"),
    ("I love sushi on Fridays.", "I no longer like sushi.", "Do I like sushi?"),
    ("I really like coffee in the morning.", "I don't like coffee anymore.", "Coffee for me?"),
    ("My phone number is 555-0123.", "My phone number is 555-0199.", "What is my phone number?"),
    ("My favourite colour is blue.", "My favourite colour is green.", "My favourite colour?"),
    ("I have 2 kids in school.", "I have 3 kids in school.", "How many kids in school?"),
    ("I run 10 km every week.", "I run 25 km every week.", "How far do I run every week?"),
]
NOT_UPDATES = [
    ("I live in Porto.", "My sister lives in Boston."),
    ("I love sushi.", "I love hiking in the hills."),
    ("I live in Porto.", "I visited Lisbon in 2023."),
    ("I have 2 kids.", "I ran 5 km today."),
    ("Caroline: I live in Boston.", "Melanie: I moved to Denver."),
]


async def said(memory: BackgroundMemory, text: str) -> None:
    await memory.add_message(ChatMessage.user(text))
    await memory.add_message(ChatMessage.assistant("Noted."))
    await memory.drain()


@pytest.mark.parametrize(("older", "newer", "asked"), UPDATES)
async def test_the_newer_statement_supersedes_the_older_and_recall_places_it(
    older: str, newer: str, asked: str
) -> None:
    store = SQLiteLongTermStore()
    first = BackgroundMemory(store=store, scope=ANN, log_store=InMemoryLogStore())
    await said(first, older)
    later = BackgroundMemory(store=store, scope=ANN, log_store=InMemoryLogStore())
    await said(later, newer)
    (old,) = store.memories(ANN, Filters(status="superseded"))
    (new,) = store.memories(ANN, Filters(status="active"))
    assert (old.text, new.text) == (older, newer)
    assert old.superseded_by == new.id
    assert [v.action for v in store.history(ANN, old.id)] == ["add", "supersede"]
    asking = BackgroundMemory(store=store, scope=ANN, log_store=InMemoryLogStore())
    await asking.add_message(ChatMessage.user(f"{asked} {older}"))
    block = asking.memory_block
    assert older not in block  # never the superseded fact alone
    assert newer in block


@pytest.mark.parametrize(("older", "newer"), NOT_UPDATES)
def test_statements_about_other_things_or_people_replace_nothing(older: str, newer: str) -> None:
    assert not replaces(newer, older)


async def test_reading_the_conversation_again_keeps_the_newer() -> None:
    store = SQLiteLongTermStore()
    conversation = ["I live in Porto with my two cats.", "I moved to Lisbon last spring."]
    first = BackgroundMemory(store=store, scope=ANN, log_store=InMemoryLogStore())
    for text in conversation:
        await said(first, text)
    # Imported again: the same statements, in order, in a new session.
    again = BackgroundMemory(store=store, scope=ANN, log_store=InMemoryLogStore())
    await said(again, conversation[0])
    assert [m.text for m in store.memories(ANN, Filters(status="active"))] == [conversation[1]]
    await said(again, conversation[1])
    assert [m.text for m in store.memories(ANN, Filters(status="active"))] == [conversation[1]]
    assert store.count(ANN, status=None) == 2
