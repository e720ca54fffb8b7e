"""``CompactionMemory``: compaction plus a conversation log and exact restore.

Every message and every compaction event goes to the session's log as a typed
record (``memory.log.records``) through the memory's recorder.
``restore_from_log`` replays the log through the same ``_apply_*`` code that
built the live context (``memory.compaction.replay``), so the restored
``get_context()`` equals the live one: summary, replayed messages, the pending
request, truncated tool results and placeholder results included.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

from ..clients.base import ChatClient
from ..config import CompactionMemoryConfig
from ..log.jsonl import JSONLLogStore
from ..log.recorder import Recorder
from ..log.records import FORMAT_VERSION, Compaction, SessionMeta, now_iso
from ..log.store import LogProblem, LogStore
from ..messages import ChatMessage
from ..session_state import CompactionSessionState
from . import replay
from .base import CompactionBase, OnCompact
from .checkpoint import Checkpoint
from .summarize import CompactFn, continuation_message
from .tools import build_memory_tools


class CompactionMemory(CompactionBase):
    """A compacting memory that logs every message and compaction event.

    The log goes to ``log_store`` when given, else to a ``JSONLLogStore`` in
    ``config.log_base_path``; with neither, nothing is logged. A log write that
    fails raises ``LogError`` from ``add_message``: the message is then in the
    context but not in the log, and the caller decides whether to go on.

    With a log, ``build_tools()`` gives the agent two memory tools (search the
    full log, read a past summary; see ``memory.compaction.tools``) unless
    ``enable_memory_tools=False``.
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

    def build_tools(self) -> list[Callable[..., Any]]:
        """``search_conversation_log`` and ``read_compaction_summary`` over this
        session's log (see ``memory.compaction.tools``); none without a log
        store or with ``enable_memory_tools=False``."""
        if not self._enable_memory_tools or self.log_store is None:
            return []
        return build_memory_tools(self)

    def _session_meta(self) -> SessionMeta:
        config = self.config.to_dict()
        config.pop("session_id")
        config.pop("log_base_path")
        return SessionMeta(
            ts=now_iso(),
            session_id=self.session_id,
            system_prompt=self._system_prompt,
            system_role=None if self._system_role == "system" else self._system_role,
            config=config,
            parent_session_id=self._parent_session_id,
            format_version=FORMAT_VERSION,
            memory_type=self.memory_type,
            model_name=self._model_name,
            parent_seq=self._parent_seq,
            # The Motus format writes these keys even when empty: keep writing them.
            extra={
                k: None
                for k, v in (
                    ("parent_session_id", self._parent_session_id),
                    ("model_name", self._model_name),
                    ("parent_seq", self._parent_seq),
                )
                if v is None
            },
        )

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
        Goes through ``_apply_compaction``, like a live compaction and a
        restore, so a restore rebuilds the same context. Returns the record.
        Raises ``CompactionError`` when a replayed seq is not in the context.
        """
        wanted = set(replayed_seqs)
        entries = self._entries()
        folded = [m.seq for _, m, _ in entries if m.seq is not None and m.seq not in wanted]
        before = self.estimate_context_tokens()
        message = (
            ChatMessage.user(continuation)
            if continuation is not None
            else continuation_message(summary)
        )
        record = Compaction(
            ts=now_iso(),
            compaction_number=self._compaction_count + 1,
            status="ok",
            trigger=trigger,
            through_seq=self._next_seq - 1,
            summarized_seqs=[min(folded), max(folded)] if folded else None,
            replayed_seqs=sorted(wanted),
            messages_compacted=len(entries) - len(wanted),
            messages_replayed=len(wanted),
            summary=summary,
            summary_tokens=self.estimate_message_tokens(message),
            tokens_before=before if tokens_before is None else tokens_before,
            model=model,
            continuation=continuation,
            checkpoint=Checkpoint.capture(self).to_dict(),
            extra=dict(extra or {}),
        )
        self._apply_compaction(record)
        # Known only once applied; the context does not depend on it.
        record = dataclasses.replace(record, tokens_after=self.estimate_context_tokens())
        self._recorder.record(record)
        return record

    # -- restore, state and forks (memory.compaction.replay) -------------------

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
        when the session has no log, ``ConfigurationError`` for a bad id.

        The log is read from its end back to the checkpoint of its
        second-latest compaction (``memory.compaction.checkpoint``) and only
        the records after it are replayed, so the time follows the live
        context, not the log's length; undoing the latest compaction still
        works. ``full_replay=True`` replays every record from the first, as
        logs without checkpoints always are, and reports the problems of the
        whole log rather than of the records read; both give the same memory.
        """
        if log_store is None:
            base = log_base_path or (config.log_base_path if config else None) or "."
            log_store = JSONLLogStore(base, fsync=bool(config and config.fsync))
        return replay.restore_from_log(
            cls,
            session_id,
            log_store=log_store,
            config=config,
            client=client,
            model_name=model_name,
            compact_fn=compact_fn,
            on_compact=on_compact,
            system_prompt=system_prompt,
            full_replay=full_replay,
        )

    def get_session_state(self) -> CompactionSessionState:
        """Everything needed to continue this session (see ``CompactionSessionState``)."""
        base = self.config.log_base_path
        return CompactionSessionState(
            system_prompt=self._system_prompt,
            system_role=self._system_role,
            messages=[m.to_dict() for m in self._messages],
            model_name=self._model_name,
            session_id=self.session_id,
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
        return replay.restore_from_state(
            cls,
            state,
            log_store=log_store,
            client=client,
            compact_fn=compact_fn,
            on_compact=on_compact,
        )

    def fork(self, *, session_id: str | None = None) -> Self:
        """A new session that starts from this context and points at this one.

        The fork gets its own log (same store): its first records rebuild this
        context, so it restores on its own; the parent's log is untouched.
        """
        return replay.fork(self, session_id=session_id)
