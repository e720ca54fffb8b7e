"""OpenAIChatClient against the scripted server on 127.0.0.1 (and MockTransport
for what a real server cannot be made to do)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from typing import Any

import httpx2
import pytest

from memory import (
    AuthenticationError,
    BadRequestError,
    ChatMessage,
    CompletionDone,
    ConfigurationError,
    ContextLengthExceededError,
    OpenAIChatClient,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    ReasoningDelta,
    ServerError,
    StreamingChatClient,
    StreamInterruptedError,
    TextDelta,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallStart,
    stream_completion,
)
from memory.clients.base import ChatStreamEvent
from memory.testing.scripted_server import ScriptedReply, ScriptedServer

from .client_helpers import consume, wait_for

KEY = "sk-test-7f3a9c1e55d2"
HELLO = [ChatMessage.system("You are terse."), ChatMessage.user("Hello")]
TWO_CALLS = [
    {"id": "call_w", "name": "weather", "arguments": {"city": "Lisbon", "unit": "celsius"}},
    {"id": "call_t", "name": "local_time", "arguments": {"tz": "Europe/Lisbon"}},
]


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(api_key=KEY, strict=True) as running:
        yield running


@pytest.fixture
async def client(server: ScriptedServer) -> AsyncIterator[OpenAIChatClient]:
    async with OpenAIChatClient(server.openai_base_url, api_key=KEY, timeout_s=5) as c:
        yield c


async def collect(client: OpenAIChatClient, **kwargs: Any) -> list[ChatStreamEvent]:
    kwargs.setdefault("messages", HELLO)
    return [event async for event in client.stream(model="gpt-test", **kwargs)]


async def test_it_streams_text_as_deltas_and_ends_with_the_whole_reply(
    server: ScriptedServer, client: OpenAIChatClient
) -> None:
    server.add(
        "openai",
        ScriptedReply(
            text="Hello there, how can I help?",
            usage={"input_tokens": 42, "output_tokens": 9, "cached_input_tokens": 32},
        ),
    )
    events = await collect(client)

    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 1
    assert "".join(deltas) == "Hello there, how can I help?"
    assert isinstance(events[-1], CompletionDone)
    done = events[-1].completion
    assert done.message == ChatMessage.assistant("Hello there, how can I help?")
    assert (done.usage.input_tokens, done.usage.output_tokens) == (42, 9)
    assert done.usage.cached_input_tokens == 32
    assert done.finish_reason == "stop"
    assert done.model == "gpt-test"
    sent = server.requests[0].body
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}
    assert sent["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Hello"},
    ]


async def test_parallel_tool_calls_are_assembled_from_their_argument_deltas(
    server: ScriptedServer, client: OpenAIChatClient
) -> None:
    server.add("openai", ScriptedReply(tool_calls=TWO_CALLS))
    tools = [{"type": "function", "function": {"name": "weather", "parameters": {}}}]
    events = await collect(client, tools=tools, max_tokens=300)

    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert starts == [
        ToolCallStart(index=0, id="call_w", name="weather"),
        ToolCallStart(index=1, id="call_t", name="local_time"),
    ]
    pieces = [e for e in events if isinstance(e, ToolCallArgumentsDelta)]
    assert len([p for p in pieces if p.index == 0]) > 1
    message = events[-1].completion.message  # type: ignore[union-attr]
    assert [(c.id, c.name, json.loads(c.arguments)) for c in message.tool_calls] == [
        ("call_w", "weather", {"city": "Lisbon", "unit": "celsius"}),
        ("call_t", "local_time", {"tz": "Europe/Lisbon"}),
    ]
    assert message.content is None
    assert events[-1].completion.finish_reason == "tool_calls"  # type: ignore[union-attr]
    sent = server.requests[0].body
    assert sent["tools"] == tools
    assert sent["max_tokens"] == 300  # not OpenAI itself: the widely known name


async def test_create_returns_calls_reasoning_and_usage_whole(
    server: ScriptedServer, client: OpenAIChatClient
) -> None:
    server.add(
        "openai",
        ScriptedReply(
            text="Checking.",
            tool_calls=TWO_CALLS[:1],
            reasoning="The user wants the weather.",
            usage={"input_tokens": 120, "output_tokens": 30},
        ),
    )
    done = await client.create(model="deepseek-test", messages=HELLO)

    assert done.message.content == "Checking."
    assert done.message.reasoning_content == "The user wants the weather."
    assert done.message.tool_calls[0].name == "weather"
    assert (done.usage.input_tokens, done.usage.output_tokens, done.usage.total_tokens) == (
        120,
        30,
        150,
    )
    assert "stream" not in server.requests[0].body


async def test_reasoning_streams_as_its_own_deltas(
    server: ScriptedServer, client: OpenAIChatClient
) -> None:
    server.add("openai", ScriptedReply(text="42.", reasoning="Six times seven is forty-two."))
    events = await collect(client)

    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    assert reasoning == "Six times seven is forty-two."
    assert events[-1].completion.message.reasoning_content == reasoning  # type: ignore[union-attr]


async def test_reasoning_content_goes_back_on_tool_call_turns_only(
    server: ScriptedServer, client: OpenAIChatClient
) -> None:
    server.add("openai", ScriptedReply(text="ok"))
    call = ToolCall(id="call_1", name="weather", arguments='{"city": "Oslo"}')
    history = [
        *HELLO,
        ChatMessage(role="assistant", tool_calls=(call,), reasoning_content="I need the weather."),
        ChatMessage.tool("12 C", "call_1"),
        ChatMessage(role="assistant", content="12 C in Oslo.", reasoning_content="Easy."),
        ChatMessage.user("Thanks"),
    ]
    await client.create(model="kimi-test", messages=history)

    sent = server.requests[0].body["messages"]
    assert sent[2]["reasoning_content"] == "I need the weather."
    assert "reasoning_content" not in sent[4]


async def test_reasoning_content_is_never_sent_when_told_so(server: ScriptedServer) -> None:
    server.add("openai", ScriptedReply(text="ok"))
    call = ToolCall(id="call_1", name="weather", arguments="{}")
    history = [
        ChatMessage(role="assistant", tool_calls=(call,), reasoning_content="hmm"),
        ChatMessage.tool("12 C", "call_1"),
    ]
    async with OpenAIChatClient(
        server.openai_base_url, api_key=KEY, send_reasoning_content="never"
    ) as client:
        await client.create(model="m", messages=history)
    assert "reasoning_content" not in server.requests[0].body["messages"][0]


async def test_closing_a_stream_early_closes_the_response(
    server: ScriptedServer, client: OpenAIChatClient
) -> None:
    server.add("openai", ScriptedReply(text="word " * 200, chunk_delay_s=0.02))
    stream = stream_completion(client, model="m", messages=HELLO)
    async with aclosing(stream) as events:
        async for event in events:
            assert isinstance(event, TextDelta)
            break
    await wait_for(lambda: server.requests[0].disconnected)


# -- errors ---------------------------------------------------------------------


async def test_a_wrong_key_is_an_authentication_error_and_is_not_retried(
    server: ScriptedServer,
) -> None:
    async with OpenAIChatClient(server.openai_base_url, api_key="sk-wrong") as client:
        with pytest.raises(AuthenticationError) as caught:
            await client.create(model="m", messages=HELLO)
    assert caught.value.status_code == 401
    assert "Incorrect API key" in str(caught.value)
    assert len(server.requests) == 1


async def test_a_context_length_error_is_its_own_bad_request_and_is_not_retried(
    server: ScriptedServer, client: OpenAIChatClient
) -> None:
    server.add("openai", ScriptedReply(error="context_length"), ScriptedReply(text="never sent"))
    with pytest.raises(ContextLengthExceededError) as caught:
        await client.create(model="m", messages=HELLO)
    assert isinstance(caught.value, BadRequestError)
    assert caught.value.status_code == 400
    assert "context_length_exceeded" in caught.value.body
    assert len(server.requests) == 1


async def test_a_bad_request_is_never_retried(
    server: ScriptedServer, client: OpenAIChatClient
) -> None:
    server.add("openai", ScriptedReply(error="bad_request"), ScriptedReply(text="never sent"))
    with pytest.raises(BadRequestError) as caught:
        await client.create(model="m", messages=HELLO)
    assert not isinstance(caught.value, ContextLengthExceededError)
    assert len(server.requests) == 1
    assert len(server.scripts["openai"]) == 1


async def test_a_server_error_is_retried_and_then_succeeds(
    server: ScriptedServer, client: OpenAIChatClient
) -> None:
    server.add(
        "openai", ScriptedReply(error="server", retry_after=0.01), ScriptedReply(text="back")
    )
    done = await client.create(model="m", messages=HELLO)
    assert done.message.content == "back"
    assert len(server.requests) == 2


async def test_server_errors_stop_after_max_retries(server: ScriptedServer) -> None:
    server.add("openai", *[ScriptedReply(error="server", retry_after=0.01)] * 3)
    async with OpenAIChatClient(server.openai_base_url, api_key=KEY, max_retries=2) as client:
        with pytest.raises(ServerError) as caught:
            await client.create(model="m", messages=HELLO)
    assert caught.value.status_code == 500
    assert len(server.requests) == 3


async def test_a_rate_limit_waits_what_retry_after_asks_then_retries(
    server: ScriptedServer, client: OpenAIChatClient
) -> None:
    server.add(
        "openai", ScriptedReply(error="rate_limit", retry_after=0.4), ScriptedReply(text="ok")
    )
    started = time.monotonic()
    done = await client.create(model="m", messages=HELLO)
    assert done.message.content == "ok"
    assert time.monotonic() - started >= 0.4
    assert len(server.requests) == 2


async def test_a_rate_limit_after_the_last_retry_carries_retry_after(
    server: ScriptedServer,
) -> None:
    server.add("openai", *[ScriptedReply(error="rate_limit", retry_after=0.05)] * 2)
    async with OpenAIChatClient(server.openai_base_url, api_key=KEY, max_retries=1) as client:
        with pytest.raises(RateLimitError) as caught:
            await client.create(model="m", messages=HELLO)
    assert caught.value.retry_after == pytest.approx(0.05)
    assert len(server.requests) == 2


async def test_a_long_retry_after_is_not_waited_for_but_handed_to_the_caller(
    server: ScriptedServer, client: OpenAIChatClient
) -> None:
    server.add("openai", ScriptedReply(error="rate_limit", retry_after=3600), ScriptedReply())
    started = time.monotonic()
    with pytest.raises(RateLimitError) as caught:
        await client.create(model="m", messages=HELLO)
    assert time.monotonic() - started < 2
    assert caught.value.retry_after == 3600
    assert len(server.requests) == 1


async def test_a_slow_answer_times_out_and_the_server_sees_the_request_dropped(
    server: ScriptedServer,
) -> None:
    server.add("openai", ScriptedReply(text="late", delay_s=3))
    async with OpenAIChatClient(
        server.openai_base_url, api_key=KEY, timeout_s=0.3, max_retries=0
    ) as client:
        with pytest.raises(ProviderTimeoutError):
            await client.create(model="m", messages=HELLO)
    await wait_for(lambda: server.requests[0].disconnected)


async def test_a_timeout_is_retried_within_max_retries(server: ScriptedServer) -> None:
    server.add("openai", ScriptedReply(delay_s=5), ScriptedReply(text="fast"))
    async with OpenAIChatClient(
        server.openai_base_url, api_key=KEY, timeout_s=1, max_retries=1
    ) as client:
        done = await client.create(model="m", messages=HELLO)
    assert done.message.content == "fast"
    assert len(server.requests) == 2


async def test_cancelling_the_task_stops_the_request(
    server: ScriptedServer, client: OpenAIChatClient
) -> None:
    server.add("openai", ScriptedReply(text="too late", delay_s=10))
    task = asyncio.create_task(client.create(model="m", messages=HELLO))
    await wait_for(lambda: len(server.requests) == 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await wait_for(lambda: server.requests[0].disconnected)


async def test_cancelling_a_stream_closes_its_response(
    server: ScriptedServer, client: OpenAIChatClient
) -> None:
    server.add("openai", ScriptedReply(text="word " * 200, chunk_delay_s=0.02))
    seen: list[ChatStreamEvent] = []
    task = asyncio.create_task(consume(client.stream(model="m", messages=HELLO), seen))
    await wait_for(lambda: len(seen) >= 3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await wait_for(lambda: server.requests[0].disconnected)
    assert not any(isinstance(e, CompletionDone) for e in seen)


async def test_a_stream_cut_off_mid_way_raises_a_clear_error(
    server: ScriptedServer, client: OpenAIChatClient
) -> None:
    server.add("openai", ScriptedReply(text="This answer will never finish.", cut_after=3))
    seen: list[ChatStreamEvent] = []
    with pytest.raises(StreamInterruptedError, match="no finish_reason"):
        await consume(client.stream(model="m", messages=HELLO), seen)
    assert [type(e) for e in seen] == [TextDelta, TextDelta]
    assert isinstance(StreamInterruptedError("x"), ProviderConnectionError)


async def test_an_error_inside_a_stream_is_a_provider_error(
    server: ScriptedServer, client: OpenAIChatClient
) -> None:
    server.add("openai", ScriptedReply(text="partial answer", cut_after=2, stream_error="server"))
    with pytest.raises(ProviderError, match="error processing your request"):
        await collect(client)


# -- configuration and secrets --------------------------------------------------------


def test_openai_itself_needs_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        OpenAIChatClient()
    OpenAIChatClient("http://127.0.0.1:11434/v1")  # a local server needs none


async def test_the_key_comes_from_the_environment_by_default(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    server.add("openai", ScriptedReply(text="ok"))
    async with OpenAIChatClient(server.openai_base_url) as client:
        await client.create(model="m", messages=HELLO)
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"


async def test_the_key_is_never_in_repr_logs_or_errors(
    server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.add("openai", ScriptedReply(text="ok"), ScriptedReply(error="server"))
    caplog.set_level(logging.DEBUG)
    async with OpenAIChatClient(server.openai_base_url, api_key=KEY, max_retries=0) as client:
        await client.create(model="m", messages=HELLO)
        with pytest.raises(ServerError) as caught:
            await client.create(model="m", messages=HELLO)
        error = caught.value
        shown = [repr(client), str(client), repr(vars(client)), str(error), error.body]
    assert caplog.records, "the SDK and httpx2 log at DEBUG: the check must see them"
    shown += [r.getMessage() for r in caplog.records]
    assert not [text for text in shown if KEY in text]
    assert repr(client) == f"OpenAIChatClient(base_url={server.openai_base_url!r})"


def test_it_is_a_streaming_client() -> None:
    assert isinstance(OpenAIChatClient("http://127.0.0.1:1/v1"), StreamingChatClient)


# -- transport failures (MockTransport) --------------------------------------------


def sse(*chunks: dict[str, Any], done: bool = True) -> bytes:
    lines = [f"data: {json.dumps(c)}\n\n" for c in chunks]
    return "".join(lines + (["data: [DONE]\n\n"] if done else [])).encode()


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def mock_client(handler: Any, **kwargs: Any) -> OpenAIChatClient:
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    return OpenAIChatClient("http://model.test/v1", api_key=KEY, http_client=http, **kwargs)


async def test_a_refused_connection_is_a_connection_error_after_retries() -> None:
    attempts: list[httpx2.Request] = []

    def refuse(request: httpx2.Request) -> httpx2.Response:
        attempts.append(request)
        raise httpx2.ConnectError("connection refused", request=request)

    client = mock_client(refuse, max_retries=1)
    with pytest.raises(ProviderConnectionError, match="could not reach"):
        await client.create(model="m", messages=HELLO)
    assert len(attempts) == 2


async def test_a_connection_dropped_mid_stream_is_a_stream_interruption() -> None:
    class Broken(httpx2.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield sse(chunk({"role": "assistant", "content": "Half an"}), done=False)
            raise httpx2.RemoteProtocolError("peer closed connection mid-body")

    def respond(request: httpx2.Request) -> httpx2.Response:
        headers = {"content-type": "text/event-stream"}
        return httpx2.Response(200, headers=headers, stream=Broken())

    seen: list[ChatStreamEvent] = []
    with pytest.raises(StreamInterruptedError, match="broke off"):
        await consume(mock_client(respond).stream(model="m", messages=HELLO), seen)
    assert seen == [TextDelta("Half an")]


async def test_calls_without_index_or_sharing_one_are_told_apart_by_id() -> None:
    # Some compatible servers send each call whole on index 0, or no index at all.
    body = sse(
        chunk(
            {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": "{}"}}]}
        ),
        chunk(
            {"tool_calls": [{"index": 0, "id": "b", "function": {"name": "g", "arguments": "{"}}]}
        ),
        chunk({"tool_calls": [{"function": {"arguments": '"x": 1}'}}]}),
        chunk({"tool_calls": [{"id": "c", "function": {"name": "h", "arguments": "[]"}}]}),
        chunk({}, "tool_calls"),
    )

    def respond(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    events = [e async for e in mock_client(respond).stream(model="m", messages=HELLO)]
    calls = events[-1].completion.message.tool_calls  # type: ignore[union-attr]
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("a", "f", "{}"),
        ("b", "g", '{"x": 1}'),
        ("c", "h", "[]"),
    ]
    assert [e.index for e in events if isinstance(e, ToolCallStart)] == [0, 1, 2]


async def test_reasoning_named_reasoning_is_read_too() -> None:
    body = sse(chunk({"reasoning": "thinking..."}), chunk({"content": "done"}, "stop"))

    def respond(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    events = [e async for e in mock_client(respond).stream(model="m", messages=HELLO)]
    assert events[0] == ReasoningDelta("thinking...")
    assert events[-1].completion.message.reasoning_content == "thinking..."  # type: ignore[union-attr]


async def test_openai_itself_gets_max_completion_tokens() -> None:
    sent: list[dict[str, Any]] = []

    def respond(request: httpx2.Request) -> httpx2.Response:
        sent.append(json.loads(request.content))
        reply = {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt-5",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "hi"},
                    "finish_reason": "stop",
                }
            ],
        }
        return httpx2.Response(200, json=reply)

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(respond))
    client = OpenAIChatClient(api_key=KEY, http_client=http)
    done = await client.create(model="gpt-5", messages=HELLO, max_tokens=50)
    assert sent[0]["max_completion_tokens"] == 50
    assert "max_tokens" not in sent[0]
    assert done.usage.input_tokens is None  # reported nothing: known nothing


async def test_a_call_with_an_empty_id_is_kept_as_sent() -> None:
    reply = {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "gemini-test",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                    ],
                },
            }
        ],
    }
    client = mock_client(lambda request: httpx2.Response(200, json=reply))
    done = await client.create(model="gemini-test", messages=HELLO)
    assert [(c.id, c.name) for c in done.message.tool_calls] == [("", "f")]
