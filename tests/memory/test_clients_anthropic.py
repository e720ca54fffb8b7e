"""AnthropicClient against the scripted server on 127.0.0.1, and the message
conversion to and from the Messages API."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from memory import (
    AnthropicClient,
    AuthenticationError,
    ChatMessage,
    Completion,
    CompletionDone,
    ConfigurationError,
    ContextLengthExceededError,
    RateLimitError,
    ReasoningDelta,
    ServerError,
    StreamInterruptedError,
    TextDelta,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallStart,
)
from memory.clients.anthropic_messages import anthropic_tool, to_anthropic
from memory.clients.base import ChatStreamEvent
from memory.testing.scripted_server import ScriptedReply, ScriptedServer

from .client_helpers import wait_for

KEY = "sk-ant-test-0b8e2d4471"
HELLO = [ChatMessage.system("You are terse."), ChatMessage.user("Hello")]
TWO_CALLS = [
    {"id": "toolu_w", "name": "weather", "arguments": {"city": "Lisbon"}},
    {"id": "toolu_t", "name": "local_time", "arguments": {"tz": "Europe/Lisbon"}},
]


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(api_key=KEY, strict=True) as running:
        yield running


@pytest.fixture
async def client(server: ScriptedServer) -> AsyncIterator[AnthropicClient]:
    async with AnthropicClient(server.anthropic_base_url, api_key=KEY, timeout_s=5) as c:
        yield c


async def collect(client: AnthropicClient, **kwargs: Any) -> list[ChatStreamEvent]:
    kwargs.setdefault("messages", HELLO)
    return [event async for event in client.stream(model="claude-test", **kwargs)]


def sent_key(headers: dict[str, str]) -> str | None:
    """The key as the SDK sends it: ``x-api-key``, or a bearer token."""
    return headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")


def final(events: list[ChatStreamEvent]) -> Completion:
    assert isinstance(events[-1], CompletionDone)
    return events[-1].completion


async def test_it_streams_thinking_then_text_and_keeps_the_signed_block(
    server: ScriptedServer, client: AnthropicClient
) -> None:
    server.add(
        "anthropic",
        ScriptedReply(
            text="It is sunny in Lisbon.",
            reasoning="The user asked about Lisbon.",
            signature="EqQBCkYIARgCIkD",
            usage={"input_tokens": 300, "output_tokens": 40, "cached_input_tokens": 200},
        ),
    )
    events = await collect(client)

    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == (
        "The user asked about Lisbon."
    )
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "It is sunny in Lisbon."
    first_text = next(i for i, e in enumerate(events) if isinstance(e, TextDelta))
    assert all(not isinstance(e, ReasoningDelta) for e in events[first_text:])
    done = final(events)
    assert done.message.content == "It is sunny in Lisbon."
    assert done.message.thinking_blocks == (
        {
            "type": "thinking",
            "thinking": "The user asked about Lisbon.",
            "signature": "EqQBCkYIARgCIkD",
        },
    )
    assert done.message.reasoning_content == "The user asked about Lisbon."
    # input_tokens is the whole prompt: fresh plus read from the cache.
    assert (done.usage.input_tokens, done.usage.cached_input_tokens) == (300, 200)
    assert done.usage.output_tokens == 40
    assert done.finish_reason == "stop"
    sent = server.requests[0].body
    assert sent["system"] == "You are terse."
    assert sent["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}]
    assert sent["max_tokens"] == 4096
    assert sent_key(server.requests[0].headers) == KEY


async def test_parallel_tool_uses_are_assembled_from_their_json_deltas(
    server: ScriptedServer, client: AnthropicClient
) -> None:
    server.add("anthropic", ScriptedReply(text="Let me look.", tool_calls=TWO_CALLS))
    tools = [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "Weather in a city.",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    events = await collect(client, tools=tools, max_tokens=512)

    assert [e for e in events if isinstance(e, ToolCallStart)] == [
        ToolCallStart(index=0, id="toolu_w", name="weather"),
        ToolCallStart(index=1, id="toolu_t", name="local_time"),
    ]
    assert len([e for e in events if isinstance(e, ToolCallArgumentsDelta) and e.index == 1]) > 1
    done = final(events)
    assert [(c.id, c.name, json.loads(c.arguments)) for c in done.message.tool_calls] == [
        ("toolu_w", "weather", {"city": "Lisbon"}),
        ("toolu_t", "local_time", {"tz": "Europe/Lisbon"}),
    ]
    assert done.message.content == "Let me look."
    assert done.finish_reason == "tool_calls"
    sent = server.requests[0].body
    assert sent["tools"] == [
        {
            "name": "weather",
            "description": "Weather in a city.",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    ]
    assert sent["max_tokens"] == 512


async def test_create_gives_the_same_message_as_the_stream(
    server: ScriptedServer, client: AnthropicClient
) -> None:
    reply = ScriptedReply(
        text="Checking both.",
        tool_calls=TWO_CALLS,
        reasoning="Two lookups.",
        redacted_thinking="EmwKAhgBEgy3va3pzix",
    )
    server.add("anthropic", reply, reply)
    whole = await client.create(model="claude-test", messages=HELLO)
    streamed = final(await collect(client))
    assert whole.message == streamed.message
    assert whole.message.thinking_blocks == (
        {"type": "thinking", "thinking": "Two lookups.", "signature": "scripted-signature"},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
    )
    assert whole.usage == streamed.usage


async def test_a_thinking_turn_goes_back_unchanged_with_its_tool_results_merged(
    server: ScriptedServer, client: AnthropicClient
) -> None:
    server.add(
        "anthropic",
        ScriptedReply(tool_calls=TWO_CALLS, reasoning="I need both.", signature="sig-123"),
        ScriptedReply(text="Sunny, 14:00."),
    )
    history = list(HELLO)
    first = await client.create(model="claude-test", messages=history)
    history.append(first.message)
    history += [
        ChatMessage.tool("sunny", "toolu_w"),
        ChatMessage.tool("14:00", "toolu_t"),
    ]
    await client.create(model="claude-test", messages=history)

    assistant, results = server.requests[1].body["messages"][1:]
    assert assistant["role"] == "assistant"
    assert assistant["content"][0] == {
        "type": "thinking",
        "thinking": "I need both.",
        "signature": "sig-123",
    }
    assert [b["type"] for b in assistant["content"]] == ["thinking", "tool_use", "tool_use"]
    assert assistant["content"][1]["input"] == {"city": "Lisbon"}
    assert results == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_w", "content": "sunny"},
            {"type": "tool_result", "tool_use_id": "toolu_t", "content": "14:00"},
        ],
    }


def test_the_conversion_keeps_roles_alternating() -> None:
    call = ToolCall(id="t1", name="f", arguments="not json")
    system, messages = to_anthropic(
        [
            ChatMessage.system("Rule one."),
            ChatMessage.user("Hi"),
            ChatMessage.assistant(tool_calls=[call]),
            ChatMessage.tool("result", "t1"),
            ChatMessage.user("And now?"),
            ChatMessage.assistant(""),
            ChatMessage.system("Rule two."),
            ChatMessage.user(
                [
                    {"type": "text", "text": "See"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
                ]
            ),
        ]
    )
    assert system == "Rule one.\n\nRule two."
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == [
        {"type": "tool_use", "id": "t1", "name": "f", "input": {"arguments": "not json"}}
    ]
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "result"},
        {"type": "text", "text": "And now?"},
        {"type": "text", "text": "See"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}},
    ]


THINKING = {"thinking": {"type": "enabled", "budget_tokens": 2048}}


@pytest.mark.parametrize(
    ("params", "max_tokens", "refused"),
    [
        ({**THINKING, "temperature": 0.2}, 4096, "temperature must be 1 or unset"),
        ({**THINKING, "top_k": 5}, 4096, "top_k must be unset"),
        ({**THINKING, "top_p": 0.5}, 4096, "top_p must be between 0.95 and 1"),
        ({**THINKING, "tool_choice": {"type": "any"}}, 4096, "tool_choice must be auto or none"),
        ({"thinking": {"type": "enabled", "budget_tokens": 512}}, 4096, "at least 1024"),
        (THINKING, 2048, "max_tokens (2048) must be above budget_tokens (2048)"),
    ],
)
def test_parameters_extended_thinking_refuses_are_a_configuration_error(
    params: dict[str, Any], max_tokens: int, refused: str
) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(refused)):
        AnthropicClient(api_key=KEY, params=params, max_tokens=max_tokens)


def test_thinking_with_temperature_one_and_top_p_near_one_is_accepted() -> None:
    client = AnthropicClient(api_key=KEY, params={**THINKING, "temperature": 1, "top_p": 0.95})
    assert client.thinking_budget == 2048


async def test_a_call_asking_for_max_tokens_gets_the_thinking_budget_on_top(
    server: ScriptedServer,
) -> None:
    server.add("anthropic", ScriptedReply(text="A summary."), ScriptedReply(text="Another."))
    async with AnthropicClient(
        server.anthropic_base_url, api_key=KEY, timeout_s=5, params=THINKING
    ) as client:
        await client.create(model="claude-haiku-4-5", messages=HELLO, max_tokens=500)
        # Within the model's output limit (8,192 tokens for Claude 3.5 Haiku).
        await client.create(model="claude-3-5-haiku-latest", messages=HELLO, max_tokens=8000)
    assert [r.body["max_tokens"] for r in server.requests] == [2548, 8192]
    assert [r.problems for r in server.requests] == [[], []]
    with pytest.raises(ConfigurationError, match="leaves no room"):
        AnthropicClient(
            api_key=KEY,
            params={"thinking": {"type": "enabled", "budget_tokens": 9000}},
            max_tokens=9500,
        ).request_body(model="claude-3-5-haiku", messages=HELLO, max_tokens=100)


def test_tools_already_in_anthropic_shape_pass_unchanged() -> None:
    native = {"name": "f", "input_schema": {"type": "object"}}
    assert anthropic_tool(native) == native
    bare = {"type": "function", "function": {"name": "g"}}
    assert anthropic_tool(bare) == {
        "name": "g",
        "input_schema": {"type": "object", "properties": {}},
    }


# -- errors ---------------------------------------------------------------------


async def test_a_wrong_key_is_an_authentication_error(server: ScriptedServer) -> None:
    async with AnthropicClient(server.anthropic_base_url, api_key="sk-ant-wrong") as client:
        with pytest.raises(AuthenticationError, match="invalid x-api-key"):
            await client.create(model="m", messages=HELLO)
    assert len(server.requests) == 1


async def test_overloaded_is_a_server_error_after_retries(server: ScriptedServer) -> None:
    server.add("anthropic", *[ScriptedReply(error="overloaded", retry_after=0.01)] * 2)
    async with AnthropicClient(server.anthropic_base_url, api_key=KEY, max_retries=1) as client:
        with pytest.raises(ServerError) as caught:
            await client.create(model="m", messages=HELLO)
    assert caught.value.status_code == 529
    assert len(server.requests) == 2


async def test_a_prompt_too_long_is_a_context_length_error_and_not_retried(
    server: ScriptedServer, client: AnthropicClient
) -> None:
    server.add("anthropic", ScriptedReply(error="context_length"), ScriptedReply())
    with pytest.raises(ContextLengthExceededError, match="prompt is too long"):
        await client.create(model="m", messages=HELLO)
    assert len(server.requests) == 1


async def test_a_rate_limit_honours_retry_after_and_a_long_one_is_handed_back(
    server: ScriptedServer, client: AnthropicClient
) -> None:
    server.add(
        "anthropic",
        ScriptedReply(error="rate_limit", retry_after=0.3),
        ScriptedReply(text="ok"),
        ScriptedReply(error="rate_limit", retry_after=900),
    )
    started = time.monotonic()
    assert (await client.create(model="m", messages=HELLO)).message.content == "ok"
    assert time.monotonic() - started >= 0.3
    with pytest.raises(RateLimitError) as caught:
        await client.create(model="m", messages=HELLO)
    assert caught.value.retry_after == 900
    assert len(server.requests) == 3


async def test_an_overloaded_event_inside_a_stream_is_a_server_error(
    server: ScriptedServer, client: AnthropicClient
) -> None:
    server.add("anthropic", ScriptedReply(text="partial", cut_after=4, stream_error="overloaded"))
    with pytest.raises(ServerError, match="Overloaded") as caught:
        await collect(client)
    assert caught.value.status_code == 529


async def test_a_stream_cut_off_mid_way_raises_a_clear_error(
    server: ScriptedServer, client: AnthropicClient
) -> None:
    server.add("anthropic", ScriptedReply(text="This will not finish.", cut_after=5))
    with pytest.raises(StreamInterruptedError, match="no message_stop"):
        await collect(client)


async def test_cancelling_the_task_stops_the_request(
    server: ScriptedServer, client: AnthropicClient
) -> None:
    server.add("anthropic", ScriptedReply(text="too late", delay_s=10))
    task = asyncio.create_task(client.create(model="m", messages=HELLO))
    await wait_for(lambda: server.requests)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await wait_for(lambda: server.requests[0].disconnected)


# -- configuration and secrets --------------------------------------------------------


def test_a_key_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        AnthropicClient()


async def test_the_key_is_never_in_repr_or_logs(
    server: ScriptedServer, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    server.add("anthropic", ScriptedReply(text="ok"))
    caplog.set_level(logging.DEBUG)
    async with AnthropicClient(server.anthropic_base_url) as client:
        await client.create(model="m", messages=HELLO)
        shown = [repr(client), repr(vars(client))]
    assert caplog.records
    shown += [r.getMessage() for r in caplog.records]
    assert not [text for text in shown if KEY in text]
    assert sent_key(server.requests[0].headers) == KEY
