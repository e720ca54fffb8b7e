"""Conversation logs: the record format, the store interface and two stores."""

from . import records
from .in_memory import InMemoryLogStore
from .jsonl import JSONLLogStore
from .store import InvalidSessionIdError, LogProblem, LogStore, validate_session_id

__all__ = [
    "InMemoryLogStore",
    "InvalidSessionIdError",
    "JSONLLogStore",
    "LogProblem",
    "LogStore",
    "records",
    "validate_session_id",
]
