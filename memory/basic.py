"""``BasicMemory``: append-only, never compacts."""

from __future__ import annotations

from typing import Any

from .base import BaseMemory
from .messages import ChatMessage
from .session_state import SessionState
from .state import ContextState


class BasicMemory(BaseMemory):
    """Keeps every message; the context grows until the provider refuses it.

    The default memory of an agent given no ``memory_type`` or ``memory``.
    """

    memory_type = "basic"

    def _new_state(self, model_name: str | None, max_tool_result_tokens: int) -> ContextState:
        # Nothing here needs a size on the way in: a message other than a tool
        # result is counted when a size is asked for (``memory.lazy_tokens``).
        state = super()._new_state(model_name, max_tool_result_tokens)
        state.lazy_tokens = True
        return state

    async def compact(self, **kwargs: Any) -> None:
        """Does nothing: a basic memory never compacts."""
        return None

    def reset(self) -> dict[str, int]:
        """Forget the context and the trace; returns ``{"messages", "trace_events"}``."""
        return self._clear_context()

    @classmethod
    def restore(cls, state: SessionState) -> BasicMemory:
        """Rebuild a memory from ``get_session_state()`` output."""
        memory = cls(model_name=state.model_name)
        memory._state.set_system_prompt(state.system_prompt, state.system_role)
        for data in state.messages:
            memory._state.ingest(ChatMessage.from_dict(data))
        return memory
