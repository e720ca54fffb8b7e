"""The client protocol's shared parts: streaming any client, usage, the error
mapping, and the reasoning fields on ChatMessage."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Sequence
from typing import Any

import pytest

from memory import (
    AuthenticationError,
    BadRequestError,
    ChatClient,
    ChatMessage,
    Completion,
    CompletionDone,
    ContextLengthExceededError,
    ProviderStatusError,
    RateLimitError,
    ReasoningDelta,
    ServerError,
    StreamingChatClient,
    TextDelta,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallStart,
    Usage,
    stream_completion,
)
from memory.clients._provider import Secret, retry_after_s, status_error


class CreateOnly:
    """A fake client of the kind the tests use: ``create`` and nothing else."""

    def __init__(self, completion: Completion) -> None:
        self.completion = completion
        self.calls: list[dict[str, Any]] = []

    async def create(
        self,
        *,
        model: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        self.calls.append({"model": model, "tools": tools, "max_tokens": max_tokens})
        return self.completion


async def test_any_client_can_be_streamed_through_create() -> None:
    reply = ChatMessage(
        role="assistant",
        content="Looking.",
        tool_calls=(ToolCall(id="c1", name="f", arguments='{"a": 1}'), ToolCall(id="c2", name="g")),
        reasoning_content="Two calls.",
    )
    fake = CreateOnly(Completion(message=reply, usage=Usage(input_tokens=9, output_tokens=3)))
    assert isinstance(fake, ChatClient)
    assert not isinstance(fake, StreamingChatClient)

    events = [
        e
        async for e in stream_completion(
            fake, model="m", messages=[ChatMessage.user("hi")], max_tokens=7
        )
    ]
    assert events == [
        ReasoningDelta("Two calls."),
        TextDelta("Looking."),
        ToolCallStart(index=0, id="c1", name="f"),
        ToolCallArgumentsDelta(index=0, text='{"a": 1}'),
        ToolCallStart(index=1, id="c2", name="g"),
        CompletionDone(fake.completion),
    ]
    assert fake.calls == [{"model": "m", "tools": None, "max_tokens": 7}]


def test_usage_totals_only_what_is_known() -> None:
    assert Usage(input_tokens=10, output_tokens=4).total_tokens == 14
    assert Usage(input_tokens=10).total_tokens is None


@pytest.mark.parametrize(
    ("status", "message", "expected"),
    [
        (401, "Incorrect API key", AuthenticationError),
        (403, "not allowed", AuthenticationError),
        (429, "slow down", RateLimitError),
        (400, "Invalid value for 'messages'", BadRequestError),
        (404, "model not found", BadRequestError),
        (422, "unprocessable", BadRequestError),
        (400, "This model's maximum context length is 8192 tokens", ContextLengthExceededError),
        (400, "prompt is too long: 210000 tokens > 200000 maximum", ContextLengthExceededError),
        (400, "the request exceeds the available context size", ContextLengthExceededError),
        (413, "Input is too long for requested model", ContextLengthExceededError),
        (500, "boom", ServerError),
        (503, "unavailable", ServerError),
        (529, "Overloaded", ServerError),
        (408, "request timeout", ProviderStatusError),
    ],
)
def test_each_status_maps_to_its_error(
    status: int, message: str, expected: type[ProviderStatusError]
) -> None:
    error = status_error(status, message, body={"error": {"message": message}})
    assert type(error) is expected
    assert error.status_code == status
    assert message in str(error)


def test_a_context_length_code_in_the_body_is_enough() -> None:
    body = {"error": {"message": "too big", "code": "context_length_exceeded"}}
    assert isinstance(status_error(400, "too big", body=body), ContextLengthExceededError)


def test_an_anthropic_error_event_is_mapped_by_its_type() -> None:
    # Errors inside a stream arrive after a 200.
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    error = status_error(200, "Overloaded", body=body)
    assert isinstance(error, ServerError)
    assert error.status_code == 529


def test_a_huge_error_body_is_cut() -> None:
    error = status_error(500, "boom", body="x" * 100_000)
    assert len(error.body) == 2000


def test_retry_after_is_read_from_milliseconds_seconds_or_a_date() -> None:
    assert retry_after_s({"retry-after-ms": "250"}) == 0.25
    assert retry_after_s({"retry-after-ms": "nonsense", "retry-after": "3"}) == 3.0
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert retry_after_s({"retry-after": later}) == pytest.approx(30, abs=2)
    assert retry_after_s({"retry-after": "soon"}) is None
    assert retry_after_s({}) is None
    error = status_error(429, "slow down", headers={"retry-after": "12"})
    assert isinstance(error, RateLimitError)
    assert error.retry_after == 12.0


def test_a_secret_never_shows_itself() -> None:
    secret = Secret("sk-live-123")
    assert "sk-live-123" not in f"{secret} {secret!r} {[secret]}"
    assert secret.reveal() == "sk-live-123"


# -- reasoning on ChatMessage ----------------------------------------------------------


def test_reasoning_fields_round_trip_losslessly() -> None:
    data = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
        "reasoning_content": "Need f.",
        "thinking_blocks": [
            {"type": "thinking", "thinking": "Need f.", "signature": "EqQB"},
            {"type": "redacted_thinking", "data": "EmwK"},
        ],
    }
    message = ChatMessage.from_dict(data)
    assert message.reasoning_content == "Need f."
    assert message.thinking_blocks is not None
    assert message.thinking_blocks[0]["signature"] == "EqQB"
    assert "reasoning_content" not in message.extra
    assert message.to_dict() == data


@pytest.mark.parametrize(
    "odd",
    [
        {"reasoning_content": None},
        {"thinking_blocks": None},
        {"thinking_blocks": "not a list"},
        {"thinking_blocks": []},
    ],
)
def test_odd_reasoning_values_still_round_trip(odd: dict[str, Any]) -> None:
    data = {"role": "assistant", "content": "hi", **odd}
    assert ChatMessage.from_dict(data).to_dict() == data
