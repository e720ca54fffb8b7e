"""A restore (and a fork) from the database reads the rows after the latest checkpoints only."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory import CompactionMemory, CompactionMemoryConfig, InMemoryLogStore
from memory.compaction import checkpoint, restore
from motus_web.sessions import operations, rows
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import Session
from tests.memory.conftest import answer, calls, result, user

pytestmark = pytest.mark.django_db


def stored_session(session_id: str, turns: int, threshold: int = 900) -> CompactionMemory:
    """A session of ``turns`` tool-using turns, compacting every few (at
    ``threshold`` tokens), stored in the database."""
    staging = InMemoryLogStore()
    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id=session_id, token_threshold=threshold),
        log_store=staging,
        model_name="gpt-4o",
    )

    async def feed() -> None:
        for turn in range(turns):
            for message in (
                user(f"Where is order #{1000 + turn}?"),
                calls(f"call_{turn}"),
                result(f"call_{turn}", f"order #{1000 + turn} is in Lyon " * 20),
                answer(f"In Lyon (turn {turn})."),
            ):
                await memory.add_message(message)

    asyncio.run(feed())
    DatabaseLogStore().extend(session_id, staging.read(session_id))
    return memory


@contextlib.contextmanager
def rows_read(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts the rows the database store turns into records inside the block."""
    read = [0]
    record_of = rows.record_of

    def counting(row: Any) -> dict[str, Any]:
        read[0] += 1
        return record_of(row)

    with monkeypatch.context() as patch:
        patch.setattr(rows, "record_of", counting)
        yield read


def measured_restore(
    session_id: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[CompactionMemory, int, int]:
    """The restored memory, the queries it ran and the rows it turned into records."""
    with rows_read(monkeypatch) as read, CaptureQueriesContext(connection) as queries:
        memory = CompactionMemory.restore_from_log(session_id, log_store=DatabaseLogStore())
    return memory, len(queries), read[0]


def test_restore_reads_the_same_rows_and_queries_however_long_the_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    short_live = stored_session("short", turns=40)
    long_live = stored_session("long", turns=320)
    assert long_live.compaction_count > 4 * short_live.compaction_count > 0

    short, short_queries, short_rows = measured_restore("short", monkeypatch)
    long, long_queries, long_rows = measured_restore("long", monkeypatch)

    assert long_queries == short_queries
    assert long_rows < 4 * 40  # the session has 4 * 320 message rows
    assert abs(long_rows - short_rows) <= 8  # the same two compactions' worth
    for restored, live in ((short, short_live), (long, long_live)):
        assert restored.get_session_state().to_dict() == live.get_session_state().to_dict()
        full = CompactionMemory.restore_from_log(
            live.session_id, log_store=DatabaseLogStore(), full_replay=True
        )
        assert restored.get_context() == full.get_context() == live.get_context()


def test_a_fork_late_in_a_long_session_reads_only_the_end_of_its_prefix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    live = stored_session("parent", turns=320)
    session = Session.objects.get(public_id="parent")
    message = session.messages.get(seq=4 * 300 + 3)  # the answer closing turn 300
    with rows_read(monkeypatch) as read:
        child = operations.fork(operations.fork_cut(session, message), session, None, "fork")

    assert read[0] < 4 * 40
    prefix = InMemoryLogStore()
    for record in DatabaseLogStore().read("parent", before=message.position + 1):
        prefix.append("parent", record)
    expected = CompactionMemory.restore_from_log("parent", log_store=prefix, full_replay=True)
    forked = CompactionMemory.restore_from_log(child.public_id, log_store=DatabaseLogStore())
    assert forked.get_context() == expected.get_context()
    assert child.parent == session
    assert live.next_seq > expected.next_seq  # the fork stopped where it was asked


def test_a_session_without_compactions_applies_only_the_records_after_its_newest_checkpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a chat turn's restore does (``chat.turns.restore_memory``: the
    database store, newest first): the context's earlier messages come from
    their rows, and only the records after the newest ``checkpoint`` are
    applied one by one."""
    monkeypatch.setattr(checkpoint, "CHECKPOINT_EVERY", 20)
    live = stored_session("flat", turns=30, threshold=10**9)  # 120 messages, 6 checkpoints
    assert live.compaction_count == 0
    applied: list[str] = []
    apply = restore.RecordApplier.apply

    def counting(self: restore.RecordApplier, record: Any) -> None:
        applied.append(record.type)
        apply(self, record)

    monkeypatch.setattr(restore.RecordApplier, "apply", counting)
    restored = CompactionMemory.restore_from_log("flat", log_store=DatabaseLogStore())
    assert applied == []  # seq 119 closed the last checkpoint's 20
    assert restored.get_session_state().to_dict() == live.get_session_state().to_dict()
    live.set_system_prompt("Be brief.")
    DatabaseLogStore().append(
        "flat",
        {
            "type": "system_prompt",
            "system_prompt": "Be brief.",
            "through_seq": 119,
            "ts": "2026-12-01T00:00:00+00:00",
        },
    )
    restored = CompactionMemory.restore_from_log("flat", log_store=DatabaseLogStore())
    assert applied == ["system_prompt"]
    assert restored.get_context() == live.get_context()
