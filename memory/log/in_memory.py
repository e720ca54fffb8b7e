"""``InMemoryLogStore``: logs kept in a dict, for tests and for staging records
(build a session in memory, then copy its records into another store in one
transaction)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from ..errors import LogError, SessionNotFoundError
from .records import LogRecord, serialise
from .store import LogProblem, validate_session_id


class InMemoryLogStore:
    """Holds each record as JSON bytes, so a stored record cannot be mutated
    by its writer and non-JSON values fail at ``append`` as they would on disk."""

    def __init__(self) -> None:
        self._logs: dict[str, list[bytes]] = {}

    def append(self, session_id: str, record: LogRecord | Mapping[str, Any]) -> None:
        try:
            data = serialise(record)
        except TypeError as exc:
            raise LogError(
                f"record for session {session_id!r} is not JSON-serialisable: {exc}"
            ) from exc
        self._logs.setdefault(validate_session_id(session_id), []).append(data)

    def read(
        self, session_id: str, problems: list[LogProblem] | None = None
    ) -> Iterator[dict[str, Any]]:
        if validate_session_id(session_id) not in self._logs:
            raise SessionNotFoundError(session_id, "memory")
        return (orjson.loads(data) for data in list(self._logs[session_id]))

    def read_reversed(
        self, session_id: str, problems: list[LogProblem] | None = None
    ) -> Iterator[dict[str, Any]]:
        if validate_session_id(session_id) not in self._logs:
            raise SessionNotFoundError(session_id, "memory")
        return (orjson.loads(data) for data in reversed(list(self._logs[session_id])))

    def exists(self, session_id: str) -> bool:
        return validate_session_id(session_id) in self._logs

    def list_sessions(self) -> list[str]:
        return sorted(self._logs)
