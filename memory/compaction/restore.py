"""Restoring a compacting memory's state from its log, and upgrading old logs.

A restore builds a ``CompactionState`` by applying a log's records, in order,
through the state's own methods, the code that built the live context, so a
restored context is the one the memory had. ``RecordApplier`` does it:

- a ``message`` with ``seq`` and ``tokens`` enters the context as recorded (its
  truncated ``context_message`` and token count are used, never recomputed);
  one with ``provider_tokens`` teaches the calibration again, against the
  context size the log last stated (the request that reply answered);
- a ``compaction`` keeps the messages its ``replayed_seqs`` lists; one written
  by the reference implementation (no ``through_seq``) keeps what its
  ``messages_compacted`` says it kept (``memory.compaction.reference``);
- ``compaction_revert``, ``summary_correction``, ``unpin``, ``rewind``,
  ``system_prompt``, ``tools``, ``tool_results_cleared``,
  ``tool_results_restored`` and ``reset`` change the state as they did live
  (an undo or a
  rewind reads the earlier context it needs from the same log:
  ``memory.log.prefix``); ``compaction_failed`` and ``compaction_warning`` only
  enter the trace; a record type this library does not know is skipped and
  noted.

A record that cannot be used is skipped and reported as a ``LogProblem`` with
its record number; the rest still load. Messages missing from the log (a gap
in ``seq``: their write failed, and the live memory raised ``LogError``) are
reported too, at the record that follows the gap.

``read_state`` starts at the end of the log when it can
(``memory.compaction.checkpoint``); ``state_at`` is the state at a point of the
log (a rewind's target, the context before a compaction, what the model saw at
a step).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import itertools
import logging
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from ..config import CompactionMemoryConfig
from ..errors import CompactionError, LogCorruptError, MotusMemoryError
from ..log.in_memory import InMemoryLogStore
from ..log.jsonl import JSONLLogStore
from ..log.prefix import LogPoint, PrefixStore
from ..log.records import (
    RESET_SCOPE_MESSAGES,
    CheckpointRecord,
    Compaction,
    CompactionFailure,
    CompactionRevert,
    CompactionWarning,
    LogRecord,
    MemoryExtraction,
    MemoryRecall,
    MessageRecord,
    Reset,
    Rewind,
    SessionMeta,
    SummaryCorrection,
    SystemPromptChange,
    ToolResultsCleared,
    ToolResultsRestored,
    ToolsChange,
    UnknownRecord,
    Unpin,
    record_from_dict,
)
from ..log.store import LineLogStore, LogProblem, LogStore, ReversibleLogStore
from ..trace import Trace
from . import checkpoint
from .base import clearing_trace_fields, compaction_trace_fields
from .ledger import Ledger
from .meta import session_meta
from .reference import reference_cut
from .state import CompactionState, Head, Prior

logger = logging.getLogger("memory.compaction")

StateFactory = Callable[[], CompactionState]
PrefixLoader = Callable[[LogPoint], CompactionState]


class RecordApplier:
    """Applies a log's records to ``state``, collecting problems and trace events.

    ``load_prefix(point)`` gives the state of the same log at ``point`` (what an
    undo or a rewind needs from earlier in the log). With ``upgrade``, every
    record is also handed to it in the current format: what the record says
    stands, and the fields it lacks are filled with what applying it computed.
    """

    def __init__(
        self,
        state: CompactionState,
        *,
        trace: Trace,
        load_prefix: PrefixLoader | None,
        upgrade: Callable[[LogRecord], None] | None = None,
        stated_tokens: int | None = None,
    ) -> None:
        self.state = state
        self.trace = trace
        self.load_prefix = load_prefix
        self.upgrade = upgrade
        self.problems: list[LogProblem] = []
        self._number = 0
        # Compaction number -> its record's through_seq, for the newest record
        # of each number read so far: ``reset()`` numbers compactions again, so
        # a rewind's "before compaction n" means the n it could see.
        self._compactions_seen: dict[int, int] = {}
        # The context's size as the log last stated it (tools included): the
        # estimate of the request a reply with provider usage answered.
        self._stated_tokens = stated_tokens

    def run(self, records: Iterable[Mapping[str, Any]]) -> None:
        for raw in records:
            self._number += 1
            try:
                self.apply(self._typed(raw))
            except (MotusMemoryError, ValueError) as exc:
                self.problems.append(LogProblem(self._number, str(exc)))

    def _typed(self, raw: Mapping[str, Any]) -> LogRecord:
        # A restore reads what a store parsed from JSON (clean, and never written
        # back); an upgrade may be handed any dicts, and writes them again.
        upgrade = self.upgrade is not None
        return record_from_dict(raw, exact=upgrade, parsed_json=not upgrade)

    def apply(self, record: LogRecord) -> None:
        computed = self._apply(record)
        if self.upgrade is not None and computed is not None:
            merged = {**computed.to_dict(), **record.to_dict()}
            self.upgrade(record_from_dict(merged))
        stated = (
            record.tokens_after if isinstance(record, Compaction | ToolResultsCleared) else None
        )
        if isinstance(
            record, MessageRecord | Reset | CompactionRevert | Rewind | ToolResultsRestored
        ):
            stated = record.context_tokens
        if stated is not None:
            self._stated_tokens = stated

    def _apply(self, record: LogRecord) -> LogRecord | None:
        """Apply ``record``; returns the record as the current format writes it."""
        state = self.state
        through = state.next_seq - 1
        match record:
            case MessageRecord():
                return self._message(record)
            case SessionMeta():
                return None  # read before the records
            case Compaction():
                return self._compaction(record)
            case CompactionRevert():
                if record.reverts is None:
                    raise LogCorruptError("compaction_revert record without 'reverts'")
                state.revert(record.reverts, self._load_prior)
                self.trace.add("compaction_revert", reverts=record.reverts)
                return CompactionRevert(
                    reverts=record.reverts,
                    through_seq=through,
                    context_tokens=state.context_tokens(),
                )
            case ToolResultsCleared():
                tokens_before = state.context_tokens()
                number = state.clear_tool_results(record)
                self.trace.add("tool_results_cleared", **clearing_trace_fields(record))
                return dataclasses.replace(
                    record,
                    clearing_number=number,
                    through_seq=through,
                    tokens_before=tokens_before,
                    tokens_after=state.context_tokens(),
                )
            case ToolResultsRestored():
                undone = state.restore_tool_results(record.reverts)
                self.trace.add("tool_results_restored", reverts=undone)
                return ToolResultsRestored(
                    reverts=undone, through_seq=through, context_tokens=state.context_tokens()
                )
            case SummaryCorrection():
                ledger = Ledger.from_record(record.ledger) if record.ledger is not None else None
                state.correct_summary(record.compaction_number, record.summary or "", ledger)
                self.trace.add("summary_correction", compaction_number=record.compaction_number)
                return record
            case Unpin():
                state.unpin(record.compaction_number, list(record.values or []))
                self.trace.add(
                    "unpin", compaction_number=record.compaction_number, values=record.values
                )
                return record
            case Rewind():
                self._rewind(record)
                return record
            case SystemPromptChange():
                if record.system_prompt is None:
                    raise LogCorruptError("system_prompt record without a prompt")
                state.set_system_prompt(record.system_prompt, record.system_role)
                return SystemPromptChange(
                    system_prompt=record.system_prompt,
                    through_seq=through,
                    system_role=record.system_role,
                )
            case ToolsChange():
                if record.schemas is None:
                    raise LogCorruptError("tools record without 'schemas'")
                state.set_tools(record.schemas)
                return ToolsChange(
                    schemas=record.schemas, tokens=state.tools_tokens, through_seq=through
                )
            case Reset():
                if record.scope == RESET_SCOPE_MESSAGES:
                    state.clear_messages()
                else:
                    state.reset()
                    self.trace.clear()
                return Reset(
                    through_seq=through, context_tokens=state.context_tokens(), scope=record.scope
                )
            case CompactionFailure() | CompactionWarning():
                fields = {k: v for k, v in record.to_dict().items() if k not in ("type", "ts")}
                self.trace.add(record.type, **fields)
                return type(record)(through_seq=through)
            case MemoryRecall():
                state.set_memory_block(record.block or "")
                self.trace.add(
                    "memory_recall", memory_ids=record.memory_ids or [], scores=record.scores
                )
                return record
            case MemoryExtraction():
                if record.through_seq is not None and record.error is None:
                    state.extracted_through = max(state.extracted_through, record.through_seq)
                fields = {k: v for k, v in record.to_dict().items() if k not in ("type", "ts")}
                self.trace.add(record.type, **fields)
                return record
            case CheckpointRecord():
                return record  # a restore's start (``memory.compaction.checkpoint``), no change
            case UnknownRecord():
                # A newer library's record: not corrupt, so not a problem, but
                # the context may differ from what that library shows.
                self.trace.add(
                    "log_note",
                    record=self._number,
                    detail=f"record type {record.type_name!r} is newer than this library: skipped",
                )
                return record
        raise LogCorruptError(f"unknown record type {record.type_name!r}")

    def _message(self, record: MessageRecord) -> LogRecord | None:
        state = self.state
        if record.message is None:
            raise LogCorruptError("message record without a chat message")
        seq = record.seq
        if seq is not None and seq < state.next_seq:
            raise LogCorruptError(f"message seq {seq} does not follow seq {state.next_seq - 1}")
        if seq is not None and seq > state.next_seq:
            missing = f"{state.next_seq}" + (f"-{seq - 1}" if seq - 1 > state.next_seq else "")
            self.problems.append(
                LogProblem(
                    self._number,
                    f"message seq {missing} is missing from the log (never written): "
                    "the context lacks it",
                )
            )
        legacy = seq is None  # the reference logged messages without seq or tokens
        model = state.model_name
        if record.provider_tokens is not None and self._stated_tokens is not None and model:
            # Learn the calibration again, as the live memory did from this reply.
            state.calibration.observe(model, self._stated_tokens, record.provider_tokens)
        ingested = state.ingest(
            record.message,
            seq=seq,
            context_message=record.context_message or (None if legacy else record.message),
            tokens=record.tokens,
        )
        c = ingested.classification
        if c.anomaly:
            self.trace.add("anomaly", seq=ingested.seq, detail=c.anomaly, in_context=c.in_context)
        return state.message_record(ingested) if self.upgrade is not None else None

    def _compaction(self, record: Compaction) -> Compaction:
        state = self.state
        if record.summary is None:
            raise LogCorruptError("compaction record without a summary")
        number = record.compaction_number
        if record.through_seq is not None:
            if number is not None and number <= state.compaction_number:
                raise LogCorruptError(
                    f"compaction number {number} does not follow number {state.compaction_number}"
                )
            if record.through_seq >= state.next_seq:
                raise LogCorruptError(
                    f"compaction covers messages up to seq {record.through_seq}, "
                    f"but the log so far ends at seq {state.next_seq - 1}"
                )
        tokens_before = state.context_tokens()
        applied = record if record.through_seq is not None else _reference_compaction(state, record)
        state.compact(applied)
        if record.through_seq is not None:
            self._compactions_seen[state.compaction_number] = record.through_seq
        self.trace.add("compaction", **compaction_trace_fields(applied))
        return Compaction(
            compaction_number=state.compaction_number,
            status="ok",
            through_seq=state.next_seq - 1,
            replayed_seqs=applied.replayed_seqs or [],
            messages_replayed=len(applied.replayed_seqs or []),
            tokens_before=tokens_before,
            tokens_after=state.context_tokens(),
            summary_tokens=state.tokens[0],
            continuation=applied.continuation,
            checkpoint=(
                checkpoint.Checkpoint.capture(state).to_dict() if self.upgrade is not None else None
            ),
        )

    def _rewind(self, record: Rewind) -> None:
        if self.load_prefix is None:
            raise LogCorruptError("a rewind cannot be applied without the log it points into")
        try:
            point = LogPoint.from_dict(record.target)
        except ValueError as error:
            raise LogCorruptError(f"rewind record: {error}") from error
        if point.kind == "before_compaction" and point.through_seq is None:
            seen = self._compactions_seen.get(point.key)
            point = dataclasses.replace(point, through_seq=seen) if seen is not None else point
        self.state.rewind(self.load_prefix(point), record)
        self.trace.add("rewind", rewind_number=record.rewind_number, target=record.target)

    def _load_prior(self, head: Head) -> Prior:
        if self.load_prefix is None:
            raise CompactionError(
                f"cannot undo compaction {head.number}: the context before it is not in this log"
            )
        return prior_of(self.load_prefix(before_compaction(head)))


def before_compaction(head: Head) -> LogPoint:
    """The point just before the compaction record of ``head``."""
    return LogPoint("before_compaction", head.number, head.through_seq)


def prior_of(state: CompactionState) -> Prior:
    """What undoing a compaction gives back, from the state just before it."""
    return Prior(state.entries(), state.head, list(state.clearings))


def _reference_compaction(state: CompactionState, record: Compaction) -> Compaction:
    entries = state.entries()
    cut = reference_cut(
        [message for message, _, _ in entries], record.messages_compacted, record.summary or ""
    )
    kept = [seq for i in cut.kept if (seq := entries[i][1].seq) is not None]
    # Its own token counts, if any, are of another template: count again.
    return dataclasses.replace(
        record, replayed_seqs=kept, continuation=cut.continuation, summary_tokens=None
    )


# -- reading a state ----------------------------------------------------------------


@dataclass(slots=True)
class Restored:
    """What a restore read: the ``state``, the log's ``meta`` (its
    ``session_meta`` as a dict, ``{}`` when it has none), the ``config`` in
    force, the ``problems`` found, the ``trace`` events it made, and
    ``start`` (the compaction number it started at; ``None``: the first record)."""

    state: CompactionState
    meta: Mapping[str, Any]
    config: CompactionMemoryConfig
    problems: list[LogProblem] = field(default_factory=list)
    trace: Trace = field(default_factory=Trace)
    start: int | None = None
    started: bool = True  # the log has a record (a memory appending to it writes no meta)


def read_state(
    store: LogStore,
    session_id: str,
    *,
    config: CompactionMemoryConfig | None = None,
    model_name: str | None = None,
    full_replay: bool = False,
    trace_max_events: int = 1000,
) -> Restored:
    """The state of ``session_id``'s log in ``store`` (see
    ``CompactionMemory.restore_from_log`` for the rules). ``config`` and
    ``model_name`` replace what the ``session_meta`` says. Raises
    ``SessionNotFoundError`` when the session has no log."""
    read_problems: list[LogProblem] = []
    head = store.read(session_id, read_problems)
    first = next(head, None)
    if first is None and read_problems:
        raise _unreadable(session_id, read_problems)
    meta_problems: list[LogProblem] = []
    meta = _meta(first, session_id, meta_problems)
    config = _config(meta, session_id, store, config, meta_problems)
    model = model_name or _str(meta.get("model_name"))
    role = _role(meta, meta_problems)
    tools = meta.get("tools")

    def new_state() -> CompactionState:
        state = CompactionState(
            model_name=model, max_tool_result_tokens=config.max_tool_result_tokens
        )
        state.set_system_prompt(str(meta.get("system_prompt") or ""), role)
        if isinstance(tools, list) and all(isinstance(t, Mapping) for t in tools):
            state.set_tools(tools)
        return state

    def load_prefix(point: LogPoint) -> CompactionState:
        return state_at(store, session_id, point, config=config, model_name=model)

    restored = None
    if not full_replay and _reversible(store):
        getattr(head, "close", lambda: None)()  # a generator holding a file or a cursor
        reversible = cast("ReversibleLogStore", store)
        restored = _from_tail(reversible, session_id, new_state, load_prefix, trace_max_events)
        if restored is None:
            read_problems = []
            head = store.read(session_id, read_problems)
            first = next(head, None)
    if restored is None:
        trace = Trace(trace_max_events)
        applier = RecordApplier(new_state(), trace=trace, load_prefix=load_prefix)
        applier.run(itertools.chain([first] if first is not None else [], head))
        restored = Restored(applier.state, meta, config, [*read_problems, *applier.problems], trace)
    restored.meta, restored.config, restored.started = meta, config, first is not None
    restored.problems = sorted([*meta_problems, *restored.problems], key=lambda p: p.line)
    return restored


def _unreadable(session_id: str, problems: list[LogProblem]) -> LogCorruptError:
    """The error for a log whose every line is damaged (not an empty log: that
    one is a session that has logged nothing): restoring it would give a
    memory that forgot the whole session without a word."""
    shown = "; ".join(f"line {p.line}: {p.error}" for p in problems[:_LINES_SHOWN])
    more = len(problems) - _LINES_SHOWN
    error = LogCorruptError(
        f"no record of session {session_id!r} can be read ({shown}"
        + (f"; and {more} more damaged lines" if more > 0 else "")
        + ")"
    )
    error.line = problems[0].line  # the first; the message names them
    return error


_LINES_SHOWN = 5


def _from_tail(
    store: ReversibleLogStore,
    session_id: str,
    new_state: StateFactory,
    load_prefix: PrefixLoader,
    trace_max_events: int,
) -> Restored | None:
    """The state rebuilt from the end of the log, or ``None`` when the log
    must be read from its start (no usable start, or a problem in the records
    after it, which a full read reports in its own words)."""
    problems: list[LogProblem] = []
    with _collector_paused():
        tail = checkpoint.read_tail(_lines_reversed(store, session_id, problems))
    if tail is None:
        return None
    trace = Trace(trace_max_events)
    state = _state_of_tail(tail, new_state, load_prefix, trace, problems)
    if state is None:
        return None
    start = tail.compaction.compaction_number if tail.compaction is not None else None
    return Restored(state, {}, CompactionMemoryConfig(), problems, trace, start)


def _lines_reversed(
    store: ReversibleLogStore, session_id: str, problems: list[LogProblem]
) -> Iterator[checkpoint.Line]:
    """The records of ``store``'s log newest first, each with its line when
    the store keeps lines (the context's messages are then held as lines)."""
    if isinstance(store, LineLogStore):
        return store.read_reversed_lines(session_id, problems)
    return ((record, None) for record in store.read_reversed(session_id, problems))


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a tail is read: the read
    keeps two objects per context message (the unbuilt message and its
    ``EntryMeta``: tens of thousands for a log without compactions), and
    each collection of the young generation during the read would walk them
    again. They form no cycles, so nothing is left for it to find; it is on
    again after, and its next collection walks them once.

    (Moving them to the oldest generation without that walk, with
    ``gc.freeze()`` and ``gc.unfreeze()``, was tried: it saves the walk, a
    fifth of the parse, but objects moved so do not count towards the next
    full collection, the only one that then frees any cycle among them: a
    process restoring memory after memory would hold such garbage far
    longer.)"""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _state_of_tail(
    tail: checkpoint.Tail,
    new_state: StateFactory,
    load_prefix: PrefixLoader,
    trace: Trace,
    problems: list[LogProblem],
) -> CompactionState | None:
    """The state the records of ``tail`` give from its start; ``None`` when a
    record after a checkpoint or a rewind cannot be applied (a read from the
    log's first record then reports it)."""
    state = new_state()
    stated = None
    if tail.compaction is not None and tail.checkpoint is not None:
        checkpoint.start_at(state, tail.compaction, tail.checkpoint, tail.kept)
        stated = tail.compaction.tokens_after
    elif tail.periodic is not None and tail.checkpoint is not None:
        checkpoint.start_at_periodic(state, tail.periodic, tail.checkpoint, tail.kept)
        stated = tail.periodic.context_tokens
    elif tail.rewind is not None and tail.prefix is not None:
        prefix = _state_of_tail(tail.prefix, new_state, load_prefix, Trace(0), problems)
        if prefix is None:
            return None
        state.rewind(prefix, tail.rewind)
        stated = tail.rewind.context_tokens
    applier = RecordApplier(state, trace=trace, load_prefix=load_prefix, stated_tokens=stated)
    applier.run(tail.records)
    if applier.problems and tail.start != "log":
        return None
    problems.extend(applier.problems)
    return state


def state_at(
    store: LogStore,
    session_id: str,
    point: LogPoint,
    *,
    config: CompactionMemoryConfig | None = None,
    model_name: str | None = None,
) -> CompactionState:
    """The state of the log at ``point`` (``memory.log.prefix``). Raises
    ``PointNotFoundError`` when the log has no such point."""
    prefix = _prefix(store, session_id, point)
    return read_state(prefix, session_id, config=config, model_name=model_name).state


def _prefix(store: LogStore, session_id: str, point: LogPoint) -> PrefixStore:
    # A prefix of a prefix is a prefix of the log itself.
    while isinstance(store, PrefixStore) and store.session_id == session_id:
        store = store.store
    return PrefixStore(store, session_id, point)


def _reversible(store: LogStore) -> bool:
    if isinstance(store, PrefixStore):
        return _reversible(store.store)
    return isinstance(store, ReversibleLogStore)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _meta(
    first: Mapping[str, Any] | None, session_id: str, problems: list[LogProblem]
) -> Mapping[str, Any]:
    """The log's ``session_meta`` (``{}`` when it has none, which is reported)."""
    meta = first if first is not None and first.get("type") == "session_meta" else {}
    if first is not None and not meta:
        problems.append(LogProblem(1, "the log does not start with a session_meta record"))
    elif meta.get("session_id") not in (None, session_id):
        problems.append(LogProblem(1, f"session_meta names session {meta.get('session_id')!r}"))
    return meta


def _config(
    meta: Mapping[str, Any],
    session_id: str,
    store: LogStore,
    given: CompactionMemoryConfig | None,
    problems: list[LogProblem],
) -> CompactionMemoryConfig:
    """The config in force: ``given`` (for ``session_id``), else the meta's."""
    if given is not None:
        return dataclasses.replace(given, session_id=session_id)
    stored_config = meta.get("config") or {}
    if not isinstance(stored_config, dict):
        problems.append(LogProblem(1, "session_meta config is not an object; defaults used"))
        stored_config = {}
    stored = {**stored_config, "session_id": session_id}
    base = store.store if isinstance(store, PrefixStore) else store
    if isinstance(base, JSONLLogStore):
        stored["log_base_path"] = str(base.base_path)
    return CompactionMemoryConfig.from_dict(stored)


def _role(meta: Mapping[str, Any], problems: list[LogProblem] | None) -> str | None:
    """The session_meta's ``system_role``; an unknown one is reported and read as system."""
    role = meta.get("system_role")
    if role in (None, "system", "developer"):
        return role
    if problems is not None:
        problems.append(LogProblem(1, f"session_meta system_role {role!r} is unknown; system used"))
    return None


# -- upgrading old logs -------------------------------------------------------------


def upgrade_records(
    records: Iterable[dict[str, Any]],
    *,
    session_id: str | None = None,
    model_name: str | None = None,
    problems: list[LogProblem] | None = None,
) -> list[dict[str, Any]]:
    """Return a session's log records in the current format.

    Older logs (the reference Motus format: no ``seq``, compaction records with
    only ``compaction_number``/``messages_compacted``/``summary``) gain every
    field a current record has: ``seq``, ``tokens``, ``unit``, ``unit_index``,
    ``context_tokens``, ``through_seq``, the compaction figures and, for the
    reference's compactions, the ``replayed_seqs`` and ``continuation`` that
    give back what it kept, computed by applying them exactly as
    ``restore_from_log`` would. Nothing a record already says is changed (its
    ``ts``, unknown fields, the meta's ``title``), so records in the current
    format come back equal (an undo's or a rewind's earlier context is read
    from the records upgraded before it). ``session_id`` defaults to the one in
    ``session_meta``. Unusable records are skipped and reported in
    ``problems`` (by record number); raises ``ConfigurationError`` for an
    invalid session id.
    """
    stream: Iterator[dict[str, Any]] = iter(records)
    first = next(stream, None)
    meta = first if first is not None and first.get("type") == "session_meta" else {}
    stored = dict(meta.get("config") or {})
    stored.update(session_id=session_id or meta.get("session_id") or str(uuid.uuid4()))
    config = CompactionMemoryConfig.from_dict(stored)
    model = model_name or _str(meta.get("model_name"))
    state = CompactionState(model_name=model, max_tool_result_tokens=config.max_tool_result_tokens)
    state.set_system_prompt(str(meta.get("system_prompt") or ""), _role(meta, problems))
    # The meta as logged (config included) stands, apart from a session id
    # given to replace it; what it lacks is what a current memory writes.
    assert config.session_id is not None
    computed = session_meta(
        state,
        config,
        session_id=config.session_id,
        parent_session_id=_str(meta.get("parent_session_id")),
        parent_seq=meta.get("parent_seq") if isinstance(meta.get("parent_seq"), int) else None,
    ).to_dict()
    logged = {k: v for k, v in meta.items() if k != "session_id" or not session_id}
    logged.setdefault(
        "config", {k: v for k, v in computed["config"].items() if k != "auto_compact"}
    )
    upgraded = [record_from_dict({**computed, **logged}).to_dict()]
    applier = RecordApplier(
        state,
        trace=Trace(0),
        load_prefix=_prefix_loader(upgraded, config.session_id, model),
        upgrade=lambda record: upgraded.append(record.to_dict()),
    )
    applier.run(itertools.chain([first] if first is not None else [], stream))
    if problems is not None:
        problems.extend(applier.problems)
    return upgraded


def _prefix_loader(
    upgraded: list[dict[str, Any]], session_id: str, model: str | None
) -> PrefixLoader:
    """What an undo or a rewind reads from earlier in a log being upgraded:
    the state at a point of the records upgraded so far (current records,
    which restore as the live memory had them). They are copied into a store
    only when a record needs them, and then only those not copied yet."""
    store = InMemoryLogStore()
    copied = 0

    def load(point: LogPoint) -> CompactionState:
        nonlocal copied
        for record in upgraded[copied:]:
            store.append(session_id, record)
        copied = len(upgraded)
        return state_at(store, session_id, point, model_name=model)

    return load
