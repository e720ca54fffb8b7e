"""Conversation logs: typed records, the one write path, the store interface and two stores.

- ``records``: one frozen dataclass per record type, and their serializer pair;
- ``recorder``: ``Recorder``, which writes a memory's records and tells its listeners;
- ``store``: the ``LogStore`` interface (and ``ReversibleLogStore``, read from the end,
  ``LineLogStore``, which also hands over the lines), session-id rules and ``LogProblem``;
- ``jsonl``: ``JSONLLogStore`` (one crash-safe JSONL file per session) and ``parse_lines``;
- ``in_memory``: ``InMemoryLogStore``;
- ``prefix``: ``LogPoint`` (a place in a log) and ``PrefixStore`` (a log read up to one).
"""

from . import records
from .in_memory import InMemoryLogStore
from .jsonl import JSONLLogStore, parse_lines
from .prefix import LogPoint, PointNotFoundError, PrefixStore
from .recorder import Listener, Recorder
from .records import LogRecord, record_from_dict, record_from_json
from .store import (
    SESSION_ID_MAX_LENGTH,
    AsyncLogStore,
    InvalidSessionIdError,
    LineLogStore,
    LogProblem,
    LogStore,
    ReversibleLogStore,
    validate_session_id,
)

__all__ = [
    "SESSION_ID_MAX_LENGTH",
    "AsyncLogStore",
    "InMemoryLogStore",
    "InvalidSessionIdError",
    "JSONLLogStore",
    "LineLogStore",
    "Listener",
    "LogPoint",
    "LogProblem",
    "LogRecord",
    "LogStore",
    "PointNotFoundError",
    "PrefixStore",
    "Recorder",
    "ReversibleLogStore",
    "parse_lines",
    "record_from_dict",
    "record_from_json",
    "records",
    "validate_session_id",
]
