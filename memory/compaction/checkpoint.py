"""Checkpoints: restoring a session from the end of its log, not its first record.

After a compaction the context is ``[instructions, continuation, *kept]`` plus
every message added since. The compaction record already names the
continuation (``summary`` or ``continuation``, ``summary_tokens``) and the kept
messages (``replayed_seqs``; their message records hold the form they have in
the context, their tokens and their unit). Its ``checkpoint`` field holds the
rest of the memory's state at that point::

    {"version": 2,
     "next_seq": 120,                       # the seq the next message gets
     "system_prompt": "...",                # the instructions in force
     "system_role": "developer",            # absent for "system"
     "tracker": {"unit_index": 41, "unit": "B",
                 "pending": ["call_7"], "answered": []},   # the open tool batch
     "calibration": {"models": {...}},      # absent until usage was reported
     "tools": [{...}],                      # the tool schemas; absent: none
     "rewind_number": 2,                    # the last rewind numbered; absent: 0
     "memory_block": "<long_term_memory>...",  # BackgroundMemory's recalled block; absent: none
     "extracted_through": 118,              # the last seq its extractor read; absent: -1
     "clearing_number": 3}                  # the last tool-result clearing numbered; absent: 0

(Version 1, written before tools and rewinds were logged, lacks the last two
and still loads.) A ``rewind`` record is a start too: the state after it is
the state of the log at its target, which the same backward read reaches by
reading on past the records the rewind left behind.

While no compaction and no tool-result clearing is in force, a ``checkpoint``
record holds the same state every ``CHECKPOINT_EVERY`` messages
(``periodic``), with the seqs of the context's messages instead of a
compaction's kept ones, and the last compaction number given out. (A
clearing's stubs are not in the message records, so a restore starts before
it; a compaction's kept messages never hold a stub: see
``memory.compaction.clearing``.)

Where a restore starts (``read_tail``): reading the log backwards from its
end, at the first of

1. a compaction with a usable checkpoint that no later ``compaction_revert``
   undid (undoing it later reads what came before it from the log: the
   restored memory is given a loader),
2. a ``checkpoint`` record, or
3. a ``rewind`` (its target is then found the same way, further back).

The records after the start are applied as usual. The context messages
before it are read on backwards from their records, each held unbuilt
(``memory.log.logged_message``): as its line when the store keeps lines
(``memory.log.store.LineLogStore``: the JSONL store), else as its dict, and
built on first use. So a restore applies at most ``CHECKPOINT_EVERY``
records, or one compaction's worth, however long the log is, and otherwise
only parses the lines of the messages still in the context, once each (a
line that does not parse is a problem of the restore, with its number). A log without
such a start (shorter, or written before checkpoints: older versions, the
reference implementation, other tools) is applied whole, as is any log whose
tail does not apply cleanly; ``restore_from_log(..., full_replay=True)``
always reads everything and reports every problem of the log, where a
restore from a checkpoint reports those of the records it read.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeGuard, cast

from ..log.logged_message import context_message_of, logged, logged_line
from ..log.prefix import LogPoint
from ..log.records import (
    CHECKPOINT,
    COMPACTION,
    COMPACTION_REVERT,
    MESSAGE,
    REWIND,
    SESSION_META,
    CheckpointRecord,
    Compaction,
    Rewind,
    record_from_dict,
)
from ..messages import ChatMessage
from ..state import EntryMeta
from ..units import TurnTracker, Unit
from .state import CompactionState

VERSION = 2
READABLE_VERSIONS = (1, 2)
UNITS = ("A", "B", "C")
# The roles of a context message's record ("function": the legacy tool result).
ENTRY_ROLES = frozenset({"user", "assistant", "tool", "function"})
# A backward read gives up after this many records without a usable start,
# and the log is applied forwards instead: holding every record of a long log
# that has none would cost the memory a streamed read avoids.
MAX_TAIL_RECORDS = 20_000
CHECKPOINT_EVERY = 1_000
"""A ``checkpoint`` record follows every this many messages (by seq) while no
compaction is in force: the most records a restore applies one by one."""


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
    tools: tuple[Mapping[str, Any], ...] = ()
    rewind_number: int = 0
    memory_block: str = ""
    extracted_through: int = -1
    clearing_number: int = 0

    @classmethod
    def capture(cls, state: CompactionState) -> Checkpoint:
        """The checkpoint of ``state`` as it is now."""
        tracker = state.tracker
        learned = state.calibration.to_dict()
        return cls(
            next_seq=state.next_seq,
            system_prompt=state.system_prompt,
            system_role=None if state.system_role == "system" else state.system_role,
            unit_index=tracker.unit_index,
            unit=tracker.unit,
            pending=tuple(tracker.pending),
            answered=tuple(sorted(tracker.answered)),
            calibration=learned if learned["models"] else {},
            tools=tuple(state.tool_schemas),
            rewind_number=state.rewind_number,
            memory_block=state.memory_block,
            extracted_through=state.extracted_through,
            clearing_number=state.clearing_number,
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
        if self.tools:
            out["tools"] = [dict(schema) for schema in self.tools]
        if self.rewind_number:
            out["rewind_number"] = self.rewind_number
        if self.memory_block:
            out["memory_block"] = self.memory_block
        if self.extracted_through >= 0:
            out["extracted_through"] = self.extracted_through
        if self.clearing_number:
            out["clearing_number"] = self.clearing_number
        return out

    @classmethod
    def from_dict(cls, data: object) -> Checkpoint | None:
        """The checkpoint ``data`` holds; ``None`` when it is absent, of another
        version or malformed (the restore then starts at an earlier one)."""
        if not isinstance(data, Mapping) or data.get("version") not in READABLE_VERSIONS:
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
        tools = data.get("tools", [])
        rewinds = data.get("rewind_number", 0)
        block, extracted = data.get("memory_block", ""), data.get("extracted_through", -1)
        clearings = data.get("clearing_number", 0)
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
            and isinstance(tools, list)
            and all(isinstance(schema, Mapping) for schema in tools)
            and _is_int(rewinds)
            and isinstance(block, str)
            and _is_int(extracted)
            and _is_int(clearings)
        ):
            return None
        return cls(
            next_seq,
            prompt,
            role,
            unit_index,
            unit,
            tuple(pending),
            tuple(answered),
            calibration,
            tuple(tools),
            rewinds,
            block,
            extracted,
            clearings,
        )

    def tracker(self) -> TurnTracker:
        unit = cast("Unit | None", self.unit)
        return TurnTracker(self.unit_index, unit, dict.fromkeys(self.pending), set(self.answered))


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_str_list(value: object) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


Line = tuple[dict[str, Any], bytes | None]
"""A record read from a log, with its line's bytes when the store keeps
lines (``memory.log.store.LineLogStore``), else ``None``."""


class Context(NamedTuple):
    """Context messages read from their records: the state's parallel lists
    (``ContextState.messages``, ``meta``, ``tokens``), in seq order."""

    messages: list[ChatMessage]
    meta: list[EntryMeta]
    tokens: list[int]


@dataclass(slots=True)
class Tail:
    """What a backward read found.

    ``records`` are the records after the start, in log order. The start is
    ``compaction`` (with its ``checkpoint`` and the context of its ``kept``
    messages), or ``rewind`` (with ``prefix``: the tail
    of the log up to the rewind's target), or neither: the read reached the
    log's first record, and ``records`` is the whole log.
    """

    records: list[dict[str, Any]]
    compaction: Compaction | None = None
    checkpoint: Checkpoint | None = None
    kept: Context = field(default_factory=lambda: Context([], [], []))
    rewind: Rewind | None = None
    prefix: Tail | None = None
    periodic: CheckpointRecord | None = None

    @property
    def start(self) -> str:
        """``"compaction"``, ``"checkpoint"``, ``"rewind"`` or ``"log"`` (its first record)."""
        if self.compaction is not None:
            return "compaction"
        if self.periodic is not None:
            return "checkpoint"
        return "rewind" if self.rewind is not None else "log"


def read_tail(backward: Iterator[Line]) -> Tail | None:
    """Find where a restore starts in a log read from its end (``backward``
    yields its records newest first, each with its line or ``None``; see the
    module for the rule).

    Returns ``None`` when a restore cannot start from what was read: no usable
    start within ``MAX_TAIL_RECORDS`` records, a kept message whose record is
    missing or lacks its ``tokens``/``unit``/``unit_index``, or a rewind whose
    target is not in the log; the caller then applies the log forwards.
    """
    after: list[dict[str, Any]] = []
    reverted: set[int] = set()
    for raw, _ in backward:
        kind = raw.get("type")
        if kind == SESSION_META:
            after.append(raw)
            after.reverse()
            return Tail(after)
        if kind == COMPACTION_REVERT and _is_int(raw.get("reverts")):
            reverted.add(raw["reverts"])
        elif kind == COMPACTION and raw.get("compaction_number") not in reverted:
            start = _usable_start(raw)
            if start is not None:
                kept = _kept(backward, start[0].replayed_seqs or [])
                if kept is None:
                    return None
                after.reverse()
                return Tail(after, compaction=start[0], checkpoint=start[1], kept=kept)
        elif kind == CHECKPOINT and (periodic := _usable_periodic(raw)) is not None:
            record, state, seqs = periodic
            kept = _kept(backward, seqs)
            if kept is None:
                return None
            after.reverse()
            return Tail(after, checkpoint=state, kept=kept, periodic=record)
        elif kind == REWIND:
            return _rewind_start(raw, backward, after)
        after.append(raw)
        if len(after) > MAX_TAIL_RECORDS:
            return None
    return None  # a log without its session_meta: the forward read reports it


def _usable_start(raw: dict[str, Any]) -> tuple[Compaction, Checkpoint] | None:
    """Compaction ``raw`` and its checkpoint, when a restore can start there."""
    checkpoint = Checkpoint.from_dict(raw.get("checkpoint"))
    if checkpoint is None or not _is_int(raw.get("compaction_number")):
        return None
    start = record_from_dict(raw, exact=False, parsed_json=True)
    if not isinstance(start, Compaction) or start.summary is None:
        return None
    # A record its own checkpoint contradicts was edited by hand: the forward
    # read applies it and says what is wrong.
    through = start.through_seq
    if through is None or through >= checkpoint.next_seq:
        return None
    return start, checkpoint


def _usable_periodic(
    raw: dict[str, Any],
) -> tuple[CheckpointRecord, Checkpoint, list[int]] | None:
    """Checkpoint record ``raw``, its state and its context's seqs, when a
    restore can start there."""
    state = Checkpoint.from_dict(raw.get("checkpoint"))
    if state is None:
        return None
    record = record_from_dict(raw, exact=False, parsed_json=True)
    if not isinstance(record, CheckpointRecord) or not _is_int(record.compaction_number):
        return None
    seqs: list[int] = []
    for run in record.context_seqs or []:
        after = seqs[-1] if seqs else -1  # runs are ascending and apart
        if len(run) != 2 or not after < run[0] <= run[1]:
            return None
        seqs.extend(range(run[0], run[1] + 1))
    if seqs and seqs[-1] >= state.next_seq:
        return None
    return record, state, seqs


def periodic(state: CompactionState) -> CheckpointRecord | None:
    """The ``checkpoint`` record of ``state`` now; ``None`` while a compaction is
    in force (its record is the checkpoint), while a tool-result clearing is
    (its stubs are in no message record), or while the context holds a message
    without a seq (a placeholder result), which no record could give back."""
    if state.head is not None or state.clearings:
        return None
    runs: list[list[int]] = []
    for meta in state.meta:
        seq = meta.seq
        if seq is None:
            return None
        if runs and runs[-1][1] == seq - 1:
            runs[-1][1] = seq
        else:
            runs.append([seq, seq])
    return CheckpointRecord(
        checkpoint=Checkpoint.capture(state).to_dict(),
        context_seqs=runs,
        compaction_number=state.compaction_number,
        through_seq=state.next_seq - 1,
        context_tokens=state.context_tokens(),
    )


def _rewind_start(
    raw: dict[str, Any], backward: Iterator[Line], after: list[dict[str, Any]]
) -> Tail | None:
    """The tail starting at rewind ``raw``: the log up to its target is read
    on from the same backward read (the records between are no longer in force)."""
    record = record_from_dict(raw, exact=False, parsed_json=True)
    try:
        point = LogPoint.from_dict(raw.get("target"))
    except ValueError:
        return None
    if not isinstance(record, Rewind):
        return None
    for older, line in backward:
        if point.names(older):
            rest = _chain([(older, line)], backward) if point.includes_its_record else backward
            prefix = read_tail(rest)
            if prefix is None:
                return None
            after.reverse()
            return Tail(after, rewind=record, prefix=prefix)
    return None


def _chain(first: list[Line], rest: Iterator[Line]) -> Iterator[Line]:
    yield from first
    yield from rest


def _kept(backward: Iterator[Line], seqs: list[int]) -> Context | None:
    """The context of the messages ``seqs``, from their records read on
    backwards; ``None`` if one is missing or unusable. Each message is held
    unbuilt (``memory.log.logged_message``): as its line when the store gave
    one, else as its dict. (This loop runs once per record of a log without
    compactions: it stays lean.)"""
    wanted = set(seqs)
    found: set[int] = set()
    messages: list[ChatMessage] = []
    metas: list[EntryMeta] = []
    counts: list[int] = []
    lowest = min(wanted, default=0)
    missing = len(wanted)
    descending = True  # as a backward read of a log gives them
    previous = None
    for raw, line in backward if wanted else ():
        if raw.get("type") != MESSAGE:
            continue
        seq = raw.get("seq")
        if type(seq) is not int or seq < lowest:  # ``type(x) is int`` refuses bools too
            break
        if seq in wanted and seq not in found:
            message = context_message_of(raw)
            tokens, unit, index = raw.get("tokens"), raw.get("unit"), raw.get("unit_index")
            if not (
                type(message) is dict
                and message.get("role") in ENTRY_ROLES
                and type(tokens) is int
                and unit in UNITS
                and type(index) is int
            ):
                return None
            messages.append(logged(message) if line is None else logged_line(line))
            metas.append(_meta(EntryMeta, (seq, unit, index)))
            counts.append(tokens)
            if previous is not None and seq > previous:
                descending = False
            previous = seq
            found.add(seq)
            missing -= 1
            if not missing:
                break
    if missing:
        return None
    if descending:
        messages.reverse()
        metas.reverse()
        counts.reverse()
        return Context(messages, metas, counts)
    order = sorted(range(len(metas)), key=lambda i: metas[i].seq or 0)
    return Context(
        [messages[i] for i in order], [metas[i] for i in order], [counts[i] for i in order]
    )


_meta = tuple.__new__  # an EntryMeta without its Python-level __new__


def start_at(
    state: CompactionState, compaction: Compaction, checkpoint: Checkpoint, kept: Context
) -> None:
    """Give ``state`` (new, built from the log's session_meta) the state it
    had just after ``compaction``: the checkpoint's instructions, tools,
    calibration and open tool batch, and the context ``[continuation, *kept]``."""
    start_at_checkpoint(state, checkpoint, kept)
    state.compact(compaction)
    assert state.head is not None
    # What came before is read from the log if this compaction is ever undone.
    state.head.prior = None


def start_at_periodic(
    state: CompactionState, record: CheckpointRecord, checkpoint: Checkpoint, kept: Context
) -> None:
    """Give ``state`` (new) the state of checkpoint record ``record``: no
    compaction in force, the context ``kept``."""
    start_at_checkpoint(state, checkpoint, kept)
    state.compaction_number = record.compaction_number or 0


def start_at_checkpoint(state: CompactionState, checkpoint: Checkpoint, kept: Context) -> None:
    """The checkpoint's instructions, tools, calibration, numbers and open tool
    batch, and the context ``kept``."""
    state.set_system_prompt(checkpoint.system_prompt, checkpoint.system_role)
    state.calibration.load(checkpoint.calibration)
    state.set_tools(checkpoint.tools)
    state.replace_columns(*kept)
    state.next_seq = checkpoint.next_seq
    state.tracker = checkpoint.tracker()
    state.rewind_number = checkpoint.rewind_number
    state.set_memory_block(checkpoint.memory_block)
    state.extracted_through = checkpoint.extracted_through
    state.clearing_number = checkpoint.clearing_number
