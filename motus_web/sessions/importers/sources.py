"""What the parsers find in a file: transcripts, Motus logs, agent sessions, and problems."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .formats import ParsedSession

# A problem echoes at most this much of a bad value or a long file name.
MESSAGE_MAX_CHARS = 1000
SOURCE_MAX_CHARS = 120


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis that says so."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class Problem:
    """Something in a file that could not be imported, and where.

    ``source`` is the file's name and ``message`` the reason, both clipped so
    that a 1,000-character name or a 2 MB bad value does not flood the page.
    """

    source: str
    location: str  # "line 12", "record 3, message 5", or "" for the whole file
    message: str
    warning: bool = False  # a damaged line skipped; the session was built from the rest

    def __post_init__(self) -> None:
        name = self.source if len(self.source) <= SOURCE_MAX_CHARS else "…" + self.source[-79:]
        object.__setattr__(self, "source", name)
        object.__setattr__(self, "message", clip(self.message, MESSAGE_MAX_CHARS))

    def __str__(self) -> str:
        where = f"{self.source}: {self.location}" if self.location else self.source
        return f"{where}: {self.message}"


class Refused(Exception):
    """Raised while a session is read or written: refuse it with this problem.

    Raised inside the session's transaction, so nothing of it is written.
    """

    def __init__(self, location: str, message: str) -> None:
        super().__init__(message)
        self.location = location


@dataclass(frozen=True, slots=True)
class Transcript:
    """One conversation in the OpenAI chat format, not yet run through a memory.

    ``messages`` may be a lazy iterable over a file being parsed; it raises
    ``Refused`` where the file stops being valid JSON.
    """

    index: int  # 1-based line (JSONL) or record (JSON) number; part of the dedup key
    location: str
    title: str
    messages: Iterable[Any]


@dataclass(frozen=True, slots=True)
class MotusLog:
    """The records of one Motus JSONL log, with the line each came from."""

    records: list[dict[str, Any]]
    lines: list[int]
    index: int = 1  # the log's place in a file of concatenated logs; part of the dedup key


@dataclass(frozen=True, slots=True)
class AgentSession:
    """A session read by ``formats`` (Claude Code, Codex, ChatGPT...), ``index`` in its file."""

    index: int
    session: ParsedSession


Found = Transcript | MotusLog | AgentSession | Problem
