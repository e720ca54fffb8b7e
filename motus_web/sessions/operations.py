"""What may be done to stored sessions, done through the memory library.

Session creation, undo, fork, restore (to before a compaction, or from a
log file) and delete live here; the dashboard and the chat call them. Nothing
here edits a logged record. Undo appends a ``compaction_revert`` through the
library; fork and restore create a new session whose first records are the
library's fork of the restored memory, written through ``DatabaseLogStore``
with its owner, in one transaction.

Writes to a live session (undo, delete, and the actions of ``context_edits``
through ``writing``) hold the session's writer lease for their transaction
(``lease.holding``), so they never land in the middle of a
chat turn: while one streams they are refused with ``SessionBusyError``. They
also check, under that lease, that the session is as the confirmation saw it
(``as_of``, its record count then) and raise ``StaleTargetError`` naming
what changed.
"""

from __future__ import annotations

import json
import tempfile
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import orjson
from asgiref.sync import async_to_sync
from django.db import transaction
from django.db.models import Max, Min, QuerySet

from memory import (
    ChatClient,
    CompactionMemory,
    CompactionMemoryConfig,
    JSONLLogStore,
    LogProblem,
)
from memory.log import InvalidSessionIdError, records, validate_session_id

from . import history, lease
from .log_store import DatabaseLogStore
from .memories import (
    ContextSize,
    config_of,
    dropped_scope_note,
    owned_meta,
    restore_from,
    restore_view,
)
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
    "remember across chats"); whatever scope it names, the session's is its
    owner's (``memories.owned_meta``)."""
    public_id = uuid.uuid4().hex
    stored = {k: v for k, v in config.to_dict().items() if k not in ("session_id", "log_base_path")}
    extra, _ = owned_meta(extra or {}, owner.pk)  # its long-term memories are its owner's
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
    for change in session.context_changes.filter(position__gte=as_of).order_by("position")[:5]:
        parts.append(_change_words(change))
    return ", ".join(parts) or "records were added"


def _change_words(change: ContextChange) -> str:
    if change.kind == history.REWIND:
        number = history.rewind_number(change)
        return f"rewind {number} happened" if number is not None else "a rewind happened"
    if change.kind == history.SUMMARY_CORRECTION:
        number = change.record_extra.get("compaction_number")
        return f"the summary of compaction {number} was corrected"
    if change.kind == "unpin":
        values = change.record_extra.get("values") or []
        return f"{', '.join(map(str, values)) or 'a pin'} was unpinned"
    if change.kind == ContextChange.Kind.RESET:
        return "the context was reset"
    if change.kind == ContextChange.Kind.SYSTEM_PROMPT:
        return "its system prompt changed"
    return f"a {change.kind} record was logged"


# -- undo ------------------------------------------------------------------------------


def undoable(
    events: Sequence[CompactionEvent | ContextChange],
) -> tuple[CompactionEvent | None, str]:
    """The compaction an undo would revert after ``events`` (log order): the
    one in force, as the library replays them (``history``: an undo puts the
    one before in force again, any depth; a rewind puts back what was in
    force at its target); else ``None`` and why not."""
    in_force = history.compactions_in_force(events)
    if not in_force:
        went_back = (history.REWIND, ContextChange.Kind.RESET)
        if any(isinstance(e, ContextChange) and e.kind in went_back for e in events):
            return None, "No compaction is in force: a rewind or a reset went back before them."
        undone = sum(1 for e in events if e.kind == CompactionEvent.Kind.REVERT)
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


def undone_numbers(session: Session, before: int | None = None) -> set[int] | None:
    """The numbers of the compactions undone in the session's log (before log
    position ``before``), read from its few revert rows, when the log holds
    no context change (the session's stored counts say so) and each revert
    names a distinct compaction: the library reverts only the compaction in
    force and never gives a number twice without a reset, so every other ok
    compaction is in force. ``None``: the log must be walked (``history``)."""
    if session.change_count:
        return None
    if not session.revert_count:
        return set()
    reverts = session.compaction_events.filter(kind=CompactionEvent.Kind.REVERT)
    if before is not None:
        reverts = reverts.filter(position__lt=before)
    numbers = list(reverts.values_list("reverts", flat=True))
    if None in numbers or len(set(numbers)) != len(numbers):
        return None
    return {number for number in numbers if number is not None}


def in_force(session: Session, before: int | None = None) -> CompactionEvent | None:
    """The compaction whose summary heads the context (``history``), after the
    whole log or, with ``before``, just before that log position: by index,
    the latest ok compaction not undone, in a log that only compacted and
    undid (``undone_numbers``); any other log's event rows are walked."""
    events = session.compaction_events.all()
    if before is not None:
        events = events.filter(position__lt=before)
    undone = undone_numbers(session, before)
    if undone is not None:
        ok = events.filter(kind=CompactionEvent.Kind.OK).exclude(number__in=undone)
        return ok.order_by("-position").first()
    rows = events_of(session)
    found = history.compactions_in_force([e for e in rows if before is None or e.position < before])
    return found[-1] if found else None


