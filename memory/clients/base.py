"""The interface between the memory (and the agent) and a model provider.

Concrete clients over httpx implement ``ChatClient``; tests use fakes. The
memory needs one call: a chat completion of a list of messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..messages import ChatMessage


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage reported by the provider (``None`` where it reports nothing)."""

    input_tokens: int | None = None
    output_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Completion:
    """One model reply: the assistant message, the provider's usage and finish reason."""

    message: ChatMessage
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    model: str | None = None


@runtime_checkable
class ChatClient(Protocol):
    """A chat-completions client.

    ``create`` sends ``messages`` (system prompt first) and returns the reply.
    It raises ``ProviderError`` subclasses (``ProviderTimeoutError``,
    ``ProviderStatusError``...) on failure, after its own retries.
    """

    async def create(
        self,
        *,
        model: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> Completion: ...
