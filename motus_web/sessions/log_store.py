"""``DatabaseLogStore``: the memory's ``LogStore`` over the dashboard's models."""

from __future__ import annotations

import heapq
import logging
import operator
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import QuerySet

from memory import LogCorruptError, LogError, SessionNotFoundError
from memory.log import LogProblem, LogRecord, records, validate_session_id

from . import aggregates, rows
from .db_threads import on_db_thread
from .models import CompactionEvent, ContextChange, Message, Session
from .signals import announce

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

_BATCH = 500
logger = logging.getLogger(__name__)


class DatabaseLogStore:
    """Conversation logs as rows: a ``Session`` per log, a row per record.

    ``append`` (and ``extend`` for many records) runs in one transaction that
    locks the session row, inserts the record rows and updates the session's
    totals (``message_count``, ``total_tokens``, ``context_tokens``,
    ``compaction_count``, the counts and usage of ``aggregates``) and its
    chart blocks. A crash or error mid-write rolls all of it back: the log
    holds the record and the totals count it, or neither.

    A session's first record must be its ``session_meta``; a message's
    ``seq`` must be greater than every seq before it. Records that break
    these rules, or lack the fields the totals need, or hold an integer past
    64 bits where a column needs it, raise ``LogCorruptError``; database
    failures raise ``LogError`` (the driver's message goes to the log only).
    Text and JSON are stored losslessly on SQLite and PostgreSQL alike, NUL
    characters included (see ``fields.py`` and ``rows._str``). ``read`` gives back every record
    exactly as appended (see ``rows.py``), so rows never yield ``problems``.

    The ORM is synchronous: inside a running event loop a memory writes
    through ``append_async`` (this is an ``AsyncLogStore``), which runs the
    same transaction on a thread of ``db_threads``' pool; ``read`` and the other methods
    are for sync code (or ``sync_to_async``).

    Once a transaction commits, its records are announced
    (``signals.announce``): the ``records_committed`` signal and the session's
    channel-layer group. This store is the only writer of session rows, so
    every record, whoever appends it, is announced the same way.

    ``parents`` are the sessions a new session's ``parent_session_id`` may
    name (by public id, else by the id it had in an imported log): all of them
    by default; the importer passes the importing owner's. A parent outside
    them leaves the link empty; the record keeps its ``parent_session_id``.

    ``owner`` owns a session this store creates: the ``Session`` row is
    inserted with it, in the same transaction as its first records.

    ``announce=False`` leaves the announcement to the caller: an importer that
    writes a big session in many ``extend`` calls inside its own transaction
    would otherwise keep every record until the commit; it announces the
    session once, after that commit.
    """

    def __init__(
        self,
        *,
        parents: QuerySet[Session] | None = None,
        announce: bool = True,
        owner: AbstractBaseUser | None = None,
    ) -> None:
        self.parents = parents
        self.announce = announce
        self.owner = owner

    def append(self, session_id: str, record: LogRecord | Mapping[str, Any]) -> None:
        self.extend(session_id, [record])

    async def append_async(self, session_id: str, record: LogRecord | Mapping[str, Any]) -> None:
        await on_db_thread(self.extend)(session_id, [record])

    def extend(self, session_id: str, new_records: Iterable[LogRecord | Mapping[str, Any]]) -> None:
        """Append ``new_records`` in order, in one transaction.

        ``LogCorruptError.line`` is the 1-based index in ``new_records`` of the
        record that was refused.
        """
        validate_session_id(session_id)
        try:
            with transaction.atomic():
                session = Session.objects.select_for_update().filter(public_id=session_id).first()
                writer = _Writer(session_id, session, self.parents, self.owner)
                written: list[dict[str, Any]] = []
                for index, record in enumerate(new_records, start=1):
                    data = records.as_dict(record)
                    try:
                        writer.add(data)
                    except rows.RecordError as error:
                        raise LogCorruptError(str(error), line=index) from error
                    if self.announce:
                        written.append(data)
                writer.finish()
                if self.announce:
                    transaction.on_commit(lambda: announce(session_id, written))
        except IntegrityError as error:
            # Another transaction wrote the same session or row first: a conflict the
            # caller resolves (the importer retries under a new id), not a server fault.
            logger.info("session %r was written by another transaction first", session_id)
            raise LogError(
                f"session {session_id!r} was written by another request at the same time"
            ) from error
        except DatabaseError as error:
            # The driver's message may quote SQL and data: it goes to the server log only.
            logger.exception("could not write session %r", session_id)
            raise LogError(
                f"the database could not store session {session_id!r} "
                "(the server log has the details)"
            ) from error

    def read(
        self,
        session_id: str,
        problems: list[LogProblem] | None = None,
        *,
        before: int | None = None,
    ) -> Iterator[dict[str, Any]]:
        """The session's records in order; with ``before``, only those at log
        positions below it (the ``session_meta`` is position 0)."""
        return self._records(self._session(session_id), before)

    def read_reversed(
        self,
        session_id: str,
        problems: list[LogProblem] | None = None,
        *,
        before: int | None = None,
    ) -> Iterator[dict[str, Any]]:
        """The records newest first (a ``ReversibleLogStore``): three streamed
        queries, whose rows a restore stops reading at its checkpoint.
        ``before`` as in ``read``."""
        return self._records_reversed(self._session(session_id), before)

    @staticmethod
    def _session(session_id: str) -> Session:
        session = Session.objects.filter(public_id=session_id).first()
        if session is None:
            raise SessionNotFoundError(session_id, "the database")
        return session

    def exists(self, session_id: str) -> bool:
        return Session.objects.filter(public_id=session_id).exists()

    def list_sessions(self) -> list[str]:
        return sorted(Session.objects.values_list("public_id", flat=True))

    @staticmethod
    def _records(session: Session, before: int | None) -> Iterator[dict[str, Any]]:
        if before is not None and before <= 0:
            return
        yield rows.meta_of(session)
        bound = {} if before is None else {"position__lt": before}
        # Few events, many messages: list the first, stream the second.
        events: list[CompactionEvent | ContextChange] = [
            *session.compaction_events.filter(**bound).order_by("position"),
            *session.context_changes.filter(**bound).order_by("position"),
        ]
        events.sort(key=lambda row: row.position)
        messages = session.messages.filter(**bound).order_by("seq").iterator(chunk_size=_BATCH)
        for row in heapq.merge(messages, events, key=lambda row: row.position):
            yield rows.record_of(row)

    @staticmethod
    def _records_reversed(session: Session, before: int | None) -> Iterator[dict[str, Any]]:
        if before is not None and before <= 0:
            return
        bound = {} if before is None else {"position__lt": before}
        newest_first: list[Iterator[Message | CompactionEvent | ContextChange]] = [
            related.filter(**bound).order_by("-position").iterator(chunk_size=_BATCH)
            for related in (session.messages, session.compaction_events, session.context_changes)
        ]
        position = operator.attrgetter("position")
        for row in heapq.merge(*newest_first, key=position, reverse=True):
            yield rows.record_of(row)
        yield rows.meta_of(session)