def undoable_now(session: Session) -> tuple[CompactionEvent | None, str]:
    """``undoable`` after the session's whole log, reading only the
    compaction in force (and the reverts, when none is) when the log only
    compacted and undid (``in_force``)."""
    if undone_numbers(session) is None:
        return undoable(events_of(session))
    latest = in_force(session)
    if latest is not None:
        return undoable([latest])
    return undoable(list(session.compaction_events.filter(kind=CompactionEvent.Kind.REVERT)))


def events_of(session: Session) -> list[CompactionEvent | ContextChange]:
    """Every event row of the session in log order: few, whatever its length."""
    found: list[CompactionEvent | ContextChange] = [
        *session.compaction_events.all(),
        *session.context_changes.all(),
    ]
    return sorted(found, key=lambda row: row.position)


def undo_preview(session: Session) -> ContextSize:
    """The context an undo of the latest compaction would leave, computed by
    the library without writing (raises ``CompactionError`` when there is
    nothing to undo)."""
    memory = restore_view(session)
    memory.revert_last_compaction("preview")
    return ContextSize.of(memory)


@contextmanager
def writing(
    session: Session,
    kind: str,
    *,
    as_of: int,
    check: Callable[[], None] | None = None,
    client: ChatClient | None = None,
    compact_model: str | None = None,
) -> Iterator[CompactionMemory]:
    """The session's live memory, restored from the database, for one action
    that appends to its log (``kind``: "undo", "rewind"...), inside one
    transaction holding the session's writer lease.

    Under the lease, ``check()`` (which raises ``StaleTargetError`` when the
    action's target is no longer current) runs, then the session must still
    have ``as_of`` records. What the block's memory logs is flushed to the
    database before the transaction commits; a crash or an error anywhere in
    the block rolls back every record, the lease and the caller's token with
    it, so the log has all of the action or none. ``client`` and
    ``compact_model`` are what a compaction would use (``None``: the offline
    summariser).
    Raises ``SessionBusyError`` while a chat turn writes the session.
    """
    with transaction.atomic(), lease.holding(session.pk, kind):
        if check is not None:
            check()
        check_unchanged(session, as_of)
        config = None
        if compact_model:
            config = config_of(
                session.config, session_id=session.public_id, compact_model_name=compact_model
            )
        memory = restore_from(session, DatabaseLogStore(), config=config, client=client)
        yield memory
        # The database store is an AsyncLogStore: the memory queues its records for flush().
        async_to_sync(memory.flush)()


def undo_compaction(session: Session, reason: str, *, target: int, as_of: int) -> int:
    """Revert the compaction at log position ``target``, the one in force,
    through the library; returns its number.

    Raises ``StaleTargetError`` when that compaction is no longer the one an
    undo would revert, or the session logged anything since it had ``as_of``
    records; ``SessionBusyError`` while a chat turn writes the session.
    """
    found: list[CompactionEvent] = []

    def check() -> None:
        event, why = undoable_now(Session.objects.get(pk=session.pk))
        if event is None or event.position != target:
            asked = session.compaction_events.filter(position=target).first()
            name = _called(asked) if asked is not None else "that compaction"
            now = f"{_called(event)} is the latest now" if event else why
            raise StaleTargetError(f"This page was for {name}, but {now}. Nothing was undone.")
        found.append(event)

    with writing(session, "undo", as_of=as_of, check=check) as memory:
        memory.revert_last_compaction(reason, number=found[0].number)
    return found[0].number or 0


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


