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
from dataclasses import astuple, dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from ..json_values import loads as load_json
from ..messages import (
    FINISH_REASON,
    INVALID_TOOL_CALLS,
    NORMAL_FINISH_REASONS,
    ChatMessage,
    ToolCall,
)

# The error kept for a sound call of a reply whose other call was invalid.
UNRUN_CALL = "not run: another call of the same reply was invalid"


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

    def to_dict(self) -> dict[str, int]:
        """The figures reported, by field name (the log's ``usage`` of a reply)."""
        return {
            name: value
            for name in (
                "input_tokens",
                "output_tokens",
                "cached_input_tokens",
                "cache_write_tokens",
                "reasoning_tokens",
            )
            if (value := getattr(self, name)) is not None
        }

    def __add__(self, other: Usage) -> Usage:
        """The usage of two requests together: each count summed over the
        requests that reported it (``None`` when neither did)."""
        return Usage(
            *(
                None if mine is None and theirs is None else (mine or 0) + (theirs or 0)
                for mine, theirs in zip(astuple(self), astuple(other), strict=True)
            )
        )


@dataclass(frozen=True, slots=True)
class Completion:
    """One model reply: the assistant message, the provider's usage and finish reason.

    ``message`` is the reply as the provider sent it, tool calls included
    whatever their arguments. ``finish_reason`` uses the OpenAI names whatever
    the provider: ``"stop"``, ``"tool_calls"``, ``"length"`` (cut at
    ``max_tokens``), ``"content_filter"``; other values are passed through as
    the provider sent them; ``None`` when it said nothing. ``stored_message``
    is the reply as a memory should keep it.
    """

    message: ChatMessage
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    model: str | None = None

    @property
    def ended_normally(self) -> bool:
        """``finish_reason`` is a normal end (``"stop"``, ``"tool_calls"``), or unknown."""
        return self.finish_reason is None or self.finish_reason in NORMAL_FINISH_REASONS

    @property
    def invalid_tool_calls(self) -> list[tuple[ToolCall, str]]:
        """The calls whose arguments are not valid JSON, each with why."""
        return [
            (call, error) for call in self.message.tool_calls if (error := call.arguments_error())
        ]

    @property
    def stored_message(self) -> ChatMessage:
        """The reply as a memory keeps it (see ``memory.messages``, "How a reply ended").

        A normal reply is ``message`` itself. One that ended otherwise carries
        ``"finish_reason"``. When a call's arguments are not valid JSON, no
        call of the reply is kept as a call (none may run, and a provider
        refuses such a call sent back): all of them go to
        ``"invalid_tool_calls"`` with their error, and the finish reason is
        ``"invalid_tool_calls"`` unless the provider gave another abnormal one.
        """
        message = self.message
        errors = [call.arguments_error() for call in message.tool_calls]
        invalid = any(errors)
        if self.ended_normally and not invalid:
            return message
        extra = dict(message.extra)
        if invalid:
            extra[INVALID_TOOL_CALLS] = [
                {
                    "id": call.id,
                    "name": call.name,
                    "arguments": call.arguments,
                    "error": error or UNRUN_CALL,
                }
                for call, error in zip(message.tool_calls, errors, strict=True)
            ]
            message = replace(message, content=message.content or "", tool_calls=())
        extra[FINISH_REASON] = (
            "invalid_tool_calls" if self.ended_normally else str(self.finish_reason)
        )
        return replace(message, extra=extra)


def call_input(call: ToolCall) -> dict[str, Any]:
    """A call's arguments as the JSON object providers take back: the parsed
    ``arguments``; ``{}`` when they are empty; and when they are not a JSON
    object (invalid JSON in an older log, a custom call's free text)
    ``{"arguments": text}``, so what the model wrote stays visible to it."""
    if not call.arguments.strip():
        return {}
    value = None
    if call.type != "custom":
        try:
            value = load_json(call.arguments)
        except ValueError:  # not JSON: kept as text below
            value = None
    return value if isinstance(value, dict) else {"arguments": call.arguments}


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