class _Writer:
    """Turns one transaction's records into rows and keeps the session's totals."""

    def __init__(
        self,
        session_id: str,
        session: Session | None,
        parents: QuerySet[Session] | None,
        owner: AbstractBaseUser | None,
    ) -> None:
        self.session_id = session_id
        self.session = session
        self.parents = Session.objects.all() if parents is None else parents
        self.owner = owner
        self.messages: list[Message] = []
        self.blocks = aggregates.ChartBlocks()
        self.last_seq = -1
        if session is not None:
            last = session.messages.order_by("-seq").values_list("seq", flat=True).first()
            self.last_seq = -1 if last is None else last

    def add(self, record: Mapping[str, Any]) -> None:
        kind = record.get("type") if isinstance(record, Mapping) else None
        if self.session is None:
            self.session = self._create(record, kind)
            return
        if kind == records.SESSION_META:
            raise rows.RecordError(f"session {self.session_id!r} already has its session_meta")
        session = self.session
        position = session.record_count
        if kind == records.MESSAGE:
            self._add_message(rows.message_row(session, position, record))
        elif kind in rows.EVENT_KINDS:
            self._add_event(rows.event_row(session, position, record), record)
        else:
            self._add_change(rows.change_row(session, position, record), record)
        session.record_count += 1

    def _add_change(self, change: ContextChange, record: Mapping[str, Any]) -> None:
        session = change.session
        self._save_row(change, record)
        session.change_count += 1
        if change.kind != ContextChange.Kind.TOOL_RESULTS_CLEARED:
            return
        session.clearing_count += 1
        before, after = change.tokens_before, change.tokens_after
        if change.through_seq is not None and before is not None and after is not None:
            self.blocks.add(change.through_seq, before, after)

    def _add_event(self, event: CompactionEvent, record: Mapping[str, Any]) -> None:
        session = event.session
        if event.trigger != CompactionEvent.Trigger.FORK:
            event.chart_ordinal = session.chart_event_count
            session.chart_event_count += 1
        self._save_row(event, record)
        session.event_count += 1
        if event.kind == CompactionEvent.Kind.REVERT:
            session.revert_count += 1
        if event.kind != CompactionEvent.Kind.OK:
            return
        session.compaction_count += 1
        first, last = event.summarized_first_seq, event.summarized_last_seq
        if first is not None and last is not None:
            session.folded_through = max(session.folded_through or -1, last)
            session.longest_fold = max(session.longest_fold, last - first)
        before, after = event.tokens_before, event.tokens_after
        if event.through_seq is not None and before is not None and after is not None:
            self.blocks.add(event.through_seq, before, after)

    def _create(self, record: Mapping[str, Any], kind: object) -> Session:
        if kind != records.SESSION_META:
            raise rows.RecordError(
                f"the first record of session {self.session_id!r} must be session_meta, "
                f"not {kind!r}"
            )
        if record.get("session_id") != self.session_id:
            raise rows.RecordError(
                f"session_meta names session {record.get('session_id')!r}, not {self.session_id!r}"
            )
        session = rows.session_from_meta(record, self._parent(record.get("parent_session_id")))
        session.owner_id = self.owner.pk if self.owner is not None else None
        session.record_count = 1
        session.save()
        return session

    def _parent(self, parent_id: object) -> Session | None:
        if not isinstance(parent_id, str) or not parent_id:
            return None
        return (
            self.parents.filter(public_id=parent_id).first()
            or self.parents.filter(original_id=parent_id).order_by("pk").first()
        )

    def _add_message(self, row: Message) -> None:
        if row.seq <= self.last_seq:
            raise rows.RecordError(f"message seq {row.seq} does not follow seq {self.last_seq}")
        self.last_seq = row.seq
        self.messages.append(row)
        session = row.session
        session.message_count += 1
        session.total_tokens += row.tokens
        if session.total_tokens > rows.INT_MAX:
            raise rows.RecordError(
                f"the session's message tokens would add up past {rows.INT_MAX}, "
                "the largest integer the database stores"
            )
        session.context_tokens = row.context_tokens
        session.updated_at = max(session.updated_at, row.created_at)
        self.blocks.add(row.seq, row.context_tokens, row.context_tokens)
        aggregates.add_part(session.part_totals, row.role, row.unit, row.tokens)
        usage = aggregates.ReplyUsage.of(session.model_name, row.provider_tokens, row.record_extra)
        if usage is not None:
            aggregates.add_usage(session.usage_totals, usage)
        if len(self.messages) >= _BATCH:
            self._flush()

    def _save_row(self, row: CompactionEvent | ContextChange, record: Mapping[str, Any]) -> None:
        row.save()
        session = row.session
        session.updated_at = max(session.updated_at, row.created_at)
        # A compaction states the context it leaves in tokens_after; any record
        # may state context_tokens. Otherwise the size stands until the next message.
        stated = rows.nonnegative(record.get("context_tokens", record.get("tokens_after")))
        if stated is not None:
            session.context_tokens = stated

    def _flush(self) -> None:
        Message.objects.bulk_create(self.messages)
        self.messages.clear()
        if self.session is not None:
            self.blocks.save(self.session)

    def finish(self) -> None:
        self._flush()
        if self.session is not None:
            self.session.save(
                update_fields=[
                    "message_count",
                    "total_tokens",
                    "context_tokens",
                    "compaction_count",
                    "record_count",
                    "updated_at",
                    "event_count",
                    "chart_event_count",
                    "revert_count",
                    "change_count",
                    "clearing_count",
                    "folded_through",
                    "longest_fold",
                    "usage_totals",
                    "part_totals",
                ]
            )
