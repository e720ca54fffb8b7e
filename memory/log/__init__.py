"""Conversation logs: the record format, the store interface and two stores."""

from . import records
from .in_memory import InMemoryLogStore
from .jsonl import JSONLLogStore
from .store import AsyncLogStore, InvalidSessionIdError, LogProblem, LogStore, validate_session_id

__all__ = [
    "AsyncLogStore",
    "InMemoryLogStore",
    "InvalidSessionIdError",
    "JSONLLogStore",
    "LogProblem",
    "LogStore",
    "records",
    "validate_session_id",
]
