"""Write what the parsers found into the database, in short committed transactions.

Every session is written through ``DatabaseLogStore`` (the only writer of
session rows) in batches, in the import's transactions (``commits``): several
small sessions share one, a long one spans several. A new session is
``incomplete`` (shown nowhere) from its first batch until its last one is
written; one refused half-way (a bad message, JSON that breaks, the upload's
message cap, Cancel) is deleted, and one left half-written by a crash is
replaced when the file is imported again (``_stored``). An update in place
(``_append``) is one transaction. Memory holds one batch plus the memory's
live context.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import PurePath
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, InterfaceError, OperationalError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from memory import (
    ChatMessage,
    ConfigurationError,
    LogCorruptError,
    LogError,
    LogPoint,
    LogProblem,
    MotusMemoryError,
    clean_text,
    upgrade_records,
)
from memory.log import InvalidSessionIdError, LogRecord, records, validate_session_id
from memory.tokens import TokenCounter

from ..log_store import DatabaseLogStore
from ..memories import dropped_scope_note, owned_meta
from ..models import Session
from ..rows import named_by_content
from ..runners import elsewhere_alive, worker_id
from ..signals import announce
from .agents import agent_batches, first_request, seq_at, seq_of_call, unit_fingerprints
from .commits import Transactions
from .formats import ESTIMATE_MODELS, ParsedSession
from .formats._io import PlainTooLarge, kind
from .formats.times import last_activity
from .growth import older, regrown
from .identity import (
    FingerprintChain,
    Relation,
    branch_key,
    conversation_key,
    fingerprints,
    relation,
)
from .ingest import BATCH, batched, chat_message
from .runner import Replayer
from .sources import AgentSession, Found, MotusLog, Problem, Refused, Transcript, clip

logger = logging.getLogger(__name__)
_ATTEMPTS = 3  # a new id per attempt when another import takes the id first
_WRITING: set[str] = set()  # sessions this process's imports are writing now
_WRITING_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class ImportOptions:
    owner: AbstractBaseUser | None = None  # None: only staff see the sessions
    replay_threshold: int | None = None  # compact chat transcripts at this many tokens
    # Counts tokens and sets the context window of sessions whose file names no
    # model (an agent's session that names one keeps it); a Motus log is
    # recounted with it. None: a Motus log's own, else settings.MOTUS_MODEL_NAME.
    model_name: str | None = None
    max_messages: int | None = None  # per file; None: no cap (the command line)
    # Bytes a compressed file may expand to (settings.MOTUS_UPLOAD_MAX_PLAIN_BYTES
    # for uploads); None: no bound (the command line).
    max_plain_bytes: int | None = None
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


TRANSCRIPT_FORMAT = "openai-chat"  # the source format of chat messages without an id


@dataclass(frozen=True, slots=True)
class Outcome:
    """What an import did with one conversation of the file.

    ``kind``: ``"new"`` (a session was made), ``"updated"`` (``added`` messages
    were appended to the stored session), ``"unchanged"`` (the stored session
    holds it all), ``"older"`` (an older copy of the stored session, whose
    last reply was still being written: nothing added), ``"branched"`` (its
    past differs from the stored one's: a new session linked to it as a branch).
    """

    location: str
    public_id: str
    kind: str
    added: int = 0  # messages written by this import

    def __str__(self) -> str:
        what = f"updated (+{self.added:,} messages)" if self.kind == "updated" else self.kind
        if self.kind == "older":
            what = (
                "an older copy of the session already imported (the file went back): nothing added"
            )
        return f"{self.location or 'the conversation'}: {what}"


@dataclass
class ImportReport:
    imported: list[str] = field(default_factory=list)  # public ids made (new and branched)
    skipped: list[Skipped] = field(default_factory=list)  # already imported, unchanged
    renamed: dict[str, str] = field(default_factory=dict)  # a log's own id -> its new public id
    problems: list[Problem] = field(default_factory=list)
    stopped: bool = False  # the message cap was reached: the rest of the file was not read
    messages: int = 0  # messages in the sessions imported (committed)
    cancelled: bool = False  # a checkpoint stopped the import: the rest was not read
    outcomes: list[Outcome] = field(default_factory=list)  # per conversation, in file order
    warnings: list[Problem] = field(default_factory=list)  # damaged lines skipped
    # What was imported otherwise than the file says (a memory scope not the owner's).
    notes: list[Problem] = field(default_factory=list)

    @property
    def updated(self) -> list[Outcome]:
        return [outcome for outcome in self.outcomes if outcome.kind == "updated"]

    @property
    def older(self) -> list[Outcome]:
        """Conversations found older than what is stored: they added nothing."""
        return [outcome for outcome in self.outcomes if outcome.kind == "older"]


@dataclass(frozen=True, slots=True)
class Progress:
    """Where an import is, as its checkpoint sees it.

    ``in_transaction`` is true while the import's transaction holds writes not
    committed yet (``commits``): a database write made now would commit or roll
    back with them. When it is false, everything in ``report`` is committed.
    """

    report: ImportReport
    messages_read: int  # messages read from the file so far, refused ones included
    in_transaction: bool


class ImportCancelled(Exception):
    """Raised by a checkpoint to stop an import.

    Raised while a session is written, it deletes that session; the sessions
    written before it stay (they are committed). ``import_stream`` returns the
    report with ``cancelled`` set.
    """


class _CapReached(Refused):
    pass


class _Conflict(Exception):
    """Another import wrote the same conversation first: look again at what is stored."""


class _BeingWritten(Exception):
    """Another import, still running, is writing the same conversation now."""


@dataclass(frozen=True, slots=True)
class _Plan:
    """How to write one session: its rows' columns and the batches of its records."""

    key: str
    location: str
    title: str
    meta_extra: dict[str, Any]
    original_id: str
    batches: Callable[[str], Iterator[list[LogRecord]]]  # given the session id
    units: list[str] | None = None  # fingerprints stored with it (identity)
    parent: tuple[str, int | None] | None = None  # a branch's trunk and fork seq
    activity: datetime | None = None  # the last message's own time, when the file says


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
        self.transactions = Transactions()
        self._writing: str | None = None  # the new session being written, incomplete

    def take(self, found: Found) -> None:
        if self.report.stopped:
            return
        try:
            self._take(found)
        except (ImportCancelled, PlainTooLarge, OperationalError, InterfaceError):
            raise  # a lost database stops the import too (see _guarded)
        except _BeingWritten:
            self._problem(_location_of(found), _BUSY)
        except Exception as error:
            # See _write: a bug met by one session is that session's problem only.
            logger.exception("importing %s failed", self.source)
            self._problem("", f"{INTERNAL_ERROR} ({type(error).__name__})")
        self._commit_if_due()
        self._checkpoint()

    def _checkpoint(self) -> None:
        if self.options.checkpoint is not None:
            progress = Progress(self.report, self.messages_seen, self.transactions.open)
            self.options.checkpoint(progress)

    def _commit_if_due(self) -> None:
        """End the import's transaction when it holds enough (``commits``); a session
        still being written says first that its writer is alive (``_stored``)."""
        if not self.transactions.due():
            return
        if self._writing is not None:
            Session.objects.filter(public_id=self._writing).update(source_state=_writing_state())
        self.transactions.commit()

    def _take(self, found: Found) -> None:
        if isinstance(found, Problem):
            (self.report.warnings if found.warning else self.report.problems).append(found)
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
        """The owner's complete sessions (with no owner: the sessions without one)."""
        if self.options.owner is None:
            return Session.objects.filter(owner__isnull=True, incomplete=False)
        return Session.objects.filter(owner=self.options.owner.pk, incomplete=False)

    def _problem(self, location: str, message: str) -> None:
        self.report.problems.append(Problem(self.source, location, message))

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
        """Import chat messages that carry no id of their own: the file's name and the
        run's place in it stand for one (a renamed file imports anew).

        A conversation not stored yet is streamed (a big list of messages is
        never held whole) and fingerprinted as it goes; one stored before is
        read whole to be compared (``_agent_session``).
        """
        parsed = ParsedSession(
            source_format=TRANSCRIPT_FORMAT,
            source_tool="OpenAI chat messages",
            original_id=f"{self.name}#{transcript.index}",
            title=transcript.title,
            created_at=None,
            system_prompt=None,
            messages=[],
        )
        own = str(parsed.original_id)
        key = conversation_key(self._owner_pk(), TRANSCRIPT_FORMAT, own)
        if self._stored(key) is not None:
            cap = self.options.max_messages
            try:
                # One past the cap is enough for ``agent_batches`` to refuse it.
                held = list(itertools.islice(transcript.messages, None if cap is None else cap + 1))
            except Refused as error:
                self._problem(error.location, str(error))
                return
            whole = dataclasses.replace(parsed, messages=held)
            self._agent_session(whole, str(transcript.index), transcript.location)
            return
        where = f"{transcript.location}, " if transcript.location else ""
        chain = FingerprintChain()

        def messages() -> Iterator[ChatMessage]:
            for number, raw in enumerate(transcript.messages, start=1):
                location = f"{where}message {number}"
                self._count(location)
                chain.add(raw)
                yield chat_message(raw, location)

        def batches(session_id: str) -> Iterator[list[LogRecord]]:
            replayer = self._replayer(session_id, model=self._counted_as(parsed))
            try:
                for batch in batched(messages()):
                    yield replayer.add(batch)
            finally:
                replayer.close()

        meta = self._source_meta(parsed, self._counted_as(parsed), None)
        # ``chain.units`` is complete when the plan's session is claimed, after its batches.
        plan = _Plan(key, transcript.location, transcript.title, meta, own, batches, chain.units)
        try:
            written = self._write(plan)
        except _Conflict:
            # The stream is read: another import of the same file stored it
            # meanwhile. Compared again: the same messages are already there.
            stored = self._stored(key)
            if stored is None or relation(stored[1], chain.units).kind != "unchanged":
                self._problem(transcript.location, _RACE)
                return
            self.report.skipped.append(Skipped(transcript.location or self.source, stored[0]))
            self.report.outcomes.append(Outcome(transcript.location, stored[0], "unchanged"))
            return
        if written is not None:
            self.report.outcomes.append(Outcome(transcript.location, written[0], "new", written[1]))

    def _counted_as(self, parsed: ParsedSession) -> str:
        """The model that counts a session's tokens: the file's own, else the options',
        else the best estimate for its source (``ESTIMATE_MODELS``), else the setting."""
        return (
            parsed.model
            or self.options.model_name
            or ESTIMATE_MODELS.get(parsed.source_format)
            or settings.MOTUS_MODEL_NAME
        )

    def _replayer(
        self,
        session_id: str,
        *,
        system_prompt: str = "",
        parent: tuple[str, int | None] | None = None,
        model: str | None = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> Replayer:
        """A memory for one session, counting with ``model`` (``_counted_as``)."""
        return Replayer(
            session_id,
            system_prompt=system_prompt,
            model_name=model or self.options.model_name or settings.MOTUS_MODEL_NAME,
            threshold=self.options.replay_threshold,
            parent_session_id=parent[0] if parent else None,
            parent_seq=parent[1] if parent else None,
            tools=tools,
        )

    # -- sessions of other tools (formats) ---------------------------------------------

    def _agent_session(
        self,
        parsed: ParsedSession,
        index: str,
        location: str,
        parent: tuple[str, int | None] | None = None,
        title: str | None = None,
        trunk: str | None = None,
        lineage: str | None = None,
    ) -> None:
        """Import one conversation (then its subagents and branches) by its own id.

        ``trunk`` is the key of the session that ``parsed`` is a branch of
        (a ChatGPT regeneration, a Claude Code rewind in the same file).
        """
        own = parsed.original_id
        key = (
            conversation_key(self._owner_pk(), parsed.source_format, own)
            if own
            else self._key(index)
        )
        if parent is None:
            parent = self._parent_by_own_id(parsed)
        name = title or parsed.title or first_request(parsed.messages)
        name = name or f"{parsed.source_tool} session"
        counted_as = self._counted_as(parsed)
        if lineage is None and parent is not None:
            # Found by its session's own id: a fork names its parent (Codex's
            # ``forked_from_id``), a subagent its session.
            lineage = Session.FORK if parsed.extra.get("forked") else Session.SUBAGENT
        meta_extra = self._source_meta(parsed, counted_as, lineage)
        original = own or ""
        original = original if len(original) <= 128 else ""
        activity = last_activity(parsed.messages)

        def plan(
            start: int,
            units: list[str],
            link: tuple[str, int | None] | None,
            back: LogPoint | None,
        ) -> _Plan:
            def batches(session_id: str) -> Iterator[list[LogRecord]]:
                if start:
                    replayer = Replayer.resume(session_id, DatabaseLogStore())
                    if back is not None:
                        yield replayer.rewind(back, _REGROWN)
                else:
                    replayer = self._replayer(
                        session_id,
                        system_prompt=parsed.system_prompt or "",
                        parent=link,
                        model=counted_as,
                        tools=parsed.tools,
                    )
                try:
                    yield from agent_batches(parsed, replayer, location, self._count, start)
                finally:
                    replayer.close()

            return _Plan(key, location, name, meta_extra, original, batches, units, link, activity)

        session_id = self._converge(
            key if trunk is None else trunk,
            location,
            unit_fingerprints(parsed),
            plan,
            parent,
            lambda shared: seq_at(parsed, shared),
            branch=trunk is not None,
            regrown=lambda public_id, shared: regrown(public_id, parsed, shared),
            older=lambda public_id, shared: older(public_id, parsed, shared),
        )
        if session_id is None:
            return
        for number, child in enumerate(parsed.children, start=1):
            call = child.extra.get("parent_tool_call_id")
            self._agent_session(
                child,
                f"{index}.c{number}",
                f"{location}, subagent {number}",
                (session_id, seq_of_call(parsed, call)),
                child.title or f"{name} · subagent {number}",
                lineage=Session.SUBAGENT,
            )
        for number, branch in enumerate(parsed.branches, start=1):
            branch_session = dataclasses.replace(
                parsed,
                messages=branch,
                branches=[],
                children=[],
                compactions=[c for c in parsed.compactions if c.at < len(branch)],
                provider_input_tokens={},
                extra={"branch_of": parsed.original_id},
            )
            self._agent_session(
                branch_session,
                f"{index}.b{number}",
                f"{location}, branch {number}",
                title=f"{name} · branch {number}",
                trunk=key,
            )

    @staticmethod
    def _source_meta(parsed: ParsedSession, counted_as: str, lineage: str | None) -> dict[str, Any]:
        """What an imported session's session_meta says of its source, in its extra."""
        meta: dict[str, Any] = {Session.LINEAGE: lineage} if lineage else {}
        # The shared counter: an encoding made anew here would cost tens of MB.
        approximate = parsed.model is None or TokenCounter.for_model(counted_as).approximate
        return meta | {
            "source_format": parsed.source_format,
            "source_tool": parsed.source_tool,
            "source_created_at": parsed.created_at,
            "source_extra": parsed.extra,
            "token_count": {
                "model": counted_as,
                "named_in_file": parsed.model is not None,
                # Approximate when the file names no model or the model's own
                # tokenizer is not public (Claude, Gemini: counted with cl100k_base).
                "approximate": approximate,
            },
        }

    def _owner_pk(self) -> object:
        return self.options.owner.pk if self.options.owner is not None else None

    def _parent_by_own_id(self, parsed: ParsedSession) -> tuple[str, int | None] | None:
        """The owner's session that ``parsed`` names as its parent by that session's own id
        (a subagent transcript imported on its own, after its session)."""
        parent_id = parsed.extra.get("parent_session_id")
        if not isinstance(parent_id, str) or parent_id == parsed.original_id:
            return None
        key = conversation_key(self._owner_pk(), parsed.source_format, parent_id)
        stored = Session.objects.filter(source_key=key, incomplete=False)
        found = stored.values_list("public_id", flat=True).first()
        return (found, None) if found else None

    # -- updates in place ----------------------------------------------------------------

    def _stored(self, key: str) -> tuple[str, list[str]] | None:
        """The session stored under ``key``: its public id and its fingerprints.

        A session another import left half-written (``incomplete``: its writer
        crashed or lost the database) is deleted, so that this import writes it
        anew: ``None``. One whose writer is still running raises ``_BeingWritten``.
        """
        row = Session.objects.filter(source_key=key)
        found = row.values_list("public_id", "source_state", "incomplete").first()
        if found is None:
            return None
        public_id, state, incomplete = found
        state = state if isinstance(state, dict) else {}
        if incomplete:
            if _writer_alive(public_id, state):
                raise _BeingWritten
            logger.info("replacing session %s, left half-written by an import", public_id)
            self._discard(public_id)
            return None
        units = state.get("units")
        return public_id, [str(u) for u in units] if isinstance(units, list) else []

    def _discard(self, public_id: str) -> None:
        """Delete a session written in part (its rows go with it), in the import's transaction."""
        self.transactions.begin()
        with transaction.atomic():
            Session.objects.filter(public_id=public_id).delete()

    def _converge(
        self,
        key: str,
        location: str,
        units: list[str],
        plan: Callable[[int, list[str], tuple[str, int | None] | None, LogPoint | None], _Plan],
        parent: tuple[str, int | None] | None,
        seq_at: Callable[[int], int | None],
        *,
        branch: bool = False,
        regrown: Callable[[str, int], LogPoint | None] = lambda public_id, shared: None,
        older: Callable[[str, int], bool] = lambda public_id, shared: False,
    ) -> str | None:
        """Bring the stored copy of one conversation up to ``units``; the session's id.

        New: a session is written. The same: nothing. A longer copy of the
        stored one: the rest is appended (``_append``). A changed past (or
        ``branch``: ``key`` is the trunk's): the copy goes under the branch key
        of the first unit that differs, linked to the stored session, and is
        compared again there, unless ``regrown`` gives the point to rewind the
        stored one to (its last messages were imported while still being
        written: ``growth``), or ``older`` says the copy is an older one of
        the stored session (nothing is written). ``None`` when it was refused
        (a problem says why).
        """
        conflicts = 0
        branched = False
        while True:
            stored = self._stored(key)
            if stored is not None:
                public_id, stored_units = stored
                found = relation(stored_units, units)
                if branch and found.kind != "diverges":
                    found = Relation("diverges", min(found.shared, len(units) - 1))
                branch = False
                if found.kind == "unchanged":
                    self.report.skipped.append(Skipped(location or self.source, public_id))
                    self.report.outcomes.append(Outcome(location, public_id, "unchanged"))
                    return public_id
                back = regrown(public_id, found.shared) if found.kind == "diverges" else None
                if found.kind == "diverges" and back is None and older(public_id, found.shared):
                    self.report.outcomes.append(Outcome(location, public_id, "older"))
                    return public_id
                if found.kind == "extends" or back is not None:
                    try:
                        update = plan(found.shared, units, None, back)
                        added = self._append(public_id, stored_units, update)
                    except _Conflict:
                        continue  # another import appended first: compare with what it wrote
                    if added is None:
                        return None
                    self.report.outcomes.append(Outcome(location, public_id, "updated", added))
                    return public_id
                key = branch_key(key, units[found.shared])
                # A copy that shares nothing with the stored one is another
                # conversation under the same id (a file of the same name), not a branch.
                branched = found.shared > 0
                parent = (public_id, seq_at(found.shared)) if branched else parent
                continue
            try:
                new = dataclasses.replace(plan(0, units, parent, None), key=key)
                if branched:
                    new = dataclasses.replace(
                        new, meta_extra={**new.meta_extra, Session.LINEAGE: Session.BRANCH}
                    )
                written = self._write(new)
            except _Conflict:
                conflicts += 1
                if conflicts < _ATTEMPTS:
                    continue
                self._problem(location, _RACE)
                return None
            if written is None:
                return None
            session_id, messages = written
            kind = "branched" if branched else "new"
            self.report.outcomes.append(Outcome(location, session_id, kind, messages))
            return session_id

    def _append(self, public_id: str, stored: list[str], plan: _Plan) -> int | None:
        """Append what ``plan`` writes to the stored session; the messages appended.

        One transaction that locks the session row first, so two imports of two
        copies never both append: the second finds the fingerprints changed and
        raises ``_Conflict`` (its caller compares again). A crash or a refusal
        mid-write rolls the whole update back; the stored session stays as it was.
        ``None`` when refused (a problem says why).
        """

        def write() -> int:
            locked = Session.objects.select_for_update().filter(public_id=public_id)
            state = locked.values_list("source_state", flat=True).first()
            units = state.get("units") if isinstance(state, dict) else None
            if units != stored:
                raise _Conflict
            written = self._write_batches(public_id, plan, fresh=False)
            changes: dict[str, Any] = {"source_state": {"units": plan.units}}
            if plan.activity is not None:
                changes["updated_at"] = plan.activity
            Session.objects.filter(public_id=public_id).update(**changes)
            return written

        return self._guarded(plan.location, write)

    # -- Motus logs ---------------------------------------------------------------------

    def _motus_log(self, log: MotusLog) -> None:
        """Import one Motus log by its ``session_id`` (see ``identity``)."""
        location = f"line {log.lines[0]}"
        try:
            log_id = validate_session_id(log.records[0].get("session_id"))
        except InvalidSessionIdError as error:
            self._problem(location, f"field 'session_id': {error}")
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
        # A long-term memory scope is the owner's, whatever the file names.
        owner = self.options.owner.pk if self.options.owner is not None else None
        upgraded[0], dropped = owned_meta(upgraded[0], owner)
        if dropped is not None:
            self.report.notes.append(
                Problem(self.source, location, dropped_scope_note(dropped, owner))
            )
        try:
            for number, record in enumerate(upgraded, start=1):
                if record.get("type") == records.MESSAGE:
                    self._count(f"line {_line_of(log, number)}")
        except _CapReached as error:
            self.report.stopped = True
            self._problem(error.location, str(error))
            return
        self._converge_log(log, log_id, upgraded)

    def _converge_log(self, log: MotusLog, log_id: str, upgraded: list[dict[str, Any]]) -> None:
        """``_converge`` for a Motus log: its units are its records."""
        where = f"session {log_id}"
        units = fingerprints(_log_unit(record) for record in upgraded)
        key = conversation_key(self._owner_pk(), "motus-log", log_id)
        parent: tuple[str, int | None] | None = None
        branched = False
        conflicts = 0
        while True:
            stored = self._stored(key)
            if stored is not None:
                public_id, stored_units = stored
                found = relation(stored_units, units)
                if found.kind == "unchanged":
                    self.report.skipped.append(Skipped(where, public_id))
                    self.report.outcomes.append(Outcome(where, public_id, "unchanged"))
                    return
                if found.kind == "extends":
                    rest = upgraded[found.shared :]
                    append = functools.partial(
                        self._append_records, public_id, stored_units, rest, units
                    )
                    try:
                        added = self._guarded(where, append)
                    except _Conflict:
                        continue
                    if added is not None:
                        self.report.outcomes.append(Outcome(where, public_id, "updated", added))
                    return
                key = branch_key(key, units[found.shared])
                # Another session_meta (a title, a parent) shares no past: the log's
                # own parent_session_id links it, not the stored session.
                branched = found.shared > 0
                parent = (public_id, _last_seq(upgraded[: found.shared])) if branched else None
                continue
            if not branched and (holder := self._holder(log_id, upgraded)):
                # Imported before sessions were keyed by their own id.
                self.report.skipped.append(Skipped(where, holder))
                self.report.outcomes.append(Outcome(where, holder, "unchanged"))
                return
            try:
                self._save_log(upgraded, key, log_id, log, units, parent, branched=branched)
            except _Conflict:
                conflicts += 1
                if conflicts < _ATTEMPTS:
                    continue
                self._problem("", _RACE)
            return

    def _append_records(
        self, public_id: str, stored: list[str], rows: list[dict[str, Any]], units: list[str]
    ) -> int:
        """Append a grown log's new records, inside ``_guarded``'s transaction: the
        row is locked first and the fingerprints checked (``_Conflict`` if another
        import appended meanwhile); a crash mid-write rolls all of it back."""
        locked = Session.objects.select_for_update().filter(public_id=public_id)
        state = locked.values_list("source_state", flat=True).first()
        if not isinstance(state, dict) or state.get("units") != stored:
            raise _Conflict
        DatabaseLogStore(parents=self._owned()).extend(public_id, rows)
        Session.objects.filter(public_id=public_id).update(source_state={"units": units})
        return sum(1 for row in rows if row.get("type") == records.MESSAGE)

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

    def _save_log(
        self,
        found: list[dict[str, Any]],
        key: str,
        log_id: str,
        log: MotusLog,
        units: list[str],
        parent: tuple[str, int | None] | None,
        *,
        branched: bool,
    ) -> None:
        """Write a log as a new session: under its own id when that is free, else a
        new one (``renamed``), in batches (``_write_rows``): a crash mid-write
        leaves it ``incomplete``, shown nowhere and replaced by the next import.
        Raises ``_Conflict`` when another import stored ``key`` first."""
        where = f"session {log_id}"
        for attempt in range(_ATTEMPTS):
            session_id = log_id
            if attempt or branched or self._taken(log_id):
                session_id = uuid.uuid4().hex
            rows = [{**found[0], "session_id": session_id}, *found[1:]]
            original = "" if session_id == log_id else log_id
            chunks = (rows[start : start + BATCH] for start in range(0, len(rows), BATCH))
            try:
                self._write_rows(
                    session_id,
                    chunks,
                    lambda: self._claim(session_id, key, original, parent),  # noqa: B023
                )
                self._complete(session_id, rows[0], units)
            except LogCorruptError as error:
                if error.line == 1 and self._taken(session_id):
                    # Another import created the session after we found the id free.
                    if self._stored(key) is not None:
                        raise _Conflict from error
                    continue
                location = f"line {_line_of(log, error.line)}" if error.line is not None else ""
                self._problem(location, str(error.__cause__ or error))
                return
            except (IntegrityError, LogError) as error:
                if not _conflict(error):
                    self._problem("", str(error))
                    return
                if self._stored(key) is not None:
                    raise _Conflict from error
                continue  # the id was taken meanwhile: try a new one
            messages = sum(1 for r in found if r.get("type") == records.MESSAGE)
            if not str(found[0].get("title") or "").strip():
                # A log written without a title (the library's own) is named by its
                # first request, not left to show its id; the log itself is unchanged.
                said = [r.get("message") for r in found if r.get("type") == records.MESSAGE]
                if title := first_request([m for m in said if isinstance(m, dict)]):
                    named_by_content(Session.objects.get(public_id=session_id), title)
            self.report.imported.append(session_id)
            self.report.messages += messages
            kind = "branched" if branched else "new"
            self.report.outcomes.append(Outcome(where, session_id, kind, messages))
            if session_id != log_id:
                self.report.renamed[log_id] = session_id
            return
        self._problem("", _RACE)

    # -- the one write path -------------------------------------------------------------

    def _write(self, plan: _Plan) -> tuple[str, int] | None:
        """Write one new session (``_write_rows``); its public id and messages written.

        ``None`` if refused (a problem says why; what was written of it is
        deleted; a crash mid-write leaves it ``incomplete``). Tried once: the id
        is new (a UUID), and the messages may be a stream that cannot be read
        twice. Raises ``_Conflict`` when another import stored the same key first.
        """
        session_id = uuid.uuid4().hex
        written = self._guarded(
            plan.location, lambda: self._write_batches(session_id, plan), whole=False
        )
        if written is None:
            return None
        self.report.imported.append(session_id)
        return session_id, written

    def _guarded(
        self, location: str, write: Callable[[], int], *, whole: bool = True
    ) -> int | None:
        """Run ``write``; refusals become problems (``None``). ``whole``: in one
        transaction (a savepoint of the import's), rolled back on a refusal;
        otherwise ``write`` commits as it goes and cleans up after itself."""
        try:
            if whole:
                self.transactions.begin()
                with transaction.atomic():
                    written = write()
            else:
                written = write()
        except (ImportCancelled, _Conflict):
            raise
        except _CapReached as error:
            self.report.stopped = True
            self._problem(error.location, str(error))
            return None
        except Refused as error:
            self._problem(error.location, str(error))
            return None
        except LogCorruptError as error:
            self._problem(location, str(error.__cause__ or error))
            return None
        except (IntegrityError, LogError) as error:
            if _conflict(error):
                raise _Conflict from error
            if isinstance(error.__cause__, (OperationalError, InterfaceError)):
                raise error.__cause__ from None  # the database failed: as below
            self._problem(location, str(error))
            return None
        except MotusMemoryError as error:
            self._problem(location, f"the memory refused the messages: {error}")
            return None
        except (OperationalError, InterfaceError):
            # The database itself failed (its connection dropped, say): what was not
            # committed is rolled back, and the rest cannot be written either, so the
            # import stops.
            raise
        except Exception as error:
            # A bug met by one session must not fail the others, nor the page: the
            # session is refused (what was written of it deleted) and the trace logged.
            logger.exception("importing %s, %s failed", self.source, location)
            self._problem(location, f"{INTERNAL_ERROR} ({type(error).__name__})")
            return None
        self.report.messages += written
        return written

    def _write_batches(self, session_id: str, plan: _Plan, *, fresh: bool = True) -> int:
        """Write the session's batches; the number of messages written.

        ``fresh``: a new session (its first record is the session_meta), written
        by ``_write_rows`` and announced once complete; else an update (inside
        ``_append``'s transaction) whose records are announced as they commit,
        so the session's live pages and its chat see them.
        """
        if not fresh:
            store = DatabaseLogStore(parents=self._owned())
            written = 0
            for batch in plan.batches(session_id):
                store.extend(session_id, batch)
                written += _messages_in(batch)
                self._checkpoint()
            return written
        meta: list[dict[str, Any]] = []

        def titled() -> Iterator[list[LogRecord]]:
            for batch in plan.batches(session_id):
                if batch and not meta:
                    first = batch[0]
                    assert isinstance(first, records.SessionMeta)
                    extra = {**first.extra, **plan.meta_extra}
                    batch[0] = dataclasses.replace(first, title=clip(plan.title, 200), extra=extra)
                    meta.append(batch[0].to_dict())
                yield batch

        claim = functools.partial(self._claim, session_id, plan.key, plan.original_id, plan.parent)
        written = self._write_rows(session_id, titled(), claim)
        if not meta:
            raise Refused(plan.location, "no messages besides a system prompt")
        self._complete(session_id, meta[0], plan.units, plan.activity)
        return written

    def _write_rows(
        self,
        session_id: str,
        batches: Iterator[list[LogRecord]] | Iterator[list[dict[str, Any]]],
        claim: Callable[[], None],
    ) -> int:
        """Write a new session's ``batches`` (its session_meta first), each in a
        savepoint of the import's transaction, committing between them when due
        (``commits``); the messages written. ``claim`` runs with the first batch
        and marks the session ``incomplete`` until ``_complete``.

        Anything raised after the first batch but a database failure deletes
        what was written of the session (``_discard``), then propagates; after a
        database failure (or a crash) the committed part stays ``incomplete``,
        for the next import to replace. ``LogCorruptError.line`` counts from the first
        batch's first record.
        """
        store = DatabaseLogStore(parents=self._owned(), announce=False)
        written = records_before = 0
        with _WRITING_LOCK:
            _WRITING.add(session_id)
        self._writing = session_id
        try:
            for batch in batches:
                if not batch:
                    continue
                self.transactions.begin()
                try:
                    with transaction.atomic():
                        store.extend(session_id, batch)
                        if not records_before:
                            claim()
                except LogCorruptError as error:
                    if error.line is None or not records_before:
                        raise
                    line = error.line + records_before
                    raise LogCorruptError(str(error.__cause__), line=line) from error.__cause__
                records_before += len(batch)
                messages = _messages_in(batch)
                written += messages
                self.transactions.wrote(messages)
                self._commit_if_due()
                self._checkpoint()
        except BaseException as error:
            self._writing = None
            # Before its first batch is written the session is not this import's (its
            # savepoint rolled back; the id may be another import's session).
            if records_before and not _database_failed(error):
                self._discard(session_id)
            raise
        finally:
            self._writing = None
            with _WRITING_LOCK:
                _WRITING.discard(session_id)
        return written

    def _claim(
        self,
        session_id: str,
        key: str,
        original_id: str,
        parent: tuple[str, int | None] | None = None,
    ) -> None:
        """Mark the new session as this import's, and ``incomplete`` while it is
        written; raises ``IntegrityError`` when another import claimed ``key``
        first (the first batch's savepoint then rolls back)."""
        links: dict[str, Any] = {}
        if parent is not None:
            trunk = self._owned().filter(public_id=parent[0]).first()
            links = {"parent": trunk, "parent_seq": parent[1]} if trunk is not None else {}
        Session.objects.filter(public_id=session_id).update(
            owner=self.options.owner,
            source=clip(self.name.replace("\x00", "\ufffd"), 255),
            source_key=key,
            original_id=original_id,
            source_state=_writing_state(),
            incomplete=True,
            **links,
        )

    def _complete(
        self,
        session_id: str,
        meta: dict[str, Any],
        units: list[str] | None,
        activity: datetime | None = None,
    ) -> None:
        """The session's last batch is written: show it, with the fingerprints that
        identify it (``identity``), and announce its session_meta after the commit."""
        changes: dict[str, Any] = {
            "incomplete": False,
            "source_state": {"units": units} if units is not None else {},
        }
        if activity is not None:
            changes["updated_at"] = activity  # "last activity" is the conversation's
        self.transactions.begin()
        Session.objects.filter(public_id=session_id).update(**changes)
        # Shown nowhere before this commit, so no page is in its group yet.
        transaction.on_commit(lambda: announce(session_id, [meta], group=False))


def _messages_in(batch: list[LogRecord] | list[dict[str, Any]]) -> int:
    return sum(
        1
        for record in batch
        if isinstance(record, records.MessageRecord)
        or (isinstance(record, dict) and record.get("type") == records.MESSAGE)
    )


def _database_failed(error: BaseException) -> bool:
    """Whether ``error`` is the database's own failure (nothing more can be written)."""
    cause = error.__cause__ if isinstance(error, LogError) else error
    return isinstance(cause, (OperationalError, InterfaceError))


def _writing_state() -> dict[str, Any]:
    """An incomplete session's ``source_state``: who writes it, and when it last said so."""
    return {"writing": {"runner": worker_id(), "at": timezone.now().isoformat()}}


def _writer_alive(public_id: str, state: dict[str, Any]) -> bool:
    """Whether the import that writes incomplete session ``public_id`` still runs."""
    writing = state.get("writing")
    if not isinstance(writing, dict):
        return False
    runner, at = writing.get("runner"), writing.get("at")
    if runner == worker_id():
        with _WRITING_LOCK:
            return public_id in _WRITING
    moment = parse_datetime(at) if isinstance(at, str) else None
    return isinstance(runner, str) and elsewhere_alive(runner, moment)


def _location_of(found: Found) -> str:
    if isinstance(found, MotusLog):
        return f"line {found.lines[0]}"
    if isinstance(found, AgentSession):
        return f"session {found.index}"
    return getattr(found, "location", "")


def _conflict(error: Exception) -> bool:
    """Whether ``error`` is another transaction's write of the same row (a unique key)."""
    return isinstance(error, IntegrityError) or isinstance(error.__cause__, IntegrityError)


INTERNAL_ERROR = (
    "could not be imported because of an error in Motus; the server log has the details"
)
_RACE = "imported at the same time by another request; import the file again"
_BUSY = "being imported by another import right now; import the file again when it has ended"
# The reason of the rewind that takes back messages imported while still being written.
_REGROWN = "the file's last messages were still being written when it was imported"


def _log_unit(record: dict[str, Any]) -> dict[str, Any]:
    """A log record as it is compared: without the id it is stored under, nor its
    time (``upgrade_records`` stamps an old log's records with the time of the import)."""
    return {k: v for k, v in record.items() if k not in ("session_id", "ts")}


def _last_seq(rows: list[dict[str, Any]]) -> int | None:
    seqs = [row.get("seq") for row in rows if row.get("type") == records.MESSAGE]
    return next((seq for seq in reversed(seqs) if isinstance(seq, int)), None)


def _line_of(log: MotusLog, record_number: int | None) -> int:
    if record_number is None:
        return log.lines[0]
    return log.lines[record_number - 1] if 0 < record_number <= len(log.lines) else log.lines[-1]
