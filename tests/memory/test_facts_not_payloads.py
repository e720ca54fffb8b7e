"""Facts, not payloads: pasted material gives a bounded handful of memories; a
sentence that joins several statements gives each as its own memory."""

from __future__ import annotations

import pytest

from memory import BackgroundMemory, ChatMessage, InMemoryLogStore, Scope, SQLiteLongTermStore
from memory.background import Excerpt, OfflineExtractor
from memory.background.memory import MAX_PER_SESSION
from memory.background.payload import MAX_PER_MESSAGE

ANN = Scope(user_id="ann")


def extracted(said: str) -> list[str]:
    excerpt = Excerpt("s1", [(0, ChatMessage.user(said))], said_on="2025-03-01")
    return [c.text for c in OfflineExtractor().extract_now(excerpt)]


LOG = "\n".join(
    f"2025-03-01 10:00:{i:02d} INFO worker-{i} started the export for Maria in Berlin"
    for i in range(60)
)
TRACE = """Traceback (most recent call last):
  File "/srv/app/jobs.py", line 88, in run
    result = export(user, target="Berlin")
  File "/srv/app/export.py", line 12, in export
    raise ExportError(f"no bucket for {user}")
ExportError: no bucket for Maria"""
CODE = """```python
def monthly(rent: int) -> int:
    # I pay 1200 a month in Lisbon
    return rent * 12
```"""
TABLE = "\n".join(
    ["| city | rent | since |", "|---|---|---|"]
    + [f"| City{i} | {1000 + i} | 20{10 + i % 10} |" for i in range(30)]
)
LIST = "\n".join(f"- I visited Museum number {i} in Paris with my friend Tom." for i in range(40))
TOOL = (
    '{"reservations": ['
    + ", ".join(
        f'{{"id": "R{i}", "from": "JFK", "to": "LIS", "passenger": "Ann Lee"}}' for i in range(30)
    )
    + "]}"
)


@pytest.mark.parametrize(
    "pasted",
    [LOG, TRACE, CODE, TABLE, LIST, TOOL],
    ids=["log", "trace", "code", "table", "list", "tool"],
)
def test_pasted_material_gives_a_bounded_handful_and_the_facts_beside_it(pasted: str) -> None:
    said = (
        f"I moved to Lisbon in 2019. Here is what I got:\n{pasted}\nI work at Acme as an engineer."
    )
    texts = extracted(said)
    assert len(texts) <= MAX_PER_MESSAGE
    assert "I moved to Lisbon in 2019." in " ".join(texts)
    assert "I work at Acme as an engineer." in texts


def test_one_sentence_of_four_statements_is_four_memories() -> None:
    texts = extracted("My name is Ann, I live in Porto, I work at Acme and I have two cats.")
    assert texts == ["My name is Ann.", "I live in Porto.", "I work at Acme.", "I have two cats."]
    # A list of people or things is not several statements.
    assert extracted("I went to Paris with Tom and my sister Jane last May.") == [
        "I went to Paris with Tom and my sister Jane last May."
    ]
    assert extracted("My sister lives in Boston and my brother works in Denver.") == [
        "My sister lives in Boston.",
        "My brother works in Denver.",
    ]


async def test_a_session_that_pastes_turn_after_turn_gives_a_bounded_number() -> None:
    store = SQLiteLongTermStore()
    memory = BackgroundMemory(store=store, scope=ANN, log_store=InMemoryLogStore())
    for turn in range(MAX_PER_SESSION // MAX_PER_MESSAGE + 10):
        lines = "\n".join(
            f"- I bought a ticket {turn}-{i} for the Lisbon concert with my friend Tom."
            for i in range(12)
        )
        await memory.add_message(ChatMessage.user(lines))
        await memory.add_message(ChatMessage.assistant("Noted."))
    await memory.drain()
    assert store.count(ANN) == MAX_PER_SESSION
    # What it says again of what it gave is still linked.
    await memory.add_message(
        ChatMessage.user("- I bought a ticket 0-0 for the Lisbon concert with my friend Tom.")
    )
    await memory.add_message(ChatMessage.assistant("Noted."))
    await memory.drain()
    assert store.count(ANN) == MAX_PER_SESSION


@pytest.mark.parametrize(
    "chatter",
    [
        "I'll reach out if needed.",
        "I'd like to go with Option 2, the cheaper option.",
        "I need help with canceling a reservation.",
        "I'm not entirely certain.",
        "I appreciate the help. Have a wonderful day too!",
        "Thanks a ton, Gina! Your help and encouragement mean a lot.",
        "You're really doing our community a service by speaking out.",
        "Yes, I confirm I would like to proceed with this change.",
    ],
)
def test_chatter_that_holds_for_one_conversation_is_not_remembered(chatter: str) -> None:
    assert extracted(chatter) == []


def test_statements_beside_chatter_are_kept() -> None:
    assert extracted("Thanks! My user ID is omar_rossi_1241. I lost my job as a banker.") == [
        "My user ID is omar_rossi_1241. I lost my job as a banker."
    ]
