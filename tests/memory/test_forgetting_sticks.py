"""Forgetting sticks: whatever reads a forgotten memory's messages again, it stays forgotten.

The paths that read the same messages again: an extraction after a crash
(the memory was written, the ``memory_extraction`` record was not), an import
of the same conversation again (a new session), a restore from the log, a
fork whose conversation says it again. A purge leaves nothing to find, yet
stays purged too.
"""

from __future__ import annotations

from typing import Any

from memory import BackgroundMemory, ChatMessage, InMemoryLogStore, Scope, SQLiteLongTermStore
from memory.background import Filters

ANN = Scope(user_id="ann")
SAID = "I am allergic to peanuts.\nI moved to Lisbon in 2019."
GONE = "I moved to Lisbon in 2019."


def background(store: SQLiteLongTermStore, log: InMemoryLogStore, **kw: Any) -> BackgroundMemory:
    return BackgroundMemory(store=store, log_store=log, scope=ANN, **kw)


async def one_turn(memory: BackgroundMemory, said: str) -> None:
    await memory.add_message(ChatMessage.user(said))
    await memory.add_message(ChatMessage.assistant("Noted."))
    await memory.drain()


async def said_then_forgotten() -> tuple[SQLiteLongTermStore, InMemoryLogStore, str, str]:
    store, log = SQLiteLongTermStore(), InMemoryLogStore()
    first = background(store, log)
    await one_turn(first, SAID)
    (gone,) = [m for m in store.memories(ANN) if m.text == GONE]
    store.forget(ANN, gone.id, actor="operator:ann", reason="asked to")
    return store, log, first.session_id, gone.id


def assert_still_forgotten(store: SQLiteLongTermStore, memory_id: str) -> None:
    assert store.get(ANN, memory_id).status == "forgotten"
    assert [m.text for m in store.memories(ANN, Filters(status="active"))] == [
        "I am allergic to peanuts."
    ]
    assert all(h.memory.id != memory_id for h in store.search(ANN, "moved Lisbon 2019"))
    assert [v.action for v in store.history(ANN, memory_id)] == ["add", "forget"]


async def recalled(store: SQLiteLongTermStore) -> str:
    later = background(store, InMemoryLogStore())
    await later.add_message(ChatMessage.user("Where did I move to in 2019, Lisbon?"))
    return later.memory_block


async def test_extraction_after_a_crash_keeps_it_forgotten() -> None:
    store, log, session_id, gone = await said_then_forgotten()
    # The process died after writing the memories, before their record.
    crashed = InMemoryLogStore()
    for record in log.read(session_id):
        if record["type"] != "memory_extraction":
            crashed.append(session_id, record)
    restored = BackgroundMemory.restore_from_log(session_id, log_store=crashed, store=store)
    await one_turn(restored, "Thanks, that is all.")
    (extraction,) = [r for r in crashed.read(session_id) if r["type"] == "memory_extraction"]
    assert extraction["first_seq"] == 0  # the same messages were read again
    assert_still_forgotten(store, gone)
    assert GONE not in await recalled(store)


async def test_importing_the_same_conversation_again_keeps_it_forgotten() -> None:
    store, _, _, gone = await said_then_forgotten()
    again = background(store, InMemoryLogStore())
    await one_turn(again, SAID)
    assert_still_forgotten(store, gone)
    # The new session's link is kept: why it was not remembered has an answer.
    assert again.session_id in {p.session_id for p in store.get(ANN, gone).provenance}


async def test_a_restored_session_that_reads_its_messages_again_keeps_it_forgotten() -> None:
    store, log, session_id, gone = await said_then_forgotten()
    restored = BackgroundMemory.restore_from_log(session_id, log_store=log, store=store)
    restored._position = -1  # as a restore from a file without the extractor's position
    await one_turn(restored, "Thanks.")
    assert_still_forgotten(store, gone)


async def test_a_fork_that_says_it_again_keeps_it_forgotten() -> None:
    store, log, session_id, gone = await said_then_forgotten()
    parent = BackgroundMemory.restore_from_log(session_id, log_store=log, store=store)
    child = parent.fork()
    await one_turn(child, GONE)
    assert_still_forgotten(store, gone)


async def test_a_purged_memory_stays_purged_when_its_messages_are_read_again() -> None:
    store, _, _, gone = await said_then_forgotten()
    store.purge(ANN, [gone])
    log = InMemoryLogStore()
    again = background(store, log)
    await one_turn(again, SAID)
    assert [m.text for m in store.memories(ANN, None)] == ["I am allergic to peanuts."]
    (extraction,) = [r for r in log.read(again.session_id) if r["type"] == "memory_extraction"]
    refused = [w for w in extraction["written"] if w["action"] == "refused"]
    assert [w["text"] for w in refused] == [GONE]
    assert "purged" in refused[0]["error"]
    assert GONE not in await recalled(store)
