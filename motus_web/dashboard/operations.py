"""Operator actions on sessions, done through the memory library.

Nothing here deletes or edits a logged record. Undo appends a
``compaction_revert`` through the library; restore, fork and restore-from-file
create a new session whose first records are the library's fork of the
restored memory, written through ``DatabaseLogStore`` and linked to its parent.
"""

from __future__ import annotations

import json
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from asgiref.sync import async_to_sync
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from memory import CompactionMemory, InMemoryLogStore, JSONLLogStore, LogError, LogProblem
from memory.log import InvalidSessionIdError, LogRecord, validate_session_id
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import Session


def restore(session: Session) -> CompactionMemory:
    """The session's memory as the library restores it from the database log."""
    return CompactionMemory.restore_from_log(session.public_id, log_store=DatabaseLogStore())


def undo_latest_compaction(session: Session, reason: str) -> int:
    """Revert the session's latest compaction; returns its number.

    Raises ``CompactionError`` when there is none to revert (none yet, or
    already reverted).
    """
    # One undo at a time per session: the row lock makes a second request wait,
    # then restore the log with the revert in it and find nothing left to revert.
    with transaction.atomic():
        Session.objects.select_for_update().filter(pk=session.pk).exists()
        memory = restore(session)
        number = memory.compaction_count
        memory.revert_last_compaction(reason)
        # The database store is an AsyncLogStore: the memory queues the record for flush().
        async_to_sync(memory.flush)()
    return number


class _LogPrefix(InMemoryLogStore):
    """The first ``stop`` records of one session's database log, read-only,
    and an in-memory scratch store for every other session id: a memory
    restored from the prefix forks into the scratch store, whose records are
    then written as a new session. Reads go to the database as a restore asks
    (newest first, to its checkpoint), so a fork costs the same wherever it is
    taken from."""

    def __init__(self, session_id: str, stop: int) -> None:
        super().__init__()
        self.source_id = session_id
        self.stop = stop
        self.database = DatabaseLogStore()

    def append(self, session_id: str, record: LogRecord | Mapping[str, Any]) -> None:
        if session_id == self.source_id:
            raise LogError("the session a fork is taken from is not written to")
        super().append(session_id, record)

    def read(
        self, session_id: str, problems: list[LogProblem] | None = None
    ) -> Iterator[dict[str, Any]]:
        if session_id == self.source_id:
            return self.database.read(session_id, problems, before=self.stop)
        return super().read(session_id, problems)

    def read_reversed(
        self, session_id: str, problems: list[LogProblem] | None = None
    ) -> Iterator[dict[str, Any]]:
        if session_id == self.source_id:
            return self.database.read_reversed(session_id, problems, before=self.stop)
        return super().read_reversed(session_id, problems)

    def exists(self, session_id: str) -> bool:
        return session_id == self.source_id or super().exists(session_id)


def fork_at(session: Session, stop: int, owner: AbstractBaseUser | None, title: str) -> Session:
    """A new session that starts from the context the library restores from
    the first ``stop`` records of ``session``'s log (its log positions
    ``0 .. stop - 1``), linked to ``session``."""
    store = _LogPrefix(session.public_id, stop)
    memory = CompactionMemory.restore_from_log(session.public_id, log_store=store)
    return _save_fork(memory, owner, title, parents=Session.objects.filter(pk=session.pk))


def restore_from_file(
    upload: IO[bytes], owner: AbstractBaseUser | None, title: str
) -> tuple[Session, list[LogProblem]]:
    """A new session whose context is ``CompactionMemory.restore_from_log`` of
    the uploaded Motus JSONL log, with the problems restore reported (a torn
    last line, say). Raises ``MotusMemoryError`` subclasses for a log the
    library cannot restore."""
    with tempfile.TemporaryDirectory(prefix="motus-restore-") as folder:
        path = Path(folder) / "upload.jsonl"
        with path.open("wb") as out:
            for chunk in iter(lambda: upload.read(1 << 16), b""):
                out.write(chunk)
        log_id = _log_session_id(path)
        path.rename(Path(folder) / f"{log_id}.jsonl")
        source = JSONLLogStore(folder)
        memory = CompactionMemory.restore_from_log(log_id, log_store=source)
        owned = Session.objects.filter(owner=owner.pk) if owner else Session.objects.none()
        session = _save_fork(memory, owner, title, parents=owned)
        return session, list(memory.restore_problems)


class NotALogError(ValueError):
    """The upload is not a Motus JSONL conversation log."""


def _log_session_id(path: Path) -> str:
    """The session id the log's first line names, else a stand-in.

    Raises ``NotALogError`` when the first line is not a ``session_meta``
    record: a chat transcript, another tool's session or a binary file would
    otherwise restore to nothing and be refused for a reason that misleads.
    """
    with path.open("rb") as lines:
        first = lines.readline(1 << 20).removeprefix(b"\xef\xbb\xbf")
    try:
        meta = json.loads(first)
    except ValueError:
        meta = None
    if not isinstance(meta, dict) or meta.get("type") != "session_meta":
        raise NotALogError(
            "this is not a Motus JSONL conversation log (its first line is not a "
            "session_meta record); to bring in a transcript or another tool's session, "
            "use Import instead"
        )
    try:
        return validate_session_id(meta.get("session_id"))
    except InvalidSessionIdError:
        return "upload"


class NothingToForkError(ValueError):
    """The restored context holds no message, so a new session would be empty."""


def _save_fork(
    memory: CompactionMemory, owner: AbstractBaseUser | None, title: str, parents: Any
) -> Session:
    """Fork ``memory`` (the library logs the fork's records into the memory's
    own store), then store those records as a new session in the database.

    Raises ``NothingToForkError`` when the context is empty.
    """
    scratch = memory.log_store
    assert scratch is not None
    new_id = uuid.uuid4().hex
    memory.fork(session_id=new_id)
    if not scratch.exists(new_id):
        raise NothingToForkError("there is no message to start a new session from")
    found = list(scratch.read(new_id))
    found[0] = {**found[0], "title": title[:200]}
    with transaction.atomic():
        DatabaseLogStore(parents=parents).extend(new_id, found)
        Session.objects.filter(public_id=new_id).update(owner=owner)
    return Session.objects.select_related("parent").get(public_id=new_id)
