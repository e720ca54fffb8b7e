"""What the parsers find in a file: transcripts, Motus logs, and problems."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Problem:
    """Something in a file that could not be imported, and where."""

    source: str
    location: str  # "line 12", "record 3, message 5", or "" for the whole file
    message: str

    def __str__(self) -> str:
        where = f"{self.source}: {self.location}" if self.location else self.source
        return f"{where}: {self.message}"


@dataclass(frozen=True, slots=True)
class Transcript:
    """One conversation in the OpenAI chat format, not yet run through a memory."""

    index: int  # 1-based line (JSONL) or record (JSON) number; part of the dedup key
    location: str
    title: str
    messages: list[Any]


@dataclass(frozen=True, slots=True)
class MotusLog:
    """The records of one Motus JSONL log, with the line each came from."""

    records: list[dict[str, Any]]
    lines: list[int]


Found = Transcript | MotusLog | Problem
