"""Every session the dashboard can produce exports to a log that imports back
unchanged: the same records and the same restored context.

Each case acts on a compacted session as the dashboard's views do (the
functions they call), exports it with ``export_session``, deletes it and
imports the file again, as its owner would on another instance.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.core.management import call_command

from memory import (
    BackgroundMemory,
    ChatMessage,
    CompactionMemory,
    CompactionMemoryConfig,
    InMemoryLogStore,
    LogPoint,
    SQLiteLongTermStore,
)
from motus_web.sessions import context_edits, operations
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.long_term_store import owner_scope
from motus_web.sessions.models import Session

from .helpers import make_session

pytestmark = pytest.mark.django_db


def as_of(session: Session) -> int:
    session.refresh_from_db()
    return session.record_count


def newest_ok(session: Session) -> Any:
    return session.compaction_events.filter(kind="ok").order_by("-position").first()


def rewind(session: Session) -> Session:
    context_edits.rewind(session, LogPoint("after_message", 11), "back", as_of=as_of(session))
    return session


def undo(session: Session) -> Session:
    event, _ = operations.undoable(operations.events_of(session))
    assert event is not None
    operations.undo_compaction(session, "undo", target=event.position, as_of=as_of(session))
    return session


def undo_rewind(session: Session) -> Session:
    number = context_edits.rewind(
        session, LogPoint("after_message", 7), "back", as_of=as_of(session)
    )
    context_edits.undo_rewind(session, number, "again", as_of=as_of(session))
    return session


def correction(session: Session) -> Session:
    event = context_edits.in_force(session)
    assert event is not None
    context_edits.correct_summary(
        session, event.position, "Booking B3 flies to city 3.", "fix", as_of=as_of(session)
    )
    return session


def compact_now(session: Session) -> Session:
    context_edits.compact_now(session, "Keep the booking ids.", as_of=as_of(session))
    return session


def fork(session: Session) -> Session:
    reply = session.messages.filter(role="assistant").order_by("-seq")[3]
    return operations.fork(operations.fork_cut(session, reply), session, session.owner, "Fork")


def everything(session: Session) -> Session:
    for act in (correction, compact_now, undo, undo_rewind, rewind):
        session = act(session)
    return session


def background(owner: User) -> Session:
    """A background memory's log (recalls and extractions among its messages) in the database."""
    config = CompactionMemoryConfig(token_threshold=600)
    log = InMemoryLogStore()
    memory = BackgroundMemory(
        # The scope its owner's, as every dashboard session's is (an imported file's
        # other scope is dropped: test_memory_ownership).
        store=SQLiteLongTermStore(),
        scope=owner_scope(owner.pk),
        log_store=log,
        config=config,
    )

    async def talk() -> None:
        for turn in range(6):
            memory.recall(f"Where did I move in 201{turn - 1}?")
            await memory.add_message(ChatMessage.user(f"I moved to city {turn} in 201{turn}."))
            await memory.add_message(ChatMessage.assistant("Noted. " + "details " * 120))
            await memory.drain()

    async_to_sync(talk)()
    records = list(log.read(memory.session_id))
    assert {"memory_recall", "memory_extraction", "compaction"} <= {r["type"] for r in records}
    DatabaseLogStore().extend(memory.session_id, records)
    Session.objects.filter(public_id=memory.session_id).update(owner=owner)
    return Session.objects.get(public_id=memory.session_id)


ACTIONS: dict[str, Callable[[Session], Session]] = {
    "rewind": rewind,
    "undo": undo,
    "undo-rewind": undo_rewind,
    "correction": correction,
    "compact-now": compact_now,
    "fork": fork,
    "all-in-turn": everything,
}


def restored_context(public_id: str, **kwargs: Any) -> list[ChatMessage]:
    store = DatabaseLogStore()
    return CompactionMemory.restore_from_log(public_id, log_store=store, **kwargs).get_context()


def export_delete_import(session: Session, tmp_path: Path) -> str:
    path = tmp_path / "export.jsonl"
    call_command("export_session", session.public_id, "-o", str(path))
    session.delete()  # the test's own clean slate: the dashboard never deletes
    out = io.StringIO()
    call_command("import_sessions", str(path), "--owner", "olivia", stdout=out)
    assert f"{path}: 1 imported, 0 updated, 0 already there, 0 problems" in out.getvalue()
    return out.getvalue()


@pytest.mark.parametrize("action", [*ACTIONS, "background"])
def test_an_exported_session_imports_back_unchanged(
    action: str, owner: User, tmp_path: Path
) -> None:
    if action == "background":
        session = background(owner)
    else:
        session = ACTIONS[action](make_session(owner, turns=8, filler=60, threshold=600))
    public_id = session.public_id
    records = list(DatabaseLogStore().read(public_id))
    context = restored_context(public_id)
    assert restored_context(public_id, full_replay=True) == context

    export_delete_import(session, tmp_path)

    assert list(DatabaseLogStore().read(public_id)) == records
    assert restored_context(public_id) == context
    assert restored_context(public_id, full_replay=True) == context
    assert Session.objects.get(public_id=public_id).owner == owner
