"""Checkpoints: restoring a session from its latest compactions, not its first record.

After a compaction the context is ``[instructions, continuation, *kept]`` plus
every message added since. The compaction record already names the
continuation (``summary`` or ``continuation``, ``summary_tokens``) and the kept
messages (``replayed_seqs``; their message records hold the form they have in
the context, their tokens and their unit). Its ``checkpoint`` field holds the
rest of the memory's state at that point::

    {"version": 1,
     "next_seq": 120,                       # the seq the next message gets
     "system_prompt": "...",                # the instructions in force
     "system_role": "developer",            # absent for "system"
     "tracker": {"unit_index": 41, "unit": "B",
                 "pending": ["call_7"], "answered": []},   # the open tool batch
     "calibration": {"models": {...}}}      # absent until usage was reported

Where a restore starts (``read_tail``): reading the log backwards from its
end, at the newest compaction with a usable checkpoint that

1. is not the newest compaction of the log: undoing that one
   (``revert_last_compaction``) needs the context just before it, which only a
   replay from an earlier point rebuilds; and
2. is not reverted by a later ``compaction_revert``, for the same reason.

The records after it are replayed as usual. So a restore reads about two
compactions' worth of records, however long the log is. A log without such a
compaction (shorter, or written before checkpoints: older versions, the
reference implementation, other tools) is replayed whole, as is any log whose
tail does not replay cleanly; ``CompactionMemory.restore_from_log(...,
full_replay=True)`` always replays everything and reports every problem of
the log, where a restore from a checkpoint reports those of the records it read.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard, cast

from ..base import EntryMeta
from ..log.records import (
    COMPACTION,
    COMPACTION_REVERT,
    MESSAGE,
    SESSION_META,
    Compaction,
    MessageRecord,
    record_from_dict,
)
from ..units import TurnTracker, Unit

if TYPE_CHECKING:
    from .base import CompactionBase, Entry

VERSION = 1
UNITS = ("A", "B", "C")
# A backward read gives up after this many records without a usable
# checkpoint, and the log is replayed forwards instead: holding every record
# of a long log that has none would cost the memory a streamed replay avoids.
MAX_TAIL_RECORDS = 20_000


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """The state a compaction record's ``checkpoint`` field holds (see the module)."""

    next_seq: int
    system_prompt: str
    system_role: str | None
    unit_index: int
    unit: str | None
    pending: tuple[str, ...]
    answered: tuple[str, ...]
    calibration: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def capture(cls, memory: CompactionBase) -> Checkpoint:
        """The checkpoint of ``memory`` as it is now."""
        tracker = memory._tracker
        learned = memory.calibration.to_dict()
        return cls(
            next_seq=memory.next_seq,
            system_prompt=memory.system_prompt,
            system_role=None if memory.system_role == "system" else memory.system_role,
            unit_index=tracker.unit_index,
            unit=tracker.unit,
            pending=tuple(tracker.pending),
            answered=tuple(sorted(tracker.answered)),
            calibration=learned if learned["models"] else {},
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": VERSION,
            "next_seq": self.next_seq,
            "system_prompt": self.system_prompt,
            "tracker": {
                "unit_index": self.unit_index,
                "unit": self.unit,
                "pending": list(self.pending),
                "answered": list(self.answered),
            },
        }
        if self.system_role is not None:
            out["system_role"] = self.system_role
        if self.calibration:
            out["calibration"] = dict(self.calibration)
        return out

    @classmethod
    def from_dict(cls, data: object) -> Checkpoint | None:
        """The checkpoint ``data`` holds; ``None`` when it is absent, of another
        version or malformed (the restore then starts at an earlier one)."""
        if not isinstance(data, Mapping) or data.get("version") != VERSION:
            return None
        tracker = data.get("tracker")
        if not isinstance(tracker, Mapping):
            return None
        next_seq, prompt, role = (
            data.get("next_seq"),
            data.get("system_prompt"),
            data.get("system_role"),
        )
        unit_index, unit = tracker.get("unit_index"), tracker.get("unit")
        pending, answered = tracker.get("pending"), tracker.get("answered")
        calibration = data.get("calibration", {})
        if not (
            _is_int(next_seq)
            and next_seq >= 0
            and isinstance(prompt, str)
            and role in (None, "developer")
            and _is_int(unit_index)
            and unit_index >= -1
            and unit in (None, *UNITS)
            and _is_str_list(pending)
            and _is_str_list(answered)
            and isinstance(calibration, Mapping)
        ):
            return None
        return cls(
            next_seq, prompt, role, unit_index, unit, tuple(pending), tuple(answered), calibration
        )

    def tracker(self) -> TurnTracker:
        unit = cast("Unit | None", self.unit)
        return TurnTracker(self.unit_index, unit, dict.fromkeys(self.pending), set(self.answered))


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_str_list(value: object) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


