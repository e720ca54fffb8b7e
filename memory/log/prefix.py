"""Points in a log, and a store's view of a log up to one of them.

A rewind continues a session from an earlier point of its log, an undo needs
the context as it was just before a compaction, and "what the model saw" at a
reply is the context of the log just before that reply's record. Each is the
state a restore of a *prefix* of the log gives. A ``LogPoint`` names the point
by the record it comes before or after, so it means the same in any store
(record positions differ between a JSONL file and a database that skipped a
torn line)::

    {"after_message": 41}       # just after the message record with seq 41
    {"before_message": 42}      # just before it (after any compaction it followed)
    {"before_compaction": 3}    # just before the compaction record numbered 3
    {"before_rewind": 2}        # just before the rewind record numbered 2

Seqs, compaction numbers and rewind numbers are unique within a log (they
only grow, rewinds included), so each point is one place. ``PrefixStore``
reads one session of a store as if the log ended at the point; a restore
through it (``CompactionMemory.restore_from_log(..., log_store=prefix)``) is
the state at that point.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import LogError
from .records import COMPACTION, MESSAGE, REWIND, LogRecord
from .store import LogProblem, LogStore, ReversibleLogStore


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


PointKind = Literal["after_message", "before_message", "before_compaction", "before_rewind"]
_RECORD_OF: dict[str, tuple[str, str]] = {
    "after_message": (MESSAGE, "seq"),
    "before_message": (MESSAGE, "seq"),
    "before_compaction": (COMPACTION, "compaction_number"),
    "before_rewind": (REWIND, "rewind_number"),
}


@dataclass(frozen=True, slots=True)
class LogPoint:
    """A place between two records of a log (see the module).

    ``through_seq`` narrows a ``before_compaction`` point to the compaction
    with that ``through_seq``: ``reset()`` starts the compaction numbering
    again, so a number alone may name several records. Without it (and for
    the other kinds) a point names the newest record with its key.
    """

    kind: PointKind
    key: int
    through_seq: int | None = None

    @classmethod
    def from_dict(cls, data: object) -> LogPoint:
        """The point ``{"after_message": 41}`` (or ``{"before_compaction": 3,
        "through_seq": 120}``) names. Raises ``ValueError`` for anything else."""
        if isinstance(data, Mapping):
            through = data.get("through_seq")
            kinds = [k for k in data if k != "through_seq"]
            if len(kinds) == 1 and kinds[0] in _RECORD_OF:
                kind, key = kinds[0], data[kinds[0]]
                narrowed = through is None or (_is_int(through) and kind == "before_compaction")
                if _is_int(key) and narrowed:
                    return cls(kind, key, through)
        raise ValueError(f"not a log point: {data!r}")

    def to_dict(self) -> dict[str, int]:
        out: dict[str, int] = {self.kind: self.key}
        if self.through_seq is not None:
            out["through_seq"] = self.through_seq
        return out

    def __str__(self) -> str:
        what = {
            "after_message": "just after message #{}",
            "before_message": "just before message #{}",
            "before_compaction": "just before compaction {}",
            "before_rewind": "just before rewind {}",
        }[self.kind]
        return what.format(self.key)

    def names(self, record: Mapping[str, Any]) -> bool:
        """Whether ``record`` (a log record's dict) is a record this point may be next to."""
        kind, field = _RECORD_OF[self.kind]
        return (
            record.get("type") == kind
            and record.get(field) == self.key
            and (self.through_seq is None or record.get("through_seq") == self.through_seq)
        )

    @property
    def includes_its_record(self) -> bool:
        """``after_...``: the record it names is part of the prefix."""
        return self.kind.startswith("after_")


class PointNotFoundError(LogError):
    """The log holds no record that the point names."""

    def __init__(self, point: LogPoint) -> None:
        self.point = point
        super().__init__(f"the log has no point {point}")


class PrefixStore:
    """One session of ``store`` read as if its log ended at ``point``.

    Reads only (``append`` raises ``LogError``); other sessions read as in
    ``store``. ``read`` and ``read_reversed`` raise ``PointNotFoundError``
    (once the log is read through without finding the point).
    """

    def __init__(self, store: LogStore, session_id: str, point: LogPoint) -> None:
        self.store = store
        self.session_id = session_id
        self.point = point

    def append(self, session_id: str, record: LogRecord | Mapping[str, Any]) -> None:
        raise LogError("a log read up to a point is not written to")

    def exists(self, session_id: str) -> bool:
        return self.store.exists(session_id)

    def list_sessions(self) -> list[str]:
        return self.store.list_sessions()

    def read(
        self, session_id: str, problems: list[LogProblem] | None = None
    ) -> Iterator[dict[str, Any]]:
        records = self.store.read(session_id, problems)
        if session_id != self.session_id:
            return records
        return self._until(records)

    def _until(self, records: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        # The newest record the point names is its place: at the first one met,
        # count how many there are (a forward read of a prefix is the rare
        # path, and a restore reads only the first record this way).
        point = self.point
        matches: int | None = None
        try:
            for record in records:
                if point.names(record):
                    if matches is None:
                        matches = sum(1 for r in self.store.read(self.session_id) if point.names(r))
                    matches -= 1
                    if not matches:
                        if point.includes_its_record:
                            yield record
                        return
                yield record
        finally:
            getattr(records, "close", lambda: None)()
        raise PointNotFoundError(point)

    def read_reversed(
        self, session_id: str, problems: list[LogProblem] | None = None
    ) -> Iterator[dict[str, Any]]:
        store = self.store
        if not isinstance(store, ReversibleLogStore):
            raise LogError("reading a log backwards needs a store that can")
        records = store.read_reversed(session_id, problems)
        if session_id != self.session_id:
            return records
        return self._from(records)

    def _from(self, records: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        point = self.point
        try:
            for record in records:
                if point.names(record):
                    if point.includes_its_record:
                        yield record
                    yield from records
                    return
        finally:
            getattr(records, "close", lambda: None)()
        raise PointNotFoundError(point)
