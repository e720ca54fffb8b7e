"""Write what the parsers found into the database, one transaction per session."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from memory import ChatMessage, InvalidMessageError, LogProblem, MotusMemoryError, upgrade_records
from memory.errors import LogCorruptError, LogError
from memory.log import InvalidSessionIdError, validate_session_id

from ..log_store import DatabaseLogStore
from ..models import Session
from .runner import log_records
from .sources import Found, MotusLog, Problem, Transcript


@dataclass(frozen=True, slots=True)
class ImportOptions:
    owner: AbstractBaseUser | None = None  # None: only staff see the sessions
    replay_threshold: int | None = None  # compact chat transcripts at this many tokens
    model_name: str | None = None  # for token counting; None: the log's own, or the default


@dataclass
class ImportReport:
    imported: list[str] = field(default_factory=list)  # public ids
    skipped: list[str] = field(default_factory=list)  # already imported: where in the file
    problems: list[Problem] = field(default_factory=list)


class Writer:
    """Imports each transcript or log it is given into ``report``.

    A session's dedup key is the owner, the file's content hash and the
    session's place in the file, so importing a file again adds nothing.
    """

    def __init__(self, source: str, digest: str, options: ImportOptions) -> None:
        self.source = source
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

    def _problem(self, location: str, message: str) -> None:
        self.report.problems.append(Problem(self.source, location, message))

    def _transcript(self, transcript: Transcript) -> None:
        key = self._key(transcript.index)
        where = f"{transcript.location}, " if transcript.location else ""
        if Session.objects.filter(source_key=key).exists():
            self.report.skipped.append(transcript.location or self.source)
            return
        messages: list[ChatMessage] = []
        for number, raw in enumerate(transcript.messages, start=1):
            try:
                messages.append(ChatMessage.from_dict(raw))
            except InvalidMessageError as error:
                self._problem(f"{where}message {number}", str(error))
                return
        system_prompt = ""
        if messages and messages[0].role == "system":
            system_prompt = messages.pop(0).text
        if not messages:
            self._problem(transcript.location, "no messages besides a system prompt")
            return
        session_id = uuid.uuid4().hex
        try:
            found = log_records(
                session_id,
                messages,
                system_prompt=system_prompt,
                model_name=self.options.model_name or settings.MOTUS_MODEL_NAME,
                threshold=self.options.replay_threshold,
            )
        except MotusMemoryError as error:
            self._problem(transcript.location, f"the memory refused the messages: {error}")
            return
        found[0]["title"] = transcript.title
        self._save(session_id, found, key, transcript.location)

    def _motus_log(self, log: MotusLog) -> None:
        location = f"line {log.lines[0]}"
        try:
            session_id = validate_session_id(log.records[0].get("session_id"))
        except InvalidSessionIdError as error:
            self._problem(location, str(error))
            return
        if Session.objects.filter(public_id=session_id).exists():
            self.report.skipped.append(f"session {session_id}")
            return
        problems: list[LogProblem] = []
        upgraded = upgrade_records(
            log.records, model_name=self.options.model_name, problems=problems
        )
        for problem in problems:
            self._problem(f"line {_line_of(log, problem.line)}", problem.error)
        if not problems:
            self._save(session_id, upgraded, self._key(1), "", log)

    def _save(
        self,
        session_id: str,
        found: list[dict[str, Any]],
        key: str,
        location: str,
        log: MotusLog | None = None,
    ) -> None:
        owner = self.options.owner
        try:
            with transaction.atomic():
                DatabaseLogStore().extend(session_id, found)
                Session.objects.filter(public_id=session_id).update(
                    owner=owner, source=self.source[-255:], source_key=key
                )
        except IntegrityError:  # imported meanwhile by another request
            self.report.skipped.append(location or self.source)
            return
        except LogCorruptError as error:
            if log is not None and error.line is not None:
                location = f"line {_line_of(log, error.line)}"
            self._problem(location, str(error.__cause__ or error))
            return
        except LogError as error:
            self._problem(location, str(error))
            return
        self.report.imported.append(session_id)


def _line_of(log: MotusLog, record_number: int) -> int:
    return log.lines[record_number - 1] if 0 < record_number <= len(log.lines) else log.lines[-1]