@dataclass(slots=True)
class Tail:
    """What a backward read found.

    ``start`` is the compaction a restore starts at, with its ``checkpoint``
    and the context entries of its ``kept`` messages (in seq order), and ``records`` the
    records after it, in log order. With ``start`` ``None`` the read reached
    the log's first record: ``records`` is the whole log.
    """

    records: list[dict[str, Any]]
    start: Compaction | None = None
    checkpoint: Checkpoint | None = None
    kept: list[Entry] = field(default_factory=list)


def read_tail(backward: Iterator[dict[str, Any]]) -> Tail | None:
    """Find where a restore starts in a log read from its end (``backward``
    yields its records newest first; see the module for the rule).

    Returns ``None`` when a restore cannot start from what was read: no usable
    checkpoint within ``MAX_TAIL_RECORDS`` records, or a kept message whose
    record is missing or lacks its ``tokens``/``unit``/``unit_index``; the
    caller then replays the log forwards.
    """
    after: list[dict[str, Any]] = []
    reverted: set[int] = set()
    later_compactions = 0
    for raw in backward:
        kind = raw.get("type")
        if kind == SESSION_META:
            after.append(raw)
            after.reverse()
            return Tail(after)
        if kind == COMPACTION_REVERT and _is_int(raw.get("reverts")):
            reverted.add(raw["reverts"])
        elif kind == COMPACTION:
            number = raw.get("compaction_number")
            checkpoint = Checkpoint.from_dict(raw.get("checkpoint"))
            if later_compactions and checkpoint is not None and number not in reverted:
                start = record_from_dict(raw, exact=False, parsed_json=True)
                if isinstance(start, Compaction) and _is_int(number) and start.summary is not None:
                    kept = _kept(backward, start.replayed_seqs or [])
                    if kept is None:
                        return None
                    after.reverse()
                    return Tail(after, start, checkpoint, kept)
            later_compactions += 1
        after.append(raw)
        if len(after) > MAX_TAIL_RECORDS:
            return None
    return None  # a log without its session_meta: the forward replay reports it


def _kept(backward: Iterator[dict[str, Any]], seqs: list[int]) -> list[Entry] | None:
    """The context entries of the messages ``seqs``, from their records read on
    backwards; ``None`` if one is missing or unusable."""
    wanted = set(seqs)
    found: dict[int, Entry] = {}
    lowest = min(wanted, default=0)
    for raw in backward if wanted else ():
        if raw.get("type") != MESSAGE:
            continue
        seq = raw.get("seq")
        if not _is_int(seq) or seq < lowest:
            break
        if seq in wanted:
            record = record_from_dict(raw, exact=False, parsed_json=True)
            if not (
                isinstance(record, MessageRecord)
                and record.message is not None
                and record.tokens is not None
                and record.unit in UNITS
                and record.unit_index is not None
            ):
                return None
            meta = EntryMeta(seq, record.unit, record.unit_index)  # type: ignore[arg-type]
            found[seq] = (record.context_message or record.message, meta, record.tokens)
            if len(found) == len(wanted):
                break
    if len(found) != len(wanted):
        return None
    return [found[seq] for seq in sorted(found)]


def start_at(memory: CompactionBase, tail: Tail) -> None:
    """Give ``memory`` (new, built from the log's session_meta) the state it
    had just after ``tail.start``: the checkpoint's instructions, calibration
    and open tool batch, and the context ``[continuation, *kept]``."""
    start, checkpoint = tail.start, tail.checkpoint
    assert start is not None
    assert checkpoint is not None
    memory._apply_system_prompt(checkpoint.system_prompt, checkpoint.system_role)
    memory.calibration.load(checkpoint.calibration)
    memory._replace_context(tail.kept)
    memory._apply_compaction(start)
    # Nothing after the start reverts it (the read made sure), and the next
    # compaction replaces what undo holds.
    memory._undo = None
    memory._next_seq = checkpoint.next_seq
    memory._tracker = checkpoint.tracker()
