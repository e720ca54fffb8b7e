"""``CompactionMemory``: compaction plus a conversation log and exact restore.

Every message and every compaction event is appended to the session's log
(see ``memory.log.records``). ``restore_from_log`` replays the log through the
same code path that built the live context, so the restored ``get_context()``
equals the live one: summary, replayed messages, the pending request,
truncated tool results and placeholder results included.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple, Self, cast

from .base import EntryMeta, Ingested
from .clients.base import ChatClient
from .compaction_base import CompactionBase, OnCompact, Undo
from .config import CompactionMemoryConfig
from .errors import LogCorruptError, MotusMemoryError, SessionExistsError
from .log import records as rec
from .log.jsonl import JSONLLogStore
from .log.store import AsyncLogStore, LogProblem, LogStore
from .messages import ROLES, ChatMessage, InvalidMessageError, answered_call_ids
from .session_state import CompactionSessionState
from .summarize import CompactFn
from .units import TurnTracker

logger = logging.getLogger("memory.compaction")


class _Unmaterialized(NamedTuple):
    """A message record's dict awaiting conversion, with its record number."""

    data: dict[str, Any]
    number: int


class CompactionMemory(CompactionBase):
    """A compacting memory that logs every message and compaction event.

    The log goes to ``log_store`` when given, else to a ``JSONLLogStore`` in
    ``config.log_base_path``; with neither, nothing is logged. A log write that
    fails raises ``LogError`` from ``add_message``: the message is then in the
    context but not in the log, and the caller decides whether to go on.
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
    ) -> None:
        super().__init__(
            config=config,
            compact_fn=compact_fn,
            on_compact=on_compact,
            client=client,
            model_name=model_name,
            compaction_timeout_s=compaction_timeout_s,
        )
        self._session_id = self.config.session_id or str(uuid.uuid4())
        if log_store is None and self.config.log_base_path is not None:
            log_store = JSONLLogStore(self.config.log_base_path, fsync=self.config.fsync)
        self._log_store = log_store
        self._meta_written = False
        self._outbox: list[dict[str, Any]] = []
        self._upgrade_meta: dict[str, Any] = {}
        self._upgrade_record: dict[str, Any] | None = None
        self._parent_session_id = parent_session_id
        self._parent_seq = parent_seq
        self.restore_problems: list[LogProblem] = []

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def log_store(self) -> LogStore | None:
        return self._log_store

    @property
    def parent_session_id(self) -> str | None:
        return self._parent_session_id

    # -- writing the log -------------------------------------------------------

    def _write(self, record_type: str, fields: dict[str, Any]) -> None:
        if self._log_store is None:
            return
        if not self._meta_written:
            # An async store is not asked here (that would block the loop); the
            # database store refuses a second session_meta by itself.
            store = self._log_store
            if not isinstance(store, AsyncLogStore) and store.exists(self._session_id):
                raise SessionExistsError(self._session_id)
            self._meta_written = True
            self._send({**self._session_meta(), **self._upgrade_meta})
        record = {"type": record_type, "ts": rec.now_iso(), **fields}
        if self._upgrade_record is not None:
            # Upgrading an old log only adds what it lacks: what it said stands.
            record, self._upgrade_record = {**record, **self._upgrade_record}, None
        self._send(record)

    def _send(self, record: dict[str, Any]) -> None:
        assert self._log_store is not None
        if isinstance(self._log_store, AsyncLogStore):
            self._outbox.append(record)
        else:
            self._log_store.append(self._session_id, record)

    async def flush(self) -> None:
        """Await the writes queued for an ``AsyncLogStore``, in order. A record
        whose write raises stays queued (with those after it) for the next flush."""
        store = self._log_store
        while self._outbox and isinstance(store, AsyncLogStore):
            await store.append_async(self._session_id, self._outbox[0])
            self._outbox.pop(0)

    def _session_meta(self) -> dict[str, Any]:
        config = self.config.to_dict()
        config.pop("session_id")
        config.pop("log_base_path")
        return {
            "type": rec.SESSION_META,
            "ts": rec.now_iso(),
            "session_id": self._session_id,
            "system_prompt": self._system_prompt,
            "config": config,
            "parent_session_id": self._parent_session_id,
            "format_version": rec.FORMAT_VERSION,
            "memory_type": "compact",
            "model_name": self._model_name,
            "parent_seq": self._parent_seq,
        }

    def set_system_prompt(self, prompt: str) -> None:
        changed = prompt != self._system_prompt
        super().set_system_prompt(prompt)
        if changed and self._meta_written:
            self._write(
                rec.SYSTEM_PROMPT, {"system_prompt": prompt, "through_seq": self._next_seq - 1}
            )

    def _on_ingested(self, ingested: Ingested) -> None:
        fields: dict[str, Any] = {
            "seq": ingested.seq,
            "message": ingested.message.to_dict(),
            "tokens": ingested.tokens,
            "unit": ingested.classification.unit,
            "unit_index": ingested.classification.unit_index,
            "context_tokens": self.estimate_context_tokens(),
        }
        if ingested.truncation is not None:
            fields["context_message"] = ingested.context_message.to_dict()
            fields["truncation"] = ingested.truncation.as_dict()
        if ingested.classification.anomaly:
            fields["anomaly"] = ingested.classification.anomaly
        self._write(rec.MESSAGE, fields)

    def _on_compaction(self, stats: dict[str, Any]) -> None:
        self._write(rec.COMPACTION, stats)

    def _on_compaction_failed(self, record: dict[str, Any]) -> None:
        self._write(rec.COMPACTION_FAILED, record)

    def _on_compaction_warning(self, record: dict[str, Any]) -> None:
        self._write(rec.COMPACTION_WARNING, record)

    def _on_compaction_reverted(self, record: dict[str, Any]) -> None:
        self._write(rec.COMPACTION_REVERT, record)

    def reset(self) -> dict[str, int]:
        """Forget the context (the log keeps everything, and records the reset
        so that a restore starts from the same empty context)."""
        counts = super().reset()
        self._write(
            rec.RESET,
            {"through_seq": self._next_seq - 1, "context_tokens": self.estimate_context_tokens()},
        )
        return counts

    # -- replaying a log -------------------------------------------------------

    def _replay(self, records: Iterable[dict[str, Any]], *, write: bool = False) -> None:
        """Rebuild the state from log records. With ``write``, also log each
        record in the current format (how old logs are upgraded)."""
        for number, record in enumerate(records, start=1):
            try:
                if not write and record.get("type") == rec.MESSAGE and "tokens" in record:
                    self._ingest_recorded(record, number)
                else:
                    self._upgrade_record = record if write else None
                    self._apply_record(record, write)
            except (MotusMemoryError, KeyError, TypeError, ValueError) as exc:
                self.restore_problems.append(LogProblem(number, f"record {number} unusable: {exc}"))
            self._upgrade_record = None
        self._materialize()

    def _ingest_recorded(self, record: dict[str, Any], number: int) -> None:
        """Restore's fast path for a current-format message record.

        Most messages of a long log are folded into a summary by a later
        compaction record, so building a ``ChatMessage`` for each would be
        wasted: the raw dict enters the context and is only turned into a
        ``ChatMessage`` (and validated) by ``_materialize`` if it survives.
        The unit tracking is the same ``TurnTracker`` the live memory uses.
        """
        seq = self._checked_seq(record["seq"])
        data = record["message"]
        role = data["role"]
        if role not in ROLES or role == "system":
            raise InvalidMessageError(f"unusable message role {role!r}")
        calls = data.get("tool_calls")
        call_ids = tuple([str(call["id"]) for call in calls]) if calls else ()
        result_ids = (
            answered_call_ids(role, data.get("tool_call_id"), data.get("tool_call_ids"))
            if role == "tool"
            else ()
        )
        classification = self._tracker.classify_ids(role, call_ids, result_ids)
        self._next_seq = seq + 1
        raw = _Unmaterialized(record.get("context_message") or data, number)
        # The raw dict stands in for its ChatMessage until _materialize() runs.
        self._place(classification, seq, cast(ChatMessage, raw), int(record["tokens"]))
        self._trace_anomaly(seq, classification)

    def _checked_seq(self, value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise LogCorruptError(f"message seq {value!r} is not an integer")
        if value < self._next_seq:
            raise LogCorruptError(f"message seq {value} does not follow seq {self._next_seq - 1}")
        return value

    def _materialize(self) -> None:
        self._replace_context(self._materialized(self._entries()))
        if self._undo is not None:
            undo = self._undo
            self._undo = Undo(
                self._materialized(undo.entries, report=False), undo.summary, undo.kept, undo.number
            )

    def _materialized(
        self, entries: list[tuple[ChatMessage, EntryMeta, int]], *, report: bool = True
    ) -> list[tuple[ChatMessage, EntryMeta, int]]:
        out = []
        for message, meta, tokens in entries:
            if isinstance(message, _Unmaterialized):
                try:
                    message = ChatMessage.from_dict(message.data)
                except InvalidMessageError as exc:
                    if report:
                        problem = LogProblem(
                            message.number, f"record {message.number} unusable: {exc}"
                        )
                        self.restore_problems.append(problem)
                    continue
            out.append((message, meta, tokens))
        return out

    def _apply_record(self, record: dict[str, Any], write: bool) -> None:
        kind = record.get("type")
        if kind == rec.MESSAGE:
            seq = self._checked_seq(record["seq"]) if "seq" in record else None
            message = ChatMessage.from_dict(record["message"])
            context = record.get("context_message")
            legacy = "seq" not in record  # Motus logged messages already truncated
            ingested = self._ingest(
                message,
                seq=seq,
                context_message=ChatMessage.from_dict(context)
                if context
                else (None if legacy else message),
                tokens=record.get("tokens"),
                trace=False,
            )
            if write:
                self._on_ingested(ingested)
            return
        fields = {k: v for k, v in record.items() if k not in ("type", "ts")}
        fields.setdefault("through_seq", self._next_seq - 1)
        if kind == rec.COMPACTION:
            summary = record.get("summary")
            if not isinstance(summary, str):
                raise LogCorruptError("compaction record without a summary")
            number = record.get("compaction_number")
            if (
                "through_seq" in record
                and isinstance(number, int)
                and number <= self._compaction_count
            ):
                raise LogCorruptError(
                    f"compaction number {number} does not follow number {self._compaction_count}"
                )
            through = record.get("through_seq")
            if isinstance(through, int) and through >= self._next_seq:
                raise LogCorruptError(
                    f"compaction covers messages up to seq {through}, "
                    f"but the log so far ends at seq {self._next_seq - 1}"
                )
            tokens_before = self.estimate_context_tokens()
            replayed = set(record.get("replayed_seqs") or ())
            kept = [e for e in self._entries() if e[1].seq is not None and e[1].seq in replayed]
            if len(kept) != len(replayed):
                found = {e[1].seq for e in kept}
                missing = sorted(s for s in replayed if s not in found)
                raise LogCorruptError(f"compaction replays seqs {missing} not in the context")
            # Current records carry the continuation's token count; old ones used another template.
            recorded = record.get("summary_tokens") if "through_seq" in record else None
            number = int(record.get("compaction_number", self._compaction_count + 1))
            self._undo = Undo(self._entries(), self._summary, len(kept), number)
            self._set_summary(summary, kept, tokens=recorded)
            self._compaction_count = number
            fields.setdefault("compaction_number", self._compaction_count)
            fields.setdefault("status", "ok")
            fields.setdefault("replayed_seqs", [])
            fields.setdefault("messages_replayed", len(kept))
            fields.setdefault("tokens_before", tokens_before)
            fields.setdefault("tokens_after", self.estimate_context_tokens())
            fields.setdefault("summary_tokens", self._tokens[0])
            self._trace.add("compaction", **{k: v for k, v in fields.items() if k != "summary"})
        elif kind == rec.SYSTEM_PROMPT:
            CompactionBase.set_system_prompt(self, record["system_prompt"])
        elif kind == rec.RESET:
            CompactionBase.reset(self)
        elif kind == rec.COMPACTION_REVERT:
            self._revert(int(record["reverts"]))
        elif kind in (rec.COMPACTION_FAILED, rec.COMPACTION_WARNING):
            self._trace.add(kind, **fields)
        elif kind == rec.SESSION_META:
            return  # read before the replay
        else:
            raise LogCorruptError(f"unknown record type {kind!r}")
        if write:
            self._write(str(kind), fields)

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
    ) -> Self:
        """Rebuild the memory of ``session_id`` from its log; it keeps appending there.

        The config, model and system prompt come from the log's ``session_meta``
        unless given. Records that cannot be read (a torn last line after a
        crash, a corrupt line) are skipped and listed in ``restore_problems``
        and the trace, with their line numbers. Raises ``SessionNotFoundError``
        when the session has no log, ``ConfigurationError`` for a bad id.
        """
        if log_store is None:
            base = log_base_path or (config.log_base_path if config else None) or "."
            log_store = JSONLLogStore(base, fsync=bool(config and config.fsync))
        problems: list[LogProblem] = []
        records = log_store.read(session_id, problems)
        first = next(records, None)
        meta = first if first is not None and first.get("type") == rec.SESSION_META else {}
        if first is not None and not meta:
            problems.append(LogProblem(1, "the log does not start with a session_meta record"))
        elif meta.get("session_id") not in (None, session_id):
            problems.append(LogProblem(1, f"session_meta names session {meta.get('session_id')!r}"))
        if config is None:
            stored_config = meta.get("config") or {}
            if not isinstance(stored_config, dict):
                problems.append(
                    LogProblem(1, "session_meta config is not an object; defaults used")
                )
                stored_config = {}
            stored = dict(stored_config)
            stored["session_id"] = session_id
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
        memory._session_id = session_id
        memory._meta_written = first is not None
        CompactionBase.set_system_prompt(memory, str(meta.get("system_prompt") or ""))
        memory._replay(itertools.chain([first] if first is not None else [], records))
        memory.restore_problems.extend(problems)
        memory._trace.add(
            "restored",
            session_id=session_id,
            messages=memory._next_seq,
            compactions=memory._compaction_count,
            problems=len(memory.restore_problems),
        )
        for problem in memory.restore_problems:
            memory._trace.add("log_problem", line=problem.line, detail=str(problem))
            logger.warning("session %s: %s", session_id, problem)
        if system_prompt is not None:
            memory.set_system_prompt(system_prompt)
        return memory

    # -- state and forks -------------------------------------------------------

    def get_session_state(self) -> CompactionSessionState:
        """Everything needed to continue this session (see ``CompactionSessionState``)."""
        base = self.config.log_base_path
        return CompactionSessionState(
            system_prompt=self._system_prompt,
            messages=[m.to_dict() for m in self._messages],
            model_name=self._model_name,
            session_id=self._session_id,
            parent_session_id=self._parent_session_id,
            log_base_path=str(base) if base is not None else None,
            config=self.config.to_dict(),
            summary=self._summary,
            compaction_count=self._compaction_count,
            next_seq=self._next_seq,
            seqs=[m.seq for m in self._meta],
            units=[[m.unit, m.unit_index] for m in self._meta],
            tracker={
                "unit_index": self._tracker.unit_index,
                "unit": self._tracker.unit,
                "pending": list(self._tracker.pending),
                "answered": sorted(self._tracker.answered),
            },
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
        to the same session (``log_store``, or the state's ``log_base_path``)."""
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
        memory._system_prompt = state.system_prompt
        memory._meta_written = state.next_seq > 0 and memory._log_store is not None
        messages = [ChatMessage.from_dict(m) for m in state.messages]
        metas = [
            EntryMeta(seq, unit, idx)
            for seq, (unit, idx) in zip(state.seqs, state.units, strict=True)
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

    def fork(self, *, session_id: str | None = None) -> Self:
        """A new session that starts from this context and points at this one.

        The fork gets its own log (same store): its first records rebuild this
        context, so it restores on its own; the parent's log is untouched.
        """
        config = CompactionMemoryConfig.from_dict(
            {**self.config.to_dict(), "session_id": session_id}
        )
        child = type(self)(
            config=config,
            compact_fn=self._compact_fn,
            on_compact=self._on_compact,
            log_store=self._log_store,
            client=self._client,
            model_name=self._model_name,
            compaction_timeout_s=self._compaction_timeout_s,
            parent_session_id=self._session_id,
            parent_seq=self._next_seq - 1,
        )
        child._compact_model_name = self._compact_model_name
        child._system_prompt = self._system_prompt
        entries = self._entries()
        if self._summary is not None:
            child._set_summary(self._summary, [])
            child._compaction_count = 1
            child._write(
                rec.COMPACTION,
                {
                    "compaction_number": 1,
                    "status": "ok",
                    "trigger": "fork",
                    "through_seq": -1,
                    "summarized_seqs": None,
                    "replayed_seqs": [],
                    "messages_compacted": 0,
                    "messages_replayed": 0,
                    "summary": self._summary,
                    "summary_tokens": child._tokens[0],
                },
            )
            entries = entries[1:]
        for message, meta, tokens in entries:
            if meta.seq is None:
                continue  # a placeholder result: the fork derives it again
            ingested = child._ingest(message, context_message=message, tokens=tokens)
            child._on_ingested(ingested)
        return child


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
    ``context_tokens``, ``through_seq``, and the compaction figures, computed
    by replaying them exactly as ``restore_from_log`` would. Nothing a record
    already says is changed (its ``ts``, unknown fields, the meta's ``title``),
    so records in the current format come back equal. ``session_id`` defaults to the
    one in ``session_meta``. Unusable records are skipped and reported in
    ``problems`` (by record number); raises ``ConfigurationError`` for an
    invalid session id.
    """
    from .log.in_memory import InMemoryLogStore

    stream = iter(records)
    first = next(stream, None)
    meta = first if first is not None and first.get("type") == rec.SESSION_META else {}
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
    CompactionBase.set_system_prompt(memory, str(meta.get("system_prompt") or ""))
    # The replay runs with auto-compaction off; the meta as logged (config
    # included) stands, apart from a session id given to replace it.
    memory._upgrade_meta = {k: v for k, v in meta.items() if k != "session_id" or not session_id}
    defaults = memory._session_meta()["config"]
    memory._upgrade_meta.setdefault(
        "config", {k: v for k, v in defaults.items() if k != "auto_compact"}
    )
    memory._replay(itertools.chain([first] if first is not None else [], stream), write=True)
    if problems is not None:
        problems.extend(memory.restore_problems)
    if not store.exists(memory.session_id):
        store.append(memory.session_id, {**memory._session_meta(), **memory._upgrade_meta})
    return list(store.read(memory.session_id))
