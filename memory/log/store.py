"""The interface every conversation-log store implements.

The library ships ``JSONLLogStore`` (one file per session); the Django app
ships a store over its models. ``CompactionMemory`` only ever talks to this
interface, so a memory persists into either without knowing which.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import ConfigurationError

if TYPE_CHECKING:
    from .records import LogRecord

SESSION_ID_MAX_LENGTH = 128
_SESSION_ID_RE = re.compile(r"[A-Za-z0-9._-]+")


class InvalidSessionIdError(ConfigurationError):
    """A session id that could name something outside the log folder."""


def validate_session_id(session_id: object) -> str:
    """Return ``session_id`` if it is safe to use as a file name.

    Allowed: 1 to 128 characters from letters, digits, ``-``, ``_`` and ``.``,
    and not ``.`` or ``..``. Raises ``InvalidSessionIdError`` (a ``ValueError``).
    """
    if not isinstance(session_id, str):
        raise InvalidSessionIdError(f"session id must be a string, got {type(session_id).__name__}")
    if (
        not 0 < len(session_id) <= SESSION_ID_MAX_LENGTH
        or not _SESSION_ID_RE.fullmatch(session_id)
        or session_id in (".", "..")
    ):
        raise InvalidSessionIdError(
            f"invalid session id {session_id[:80]!r}: use 1-{SESSION_ID_MAX_LENGTH} letters, "
            "digits, '-', '_' or '.', and not '.' or '..'"
        )
    return session_id


@dataclass(frozen=True, slots=True)
class LogProblem:
    """A record that was skipped while reading a log: where, and why."""

    line: int
    error: str
    torn: bool = False

    def __str__(self) -> str:
        kind = "torn last line" if self.torn else "corrupt line"
        return f"{kind} {self.line}: {self.error}"


@runtime_checkable
class LogStore(Protocol):
    """Append-only storage of conversation-log records, one stream per session.

    ``append`` takes a typed record (``memory.log.records.LogRecord``, what a
    memory writes) or its JSON-compatible dict; ``read`` gives back dicts, the
    JSON form, which ``memory.log.records.record_from_dict`` types.
    """

    def append(self, session_id: str, record: LogRecord | Mapping[str, Any]) -> None:
        """Append one record durably. Raises ``LogError`` on I/O failure."""
        ...

    def read(
        self, session_id: str, problems: list[LogProblem] | None = None
    ) -> Iterator[dict[str, Any]]:
        """Yield the session's records in order.

        A record that cannot be read is skipped and, when ``problems`` is given,
        reported there with its line number. Raises ``SessionNotFoundError``
        when the session has no log.
        """
        ...

    def exists(self, session_id: str) -> bool:
        """Whether a log exists for ``session_id``."""
        ...

    def list_sessions(self) -> list[str]:
        """Every session id that has a log, sorted."""
        ...


@runtime_checkable
class ReversibleLogStore(LogStore, Protocol):
    """A store that can also read a session's log from its end.

    A restore reads such a store backwards and stops at the latest
    checkpoint (``memory.compaction.checkpoint``), so its time follows the
    live context, not the log's length. Every store shipped here is one.
    """

    def read_reversed(
        self, session_id: str, problems: list[LogProblem] | None = None
    ) -> Iterator[dict[str, Any]]:
        """Yield the session's records newest first, ``session_meta`` last.

        As ``read``: unreadable records go to ``problems`` with their line
        number; raises ``SessionNotFoundError`` when the session has no log.
        """
        ...


@runtime_checkable
class LineLogStore(ReversibleLogStore, Protocol):
    """A reversible store that also hands over each record's stored line.

    A restore of a long context keeps each context message as its record's
    line and parses it again when the message is first read, rather than
    holding the dict every record parsed to (``memory.log.logged_message``).
    ``JSONLLogStore`` is one; a store without lines (a database's rows) gives
    dicts, which a restore holds as they are.
    """

    def read_reversed_lines(
        self, session_id: str, problems: list[LogProblem] | None = None
    ) -> Iterator[tuple[dict[str, Any], bytes]]:
        """``read_reversed``, each record with its line: ``(record, line)``,
        where ``line`` is the record's JSON as stored (UTF-8 bytes; parsing it
        gives ``record`` again). Problems and errors as ``read_reversed``."""
        ...


@runtime_checkable
class AsyncLogStore(LogStore, Protocol):
    """A store whose writes must be awaited (a database driven from an event loop).

    A memory given such a store queues its records and awaits
    ``append_async`` for each, in order, before ``add_message()`` or
    ``compact()`` returns; records written by a synchronous method
    (``set_system_prompt``, ``reset``, ``fork``) go out at the next of those,
    or at ``await memory.flush()``.
    """

    async def append_async(self, session_id: str, record: LogRecord | Mapping[str, Any]) -> None:
        """Append one record durably. Raises ``LogError`` on I/O failure."""
        ...
