"""``ReActAgent.stream()``: the events of a turn, in order, and interrupted turns."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from typing import Any

import pytest

from memory import (
    AgentBusyError,
    AgentEvent,
    AnswerDelta,
    BasicMemory,
    ChatMessage,
    CompactionFinished,
    CompactionMemory,
    CompactionMemoryConfig,
    CompactionStarted,
    Completion,
    CompletionDone,
    MaxStepsExceeded,
    MessageAdded,
    OpenAIChatClient,
    RateLimitError,
    ReActAgent,
    TextDelta,
    ToolCall,
    ToolCallRequested,
    ToolResultReady,
    TurnError,
    TurnFinished,
    TurnStarted,
    Usage,
    UsageReported,
)
from memory.testing.scripted_server import ScriptedReply, ScriptedServer

from .conftest import FakeClient


def call(name: str, arguments: dict[str, Any], call_id: str = "c1") -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=json.dumps(arguments))


def calling(*tool_calls: ToolCall) -> ChatMessage:
    return ChatMessage.assistant(None, tool_calls)


def get_weather(city: str) -> str:
    """Today's weather in a city."""
    return f"sunny in {city}"


async def collect(agent: ReActAgent, text: str | None) -> list[AgentEvent]:
    return [event async for event in agent.stream(text)]


def kinds(events: Sequence[AgentEvent]) -> list[str]:
    out = []
    for event in events:
        name = type(event).__name__
        if isinstance(event, MessageAdded):
            name += f":{event.message.role}"
        out.append(name)
    return out


