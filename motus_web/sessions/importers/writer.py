"""Write what the parsers found into the database, one transaction per session."""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass, field
from typing import Any, cast

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet

from memory import (
    ChatMessage,
    InvalidMessageError,
    LogCorruptError,
    LogError,
    LogProblem,
    MotusMemoryError,
    upgrade_records,
)
from memory.json_values import clean_text
from memory.log import InvalidSessionIdError, validate_session_id
from memory.messages import INSTRUCTION_ROLES, InstructionRole

from ..log_store import DatabaseLogStore
from ..models import Session
from .runner import log_records
from .sources import Found, MotusLog, Problem, Transcript


@dataclass(frozen=True, slots=True)
class ImportOptions:
    owner: AbstractBaseUser | None = None  # None: only staff see the sessions
    replay_threshold: int | None = None  # compact chat transcripts at this many tokens
    model_name: str | None = None  # for token counting; None: the log's own, or the default


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


class Writer:
    """Imports each transcript or log it is given into ``report``.

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
        self.digest = digest
        self.options = options
        self.report = ImportReport()

    def take(self, found: Found) -> None:
        if isinstance(found, Problem):
            self.report.problems.append(found)
        elif isinstance(found, MotusLog):
            self._motus_log(found)
        else:
            self._transcript(found)

    def _key(self, index: int) -> str:
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

    def _transcript(self, transcript: Transcript) -> None:
        key = self._key(transcript.index)
        where = f"{transcript.location}, " if transcript.location else ""
        if self._already_imported(key, transcript.location):
            return
        messages: list[ChatMessage] = []
        for number, raw in enumerate(transcript.messages, start=1):
            try:
                messages.append(ChatMessage.from_dict(raw))
            except InvalidMessageError as error:
                self._problem(f"{where}message {number}", str(error))
                return
        system_prompt, system_role = "", cast(InstructionRole, "system")
        if messages and messages[0].role in INSTRUCTION_ROLES:
            instructions = messages.pop(0)
            system_prompt, system_role = instructions.text, cast(InstructionRole, instructions.role)
        if not messages:
            self._problem(transcript.location, "no messages besides a system prompt")
            return
        session_id = uuid.uuid4().hex
        try:
            found = log_records(
                session_id,
                messages,
                system_prompt=system_prompt,
                system_role=system_role,
                model_name=self.options.model_name or settings.MOTUS_MODEL_NAME,
                threshold=self.options.replay_threshold,
            )
        except MotusMemoryError as error:
            self._problem(transcript.location, f"the memory refused the messages: {error}")
            return
        found[0]["title"] = transcript.title
        self._save(found, key, transcript.location)

    def _motus_log(self, log: MotusLog) -> None:
        location = f"line {log.lines[0]}"
        try:
            log_id = validate_session_id(log.records[0].get("session_id"))
        except InvalidSessionIdError as error:
            self._problem(location, str(error))
            return
        key = self._key(1)
        if self._already_imported(key, f"session {log_id}"):
            return
        problems: list[LogProblem] = []
        upgraded = upgrade_records(
            log.records, model_name=self.options.model_name, problems=problems
        )
        for problem in problems:
            self._problem(f"line {_line_of(log, problem.line)}", problem.error)
        if problems:
            return
        if holder := self._holder(log_id, upgraded):
            self.report.skipped.append(Skipped(f"session {log_id}", holder))
            return
        self._save(upgraded, key, "", log)

    def _holder(self, log_id: str, found: list[dict[str, Any]]) -> str | None:
        """The owner's session that holds the log already, whole or as its start."""
        store = DatabaseLogStore()
        candidates = self._owned().filter(Q(public_id=log_id) | Q(original_id=log_id))
        for public_id in candidates.values_list("public_id", flat=True):
            expected = [{**found[0], "session_id": public_id}, *found[1:]]
            if list(itertools.islice(store.read(public_id), len(expected))) == expected:
                return public_id
        return None

    def _save(
        self,
        found: list[dict[str, Any]],
        key: str,
        location: str,
        log: MotusLog | None = None,
    ) -> None:
        log_id: str = found[0]["session_id"]
        session_id = log_id
        store = DatabaseLogStore(parents=self._owned())
        try:
            with transaction.atomic():
                if Session.objects.filter(public_id=session_id).exists():
                    session_id = uuid.uuid4().hex
                    found = [{**found[0], "session_id": session_id}, *found[1:]]
                store.extend(session_id, found)
                Session.objects.filter(public_id=session_id).update(
                    owner=self.options.owner,
                    source=self.source[-255:].replace("\x00", "\ufffd"),
                    source_key=key,
                    original_id="" if session_id == log_id else log_id,
                )
        except LogCorruptError as error:
            if log is not None and error.line is not None:
                location = f"line {_line_of(log, error.line)}"
            self._problem(location, str(error.__cause__ or error))
            return
        except (IntegrityError, LogError) as error:
            race = isinstance(error, IntegrityError) or isinstance(error.__cause__, IntegrityError)
            if not (race and self._already_imported(key, location)):
                self._problem(location, str(error) if not race else _RACE)
            return
        self.report.imported.append(session_id)
        if session_id != log_id and log is not None:
            self.report.renamed[log_id] = session_id


_RACE = "imported at the same time by another request; import the file again"


def _line_of(log: MotusLog, record_number: int) -> int:
    return log.lines[record_number - 1] if 0 < record_number <= len(log.lines) else log.lines[-1]
