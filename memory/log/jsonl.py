"""``JSONLLogStore``: one JSONL file per session, ``{base_path}/{session_id}.jsonl``.

Crash safety. Each record is serialised first and written as one complete line
with a single ``write`` on a file opened with ``O_APPEND``, under an exclusive
``flock``: two processes appending to one session never interleave bytes. A
crash mid-write can leave at most a torn last line; reads skip it and report
it with its line number, and the next append first ends that line so the new
record starts on a fresh one. With ``fsync=True`` every write is also forced
to disk (survives an OS crash or power loss, at the cost of latency).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from ..errors import LogError, SessionNotFoundError
from ..json_values import loads
from .records import LogRecord, serialise
from .store import LogProblem, validate_session_id


class JSONLLogStore:
    """Conversation logs as JSONL files under ``base_path`` (created on first write)."""

    def __init__(self, base_path: str | Path, *, fsync: bool = False) -> None:
        self.base_path = Path(base_path).expanduser()
        self.fsync = fsync

    def path_for(self, session_id: str) -> Path:
        """The log file of ``session_id``. Raises ``InvalidSessionIdError`` for an unsafe id."""
        return self.base_path / f"{validate_session_id(session_id)}.jsonl"

    def append(self, session_id: str, record: LogRecord | Mapping[str, Any]) -> None:
        """Append ``record`` as one line. Raises ``LogError`` when it cannot be written."""
        path = self.path_for(session_id)
        try:
            line = serialise(record) + b"\n"
        except TypeError as exc:
            raise LogError(
                f"record for session {session_id!r} is not JSON-serialisable: {exc}"
            ) from exc
        try:
            self.base_path.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                if _ends_mid_line(fd):
                    line = b"\n" + line
                os.write(fd, line)
                if self.fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)  # closing releases the lock
        except OSError as exc:
            raise LogError(f"cannot append to {path}: {exc}") from exc

    def read(
        self, session_id: str, problems: list[LogProblem] | None = None
    ) -> Iterator[dict[str, Any]]:
        """Yield the records of ``session_id`` in file order.

        Raises ``SessionNotFoundError`` (before the first record is yielded)
        when the file does not exist; unreadable lines go to ``problems``.
        """
        path = self.path_for(session_id)
        try:
            handle = path.open("rb")
        except FileNotFoundError:
            raise SessionNotFoundError(session_id, str(self.base_path)) from None
        except OSError as exc:
            raise LogError(f"cannot read {path}: {exc}") from exc
        return self._records(handle, problems)

    @staticmethod
    def _records(handle: Any, problems: list[LogProblem] | None) -> Iterator[dict[str, Any]]:
        with handle:
            for _, item in parse_lines(handle):
                if isinstance(item, LogProblem):
                    if problems is not None:
                        problems.append(item)
                else:
                    yield item

    def exists(self, session_id: str) -> bool:
        return self.path_for(session_id).is_file()

    def list_sessions(self) -> list[str]:
        if not self.base_path.is_dir():
            return []
        return sorted(p.stem for p in self.base_path.glob("*.jsonl"))


def parse_lines(lines: Iterable[bytes]) -> Iterator[tuple[int, dict[str, Any] | LogProblem]]:
    """Read JSONL log lines as ``(line number, record)``, 1-based, or
    ``(line number, LogProblem)`` for a line that is not JSON or not a record
    with a ``type``.
    Blank lines are skipped. A last line without its newline that does not
    parse is marked ``torn`` (a write cut short by a crash)."""
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            record = loads(raw)
        except orjson.JSONDecodeError as exc:
            yield number, LogProblem(number, f"invalid JSON ({exc})", torn=not raw.endswith(b"\n"))
            continue
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            yield number, LogProblem(number, "not a log record (no 'type')")
            continue
        yield number, record


def _ends_mid_line(fd: int) -> bool:
    size = os.fstat(fd).st_size
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"