class GatedStreamingClient:
    """A streaming client whose reply pieces wait for the test to release them."""

    def __init__(self, pieces: list[str]) -> None:
        self.pieces = pieces
        self.released = asyncio.Queue[None]()
        self.sent = asyncio.Event()
        self.closed = False

    async def create(self, **kwargs: Any) -> Completion:
        raise AssertionError("the agent streams")

    async def stream(
        self,
        *,
        model: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> AsyncGenerator[Any, None]:
        try:
            for piece in self.pieces:
                await self.released.get()
                yield TextDelta(piece)
                self.sent.set()
            text = "".join(self.pieces)
            yield CompletionDone(Completion(ChatMessage.assistant(text), Usage(10, 3)))
        finally:
            self.closed = True


async def test_a_tool_round_yields_its_events_in_order() -> None:
    client = FakeClient([calling(call("get_weather", {"city": "Oslo"})), "Sunny in Oslo."])
    agent = ReActAgent(client=client, model_name="gpt-4o", tools=[get_weather])

    events = await collect(agent, "Weather in Oslo?")

    assert kinds(events) == [
        "TurnStarted",
        "MessageAdded:user",
        "UsageReported",
        "MessageAdded:assistant",
        "ToolCallRequested",
        "ToolResultReady",
        "MessageAdded:tool",
        "AnswerDelta",
        "UsageReported",
        "MessageAdded:assistant",
        "TurnFinished",
    ]
    assert events[0] == TurnStarted(ChatMessage.user("Weather in Oslo?"))
    added = [e for e in events if isinstance(e, MessageAdded)]
    assert [e.seq for e in added] == [0, 1, 2, 3]
    assert [e.unit for e in added] == ["A", "B", "B", "C"]
    assert all(e.tokens > 0 and e.context_tokens for e in added)
    result = next(e for e in events if isinstance(e, ToolResultReady))
    assert (result.call_id, result.content, result.is_error) == ("c1", "sunny in Oslo", False)
    assert events[-1] == TurnFinished("answer", "Sunny in Oslo.", steps=2)


async def test_awaiting_the_agent_consumes_the_same_stream() -> None:
    agent = ReActAgent(client=FakeClient(["Hello there."]), model_name="gpt-4o")
    assert await agent("Hi") == "Hello there."
    assert [m.role for m in agent.memory.messages] == ["user", "assistant"]


async def test_text_streams_in_pieces_from_a_real_server_with_the_providers_usage() -> None:
    reply = ScriptedReply(text="The answer is forty-two.", usage={"input_tokens": 77})
    with ScriptedServer(openai=[reply]) as server:
        async with OpenAIChatClient(server.openai_base_url, api_key="k") as client:
            agent = ReActAgent(client=client, model_name="gpt-4o")
            events = await collect(agent, "What is the answer?")

    deltas = [e.text for e in events if isinstance(e, AnswerDelta)]
    assert len(deltas) > 1
    assert "".join(deltas) == "The answer is forty-two."
    usage = next(e for e in events if isinstance(e, UsageReported))
    assert usage.usage.input_tokens == 77
    assert server.requests[0].body["stream"] is True
    assert events[-1] == TurnFinished("answer", "The answer is forty-two.", steps=1)


async def test_parallel_tool_calls_run_at_once_and_results_are_added_in_call_order() -> None:
    both_started = asyncio.Barrier(2)
    finished: list[str] = []

    async def slow(name: str) -> str:
        """Wait for the other call, then answer slowly."""
        await asyncio.wait_for(both_started.wait(), timeout=2)
        await asyncio.sleep(0.05)
        finished.append(name)
        return f"slow {name}"

    async def fast(name: str) -> str:
        """Wait for the other call, then answer."""
        await asyncio.wait_for(both_started.wait(), timeout=2)
        finished.append(name)
        return f"fast {name}"

    reply = calling(call("slow", {"name": "a"}, "c1"), call("fast", {"name": "b"}, "c2"))
    agent = ReActAgent(client=FakeClient([reply, "done"]), model_name="m", tools=[slow, fast])

    events = await collect(agent, "go")

    ready = [e.call_id for e in events if isinstance(e, ToolResultReady)]
    added = [e.message.tool_call_id for e in events if isinstance(e, MessageAdded)]
    assert ready == ["c2", "c1"]  # as they finished
    assert added[2:4] == ["c1", "c2"]  # as they were called
    assert [e.call_id for e in events if isinstance(e, ToolCallRequested)] == ["c1", "c2"]


async def test_a_tool_that_raises_yields_an_error_result_and_the_turn_goes_on() -> None:
    def broken() -> str:
        """Always fails."""
        raise RuntimeError("disk on fire")

    agent = ReActAgent(
        client=FakeClient([calling(call("broken", {})), "I could not."]),
        model_name="m",
        tools=[broken],
    )
    events = await collect(agent, "try")

    result = next(e for e in events if isinstance(e, ToolResultReady))
    assert result.is_error
    assert result.content == "Error: broken raised RuntimeError: disk on fire"
    assert events[-1] == TurnFinished("answer", "I could not.", steps=2)


async def test_max_steps_ends_the_stream_with_an_error_then_the_finish() -> None:
    replies = [calling(call("get_weather", {"city": "X"}, f"c{i}")) for i in range(3)]
    agent = ReActAgent(
        client=FakeClient(list(replies)), model_name="m", tools=[get_weather], max_steps=2
    )
    events = await collect(agent, "loop")

    error = events[-2]
    assert isinstance(error, TurnError)
    assert isinstance(error.error, MaxStepsExceeded)
    assert events[-1] == TurnFinished("max_steps", "", steps=2)
    assert agent.memory.at_boundary
    with pytest.raises(MaxStepsExceeded):
        await ReActAgent(
            client=FakeClient(list(replies)), model_name="m", tools=[get_weather], max_steps=1
        ).run("loop")


async def test_a_provider_error_is_an_event_and_a_retry_continues_without_a_new_message() -> None:
    error = RateLimitError("slow down", status_code=429)
    client = FakeClient([error, "Here it is."])
    agent = ReActAgent(client=client, model_name="m")

    events = await collect(agent, "question")
    assert isinstance(events[-2], TurnError)
    assert events[-2].error is error
    assert events[-1].reason == "error"  # type: ignore[union-attr]

    retry = await collect(agent, None)
    assert retry[0] == TurnStarted(None)
    assert retry[-1] == TurnFinished("answer", "Here it is.", steps=1)
    assert [m.role for m in agent.memory.messages] == ["user", "assistant"]
    assert [m.role for m in client.requests[1].messages] == ["user"]


async def test_interrupting_a_streaming_reply_keeps_the_partial_answer_marked() -> None:
    client = GatedStreamingClient(["Once upon ", "a time ", "there was"])
    agent = ReActAgent(client=client, model_name="m")
    events: list[AgentEvent] = []
    two_pieces = asyncio.Event()

    async def consume() -> None:
        async for event in agent.stream("Tell me a story"):
            events.append(event)
            if sum(isinstance(e, AnswerDelta) for e in events) == 2:
                two_pieces.set()

    consumer = asyncio.create_task(consume())
    client.released.put_nowait(None)
    client.released.put_nowait(None)
    await asyncio.wait_for(two_pieces.wait(), timeout=2)
    assert agent.interrupt()
    await asyncio.wait_for(consumer, timeout=2)

    assert client.closed  # the HTTP stream was closed, not left to finish
    assert events[-1] == TurnFinished("interrupted", "Once upon a time ", steps=1)
    kept = agent.memory.messages[-1]
    assert kept.to_dict() == {
        "role": "assistant",
        "content": "Once upon a time ",
        "interrupted": True,
    }
    assert "interrupted" not in kept.to_api_dict()
    assert not agent.running
    assert not agent.interrupt()


async def test_interrupting_tools_answers_every_call_and_keeps_finished_results() -> None:
    hanging = asyncio.Event()

    def quick() -> str:
        """Answers at once."""
        return "quick result"

    async def hang() -> str:
        """Never returns."""
        hanging.set()
        await asyncio.Event().wait()
        return "unreachable"

    reply = calling(call("quick", {}, "c1"), call("hang", {}, "c2"))
    agent = ReActAgent(client=FakeClient([reply]), model_name="m", tools=[quick, hang])
    events: list[AgentEvent] = []
    quick_done = asyncio.Event()

    async def consume() -> None:
        async for event in agent.stream("both"):
            events.append(event)
            if isinstance(event, ToolResultReady):
                quick_done.set()

    consumer = asyncio.create_task(consume())
    await asyncio.wait_for(hanging.wait(), timeout=2)
    await asyncio.wait_for(quick_done.wait(), timeout=2)
    agent.interrupt()
    await asyncio.wait_for(consumer, timeout=2)

    tools = [m for m in agent.memory.messages if m.role == "tool"]
    assert [(m.tool_call_id, m.text) for m in tools] == [
        ("c1", "quick result"),
        ("c2", "Cancelled: the turn was stopped before this call finished."),
    ]
    assert agent.memory.at_boundary
    assert events[-1] == TurnFinished("interrupted", "", steps=1)


async def test_closing_the_stream_early_interrupts_the_turn_and_leaves_a_valid_context() -> None:
    client = GatedStreamingClient(["partial ", "rest"])
    agent = ReActAgent(client=client, model_name="m")
    client.released.put_nowait(None)
    async with aclosing(agent.stream("go")) as events:
        async for event in events:
            if isinstance(event, AnswerDelta):
                break

    assert [m.role for m in agent.memory.messages] == ["user", "assistant"]
    assert agent.memory.messages[-1].extra == {"interrupted": True}
    assert not agent.running


async def test_a_second_stream_while_a_turn_runs_is_refused() -> None:
    client = GatedStreamingClient(["a"])
    agent = ReActAgent(client=client, model_name="m")
    first = agent.stream("one")
    assert isinstance(await anext(first), TurnStarted)
    with pytest.raises(AgentBusyError):
        await anext(agent.stream("two"))
    client.released.put_nowait(None)
    rest = [e async for e in first]
    assert rest[-1] == TurnFinished("answer", "a", steps=1)


async def test_a_compaction_shows_as_started_then_finished_with_its_token_counts() -> None:
    memory = CompactionMemory(
        config=CompactionMemoryConfig(token_threshold=300),
        compact_fn=lambda messages, system: "They talked about filler words.",
    )
    client = FakeClient(["words " * 100, "Final."])
    agent = ReActAgent(client=client, model_name="gpt-4o", memory=memory)
    await agent.run("filler " * 100)
    assert memory.compaction_count == 0

    events = await collect(agent, "more " * 100)

    names = kinds(events)
    assert "CompactionStarted" in names
    started = names.index("CompactionStarted")
    assert names[started + 1] == "CompactionFinished"
    begin = events[started]
    done = events[started + 1]
    assert isinstance(begin, CompactionStarted)
    assert isinstance(done, CompactionFinished)
    assert begin.tokens_before > begin.threshold == 300
    assert done.tokens_before == begin.tokens_before
    assert done.tokens_after is not None
    assert done.tokens_after < done.tokens_before
    assert done.number == memory.compaction_count


class ToolLendingMemory(BasicMemory):
    """A memory with tools of its own that counts tool schemas and provider tokens."""

    def __init__(self) -> None:
        super().__init__()
        self.schemas: list[dict[str, Any]] = []
        self.provider_tokens: list[int | None] = []

    def build_tools(self) -> list[Any]:
        async def search_log(query: str) -> str:
            """Search the whole log."""
            return f"found {query}"

        return [search_log]

    def set_tools(self, schemas: Sequence[Mapping[str, Any]]) -> None:
        super().set_tools(schemas)
        self.schemas = [dict(schema) for schema in schemas]

    async def add_message(
        self, message: ChatMessage | Mapping[str, Any], *, usage: Usage | None = None
    ) -> ChatMessage:
        self.provider_tokens.append(usage.input_tokens if usage else None)
        return await super().add_message(message, usage=usage)


async def test_a_memory_lends_its_tools_and_learns_their_schemas_and_the_providers_count() -> None:
    memory = ToolLendingMemory()
    client = FakeClient([calling(call("search_log", {"query": "Mia"})), "Found her."])
    agent = ReActAgent(client=client, model_name="m", tools=[get_weather], memory=memory)

    assert [s["function"]["name"] for s in memory.schemas] == ["get_weather", "search_log"]
    await agent.run("Where is Mia?")
    assert [m.text for m in memory.messages if m.role == "tool"] == ["found Mia"]
    assert client.requests[0].tools == memory.schemas
    assert memory.provider_tokens == [None, None, None, None]  # the fake reports no usage


async def test_the_providers_input_tokens_go_to_a_memory_that_takes_them() -> None:
    memory = ToolLendingMemory()
    client = GatedStreamingClient(["Hi."])
    client.released.put_nowait(None)
    agent = ReActAgent(client=client, model_name="m", memory=memory)
    await agent.run("hello")
    assert memory.provider_tokens == [None, 10]  # the user's message has no count; the reply has
