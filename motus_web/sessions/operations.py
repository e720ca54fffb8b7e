"""What may be done to stored sessions, done through the memory library.

Session creation, undo, fork, restore (to before a compaction, or from a
log file) and delete live here; the dashboard and the chat call them. Nothing
here edits a logged record. Undo appends a ``compaction_revert`` through the
library; fork and restore create a new session whose first records are the
library's fork of the restored memory, written through ``DatabaseLogStore``
with its owner, in one transaction.

Writes to a live session (undo, delete) hold the session's writer lease for
their transaction (``lease.holding``), so they never land in the middle of a
chat turn: while one streams they are refused with ``SessionBusyError``. They
also check, under that lease, that the session is as the confirmation saw it
(``as_of``, its record count then) and raise ``StaleTargetError`` naming
what changed.
"""

from __future__ import annotations

import json
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from asgiref.sync import async_to_sync
from django.db import transaction
from django.db.models import Max, Min, QuerySet

from memory import CompactionMemory, CompactionMemoryConfig, JSONLLogStore, LogProblem
from memory.log import InvalidSessionIdError, records, validate_session_id

from . import lease
from .log_store import DatabaseLogStore
from .memories import ContextSize, restore_view
from .models import CompactionEvent, ContextChange, Message, Session
from .once import StaleTargetError

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser


def create_session(
    owner: AbstractBaseUser,
    config: CompactionMemoryConfig,
    *,
    title: str,
    model_name: str,
    system_prompt: str = "",
    parent_session_id: str | None = None,
    extra: dict[str, Any] | None = None,
    tools: list[dict[str, Any]] | None = None,
    memory_type: str = CompactionMemory.memory_type,
) -> Session:
    """Store a new session owned by ``owner`` whose log holds only its meta
    (the row is inserted with its owner: no moment without one); its memory is
    ``CompactionMemory.restore_from_log`` of it, with ``config``. ``tools``:
    the schemas every turn will send (a chat's), so that its first turn logs
    no change of them. ``memory_type="background"`` with ``extra={"long_term":
    {"scope": ...}}`` makes a ``BackgroundMemory`` session (the chat's
    "remember across chats")."""
    public_id = uuid.uuid4().hex
    stored = {k: v for k, v in config.to_dict().items() if k not in ("session_id", "log_base_path")}
    meta = records.SessionMeta(
        ts=records.now_iso(),
        session_id=public_id,
        system_prompt=system_prompt,
        config=stored,
        parent_session_id=parent_session_id,
        format_version=records.FORMAT_VERSION,
        memory_type=memory_type,
        model_name=model_name,
        tools=tools or None,
        title=title[:200],
        extra=extra or {},
    )
    DatabaseLogStore(owner=owner).append(public_id, meta)
    return Session.objects.get(public_id=public_id)


# -- the session as the confirmation saw it ------------------------------------------


def check_unchanged(session: Session, as_of: int) -> None:
    """Raise ``StaleTargetError`` naming what was logged since the session
    had ``as_of`` records (a confirmation's view of it)."""
    count = Session.objects.filter(pk=session.pk).values_list("record_count", flat=True).first()
    if count is None or count == as_of:
        return
    raise StaleTargetError(
        f"The session changed since this page was opened: {changes(session, as_of)}."
    )


def changes(session: Session, as_of: int) -> str:
    """What the session logged from record position ``as_of`` on, in words."""
    added = session.messages.filter(position__gte=as_of).aggregate(
        first=Min("seq"), last=Max("seq")
    )
    parts = []
    if added["first"] is not None:
        first, last = added["first"], added["last"]
        parts.append(
            f"message #{first} was added"
            if first == last
            else f"messages #{first}-#{last} were added"
        )
    events = session.compaction_events.filter(position__gte=as_of).order_by("position")
    for event in events[:5]:
        if event.kind == CompactionEvent.Kind.OK:
            parts.append(f"{_called(event)} happened")
        elif event.kind == CompactionEvent.Kind.REVERT:
            parts.append(f"compaction {event.reverts} was undone")
        else:
            parts.append(f"a {event.get_kind_display()} was logged")
    if session.context_changes.filter(position__gte=as_of).exists():
        parts.append("the context was reset or its system prompt changed")
    return ", ".join(parts) or "records were added"


