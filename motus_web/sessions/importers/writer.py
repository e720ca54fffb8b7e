"""Write what the parsers found into the database, one transaction per session.

Every session is written through ``DatabaseLogStore`` (the only writer of
session rows) in batches, inside one transaction: a session that is refused
half-way (a bad message, JSON that breaks, the upload's message cap) leaves
nothing behind, and memory holds one batch plus the memory's live context.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, InterfaceError, OperationalError, transaction
from django.db.models import Q, QuerySet

from memory import (
    ChatMessage,
    ConfigurationError,
    LogCorruptError,
    LogError,
    LogProblem,
    MotusMemoryError,
    clean_text,
    upgrade_records,
)
from memory.log import InvalidSessionIdError, LogRecord, records, validate_session_id

from ..log_store import DatabaseLogStore
from ..models import Session
from ..signals import announce
from .agents import agent_batches, seq_of_call
from .formats import ParsedSession
from .formats._io import kind
from .ingest import batched, chat_message
from .runner import Replayer
from .sources import AgentSession, Found, MotusLog, Problem, Refused, Transcript, clip

logger = logging.getLogger(__name__)
_ATTEMPTS = 3  # a new id per attempt when another import takes the id first


@dataclass(frozen=True, slots=True)
class ImportOptions:
    owner: AbstractBaseUser | None = None  # None: only staff see the sessions
    replay_threshold: int | None = None  # compact chat transcripts at this many tokens
    # Counts tokens and sets the context window of sessions whose file names no
    # model (an agent's session that names one keeps it); a Motus log is
    # recounted with it. None: a Motus log's own, else settings.MOTUS_MODEL_NAME.
    model_name: str | None = None
    max_messages: int | None = None  # per file; None: no cap (the command line)
    # Called after every batch a session writes and after every session; it may
    # raise ``ImportCancelled`` to stop the import (see ``Progress``).
    checkpoint: Callable[[Progress], None] | None = None


@dataclass(frozen=True, slots=True)
class Skipped:
    """Something in the file that the owner already has."""

    location: str  # where in the file: "line 2", "record 3", or the file
    public_id: str  # the session that holds it

    def __str__(self) -> str:
        return self.location


@dataclass
class ImportReport:
    imported: list[str] = field(default_factory=list)  # public ids
    skipped: list[Skipped] = field(default_factory=list)  # already imported
    renamed: dict[str, str] = field(default_factory=dict)  # a log's own id -> its new public id
    problems: list[Problem] = field(default_factory=list)
    stopped: bool = False  # the message cap was reached: the rest of the file was not read
    messages: int = 0  # messages in the sessions imported (committed)
    cancelled: bool = False  # a checkpoint stopped the import: the rest was not read


@dataclass(frozen=True, slots=True)
class Progress:
    """Where an import is, as its checkpoint sees it.

    ``in_session`` is true after a batch, inside the transaction of a session
    being written: nothing of that session is committed yet, and a database
    write made now would commit or roll back with it. It is false between
    sessions, when everything in ``report`` is committed.
    """

    report: ImportReport
    messages_read: int  # messages read from the file so far, refused ones included
    in_session: bool


class ImportCancelled(Exception):
    """Raised by a checkpoint to stop an import.

    Raised inside a session's transaction, it rolls that session back; the
    sessions committed before it stay. ``import_stream`` returns the report
    with ``cancelled`` set.
    """


class _CapReached(Refused):
    pass


@dataclass(frozen=True, slots=True)
class _Plan:
    """How to write one session: its rows' columns and the batches of its records."""

    key: str
    location: str
    title: str
    meta_extra: dict[str, Any]
    original_id: str
    batches: Callable[[str], Iterator[list[LogRecord]]]  # given the session id


