"""The interface between the memory (and the agent) and a model provider.

``ChatClient`` is what the memory needs: one chat completion of a list of
messages. ``StreamingChatClient`` adds ``stream``, an async iterator of typed
events ending with the whole ``Completion``; ``stream_completion`` gives any
``ChatClient`` (a test fake with only ``create``) that same stream.

The concrete clients (``OpenAIChatClient``, ``AnthropicClient``) live in their
own modules; tests use fakes.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..messages import ChatMessage


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage reported by the provider (``None`` where it reports nothing).

    ``input_tokens`` is the whole prompt, cached part included (OpenAI's
    ``prompt_tokens``; Anthropic's ``input_tokens`` + ``cache_read_input_tokens``
    + ``cache_creation_input_tokens``), so it compares with the library's
    estimate of the request. ``cached_input_tokens`` is the part read from the
    provider's prompt cache, ``cache_write_tokens`` the part written to it
    (Anthropic), ``reasoning_tokens`` the part of ``output_tokens`` spent
    thinking (OpenAI reasoning models).
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_input_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None

    @property
    def total_tokens(self) -> int | None:
        """``input_tokens + output_tokens``, or ``None`` if either is unknown."""
        if self.input_tokens is None or self.output_tokens is None:
            return None
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class Completion:
    """One model reply: the assistant message, the provider's usage and finish reason.

    ``finish_reason`` uses the OpenAI names whatever the provider: ``"stop"``,
    ``"tool_calls"``, ``"length"`` (cut at ``max_tokens``), ``"content_filter"``;
    other values are passed through as the provider sent them.
    """

    message: ChatMessage
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    model: str | None = None


# -- stream events ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the reply's text, in order."""

    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of the model's reasoning (``reasoning_content`` / thinking text)."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    """The model began the call number ``index`` (0-based, in the reply's order)."""

    index: int
    id: str
    name: str


@dataclass(frozen=True, slots=True)
class ToolCallArgumentsDelta:
    """A piece of the JSON arguments of call ``index``; the pieces joined are
    the call's ``arguments`` in the final message."""

    index: int
    text: str


@dataclass(frozen=True, slots=True)
class CompletionDone:
    """The last event of every stream: the assembled reply."""

    completion: Completion


ChatStreamEvent = (
    TextDelta | ReasoningDelta | ToolCallStart | ToolCallArgumentsDelta | CompletionDone
)


# -- protocols ----------------------------------------------------------------------


@runtime_checkable
class ChatClient(Protocol):
    """A chat-completions client.

    ``create`` sends ``messages`` (system prompt first) with the ``tools``
    schemas (OpenAI ``{"type": "function", "function": {...}}`` shape) and
    returns the reply. It raises ``ProviderError`` subclasses
    (``ProviderTimeoutError``, ``RateLimitError``, ``ContextLengthExceededError``...)
    on failure, after its own retries.
    """

    async def create(
        self,
        *,
        model: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> Completion: ...


@runtime_checkable
class StreamingChatClient(ChatClient, Protocol):
    """A ``ChatClient`` that can also stream its reply.

    ``stream`` takes ``create``'s arguments and is an async generator of
    ``ChatStreamEvent``s as they arrive, ending with one ``CompletionDone``.
    It raises what ``create`` raises, and ``StreamInterruptedError`` when the
    stream stops before the reply is complete. Close it early with ``contextlib.aclosing`` (or by
    cancelling the task iterating it): that closes the HTTP response.
    """

    def stream(
        self,
        *,
        model: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> AsyncGenerator[ChatStreamEvent, None]: ...


async def stream_completion(
    client: ChatClient,
    *,
    model: str,
    messages: Sequence[ChatMessage],
    tools: Sequence[dict[str, Any]] | None = None,
    max_tokens: int | None = None,
) -> AsyncGenerator[ChatStreamEvent, None]:
    """Stream a reply from any ``ChatClient``.

    A ``StreamingChatClient`` streams for real; any other client is asked with
    ``create`` and its reply is played back as events (the whole reasoning,
    the whole text, each call's start and arguments, then ``CompletionDone``),
    so callers handle one shape.
    """
    if isinstance(client, StreamingChatClient):
        # Closing this stream early closes the client's, and so its response.
        stream = client.stream(model=model, messages=messages, tools=tools, max_tokens=max_tokens)
        async with aclosing(stream) as events:
            async for event in events:
                yield event
        return
    completion = await client.create(
        model=model, messages=messages, tools=tools, max_tokens=max_tokens
    )
    for event in completion_events(completion):
        yield event


def completion_events(completion: Completion) -> list[ChatStreamEvent]:
    """The events a stream of ``completion`` would have yielded, at its coarsest."""
    message = completion.message
    events: list[ChatStreamEvent] = []
    if message.reasoning_content:
        events.append(ReasoningDelta(message.reasoning_content))
    if message.text:
        events.append(TextDelta(message.text))
    for index, call in enumerate(message.tool_calls):
        events.append(ToolCallStart(index=index, id=call.id, name=call.name))
        if call.arguments:
            events.append(ToolCallArgumentsDelta(index=index, text=call.arguments))
    events.append(CompletionDone(completion))
    return events
