"""Snapshots of a memory's state, for persistence without log files.

``state.to_dict()`` is JSON-compatible; ``from_dict(state.to_dict())`` gives an
equal state. Unknown keys are ignored, so a newer snapshot loads in an older
library as far as it can.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Self

from .errors import ConfigurationError


@dataclass(slots=True)
class SessionState:
    """The context of a memory: system prompt and the messages after it.

    ``messages`` are OpenAI chat-format dicts, in context order.
    ``system_role`` is the role of the system prompt (``"system"`` or ``"developer"``).
    """

    system_prompt: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)
    model_name: str | None = None
    system_role: str = "system"

    kind = "basic"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible dict. Lists are copied, the message dicts in them
        are not: messages are immutable, and a deep copy of a long context is
        the cost this avoids."""
        out: dict[str, Any] = {"kind": self.kind}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, list) else value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Raises ``ConfigurationError`` when ``data`` is not a snapshot of this kind."""
        if not isinstance(data, dict):
            raise ConfigurationError("a session state must be a dict")
        kind = data.get("kind", cls.kind)
        if kind != cls.kind:
            raise ConfigurationError(f"expected a {cls.kind!r} session state, got {kind!r}")
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(slots=True)
class CompactionSessionState(SessionState):
    """A ``CompactionMemory`` snapshot: the context plus what continuing it needs.

    ``messages`` starts with the continuation message when ``summary`` is set.
    ``seqs`` gives each message's log seq (``None`` for the continuation and
    for placeholder results), ``units`` its ``[unit, unit_index]`` (the
    messages of one turn unit share one pair list: read it, do not edit it).
    ``tracker`` is the open tool-call batch.
    ``log_base_path`` names the JSONL folder, when the session is logged there.
    ``compaction_in_force`` (``{"number", "through_seq", "kept",
    "continuation"}``) names the compaction whose summary heads ``messages``,
    so that it can still be undone; ``tools`` are the tool schemas and
    ``rewind_count`` the last rewind's number.
    """

    session_id: str = ""
    parent_session_id: str | None = None
    log_base_path: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    summary: str | None = None
    compaction_count: int = 0
    next_seq: int = 0
    seqs: list[int | None] = field(default_factory=list)
    units: list[list[Any]] = field(default_factory=list)
    tracker: dict[str, Any] = field(default_factory=dict)
    compaction_in_force: dict[str, Any] | None = None
    rewind_count: int = 0
    tools: list[dict[str, Any]] = field(default_factory=list)

    kind = "compaction"
