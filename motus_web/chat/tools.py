"""The tools a live chat's agent has, and what they cost every request.

A chat turn's agent gets ``CHAT_TOOLS`` plus the memory's own tools
(``build_tools()``: searching its log, reading a summary), and sends their
schemas with every request. The memory counts them (``set_tools``) in its
estimate, so the sizes a chat logs include them; the log itself holds
messages only, so a page that restores the memory from the log does not.
``overhead`` gives both figures the pages show, the floor the new-chat
form checks a threshold against, and the threshold it suggests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memory import (
    BackgroundMemory,
    BaseMemory,
    CompactionMemory,
    CompactionMemoryConfig,
    ConfigurationError,
    InMemoryLogStore,
    calculator,
    current_time,
)
from memory.agent import tool_schema

CHAT_TOOLS: tuple[Callable[..., Any], ...] = (calculator, current_time)


def chat_tool_schemas(memory: BaseMemory) -> list[dict[str, Any]]:
    """The schemas a chat's agent sends: its own tools, then the memory's (the agent's order)."""
    return [tool_schema(fn) for fn in (*CHAT_TOOLS, *memory.build_tools())]


def _chat_memory(
    config: CompactionMemoryConfig, model_name: str | None, remember: bool
) -> CompactionMemory:
    """A scratch memory of the type a chat's turns restore (``remember``: a
    ``BackgroundMemory``, whose tools add recall, remember and forget)."""
    if remember:
        return BackgroundMemory(config=config, model_name=model_name, log_store=InMemoryLogStore())
    return CompactionMemory(config=config, model_name=model_name, log_store=InMemoryLogStore())


def new_chat_tool_schemas(
    config: CompactionMemoryConfig, *, remember: bool = False
) -> list[dict[str, Any]]:
    """The schemas of a new chat's turns, before it has a log of its own (its
    memory will have one, so the memory's tools are among them); ``remember``
    for a chat that remembers across chats."""
    return chat_tool_schemas(_chat_memory(config, None, remember))


# Room a threshold should leave above the fixed parts: a continuation message
# (its template, the summary and the kept-verbatim ledger) and the newest turn
# kept verbatim. Below it every turn compacts, and the summary has no room to
# keep what the user named.
CONVERSATION_ROOM_TOKENS = 600


@dataclass(frozen=True, slots=True)
class Overhead:
    """What every request of a live chat carries before any message, in tokens."""

    context_tokens: int  # system prompt, tool schemas and reply priming: the memory's estimate
    tool_tokens: int  # the tool schemas alone
    tool_names: tuple[str, ...]
    recall_tokens: int = 0  # the recalled memories' budget, placed with the instructions

    @property
    def fixed_tokens(self) -> int:
        """What compaction cannot make smaller: the request before any message,
        with a full recalled block."""
        return self.context_tokens + self.recall_tokens

    @property
    def suggested_threshold(self) -> int:
        """The least threshold that leaves ``CONVERSATION_ROOM_TOKENS`` for the conversation."""
        return self.fixed_tokens + CONVERSATION_ROOM_TOKENS


def overhead(
    config: CompactionMemoryConfig,
    model_name: str | None,
    system_prompt: str,
    schemas: Sequence[dict[str, Any]] | None = None,
    *,
    remember: bool = False,
) -> Overhead:
    """The chat memory's estimate of a request with no message yet: counted the way
    a turn's memory counts it (``set_system_prompt``, ``set_tools`` with the chat's
    tools and its memory's, ``remember`` for a background memory's, or with
    ``schemas`` when given: a replay's, ``estimate_context_tokens``), with the
    tokenizer of ``model_name``. Raises ``ConfigurationError`` for a config the
    memory refuses."""
    memory = _chat_memory(config, model_name, remember)
    memory.set_system_prompt(system_prompt)
    schemas = chat_tool_schemas(memory) if schemas is None else list(schemas)
    memory.set_tools(schemas)
    tokens = memory.estimate_context_tokens()
    recall = memory.recall_budget_tokens if isinstance(memory, BackgroundMemory) else 0
    return Overhead(tokens, memory.tool_schema_tokens, tool_names(schemas), recall)


def session_overhead(
    config: Mapping[str, Any] | None,
    model_name: str,
    system_prompt: str,
    schemas: Sequence[dict[str, Any]] | None = None,
    *,
    remember: bool = False,
) -> Overhead | None:
    """``overhead`` for a stored session's logged config; ``None`` when the config is unreadable."""
    stored = {k: v for k, v in (config or {}).items() if k not in ("session_id", "log_base_path")}
    try:
        return overhead(
            CompactionMemoryConfig.from_dict(stored),
            model_name or None,
            system_prompt,
            schemas,
            remember=remember,
        )
    except (ConfigurationError, TypeError):
        return None


def tool_names(schemas: Sequence[dict[str, Any]]) -> tuple[str, ...]:
    """The names of tool schemas in the OpenAI (``function.name``) or Anthropic (``name``) shape."""
    names = []
    for schema in schemas:
        function = schema.get("function")
        name = function.get("name") if isinstance(function, dict) else schema.get("name")
        names.append(str(name or "?"))
    return tuple(names)
