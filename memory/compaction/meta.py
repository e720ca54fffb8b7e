"""The ``session_meta`` record a compacting memory writes first in its log."""

from __future__ import annotations

from ..config import CompactionMemoryConfig
from ..log.records import FORMAT_VERSION, SessionMeta, now_iso
from .state import CompactionState

MEMORY_TYPE = "compact"
"""The ``memory_type`` of ``CompactionMemory`` (the design's name; the
dashboard once wrote ``"compaction"``, which still reads as this)."""


def session_meta(
    state: CompactionState,
    config: CompactionMemoryConfig,
    *,
    session_id: str,
    memory_type: str = MEMORY_TYPE,
    parent_session_id: str | None = None,
    parent_seq: int | None = None,
) -> SessionMeta:
    """The ``session_meta`` of a session in ``state`` with ``config`` (its
    ``session_id`` and ``log_base_path`` are not logged: the log names itself)."""
    stored = config.to_dict()
    stored.pop("session_id")
    stored.pop("log_base_path")
    model_name = state.model_name
    return SessionMeta(
        ts=now_iso(),
        session_id=session_id,
        system_prompt=state.system_prompt,
        system_role=None if state.system_role == "system" else state.system_role,
        config=stored,
        parent_session_id=parent_session_id,
        format_version=FORMAT_VERSION,
        memory_type=memory_type,
        model_name=model_name,
        parent_seq=parent_seq,
        tools=state.tool_schemas or None,
        # The Motus format writes these keys even when empty: keep writing them.
        extra={
            k: None
            for k, v in (
                ("parent_session_id", parent_session_id),
                ("model_name", model_name),
                ("parent_seq", parent_seq),
            )
            if v is None
        },
    )
