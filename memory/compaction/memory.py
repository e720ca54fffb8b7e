"""``CompactionMemory``: compaction plus a conversation log and exact restore.

Every message and every compaction event goes to the session's log as a typed
record (``memory.log.records``) through the memory's recorder.
``restore_from_log`` applies the log's records through the same state methods
that built the live context (``memory.compaction.restore``), so the restored
``get_context()`` equals the live one: summary, kept messages, the pending
request, truncated tool results and placeholder results included.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Self

from ..clients.base import ChatClient
from ..config import CompactionMemoryConfig
from ..errors import CompactionError
from ..log.jsonl import JSONLLogStore
from ..log.prefix import LogPoint
from ..log.recorder import Recorder
from ..log.records import Compaction, Rewind, SessionMeta, now_iso
from ..log.store import LogProblem, LogStore
from ..messages import ChatMessage
from ..session_state import CompactionSessionState
from ..state import EntryMeta
from ..units import TurnTracker
from . import restore
from .base import CompactionBase, OnCompact
from .checkpoint import Checkpoint
from .meta import session_meta
from .state import Head, PriorLoader
from .summariser.with_model import CompactFn
from .tools import build_memory_tools


class CompactionMemory(CompactionBase):
    """A compacting memory that logs every message and compaction event.

    The log goes to ``log_store`` when given, else to a ``JSONLLogStore`` in
    ``config.log_base_path``; with neither, nothing is logged. A log write that
    fails raises ``LogError`` from ``add_message``: the message is then in the
    context but not in the log, and the caller decides whether to go on.

    With a log, ``build_tools()`` gives the agent two memory tools (search the
    full log, read a past summary; see ``memory.compaction.tools``) unless
    ``enable_memory_tools=False``; every compaction can be undone in turn
    (``revert_last_compaction``) and the session can be rewound (``rewind``).
    """

    def __init__(
        self,
        *,
        config: CompactionMemoryConfig | None = None,
        compact_fn: CompactFn | None = None,
        on_compact: OnCompact | None = None,
        log_store: LogStore | None = None,
        client: ChatClient | None = None,
        model_name: str | None = None,
        compaction_timeout_s: float = 120.0,
        parent_session_id: str | None = None,
        parent_seq: int | None = None,
        enable_memory_tools: bool = True,
    ) -> None:
        super().__init__(
            config=config,
            compact_fn=compact_fn,
            on_compact=on_compact,
            client=client,
            model_name=model_name,
            compaction_timeout_s=compaction_timeout_s,
            enable_memory_tools=enable_memory_tools,
        )
        session_id = self.config.session_id or str(uuid.uuid4())
        if log_store is None and self.config.log_base_path is not None:
            log_store = JSONLLogStore(self.config.log_base_path, fsync=self.config.fsync)
        self._recorder = Recorder(session_id, log_store, self._session_meta)
        self._parent_session_id = parent_session_id
        self._parent_seq = parent_seq
        self.restore_problems: list[LogProblem] = []

    @property
    def session_id(self) -> str:
        return self._recorder.session_id

    @property
    def log_store(self) -> LogStore | None:
        return self._recorder.store

    @property
    def parent_session_id(self) -> str | None:
        return self._parent_session_id

    @property
    def rewind_count(self) -> int:
        """The number of the session's newest rewind (0: none)."""
        return self._state.rewind_number

    def build_tools(self) -> list[Callable[..., Any]]:
        """``search_conversation_log`` and ``read_compaction_summary`` over this
        session's log (see ``memory.compaction.tools``); none without a log
        store or with ``enable_memory_tools=False``."""
        if not self._enable_memory_tools or self.log_store is None:
            return []
        return build_memory_tools(self)

    def _session_meta(self) -> SessionMeta:
        return session_meta(
            self._state,
            self.config,
            session_id=self.session_id,
            memory_type=self.memory_type,
            parent_session_id=self._parent_session_id,
            parent_seq=self._parent_seq,
        )

    # -- reading the log back ----------------------------------------------------

    def state_at(self, point: LogPoint) -> CompactionMemory:
        """A memory (without a log of its own) holding this session's state at
        ``point`` of its log (``memory.log.prefix``): after a message, before a
        compaction or a rewind. What "the model saw" for reply ``seq`` is
        ``state_at(LogPoint("before_message", seq)).get_context()``. Raises
        ``LogError`` without a log, ``PointNotFoundError`` when the log has no
        such point.
        """
        self._check_logged("read an earlier point")
        state = restore.state_at(
            self._log(), self.session_id, point, config=self.config, model_name=self.model_name
        )
        memory = CompactionMemory(config=self.config, model_name=self.model_name)
        memory._state = state
        return memory

    def _prior_loader(self) -> PriorLoader | None:
        if self.log_store is None:
            return None

        def load(head: Head) -> restore.Prior:
            state = restore.state_at(
                self._log(),
                self.session_id,
                restore.before_compaction(head),
                config=self.config,
                model_name=self.model_name,
            )
            return restore.prior_of(state)

        return load

    def _log(self) -> LogStore:
        store = self.log_store
        assert store is not None
        return store

    def _check_logged(self, what: str) -> None:
        if self.log_store is None or not self._recorder.started:
            raise CompactionError(f"cannot {what}: this memory has no log to read it from")

    # -- rewind ------------------------------------------------------------------

    def rewind(self, target: LogPoint, *, reason: str = "") -> int:
        """Continue this session in place from an earlier point of its log.

        The context (instructions and tools included) becomes what a restore
        of the log up to ``target`` gives: ``LogPoint("after_message", seq)``
        (a turn-unit boundary: A, C, or B with all its results),
        ``LogPoint("before_compaction", n)``, or ``LogPoint("before_rewind",
        n)`` (which undoes rewind ``n``). Nothing is deleted: a ``rewind``
        record is appended, the records after the target stay in the log
        (no longer in force), and seqs, turn units and compaction numbers keep
        growing. Returns the rewind's number. Raises ``CompactionError`` when
        the memory has no log or the target is inside a tool round (a call
        without its result), ``PointNotFoundError`` when the log has no such point.
        """
        self._check_logged("rewind")
        state = self._state
        prefix = restore.state_at(
            self._log(), self.session_id, target, config=self.config, model_name=self.model_name
        )
        if not prefix.at_boundary:
            raise CompactionError(
                f"cannot rewind to {target}: it is inside a tool round (calls "
                f"{', '.join(prefix.tracker.pending)} have no result there); rewind to the "
                "end of the round"
            )
        record = Rewind(
            ts=now_iso(),
            rewind_number=state.rewind_number + 1,
            target=target.to_dict(),
            through_seq=state.next_seq - 1,
            unit_index=state.tracker.unit_index,
            compaction_number=state.compaction_number,
            reason=reason,
            clearing_number=state.clearing_number or None,
        )
        state.rewind(prefix, record)
        record = dataclasses.replace(record, context_tokens=self.estimate_context_tokens())
        self._floor_warned = False
        self._trace.add("rewind", rewind_number=record.rewind_number, target=record.target)
        self._recorder.record(record)
        return state.rewind_number

    # -- compactions made elsewhere ---------------------------------------------

    def record_external_compaction(
        self,
        summary: str,
        *,
        continuation: str | None = None,
        replayed_seqs: list[int] | tuple[int, ...] = (),
        trigger: str | None = None,
        tokens_before: int | None = None,
        model: str | None = None,
        extra: dict[str, object] | None = None,
    ) -> Compaction:
        """Apply and log a compaction another program made (an imported agent's own).

        The context becomes ``[continuation, *kept]``: ``continuation`` is the
        exact text of the summary message that program put in its context
        (``None``: this library's template around ``summary``), and the kept
        messages are those of the context whose seq ``replayed_seqs`` lists.
        ``tokens_before`` is that program's own figure (tokens) when it has
        one, else this memory's estimate. ``extra`` is kept on the record.
        Applied like a live compaction and a restore, so a restore rebuilds
        the same context. Returns the record. Raises ``CompactionError`` when
        a kept seq is not in the context.
        """
        state = self._state
        wanted = set(replayed_seqs)
        entries = state.entries()
        folded = [m.seq for _, m, _ in entries if m.seq is not None and m.seq not in wanted]
        before = self.estimate_context_tokens()
        head = Head(0, None, summary, continuation, 0, None)
        record = Compaction(
            ts=now_iso(),
            compaction_number=state.compaction_number + 1,
            status="ok",
            trigger=trigger,
            through_seq=state.next_seq - 1,
            summarized_seqs=[min(folded), max(folded)] if folded else None,
            replayed_seqs=sorted(wanted),
            messages_compacted=len(entries) - len(wanted),
            messages_replayed=len(wanted),
            summary=summary,
            summary_tokens=self.estimate_message_tokens(head.message()),
            tokens_before=before if tokens_before is None else tokens_before,
            model=model,
            continuation=continuation,
            checkpoint=Checkpoint.capture(state).to_dict(),
            extra=dict(extra or {}),
        )
        self._apply_compaction(record)
        # Known only once applied; the context does not depend on it.
        record = dataclasses.replace(record, tokens_after=self.estimate_context_tokens())
        self._recorder.record(record)
        return record

    # -- restore, state and forks ----------------------------------------------

    @classmethod
    def restore_from_log(
        cls,
        session_id: str,
        *,
        log_store: LogStore | None = None,
        log_base_path: str | Path | None = None,
        config: CompactionMemoryConfig | None = None,
        client: ChatClient | None = None,
        model_name: str | None = None,
        compact_fn: CompactFn | None = None,
        on_compact: OnCompact | None = None,
        system_prompt: str | None = None,
        full_replay: bool = False,
    ) -> Self:
        """Rebuild the memory of ``session_id`` from its log; it keeps appending there.

        The config, model and system prompt come from the log's ``session_meta``
        unless given. Records that cannot be read (a torn last line after a
        crash, a corrupt line) are skipped and listed in ``restore_problems``
        and the trace, with their line numbers. Raises ``SessionNotFoundError``
        when the session has no log, ``LogCorruptError`` when no line of it can
        be read (an empty log restores to an empty memory, which writes its
        ``session_meta`` there first), ``ConfigurationError`` for a bad id.

        The log is read from its end back to the checkpoint of its latest
        compaction or its latest rewind (``memory.compaction.checkpoint``) and
        only the records after it are applied, so the time follows the live
        context, not the log's length; undoing a compaction later reads what
        it needs from the log. ``full_replay=True`` reads every record from
        the first, as logs without checkpoints always are, and reports the
        problems of the whole log rather than of the records read; both give
        the same memory.
        """
        if log_store is None:
            base = log_base_path or (config.log_base_path if config else None) or "."
            log_store = JSONLLogStore(base, fsync=bool(config and config.fsync))
        restored = restore.read_state(
            log_store, session_id, config=config, model_name=model_name, full_replay=full_replay
        )
        meta = restored.meta
        parent_seq = meta.get("parent_seq")
        memory = cls(
            config=restored.config,
            compact_fn=compact_fn,
            on_compact=on_compact,
            log_store=log_store,
            client=client,
            model_name=restored.state.model_name,
            parent_session_id=_str(meta.get("parent_session_id")),
            parent_seq=parent_seq if isinstance(parent_seq, int) else None,
        )
        memory._state = restored.state
        memory._trace = restored.trace
        memory._recorder.started = restored.started
        memory._recorder.adopted = True
        memory._report_restore(restored)
        if system_prompt is not None:
            memory.set_system_prompt(system_prompt)
        return memory

    def _report_restore(self, restored: restore.Restored) -> None:
        """``restore_problems``, the trace and the logger hear what the restore found."""
        problems = restored.problems
        self.restore_problems.extend(problems)
        self._trace.add(
            "restored",
            session_id=self.session_id,
            messages=self.next_seq,
            compactions=self.compaction_count,
            problems=len(problems),
            from_compaction=restored.start,
        )
        for problem in problems:
            self._trace.add("log_problem", line=problem.line, detail=str(problem))
            restore.logger.warning("session %s: %s", self.session_id, problem)

    def get_session_state(self) -> CompactionSessionState:
        """Everything needed to continue this session (see ``CompactionSessionState``)."""
        state = self._state
        base = self.config.log_base_path
        head = state.head
        return CompactionSessionState(
            system_prompt=state.system_prompt,
            system_role=state.system_role,
            messages=[m.to_dict() for m in state.messages],
            model_name=state.model_name,
            session_id=self.session_id,
            parent_session_id=self._parent_session_id,
            log_base_path=str(base) if base is not None else None,
            config=self.config.to_dict(),
            summary=state.summary,
            compaction_count=state.compaction_number,
            next_seq=state.next_seq,
            seqs=[m.seq for m in state.meta],
            units=_unit_pairs(state.meta),
            tracker={
                "unit_index": state.tracker.unit_index,
                "unit": state.tracker.unit,
                "pending": list(state.tracker.pending),
                "answered": sorted(state.tracker.answered),
            },
            compaction_in_force=(
                {
                    "number": head.number,
                    "through_seq": head.through_seq,
                    "kept": head.kept,
                    "continuation": head.continuation,
                }
                if head is not None
                else None
            ),
            rewind_count=state.rewind_number,
            tools=list(state.tool_schemas),
        )

    @classmethod
    def restore(
        cls,
        state: CompactionSessionState,
        *,
        log_store: LogStore | None = None,
        client: ChatClient | None = None,
        compact_fn: CompactFn | None = None,
        on_compact: OnCompact | None = None,
    ) -> Self:
        """Rebuild a memory from ``get_session_state()`` output; it keeps logging
        to the same session (``log_store``, or the state's ``log_base_path``).
        Undoing the compaction in force then reads what came before it from
        that log."""
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
        live = memory._state
        live.set_system_prompt(state.system_prompt, state.system_role)
        live.set_tools(state.tools)
        memory._recorder.started = state.next_seq > 0 and memory.log_store is not None
        messages = [ChatMessage.from_dict(m) for m in state.messages]
        metas = [
            EntryMeta(seq, unit, idx)
            for seq, (unit, idx) in zip(state.seqs, state.units, strict=True)
        ]
        live.replace(
            [(m, meta, live.message_tokens(m)) for m, meta in zip(messages, metas, strict=True)]
        )
        in_force = state.compaction_in_force
        if state.summary is not None and in_force is not None:
            live.head = Head(
                number=int(in_force["number"]),
                through_seq=in_force.get("through_seq"),
                summary=state.summary,
                continuation=in_force.get("continuation"),
                kept=int(in_force.get("kept", 0)),
                prior=None,
            )
        live.compaction_number = state.compaction_count
        live.rewind_number = state.rewind_count
        live.next_seq = state.next_seq
        tracker = state.tracker
        live.tracker = TurnTracker(
            int(tracker.get("unit_index", -1)),
            tracker.get("unit"),
            dict.fromkeys(tracker.get("pending", ())),
            set(tracker.get("answered", ())),
        )
        return memory

    def _fork_options(self) -> dict[str, Any]:
        """What a subclass's constructor needs besides these to make a fork
        (known before the fork's first record, its ``session_meta``)."""
        return {}

    def fork(self, *, session_id: str | None = None) -> Self:
        """A new session that starts from this context and points at this one.

        The fork gets its own log (same store): its first records rebuild this
        context (a ``fork`` compaction carrying the summary in force, then the
        context's messages), so it restores on its own; the parent's log is
        untouched.
        """
        config = CompactionMemoryConfig.from_dict(
            {**self.config.to_dict(), "session_id": session_id}
        )
        child = type(self)(
            config=config,
            compact_fn=self._compact_fn,
            on_compact=self._on_compact,
            log_store=self.log_store,
            client=self._client,
            model_name=self.model_name,
            compaction_timeout_s=self._compaction_timeout_s,
            parent_session_id=self.session_id,
            parent_seq=self.next_seq - 1,
            enable_memory_tools=self._enable_memory_tools,
            **self._fork_options(),
        )
        child._compact_model_name = self._compact_model_name
        child.calibration = self.calibration
        state = child._state
        state.set_tools(self._state.tool_schemas)
        state.set_system_prompt(self.system_prompt, self.system_role)
        entries = self._state.entries()
        if self.summary is not None:
            seed = Compaction(
                ts=now_iso(),
                compaction_number=1,
                status="ok",
                trigger="fork",
                through_seq=-1,
                replayed_seqs=[],
                messages_compacted=0,
                messages_replayed=0,
                summary=self.summary,
                continuation=self._state.head.continuation if self._state.head else None,
                ledger=self._state.head.ledger.to_record() or None if self._state.head else None,
                summary_tokens=entries[0][2],
                checkpoint=Checkpoint.capture(state).to_dict(),
                extra={"summarized_seqs": None},
            )
            # Its figures, as a restore computes them: the record is then
            # current, and an import of the fork's log keeps it unchanged.
            tokens_before = state.context_tokens()
            child._apply_compaction(seed)
            seed = dataclasses.replace(
                seed, tokens_before=tokens_before, tokens_after=state.context_tokens()
            )
            child._recorder.record(seed)
            entries = entries[1:]
        for message, meta, tokens in entries:
            if meta.seq is None:
                continue  # a placeholder result: the fork derives it again
            ingested = state.ingest(message, context_message=message, tokens=tokens)
            child._trace_message(ingested)
            if child._recorder.active:
                child._recorder.record(state.message_record(ingested))
        return child


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _unit_pairs(meta: Sequence[EntryMeta]) -> list[list[Any]]:
    """``[unit, unit_index]`` of each context message, for a session state.
    The messages of one turn unit (a call and its results) share one pair
    list: a long context's snapshot is then a list per unit, not per message,
    for its garbage collection to walk (its pairs are to be read, not edited)."""
    pairs: list[list[Any]] = []
    last: list[Any] | None = None
    for m in meta:
        if last is None or m.unit != last[0] or m.unit_index != last[1]:
            last = [m.unit, m.unit_index]
        pairs.append(last)
    return pairs