# -- undo ------------------------------------------------------------------------------


def undoable(compactions: list[CompactionEvent]) -> tuple[CompactionEvent | None, str]:
    """The compaction an undo would revert among ``compactions`` (log order):
    the one in force, as the library replays them (a compaction is put in
    force, an undo takes the latest back and puts the one before in force
    again: any depth); else ``None`` and why not."""
    in_force: list[CompactionEvent] = []
    undone = 0
    for event in compactions:
        if event.kind == CompactionEvent.Kind.OK:
            in_force.append(event)
        elif event.kind == CompactionEvent.Kind.REVERT and in_force:
            in_force.pop()
            undone += 1
    if not in_force:
        if undone:
            return None, (
                f"Every compaction of this session was undone ({undone}): the context holds "
                "all its messages again."
            )
        return None, "This session has no compaction yet: its context has never been summarised."
    event = in_force[-1]
    if event.trigger == CompactionEvent.Trigger.FORK:
        return None, (
            "The compaction in force is the summary this session started from when it was "
            "forked: there is no context before it to go back to. Its parent session has the "
            "messages it summarises."
        )
    return event, ""


def _called(event: CompactionEvent) -> str:
    return f"compaction {event.number}" if event.number is not None else "an unnumbered compaction"


def compactions_of(session: Session) -> list[CompactionEvent]:
    return list(session.compaction_events.order_by("position"))


def undo_preview(session: Session) -> ContextSize:
    """The context an undo of the latest compaction would leave, computed by
    the library without writing (raises ``CompactionError`` when there is
    nothing to undo)."""
    memory = restore_view(session)
    memory.revert_last_compaction("preview")
    return ContextSize.of(memory)


def undo_compaction(session: Session, reason: str, *, target: int, as_of: int) -> int:
    """Revert the compaction at log position ``target``, the one in force,
    through the library; returns its number.

    Raises ``StaleTargetError`` when that compaction is no longer the one an
    undo would revert, or the session logged anything since it had ``as_of``
    records; ``SessionBusyError`` while a chat turn writes the session.
    """
    with transaction.atomic(), lease.holding(session.pk, "undo"):
        event, why = undoable(compactions_of(session))
        if event is None or event.position != target:
            asked = session.compaction_events.filter(position=target).first()
            name = _called(asked) if asked is not None else "that compaction"
            now = f"{_called(event)} is the latest now" if event else why
            raise StaleTargetError(f"This page was for {name}, but {now}. Nothing was undone.")
        check_unchanged(session, as_of)
        memory = CompactionMemory.restore_from_log(session.public_id, log_store=DatabaseLogStore())
        memory.revert_last_compaction(reason, number=event.number)
        # The database store is an AsyncLogStore: the memory queues the record for flush().
        async_to_sync(memory.flush)()
    return event.number or 0


# -- fork and restore --------------------------------------------------------------------


class NothingToForkError(ValueError):
    """The restored context holds no message, so a new session would be empty."""


@dataclass(frozen=True, slots=True)
class Cut:
    """Where a fork asked for at message ``asked`` is taken: after message
    ``after`` (``None``: before any message), the log's first ``stop`` records.
    ``moved`` says why it is not right after ``asked`` ("": it is)."""

    asked: int
    after: int | None
    stop: int
    moved: str
    memory: CompactionMemory  # restored from those records, writing nowhere

    @property
    def size(self) -> ContextSize:
        return ContextSize.of(self.memory)