def fork_cut(session: Session, message: Message, what: str = "fork") -> Cut:
    """The cut of a fork at ``message``, at a unit boundary: after an A or C
    message, or after the last result of a B unit's tool round. Asked inside
    a round, the cut moves to the end of the round; when the log holds no
    result for some call of that round, to before the round, so that the
    fork's context never has a call without its result. ``what`` names the
    action in the sentence that says where the cut moved ("fork", "rewind")."""
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
                f"Message #{message.seq} is inside a tool round ({span}): the {what} is cut "
                f"after #{last_seq}, where the round's results end."
            )
        return Cut(message.seq, last_seq, last_pos + 1, moved, memory)
    before = session.messages.filter(seq__lt=first_seq).order_by("-seq").values_list("seq").first()
    moved = (
        f"Message #{message.seq} is in a tool round ({span}) whose calls do not all have a "
        f"result in the log: the {what} is cut before the round"
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
    parents = Session.objects.filter(pk=session.pk)
    return _save_fork(cut.memory, owner, title, parents=parents, lineage=Session.FORK)


def restore_before(
    session: Session, event: CompactionEvent, owner: AbstractBaseUser | None, title: str
) -> Session:
    """A new session that starts from the context just before ``event``."""
    memory = restore_view(session, event.position)
    parents = Session.objects.filter(pk=session.pk)
    return _save_fork(memory, owner, title, parents=parents, lineage=Session.RESTORE)


def restore_preview(session: Session, event: CompactionEvent) -> ContextSize:
    return ContextSize.of(restore_view(session, event.position))


def restore_from_file(
    upload: IO[bytes],
    owner: AbstractBaseUser | None,
    title: str,
    *,
    max_messages: int | None = None,
) -> tuple[Session, list[LogProblem]]:
    """A new session whose context is ``CompactionMemory.restore_from_log`` of
    the uploaded Motus JSONL log, with the problems restore reported (a torn
    last line, say). Raises ``MotusMemoryError`` subclasses for a log the
    library cannot restore, ``NotALogError`` for a file that is no log,
    ``TooManyMessagesError`` for a log of more than ``max_messages`` message
    records (counted while the file is copied, before anything is restored).

    The log is copied to a temporary folder, which goes whatever happens; the
    new session is written in one transaction, so a crash leaves none of it.
    """
    with tempfile.TemporaryDirectory(prefix="motus-restore-") as folder:
        path = Path(folder) / "upload.jsonl"
        messages = 0
        with path.open("wb") as out:
            for line in upload:
                out.write(line)
                if max_messages is not None and is_message_line(line):
                    messages += 1
                    if messages > max_messages:
                        raise TooManyMessagesError(
                            f"the log holds more than {max_messages:,} messages, the most "
                            "one upload may restore; restore it on the server "
                            "(CompactionMemory.restore_from_log) instead"
                        )
        log_id = _log_session_id(path)
        path.rename(Path(folder) / f"{log_id}.jsonl")
        source = JSONLLogStore(folder)
        # Read whole, so that every damaged line is reported, not only those after
        # the last checkpoint (the context is the same either way).
        memory = CompactionMemory.restore_from_log(log_id, log_store=source, full_replay=True)
        owned = Session.objects.filter(owner=owner.pk) if owner else Session.objects.none()
        # The fork's records go to the temporary folder's store, then to the database.
        session = _save_fork(memory, owner, title, parents=owned, lineage=Session.RESTORE)
        return session, list(memory.restore_problems)


def scope_dropped(upload: IO[bytes], owner: AbstractBaseUser | None) -> str | None:
    """What a restore of the log in ``upload`` (read from where it is) says of
    a long-term memory scope its session_meta names that is not ``owner``'s
    (the new session remembers in the owner's: ``owned_meta``); ``None``
    when it names none, or the owner's."""
    try:
        meta = _session_meta(upload.readline(1 << 20))
    except NotALogError:
        return None
    pk = owner.pk if owner is not None else None
    _, dropped = owned_meta(meta, pk)
    return dropped_scope_note(dropped, pk) if dropped is not None else None


def is_message_line(line: bytes) -> bool:
    """Whether a log line is a ``message`` record (a line that is no JSON is not)."""
    if b'"message"' not in line:
        return False  # most lines: no parse
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return isinstance(record, dict) and record.get("type") == records.MESSAGE


class TooManyMessagesError(ValueError):
    """The uploaded log holds more messages than one upload may restore."""


class NotALogError(ValueError):
    """The upload is not a Motus JSONL conversation log."""


def check_log_head(upload: IO[bytes]) -> None:
    """Raise ``NotALogError`` unless the file's first line (read up to 1 MB, then
    the file is rewound) is a Motus log's ``session_meta`` record."""
    _session_meta(upload.readline(1 << 20))
    upload.seek(0)


def _log_session_id(path: Path) -> str:
    """The session id the log's first line names, else a stand-in; raises
    ``NotALogError`` as ``check_log_head``."""
    with path.open("rb") as lines:
        meta = _session_meta(lines.readline(1 << 20))
    try:
        return validate_session_id(meta.get("session_id"))
    except InvalidSessionIdError:
        return "upload"


def _session_meta(first: bytes) -> dict[str, Any]:
    """The ``session_meta`` record of a log's first line.

    Raises ``NotALogError`` when it is none: a chat transcript, another
    tool's session or a binary file would otherwise restore to nothing and be
    refused for a reason that misleads.
    """
    try:
        meta = json.loads(first.removeprefix(b"\xef\xbb\xbf"))
    except ValueError:
        meta = None
    if not isinstance(meta, dict) or meta.get("type") != "session_meta":
        raise NotALogError(
            "this is not a Motus JSONL conversation log (its first line is not a "
            "session_meta record); to bring in a transcript or another tool's session, "
            "use Import instead"
        )
    return meta


def _save_fork(
    memory: CompactionMemory,
    owner: AbstractBaseUser | None,
    title: str,
    parents: QuerySet[Session],
    lineage: str,
) -> Session:
    """Fork ``memory`` (the library logs the fork's records into the memory's
    own store), then store those records as a new session, owned by
    ``owner``, in one transaction. ``lineage`` (``Session.FORK``,
    ``Session.RESTORE``) is kept in its session_meta's extra, for its tag.
    Raises ``NothingToForkError`` when the context is empty."""
    scratch = memory.log_store
    assert scratch is not None
    new_id = uuid.uuid4().hex
    memory.fork(session_id=new_id)
    if not scratch.exists(new_id):
        raise NothingToForkError("there is no message to start a new session from")
    found = list(scratch.read(new_id))
    # The fork's memories are its owner's, not those of the session or file it came from.
    meta, _ = owned_meta(found[0], owner.pk if owner is not None else None)
    found[0] = {**meta, "title": title[:200], Session.LINEAGE: lineage}
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
