"""The ``LogStore`` contract, checked with the same assertions on every store."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory import (
    CompactionMemory,
    CompactionMemoryConfig,
    InMemoryLogStore,
    JSONLLogStore,
    LogPoint,
    LogStore,
    SessionNotFoundError,
)
from memory.json_values import loads
from memory.log import AsyncLogStore, LineLogStore, ReversibleLogStore, records
from motus_web.sessions.log_store import DatabaseLogStore
from tests.memory import variants
from tests.memory.test_invariants import assert_restores_exactly, conversations, run
from tests.web.helpers import chat

TS = "2025-11-02T10:00:00.123456+00:00"


@pytest.fixture(
    params=["jsonl", "in-memory", pytest.param("database", marks=pytest.mark.django_db)]
)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> LogStore:
    # The mark, not getfixturevalue("db"): pytest-django creates the test
    # database only for tests whose marks it sees at collection.
    if request.param == "jsonl":
        return JSONLLogStore(tmp_path)
    return InMemoryLogStore() if request.param == "in-memory" else DatabaseLogStore()


def meta(session_id: str) -> dict[str, Any]:
    return {
        "type": records.SESSION_META,
        "ts": TS,
        "session_id": session_id,
        "system_prompt": "Be brief.",
        "config": {"token_threshold": 500, "max_tool_result_tokens": 50000},
        "parent_session_id": None,
        "format_version": records.FORMAT_VERSION,
        "memory_type": "compact",
        "model_name": "gpt-4o",
        "parent_seq": None,
    }


def message(seq: int, role: str, content: str | None, **fields: Any) -> dict[str, Any]:
    return {
        "type": records.MESSAGE,
        "ts": TS,
        "seq": seq,
        "message": {"role": role, "content": content, **fields},
        "tokens": 7 + seq,
        "unit": "A" if role == "user" else "C",
        "unit_index": seq,
        "context_tokens": 20 + 10 * seq,
    }


def a_log(session_id: str) -> list[dict[str, Any]]:
    """Every record type, in the order a memory could write them."""
    return [
        meta(session_id),
        message(0, "user", "Where is booking B1?"),
        message(1, "assistant", "In Lisbon.", reasoning_content="looked it up"),
        {
            "type": records.COMPACTION,
            "ts": TS,
            "compaction_number": 1,
            "status": "ok",
            "trigger": "auto",
            "through_seq": 1,
            "summarized_seqs": [0, 1],
            "replayed_seqs": [],
            "messages_compacted": 2,
            "messages_replayed": 0,
            "summary": "B1 is in Lisbon.",
            "summary_tokens": 6,
            "tokens_before": 40,
            "tokens_after": 25,
            "model": "offline",
            "chunks": 1,
            "duration_s": 0.0012,
        },
        {"type": records.SYSTEM_PROMPT, "ts": TS, "system_prompt": "Be briefer.", "through_seq": 1},
        message(2, "user", ""),
        {
            "type": records.COMPACTION_FAILED,
            "ts": TS,
            "trigger": "manual",
            "through_seq": 2,
            "error": "timeout",
            "tokens_before": 50,
            "model": "gpt-4o-mini",
            "duration_s": 120.0,
        },
        {
            "type": records.COMPACTION_WARNING,
            "ts": TS,
            "through_seq": 2,
            "reason": "the kept messages alone need 600 tokens",
            "floor_tokens": 600,
            "threshold": 500,
        },
        {
            "type": records.COMPACTION_REVERT,
            "ts": TS,
            "reverts": 1,
            "through_seq": 2,
            "reason": "bad",
        },
        {"type": records.RESET, "ts": TS, "through_seq": 2},
    ]


def test_it_reads_back_every_record_in_the_order_appended(store: LogStore) -> None:
    log = a_log("s1")
    for record in log:
        store.append("s1", record)

    assert list(store.read("s1")) == log


def test_it_reads_the_records_back_newest_first(store: LogStore) -> None:
    log = a_log("s1")
    for record in log:
        store.append("s1", record)

    assert isinstance(store, ReversibleLogStore)
    assert list(store.read_reversed("s1")) == log[::-1]
    with pytest.raises(SessionNotFoundError):
        store.read_reversed("never-written")


def test_a_store_that_hands_over_lines_gives_each_record_with_the_line_it_parses_from(
    store: LogStore,
) -> None:
    """A restore keeps a context message as its line and parses it later
    (``memory.log.logged_message``): the line must be the record's own. A
    store without lines (the database's) is read through ``read_reversed``."""
    log = a_log("s1")
    for record in log:
        store.append("s1", record)

    if not isinstance(store, LineLogStore):
        assert isinstance(store, DatabaseLogStore | InMemoryLogStore)
        return
    pairs = list(store.read_reversed_lines("s1"))
    assert [record for record, _ in pairs] == log[::-1]
    assert all(isinstance(line, bytes) and loads(line) == record for record, line in pairs)
    with pytest.raises(SessionNotFoundError):
        store.read_reversed_lines("never-written")


def test_it_keeps_fields_and_record_types_it_does_not_know(store: LogStore) -> None:
    log = [
        {**meta("s1"), "tenant": "acme"},
        {**message(0, "user", "hi"), "provider_tokens": 3, "latency_ms": 12},
        {"type": "annotation", "ts": TS, "through_seq": 0, "note": "from a newer library"},
    ]
    for record in log:
        store.append("s1", record)

    assert list(store.read("s1")) == log


def test_it_says_which_sessions_exist_and_lists_them_sorted(store: LogStore) -> None:
    for session_id in ("b-2", "a-1", "c.3"):
        store.append(session_id, meta(session_id))

    assert store.exists("a-1")
    assert not store.exists("nope")
    assert store.list_sessions() == ["a-1", "b-2", "c.3"]


def test_sessions_do_not_mix(store: LogStore) -> None:
    store.append("one", meta("one"))
    store.append("two", meta("two"))
    store.append("one", message(0, "user", "for one"))

    assert [r["type"] for r in store.read("one")] == ["session_meta", "message"]
    assert [r["type"] for r in store.read("two")] == ["session_meta"]


def test_reading_an_unknown_session_raises_session_not_found(store: LogStore) -> None:
    with pytest.raises(SessionNotFoundError):
        store.read("never-written")


def test_a_memory_run_with_compactions_restores_the_identical_context(store: LogStore) -> None:
    # The memory runs against a staging store (the ORM must not run inside the
    # event loop); its records are then appended to the store under test.
    staging = InMemoryLogStore()
    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="run", token_threshold=400),
        log_store=staging,
        model_name="gpt-4o",
    )
    memory.set_system_prompt("You are a booking assistant.")

    async def feed() -> None:
        for item in chat(6, filler=40):
            await memory.add_message(item)

    asyncio.run(feed())
    for record in staging.read("run"):
        store.append("run", record)

    restored = CompactionMemory.restore_from_log("run", log_store=store)

    assert memory.compaction_count >= 2
    assert restored.restore_problems == []
    assert restored.get_context() == memory.get_context()
    assert list(store.read("run")) == list(staging.read("run"))