def fork_cut(session: Session, message: Message) -> Cut:
    """The cut of a fork at ``message``, at a unit boundary: after an A or C
    message, or after the last result of a B unit's tool round. Asked inside
    a round, the cut moves to the end of the round; when the log holds no
    result for some call of that round, to before the round, so that the
    fork's context never has a call without its result."""
    if message.unit != Message.Unit.B:
        stop = message.position + 1
        return Cut(message.seq, message.seq, stop, "", restore_view(session, stop))
    found = (
        session.messages.filter(unit=Message.Unit.B, unit_index=message.unit_index)
        .order_by("seq")
        .values_list("seq", "position")
    )
    (first_seq, first_pos), *_ = found
    last_seq, last_pos = found.reverse()[0]
    span = f"#{first_seq}-#{last_seq}" if first_seq != last_seq else f"#{first_seq}"
    memory = restore_view(session, last_pos + 1)
    if memory.at_boundary:
        moved = ""
        if last_seq != message.seq:
            moved = (
                f"Message #{message.seq} is inside a tool round ({span}): the fork is cut "
                f"after #{last_seq}, where the round's results end."
            )
        return Cut(message.seq, last_seq, last_pos + 1, moved, memory)
    before = session.messages.filter(seq__lt=first_seq).order_by("-seq").values_list("seq").first()
    moved = (
        f"Message #{message.seq} is in a tool round ({span}) whose calls do not all have a "
        "result in the log: the fork is cut before the round"
        + (f", after #{before[0]}." if before else ", before any message.")
    )
    return Cut(
        message.seq,
        before[0] if before else None,
        first_pos,
        moved,
        restore_view(session, first_pos),
    )


def fork(cut: Cut, session: Session, owner: AbstractBaseUser | None, title: str) -> Session:
    """A new session that starts from ``cut``'s context, linked to ``session``."""
    return _save_fork(cut.memory, owner, title, parents=Session.objects.filter(pk=session.pk))


def restore_before(
    session: Session, event: CompactionEvent, owner: AbstractBaseUser | None, title: str
) -> Session:
    """A new session that starts from the context just before ``event``."""
    memory = restore_view(session, event.position)
    return _save_fork(memory, owner, title, parents=Session.objects.filter(pk=session.pk))


def restore_preview(session: Session, event: CompactionEvent) -> ContextSize:
    return ContextSize.of(restore_view(session, event.position))


def restore_from_file(
    upload: IO[bytes], owner: AbstractBaseUser | None, title: str
) -> tuple[Session, list[LogProblem]]:
    """A new session whose context is ``CompactionMemory.restore_from_log`` of
    the uploaded Motus JSONL log, with the problems restore reported (a torn
    last line, say). Raises ``MotusMemoryError`` subclasses for a log the
    library cannot restore, ``NotALogError`` for a file that is no log."""
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
        # The fork's records go to the temporary folder's store, then to the database.
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


def _save_fork(
    memory: CompactionMemory,
    owner: AbstractBaseUser | None,
    title: str,
    parents: QuerySet[Session],
) -> Session:
    """Fork ``memory`` (the library logs the fork's records into the memory's
    own store), then store those records as a new session, owned by
    ``owner``, in one transaction. Raises ``NothingToForkError`` when the
    context is empty."""
    scratch = memory.log_store
    assert scratch is not None
    new_id = uuid.uuid4().hex
    memory.fork(session_id=new_id)
    if not scratch.exists(new_id):
        raise NothingToForkError("there is no message to start a new session from")
    found = list(scratch.read(new_id))
    found[0] = {**found[0], "title": title[:200]}
    DatabaseLogStore(parents=parents, owner=owner).extend(new_id, found)
    return Session.objects.select_related("parent").get(public_id=new_id)


# -- delete ------------------------------------------------------------------------------


def delete_session(session: Session, *, as_of: int) -> None:
    """Delete the session and its rows (sessions forked from it lose only the
    link). Raises ``StaleTargetError`` when it logged anything since it had
    ``as_of`` records, ``SessionBusyError`` while a chat turn writes it."""
    with transaction.atomic(), lease.holding(session.pk, "delete"):
        check_unchanged(session, as_of)
        # Bulk deletes per table: a long session's rows go in a few statements.
        Message.objects.filter(session=session).delete()
        ContextChange.objects.filter(session=session).delete()
        session.delete()
