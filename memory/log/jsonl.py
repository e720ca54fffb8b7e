"""``JSONLLogStore``: one JSONL file per session, ``{base_path}/{session_id}.jsonl``.

Crash safety. Each record is serialised first and written as one complete line
with a single ``write`` on a file opened with ``O_APPEND``, under an exclusive
``flock``: two processes appending to one session never interleave bytes. A
crash mid-write can leave at most a torn last line; reads skip it and report
it with its line number, and the next append first ends that line so the new
record starts on a fresh one. A write that fails (the disk is full) is cut off
again before ``LogError`` is raised, so nothing half-written stays. A record
is in the file (the operating system's cache) when ``append`` returns; with
``fsync=True`` every write is also forced to disk (survives an OS crash or
power loss, at the cost of latency). The descriptors stay open between lines
and a log moved aside is reopened at its path (``memory.log.appender``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from ..errors import LogError, SessionNotFoundError
from ..json_values import loads
from .appender import append_line
from .records import LogRecord, serialise
from .store import LogProblem, validate_session_id


class JSONLLogStore:
    """Conversation logs as JSONL files under ``base_path`` (created on first write)."""

    def __init__(self, base_path: str | Path, *, fsync: bool = False) -> None:
        self.base_path = Path(base_path).expanduser()
        self.fsync = fsync
        self._paths: dict[str, Path] = {}  # checked ids: an append does not check again

    def path_for(self, session_id: str) -> Path:
        """The log file of ``session_id``. Raises ``InvalidSessionIdError`` for an unsafe id."""
        path = self._paths.get(session_id) if isinstance(session_id, str) else None
        if path is None:
            path = self.base_path / f"{validate_session_id(session_id)}.jsonl"
            if len(self._paths) < 1024:
                self._paths[session_id] = path
        return path

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
            append_line(path, line, fsync=self.fsync)
        except OSError as exc:
            raise LogError(f"cannot append to {path}: {exc}") from exc

    def read(
        self, session_id: str, problems: list[LogProblem] | None = None
    ) -> Iterator[dict[str, Any]]:
        """Yield the records of ``session_id`` in file order.

        Raises ``SessionNotFoundError`` (before the first record is yielded)
        when the file does not exist; unreadable lines go to ``problems``.
        """
        return self._records(self._open(session_id), problems)

    def read_reversed(
        self, session_id: str, problems: list[LogProblem] | None = None
    ) -> Iterator[dict[str, Any]]:
        """Yield the records of ``session_id`` from the file's end to its start.

        The file is read backwards in blocks, so stopping early reads only its
        end. Problems are reported as ``read`` reports them, line numbers
        included (counted for the lines that need one). Raises
        ``SessionNotFoundError`` as ``read`` does.
        """
        return (record for record, _ in self.read_reversed_lines(session_id, problems))

    def read_reversed_lines(
        self, session_id: str, problems: list[LogProblem] | None = None
    ) -> Iterator[tuple[dict[str, Any], bytes]]:
        """``read_reversed``, each record with its line: ``(record, line)``,
        the line's bytes as the file holds them (a JSON object, its newline
        kept, so ``json_values.loads(line) == record``). A restore keeps the
        line of a context message and parses it again when the message is
        first read (``memory.log.logged_message``). A subclass that reads
        records from elsewhere overrides this method: ``read_reversed`` is
        built on it."""
        return self._lines_reversed(self._open(session_id), problems)

    def _open(self, session_id: str) -> Any:
        """The log file of ``session_id``, open for binary reading."""
        path = self.path_for(session_id)
        try:
            return path.open("rb")
        except FileNotFoundError:
            raise SessionNotFoundError(session_id, str(self.base_path)) from None
        except OSError as exc:
            raise LogError(f"cannot read {path}: {exc}") from exc

    @staticmethod
    def _records(handle: Any, problems: list[LogProblem] | None) -> Iterator[dict[str, Any]]:
        with handle:
            for _, item in parse_lines(handle):
                if isinstance(item, LogProblem):
                    if problems is not None:
                        problems.append(item)
                else:
                    yield item

    @staticmethod
    def _lines_reversed(
        handle: Any, problems: list[LogProblem] | None
    ) -> Iterator[tuple[dict[str, Any], bytes]]:
        # The file is read backwards in blocks (``_BLOCK``, or as much again as
        # is held: a long line costs linear time), and each block cut into
        # lines from its end, each keeping its newline (the last line lacks it
        # only when the file does). One loop, without a generator of lines
        # beneath it: a restore of a log without compactions runs it for
        # every line. Line numbers are counted once, at the first problem
        # (from the file's start); every line read after it is the one before.
        number: int | None = None
        loads = orjson.loads
        with handle:
            start = handle.seek(0, os.SEEK_END)  # the file offset of buf[0]
            buf = b""
            stop = 0  # buf[:stop] is still to be cut into lines
            while True:
                cut = buf.rfind(b"\n", 0, stop - 1) if stop > 1 else -1
                if cut < 0:
                    if start:
                        size = min(max(_BLOCK, stop), start)
                        start -= size
                        handle.seek(start)
                        buf = handle.read(size) + buf[:stop]
                        stop = len(buf)
                        continue
                    if not stop:
                        return
                raw = buf[cut + 1 : stop]
                offset, stop = start + cut + 1, cut + 1
                if number is not None:
                    number -= 1
                # The common line first, without parse_line's calls.
                try:
                    item: dict[str, Any] | LogProblem = loads(raw)
                except orjson.JSONDecodeError:
                    if not raw.strip():
                        continue
                    item = parse_line(0, raw)
                else:
                    if type(item) is not dict or type(item.get("type")) is not str:
                        item = parse_line(0, raw)
                if not isinstance(item, LogProblem):
                    yield item, raw
                elif problems is not None:
                    if number is None:
                        number = _line_number(handle, offset)
                    problems.append(LogProblem(number, item.error, item.torn))

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
        if raw.strip():
            yield number, parse_line(number, raw)


def parse_line(number: int, raw: bytes) -> dict[str, Any] | LogProblem:
    """The record on line ``number`` (its bytes ``raw``, newline included when
    it has one), or the problem that makes it unreadable."""
    try:
        record = loads(raw)
    except orjson.JSONDecodeError as exc:
        last = not raw.endswith(b"\n")
        if not last and exc.pos >= len(raw.rstrip(b"\r\n").decode("utf-8", "replace")):
            # Broken exactly where the line ends: a write a crash cut short, which
            # the next append closed with a newline. What follows it is whole.
            return LogProblem(
                number,
                f"a record cut short by a crash during its write ({exc}); "
                "the lines after it are intact",
            )
        return LogProblem(number, f"invalid JSON ({exc})", torn=last)
    if not isinstance(record, dict) or not isinstance(record.get("type"), str):
        return LogProblem(number, "not a log record (no 'type')")
    return record


_BLOCK = 1 << 16


def _line_number(handle: Any, offset: int) -> int:
    """The 1-based number of the line that starts at byte ``offset``."""
    handle.seek(0)
    newlines = 0
    while offset > 0:
        chunk = handle.read(min(_BLOCK * 16, offset))
        if not chunk:
            break
        newlines += chunk.count(b"\n")
        offset -= len(chunk)
    return newlines + 1