class Writer:
    """Imports each transcript, log or agent session it is given into ``report``.

    A session's dedup key is the owner, the file's content hash and the
    session's place in the file, so importing a file again adds nothing.

    A Motus log keeps its session id when that id is free. When it is not,
    and the owner does not already hold the log (the same records, or their
    start: an export imported back), it is imported under a new id and the
    log's own id is kept in ``original_id``. Only the owner's sessions are
    compared and only the owner's can be its parent, so an import says nothing
    about anyone else's sessions.
    """

    def __init__(self, source: str, digest: str, options: ImportOptions) -> None:
        # A Linux file name that is not UTF-8 arrives with lone surrogates
        # (os.fsdecode); the database takes text only as U+FFFD.
        self.source = clean_text(source)
        self.name = PurePath(self.source).name or self.source  # never a server path
        self.digest = digest
        self.options = options
        self.report = ImportReport()
        self.messages_seen = 0

    def take(self, found: Found) -> None:
        if self.report.stopped:
            return
        try:
            self._take(found)
        except ImportCancelled:
            raise
        except Exception as error:
            # See _write: a bug met by one session is that session's problem only.
            logger.exception("importing %s failed", self.source)
            self._problem("", f"{INTERNAL_ERROR} ({type(error).__name__})")
        self._checkpoint(in_session=False)

    def _checkpoint(self, *, in_session: bool) -> None:
        if self.options.checkpoint is not None:
            self.options.checkpoint(Progress(self.report, self.messages_seen, in_session))

    def _take(self, found: Found) -> None:
        if isinstance(found, Problem):
            self.report.problems.append(found)
        elif isinstance(found, MotusLog):
            self._motus_log(found)
        elif isinstance(found, AgentSession):
            self._agent_session(found.session, str(found.index), f"session {found.index}")
        else:
            self._transcript(found)

    # -- bookkeeping -------------------------------------------------------------

    def _key(self, index: str) -> str:
        owner = self.options.owner.pk if self.options.owner is not None else "-"
        return f"{owner}:{self.digest}:{index}"

    def _owned(self) -> QuerySet[Session]:
        """The owner's sessions (with no owner: the sessions without one)."""
        if self.options.owner is None:
            return Session.objects.filter(owner__isnull=True)
        return Session.objects.filter(owner=self.options.owner.pk)

    def _problem(self, location: str, message: str) -> None:
        self.report.problems.append(Problem(self.source, location, message))

    def _already_imported(self, key: str, location: str) -> bool:
        public_id = Session.objects.filter(source_key=key).values_list("public_id", flat=True)
        if found := public_id.first():
            self.report.skipped.append(Skipped(location or self.source, found))
            return True
        return False

    def _count(self, location: str) -> None:
        self.messages_seen += 1
        cap = self.options.max_messages
        if cap is not None and self.messages_seen > cap:
            raise _CapReached(
                location,
                f"the file holds more than {cap:,} messages, the most an upload may hold: "
                "import it on the server with `manage.py import_sessions FILE`",
            )

    # -- chat transcripts ----------------------------------------------------------

    def _transcript(self, transcript: Transcript) -> None:
        key = self._key(str(transcript.index))
        if self._already_imported(key, transcript.location):
            return
        where = f"{transcript.location}, " if transcript.location else ""

        def messages() -> Iterator[ChatMessage]:
            for number, raw in enumerate(transcript.messages, start=1):
                location = f"{where}message {number}"
                self._count(location)
                yield chat_message(raw, location)

        def batches(session_id: str) -> Iterator[list[LogRecord]]:
            replayer = self._replayer(session_id)
            try:
                for batch in batched(messages()):
                    yield replayer.add(batch)
            finally:
                replayer.close()

        self._write(_Plan(key, transcript.location, transcript.title, {}, "", batches))

    def _replayer(
        self,
        session_id: str,
        *,
        system_prompt: str = "",
        parent: tuple[str, int | None] | None = None,
        model: str | None = None,
    ) -> Replayer:
        """A memory for one session: ``model`` (the file's own) over the options' model."""
        return Replayer(
            session_id,
            system_prompt=system_prompt,
            model_name=model or self.options.model_name or settings.MOTUS_MODEL_NAME,
            threshold=self.options.replay_threshold,
            parent_session_id=parent[0] if parent else None,
            parent_seq=parent[1] if parent else None,
        )

    # -- sessions of other tools (formats) ---------------------------------------------

    def _agent_session(
        self,
        parsed: ParsedSession,
        index: str,
        location: str,
        parent: tuple[str, int | None] | None = None,
        title: str | None = None,
    ) -> None:
        key = self._key(index)
        if self._already_imported(key, location):
            return
        seqs: dict[int, int] = {}  # index in parsed.messages -> seq

        def batches(session_id: str) -> Iterator[list[LogRecord]]:
            replayer = self._replayer(
                session_id,
                system_prompt=parsed.system_prompt or "",
                parent=parent,
                model=parsed.model,
            )
            try:
                yield from agent_batches(parsed, replayer, seqs, location, self._count)
            finally:
                replayer.close()

        meta_extra = {
            "source_format": parsed.source_format,
            "source_tool": parsed.source_tool,
            "source_created_at": parsed.created_at,
            "source_extra": parsed.extra,
        }
        name = title or parsed.title or f"{parsed.source_tool} session"
        original = parsed.original_id or ""
        original = original if len(original) <= 128 else ""
        session_id = self._write(_Plan(key, location, name, meta_extra, original, batches))
        if session_id is None:
            return
        for number, child in enumerate(parsed.children, start=1):
            call = child.extra.get("parent_tool_call_id")
            self._agent_session(
                child,
                f"{index}.c{number}",
                f"{location}, subagent {number}",
                (session_id, seq_of_call(parsed, seqs, call)),
                child.title or f"{name} · subagent {number}",
            )
        forks = parsed.extra.get("branch_forks")
        for number, branch in enumerate(parsed.branches, start=1):
            shared = forks[number - 1] if isinstance(forks, list) and len(forks) >= number else 0
            fork_seq = seqs.get(shared - 1) if isinstance(shared, int) else None
            branch_session = dataclasses.replace(
                parsed,
                messages=branch,
                branches=[],
                children=[],
                compactions=[],
                provider_input_tokens={},
                extra={"branch_of": parsed.original_id},
            )
            self._agent_session(
                branch_session,
                f"{index}.b{number}",
                f"{location}, branch {number}",
                (session_id, fork_seq),
                f"{name} · branch {number}",
            )

    # -- Motus logs ---------------------------------------------------------------------

    def _motus_log(self, log: MotusLog) -> None:
        location = f"line {log.lines[0]}"
        try:
            log_id = validate_session_id(log.records[0].get("session_id"))
        except InvalidSessionIdError as error:
            self._problem(location, f"field 'session_id': {error}")
            return
        key = self._key(str(log.index))
        if self._already_imported(key, f"session {log_id}"):
            return
        problems: list[LogProblem] = []
        config = log.records[0].get("config")
        if config is not None and not isinstance(config, dict):
            self._problem(location, f"field 'config': expected an object, got {kind(config)}")
            return
        try:
            upgraded = upgrade_records(
                log.records, model_name=self.options.model_name, problems=problems
            )
        except ConfigurationError as error:
            self._problem(location, f"field 'config': {error}")
            return
        except (MotusMemoryError, ValueError, TypeError) as error:
            self._problem(location, f"the log cannot be read: {error}")
            return
        for problem in problems:
            self._problem(f"line {_line_of(log, problem.line)}", problem.error)
        if problems:
            return
        if holder := self._holder(log_id, upgraded):
            self.report.skipped.append(Skipped(f"session {log_id}", holder))
            return
        try:
            for number, record in enumerate(upgraded, start=1):
                if record.get("type") == records.MESSAGE:
                    self._count(f"line {_line_of(log, number)}")
        except _CapReached as error:
            self.report.stopped = True
            self._problem(error.location, str(error))
            return
        self._save_log(upgraded, key, log_id, log)

    @staticmethod
    def _taken(public_id: str) -> bool:
        return Session.objects.filter(public_id=public_id).exists()

    def _holder(self, log_id: str, found: list[dict[str, Any]]) -> str | None:
        """The owner's session that holds the log already, whole or as its start."""
        store = DatabaseLogStore()
        candidates = self._owned().filter(Q(public_id=log_id) | Q(original_id=log_id))
        for public_id in candidates.values_list("public_id", flat=True):
            expected = [{**found[0], "session_id": public_id}, *found[1:]]
            if list(itertools.islice(store.read(public_id), len(expected))) == expected:
                return public_id
        return None

    def _save_log(self, found: list[dict[str, Any]], key: str, log_id: str, log: MotusLog) -> None:
        for attempt in range(_ATTEMPTS):
            session_id = log_id
            if attempt or self._taken(log_id):
                session_id = uuid.uuid4().hex
            rows = [{**found[0], "session_id": session_id}, *found[1:]]
            try:
                with transaction.atomic():
                    DatabaseLogStore(parents=self._owned()).extend(session_id, rows)
                    self._claim(session_id, key, "" if session_id == log_id else log_id)
            except LogCorruptError as error:
                if error.line == 1 and self._taken(session_id):
                    # Another import created the session after we found the id free.
                    if self._already_imported(key, f"session {log_id}"):
                        return
                    continue
                location = f"line {_line_of(log, error.line)}" if error.line is not None else ""
                self._problem(location, str(error.__cause__ or error))
                return
            except (IntegrityError, LogError) as error:
                if not _conflict(error):
                    self._problem("", str(error))
                    return
                if self._already_imported(key, f"session {log_id}"):
                    return
                continue  # the id was taken meanwhile: try a new one
            self.report.imported.append(session_id)
            self.report.messages += sum(1 for r in found if r.get("type") == records.MESSAGE)
            if session_id != log_id:
                self.report.renamed[log_id] = session_id
            return
        self._problem("", _RACE)

    # -- the one write path -------------------------------------------------------------

    def _write(self, plan: _Plan) -> str | None:
        """Write one session in one transaction; its public id, or ``None`` if refused.

        Tried once: the id is new (a UUID), and the messages may be a stream that
        cannot be read twice. A conflict is another import of the same file.
        """
        session_id = uuid.uuid4().hex
        try:
            with transaction.atomic():
                written = self._write_batches(session_id, plan)
        except ImportCancelled:
            raise
        except _CapReached as error:
            self.report.stopped = True
            self._problem(error.location, str(error))
            return None
        except Refused as error:
            self._problem(error.location, str(error))
            return None
        except LogCorruptError as error:
            self._problem(plan.location, str(error.__cause__ or error))
            return None
        except (IntegrityError, LogError) as error:
            if not _conflict(error):
                self._problem(plan.location, str(error))
            elif not self._already_imported(plan.key, plan.location):
                self._problem(plan.location, _RACE)
            return None
        except MotusMemoryError as error:
            self._problem(plan.location, f"the memory refused the messages: {error}")
            return None
        except (OperationalError, InterfaceError):
            # The database itself failed (its connection dropped, say): the session is
            # rolled back, and the rest cannot be written either, so the import stops.
            raise
        except Exception as error:
            # A bug met by one session must not fail the others, nor the page: the
            # session is refused (its transaction rolled back) and the trace logged.
            logger.exception("importing %s, %s failed", self.source, plan.location)
            self._problem(plan.location, f"{INTERNAL_ERROR} ({type(error).__name__})")
            return None
        self.report.imported.append(session_id)
        self.report.messages += written
        return session_id

    def _write_batches(self, session_id: str, plan: _Plan) -> int:
        """Write the session's batches; the number of messages written."""
        # Announced once, after the commit, with the session_meta: a session
        # written in many batches is not held in memory until then.
        store = DatabaseLogStore(parents=self._owned(), announce=False)
        meta: dict[str, Any] | None = None
        written = 0
        for batch in plan.batches(session_id):
            if not batch:
                continue
            if meta is None:
                first = batch[0]
                assert isinstance(first, records.SessionMeta)
                batch[0] = dataclasses.replace(
                    first, title=clip(plan.title, 200), extra={**first.extra, **plan.meta_extra}
                )
                meta = batch[0].to_dict()
            store.extend(session_id, batch)
            written += sum(1 for record in batch if isinstance(record, records.MessageRecord))
            self._checkpoint(in_session=True)
        if meta is None:
            raise Refused(plan.location, "no messages besides a system prompt")
        self._claim(session_id, plan.key, plan.original_id)
        announced = meta
        transaction.on_commit(lambda: announce(session_id, [announced]))
        return written

    def _claim(self, session_id: str, key: str, original_id: str) -> None:
        Session.objects.filter(public_id=session_id).update(
            owner=self.options.owner,
            source=clip(self.name.replace("\x00", "\ufffd"), 255),
            source_key=key,
            original_id=original_id,
        )


def _conflict(error: Exception) -> bool:
    """Whether ``error`` is another transaction's write of the same row (a unique key)."""
    return isinstance(error, IntegrityError) or isinstance(error.__cause__, IntegrityError)


INTERNAL_ERROR = (
    "could not be imported because of an error in Motus; the server log has the details"
)
_RACE = "imported at the same time by another request; import the file again"


def _line_of(log: MotusLog, record_number: int | None) -> int:
    if record_number is None:
        return log.lines[0]
    return log.lines[record_number - 1] if 0 < record_number <= len(log.lines) else log.lines[-1]