def test_a_record_with_lone_surrogates_in_any_field_is_stored_with_the_replacement_character(
    store: LogStore,
) -> None:
    store.append(
        "s1", {**meta("s1"), "system_prompt": "Be \ud83d", "tenant\udc00": {"k": ["\ud800"]}}
    )
    store.append("s1", message(0, "user", variants.LONE, name="mia\udfff"))
    store.append("s1", {"type": "annotation", "ts": TS, "note": "cut \ud83d\ude00 joined"})

    assert list(store.read("s1")) == [
        {**meta("s1"), "system_prompt": "Be \ufffd", "tenant\ufffd": {"k": ["\ufffd"]}},
        message(0, "user", variants.LONE_CLEAN, name="mia\ufffd"),
        {"type": "annotation", "ts": TS, "note": "cut \U0001f600 joined"},
    ]


def test_every_real_world_message_variant_restores_the_identical_context(store: LogStore) -> None:
    staging = InMemoryLogStore()
    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="variants", token_threshold=300),
        compact_fn=lambda messages, system_prompt: "summary \ud83d so far",
        log_store=staging,
        model_name="gpt-4o",
    )
    memory.set_system_prompt("Sell mugs \udc00.", role="developer")

    async def feed() -> None:
        for item in [*variants.REAL_WORLD, *variants.REAL_WORLD]:
            await memory.add_message(item)

    asyncio.run(feed())
    for record in staging.read("variants"):
        store.append("variants", record)

    restored = CompactionMemory.restore_from_log("variants", log_store=store)

    assert memory.compaction_count >= 1
    assert restored.restore_problems == []
    assert [m.to_dict() for m in restored.get_context()] == [
        m.to_dict() for m in memory.get_context()
    ]
    assert restored.get_context()[0].role == "developer"
    assert list(store.read("variants")) == list(staging.read("variants"))


