"""Rebuilding a ``CompactionMemory``: from its log or a state, as a fork, or upgrading old logs.

Everything here drives the memory's own ``_apply_*`` and ``_ingest`` methods,
the code that built the live context, so whatever way a memory is rebuilt its
context is the one it had. ``Replay`` reads a log's records in order:

- a ``message`` with ``seq`` and ``tokens`` enters the context as recorded (its
  truncated ``context_message`` and token count are used, never recomputed);
  one with ``provider_tokens`` teaches ``calibration`` again, against the
  context size the log last stated (the request that reply answered);
- a ``compaction`` keeps the messages its ``replayed_seqs`` lists; one written
  by the reference implementation (no ``through_seq``) keeps what its
  ``messages_compacted`` says it kept (``memory.compaction.reference``);
- ``compaction_revert``, ``system_prompt`` and ``reset`` change the context as
  they did live; ``compaction_failed`` and ``compaction_warning`` only enter
  the trace; a record type this library does not know is skipped.

A record that cannot be used is skipped and reported as a ``LogProblem`` with
its record number; the rest still load. Messages missing from the log (a gap
in ``seq``: their write failed, and the live memory raised ``LogError``) are
reported too, at the record that follows the gap.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from ..clients.base import ChatClient
from ..config import CompactionMemoryConfig
from ..errors import LogCorruptError, MotusMemoryError
from ..log.in_memory import InMemoryLogStore
from ..log.jsonl import JSONLLogStore
from ..log.records import (
    RESET_SCOPE_MESSAGES,
    Compaction,
    CompactionFailed,
    CompactionRevert,
    CompactionWarning,
    LogRecord,
    MessageRecord,
    Reset,
    SessionMeta,
    SystemPromptChange,
    UnknownRecord,
    now_iso,
    record_from_dict,
)
from ..log.store import LogProblem, LogStore, ReversibleLogStore
from ..messages import ChatMessage
from ..session_state import CompactionSessionState
from ..units import TurnTracker
from . import checkpoint
from .base import EntryMeta, OnCompact
from .reference import reference_cut
from .summarize import CompactFn

if TYPE_CHECKING:
    from .memory import CompactionMemory

M = TypeVar("M", bound="CompactionMemory")
logger = logging.getLogger("memory.compaction")


class Replay:
    """Applies a log's records to ``memory``, collecting problems.

    With ``upgrade``, every record is also written again through the memory's
    recorder in the current format: what the record says stands, and the
    fields it lacks are filled with what the replay computed.
    """

    def __init__(self, memory: CompactionMemory, *, upgrade: bool = False) -> None:
        self.memory = memory
        self.upgrade = upgrade
        self.problems: list[LogProblem] = []
        self._number = 0
        # The context's size as the log last stated it (tools included): the
        # estimate of the request a reply with provider usage answered.
        self._stated_tokens: int | None = None

    def run(self, records: Iterable[Mapping[str, Any] | LogRecord]) -> None:
        for number, raw in enumerate(records, start=1):
            self._number = number
            try:
                self.apply(raw if isinstance(raw, LogRecord) else self._typed(raw))
            except (MotusMemoryError, KeyError, TypeError, ValueError) as exc:
                self.problems.append(LogProblem(number, f"record {number} unusable: {exc}"))

    def _typed(self, raw: Mapping[str, Any]) -> LogRecord:
        # A restore reads what a store parsed from JSON (clean, and never written
        # back); an upgrade may be handed any dicts, and writes them again.
        upgrade = self.upgrade
        return record_from_dict(raw, exact=upgrade, parsed_json=not upgrade)

    def apply(self, record: LogRecord) -> None:
        self._apply(record)
        stated = record.tokens_after if isinstance(record, Compaction) else None
        if isinstance(record, MessageRecord | Reset | CompactionRevert):
            stated = record.context_tokens
        if stated is not None:
            self._stated_tokens = stated

    def _apply(self, record: LogRecord) -> None:
        memory = self.memory
        if isinstance(record, MessageRecord):
            self._message(record)
            return
        if isinstance(record, SessionMeta):
            return  # read before the replay
        computed: LogRecord = record
        through = memory.next_seq - 1
        if isinstance(record, Compaction):
            computed = self._compaction(record)
        elif isinstance(record, CompactionRevert):
            if record.reverts is None:
                raise LogCorruptError("compaction_revert record without 'reverts'")
            memory._apply_revert(record.reverts)
            computed = CompactionRevert(
                reverts=record.reverts,
                through_seq=through,
                context_tokens=memory.estimate_context_tokens(),
            )
        elif isinstance(record, SystemPromptChange):
            if record.system_prompt is None:
                raise LogCorruptError("system_prompt record without a prompt")
            memory._apply_system_prompt(record.system_prompt, record.system_role)
            computed = SystemPromptChange(
                system_prompt=record.system_prompt,
                through_seq=through,
                system_role=record.system_role,
            )
        elif isinstance(record, Reset):
            if record.scope == RESET_SCOPE_MESSAGES:
                memory._apply_clear_messages()
            else:
                memory._apply_reset()
            computed = Reset(
                through_seq=through,
                context_tokens=memory.estimate_context_tokens(),
                scope=record.scope,
            )
        elif isinstance(record, CompactionFailed | CompactionWarning):
            computed = type(record)(through_seq=through)
            memory._trace_event(record)
        elif not isinstance(record, UnknownRecord):
            raise LogCorruptError(f"unknown record type {record.type_name!r}")
        self._rewrite(record, computed)

    def _message(self, record: MessageRecord) -> None:
        memory = self.memory
        if record.message is None:
            raise LogCorruptError("message record without a chat message")
        seq = record.seq
        if seq is not None and seq < memory.next_seq:
            raise LogCorruptError(f"message seq {seq} does not follow seq {memory.next_seq - 1}")
        if seq is not None and seq > memory.next_seq:
            missing = f"{memory.next_seq}" + (f"-{seq - 1}" if seq - 1 > memory.next_seq else "")
            self.problems.append(
                LogProblem(
                    self._number,
                    f"message seq {missing} is missing from the log (never written): "
                    "the context lacks it",
                )
            )
        legacy = seq is None  # the reference logged messages without seq or tokens
        model = memory.model_name
        if record.provider_tokens is not None and self._stated_tokens is not None and model:
            # Learn the calibration again, as the live memory did from this reply.
            memory.calibration.observe(model, self._stated_tokens, record.provider_tokens)
        ingested = memory._ingest(
            record.message,
            seq=seq,
            context_message=record.context_message or (None if legacy else record.message),
            tokens=record.tokens,
            trace=False,
        )
        if self.upgrade:
            self._rewrite(record, memory._message_record(ingested))

    def _compaction(self, record: Compaction) -> Compaction:
        memory = self.memory
        if record.summary is None:
            raise LogCorruptError("compaction record without a summary")
        number = record.compaction_number
        if record.through_seq is not None:
            if number is not None and number <= memory.compaction_count:
                raise LogCorruptError(
                    f"compaction number {number} does not follow number {memory.compaction_count}"
                )
            if record.through_seq >= memory.next_seq:
                raise LogCorruptError(
                    f"compaction covers messages up to seq {record.through_seq}, "
                    f"but the log so far ends at seq {memory.next_seq - 1}"
                )
        tokens_before = memory.estimate_context_tokens()
        applied = record
        if record.through_seq is None:
            applied = _reference_compaction(memory, record)
        memory._apply_compaction(applied)
        return Compaction(
            compaction_number=memory.compaction_count,
            status="ok",
            through_seq=memory.next_seq - 1,
            replayed_seqs=applied.replayed_seqs or [],
            messages_replayed=len(applied.replayed_seqs or []),
            tokens_before=tokens_before,
            tokens_after=memory.estimate_context_tokens(),
            summary_tokens=memory._tokens[0],
            continuation=applied.continuation,
            checkpoint=checkpoint.Checkpoint.capture(memory).to_dict() if self.upgrade else None,
        )

    def _rewrite(self, original: LogRecord, computed: LogRecord) -> None:
        if self.upgrade:
            merged = {**computed.to_dict(), **original.to_dict()}
            self.memory._recorder.record(record_from_dict(merged))


def _reference_compaction(memory: CompactionMemory, record: Compaction) -> Compaction:
    entries = memory._entries()
    cut = reference_cut(
        [message for message, _, _ in entries], record.messages_compacted, record.summary or ""
    )
    replayed = [seq for i in cut.kept if (seq := entries[i][1].seq) is not None]
    # Its own token counts, if any, are of another template: count again.
    return dataclasses.replace(
        record, replayed_seqs=replayed, continuation=cut.continuation, summary_tokens=None
    )


# -- restore ------------------------------------------------------------------------


def restore_from_log(
    cls: type[M],
    session_id: str,
    *,
    log_store: LogStore,
    system_prompt: str | None,
    full_replay: bool = False,
    **options: Any,
) -> M:
    """See ``CompactionMemory.restore_from_log``.

    A ``ReversibleLogStore`` is read from its end to the latest checkpoint
    (``memory.compaction.checkpoint``) and the records after it are replayed;
    any other store, a log without a usable checkpoint, a tail that does not
    replay cleanly and ``full_replay`` replay the whole log from its start.
    ``options`` are ``_new_memory``'s.
    """

    def build(first: Mapping[str, Any] | None, problems: list[LogProblem]) -> M:
        return _new_memory(cls, session_id, first, problems, log_store=log_store, **options)

    memory = None
    if not full_replay and isinstance(log_store, ReversibleLogStore):
        memory = _restore_from_tail(session_id, log_store, build)
    if memory is None:
        problems: list[LogProblem] = []
        records = log_store.read(session_id, problems)
        first = next(records, None)
        memory = build(first, problems)
        replay = Replay(memory)
        replay.run(itertools.chain([first] if first is not None else [], records))
        _restored(memory, session_id, [*replay.problems, *problems], None)
    if system_prompt is not None:
        memory.set_system_prompt(system_prompt)
    return memory


def _restore_from_tail(
    session_id: str,
    log_store: ReversibleLogStore,
    build: Callable[[Mapping[str, Any] | None, list[LogProblem]], M],
) -> M | None:
    """The memory rebuilt from the end of its log, or ``None`` when the log
    must be replayed from its start (no usable checkpoint, or a problem in
    the records after it, which a full replay reports in its own words)."""
    problems: list[LogProblem] = []
    head = log_store.read(session_id)
    first = next(head, None)
    getattr(head, "close", lambda: None)()  # a generator holding a file or a cursor
    tail = checkpoint.read_tail(log_store.read_reversed(session_id, problems))
    if tail is None:
        return None
    problems.sort(key=lambda problem: problem.line)  # found backwards
    records = tail.records
    memory = build(first, problems)
    if tail.start is not None:
        checkpoint.start_at(memory, tail)
    replay = Replay(memory)
    if tail.start is not None:
        replay._stated_tokens = tail.start.tokens_after
    replay.run(records)
    if replay.problems and tail.start is not None:
        return None
    start = tail.start.compaction_number if tail.start is not None else None
    _restored(memory, session_id, [*replay.problems, *problems], start)
    return memory


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


def _new_memory(
    cls: type[M],
    session_id: str,
    first: Mapping[str, Any] | None,
    problems: list[LogProblem],
    *,
    log_store: LogStore,
    config: CompactionMemoryConfig | None,
    client: ChatClient | None,
    model_name: str | None,
    compact_fn: CompactFn | None,
    on_compact: OnCompact | None,
) -> M:
    """A memory set up from the log's first record, its ``session_meta``,
    that appends to ``session_id``'s log (what in it cannot be used is added
    to ``problems``)."""
    meta = _meta(first, session_id, problems)
    if config is None:
        stored_config = meta.get("config") or {}
        if not isinstance(stored_config, dict):
            problems.append(LogProblem(1, "session_meta config is not an object; defaults used"))
            stored_config = {}
        stored = {**stored_config, "session_id": session_id}
        if isinstance(log_store, JSONLLogStore):
            stored["log_base_path"] = str(log_store.base_path)
        config = CompactionMemoryConfig.from_dict(stored)
    memory = cls(
        config=config,
        compact_fn=compact_fn,
        on_compact=on_compact,
        log_store=log_store,
        client=client,
        model_name=model_name or meta.get("model_name"),
        parent_session_id=meta.get("parent_session_id"),
        parent_seq=meta.get("parent_seq"),
    )
    memory._recorder.session_id = session_id
    memory._recorder.started = first is not None
    memory._apply_system_prompt(str(meta.get("system_prompt") or ""), _role(meta, problems))
    return memory


def _restored(
    memory: CompactionMemory, session_id: str, problems: list[LogProblem], start: int | None
) -> None:
    """Report ``problems`` (``restore_problems``, the trace, the logger) and
    trace the restore; ``start`` is the compaction whose checkpoint it started
    at (``None``: the log's first record)."""
    memory.restore_problems.extend(problems)
    memory._trace.add(
        "restored",
        session_id=session_id,
        messages=memory.next_seq,
        compactions=memory.compaction_count,
        problems=len(problems),
        from_compaction=start,
    )
    for problem in problems:
        memory._trace.add("log_problem", line=problem.line, detail=str(problem))
        logger.warning("session %s: %s", session_id, problem)


def _role(meta: Mapping[str, Any], problems: list[LogProblem] | None) -> str | None:
    """The session_meta's ``system_role``; an unknown one is reported and read as system."""
    role = meta.get("system_role")
    if role in (None, "system", "developer"):
        return role
    if problems is not None:
        problems.append(LogProblem(1, f"session_meta system_role {role!r} is unknown; system used"))
    return None


def restore_from_state(
    cls: type[M],
    state: CompactionSessionState,
    *,
    log_store: LogStore | None,
    client: ChatClient | None,
    compact_fn: CompactFn | None,
    on_compact: OnCompact | None,
) -> M:
    """See ``CompactionMemory.restore``."""
    config = CompactionMemoryConfig.from_dict(
        {**state.config, "session_id": state.session_id, "log_base_path": state.log_base_path}
    )
    memory = cls(
        config=config,
        compact_fn=compact_fn,
        on_compact=on_compact,
        log_store=log_store,
        client=client,
        model_name=state.model_name,
        parent_session_id=state.parent_session_id,
    )
    memory._apply_system_prompt(state.system_prompt, state.system_role)
    memory._recorder.started = state.next_seq > 0 and memory.log_store is not None
    messages = [ChatMessage.from_dict(m) for m in state.messages]
    metas = [
        EntryMeta(seq, unit, idx) for seq, (unit, idx) in zip(state.seqs, state.units, strict=True)
    ]
    memory._replace_context(
        [
            (m, meta, memory.estimate_message_tokens(m))
            for m, meta in zip(messages, metas, strict=True)
        ]
    )
    memory._summary = state.summary
    memory._compaction_count = state.compaction_count
    memory._next_seq = state.next_seq
    tracker = state.tracker
    memory._tracker = TurnTracker(
        int(tracker.get("unit_index", -1)),
        tracker.get("unit"),
        dict.fromkeys(tracker.get("pending", ())),
        set(tracker.get("answered", ())),
    )
    return memory


def fork(parent: M, *, session_id: str | None) -> M:
    """See ``CompactionMemory.fork``: the child's first records rebuild the parent's context."""
    config = CompactionMemoryConfig.from_dict({**parent.config.to_dict(), "session_id": session_id})
    child = type(parent)(
        config=config,
        compact_fn=parent._compact_fn,
        on_compact=parent._on_compact,
        log_store=parent.log_store,
        client=parent._client,
        model_name=parent.model_name,
        compaction_timeout_s=parent._compaction_timeout_s,
        parent_session_id=parent.session_id,
        parent_seq=parent.next_seq - 1,
        enable_memory_tools=parent._enable_memory_tools,
    )
    child._compact_model_name = parent._compact_model_name
    child.calibration = parent.calibration
    child.set_tools(parent.tool_schemas)
    child._apply_system_prompt(parent.system_prompt, parent.system_role)
    entries = parent._entries()
    if parent.summary is not None:
        seed = Compaction(
            ts=now_iso(),
            compaction_number=1,
            status="ok",
            trigger="fork",
            through_seq=-1,
            replayed_seqs=[],
            messages_compacted=0,
            messages_replayed=0,
            summary=parent.summary,
            summary_tokens=entries[0][2],
            checkpoint=checkpoint.Checkpoint.capture(child).to_dict(),
            extra={"summarized_seqs": None},
        )
        child._apply_compaction(seed)
        child._recorder.record(seed)
        entries = entries[1:]
    for message, meta, tokens in entries:
        if meta.seq is None:
            continue  # a placeholder result: the fork derives it again
        child._record_message(child._ingest(message, context_message=message, tokens=tokens))
    return child


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
    give back what it kept, computed by replaying them exactly as
    ``restore_from_log`` would. Nothing a record already says is changed (its
    ``ts``, unknown fields, the meta's ``title``), so records in the current
    format come back equal. ``session_id`` defaults to the one in
    ``session_meta``. Unusable records are skipped and reported in
    ``problems`` (by record number); raises ``ConfigurationError`` for an
    invalid session id.
    """
    from .memory import CompactionMemory

    stream: Iterator[dict[str, Any]] = iter(records)
    first = next(stream, None)
    meta = first if first is not None and first.get("type") == "session_meta" else {}
    stored = dict(meta.get("config") or {})
    stored.update(
        session_id=session_id or meta.get("session_id") or str(uuid.uuid4()), auto_compact=False
    )
    store = InMemoryLogStore()
    memory = CompactionMemory(
        config=CompactionMemoryConfig.from_dict(stored),
        log_store=store,
        model_name=model_name or meta.get("model_name"),
        parent_session_id=meta.get("parent_session_id"),
        parent_seq=meta.get("parent_seq"),
    )
    memory._apply_system_prompt(str(meta.get("system_prompt") or ""), _role(meta, problems))
    # The replay runs with auto-compaction off; the meta as logged (config
    # included) stands, apart from a session id given to replace it.
    logged = {k: v for k, v in meta.items() if k != "session_id" or not session_id}
    computed = memory._session_meta().to_dict()
    logged.setdefault(
        "config", {k: v for k, v in computed["config"].items() if k != "auto_compact"}
    )
    upgraded_meta = record_from_dict({**computed, **logged})
    memory._recorder.meta = lambda: upgraded_meta
    replay = Replay(memory, upgrade=True)
    replay.run(itertools.chain([first] if first is not None else [], stream))
    if problems is not None:
        problems.extend(replay.problems)
    if not store.exists(memory.session_id):
        store.append(memory.session_id, upgraded_meta)
    return list(store.read(memory.session_id))