@pytest.mark.django_db
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    conversation=conversations(),
    failures=st.lists(st.booleans(), max_size=8),
    threshold=st.integers(150, 900),
)
def test_the_database_store_restores_random_conversations_exactly(
    conversation: list[dict[str, Any]], failures: list[bool], threshold: int
) -> None:
    session_id = f"prop-{uuid.uuid4().hex}"
    memory, staged, summarise = run(conversation, failures, threshold, session_id)
    database = DatabaseLogStore()
    for record in staged.read(session_id):
        database.append(session_id, record)
    assert list(database.read(session_id)) == list(staged.read(session_id))
    assert_restores_exactly(memory, database, summarise)


@pytest.mark.django_db(transaction=True)
async def test_a_live_memory_logs_into_the_database_from_inside_the_event_loop() -> None:
    store = DatabaseLogStore()
    assert isinstance(store, AsyncLogStore)
    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="live-db", token_threshold=300),
        compact_fn=lambda messages, system_prompt: "summary so far",
        log_store=store,
        model_name="gpt-4o",
    )
    memory.set_system_prompt("Be brief.")
    for message in chat(8, filler=60):
        await memory.add_message(message)
    assert memory.compaction_count >= 1
    memory.revert_last_compaction("an operator found the summary wrong")
    await memory.flush()
    restored = await sync_to_async(CompactionMemory.restore_from_log)("live-db", log_store=store)
    # The ORM ran in asgiref's sync thread: close its connection, or PostgreSQL
    # cannot drop the test database at the end of the run.
    await sync_to_async(connections.close_all)()
    assert [m.to_dict() for m in restored.get_context()] == [
        m.to_dict() for m in memory.get_context()
    ]


def test_rewinds_deep_undos_and_corrections_restore_the_same_in_every_store(
    store: LogStore,
) -> None:
    staging = InMemoryLogStore()
    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="rewound", token_threshold=300),
        compact_fn=lambda messages, system_prompt: f"summary of {len(messages)}",
        log_store=staging,
        model_name="gpt-4o",
    )
    memory.set_system_prompt("Be brief.")

    async def feed() -> None:
        for message in chat(20, filler=60):
            await memory.add_message(message)
        memory.revert_last_compaction("first undo")
        memory.revert_last_compaction("second undo")
        memory.rewind(LogPoint("after_message", 7), reason="back to turn three")
        for message in chat(6, filler=60):
            await memory.add_message(message)
        memory.correct_summary("The user asked about mugs; keep order 4411.")
        await memory.flush()

    asyncio.run(feed())
    assert memory.compaction_count >= 4
    for record in staging.read("rewound"):
        store.append("rewound", record)

    for full_replay in (False, True):
        restored = CompactionMemory.restore_from_log(
            "rewound", log_store=store, full_replay=full_replay
        )
        assert restored.restore_problems == []
        assert [m.to_dict() for m in restored.get_context()] == [
            m.to_dict() for m in memory.get_context()
        ]
        assert restored.summary == memory.summary
