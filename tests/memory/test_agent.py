"""The ReAct loop: tool rounds, recovery from bad tool calls, limits and errors."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal, Optional

import pytest

from memory import (
    BasicMemory,
    ChatMessage,
    CompactionMemory,
    CompactionMemoryConfig,
    ConfigurationError,
    MotusMemoryError,
    RateLimitError,
    ToolCall,
)
from memory.agent import MaxStepsExceeded, ReActAgent, tool_schema

from .conftest import FakeClient


def call(name: str, arguments: str | dict[str, Any], call_id: str = "c1") -> ToolCall:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCall(id=call_id, name=name, arguments=text)


def calling(*tool_calls: ToolCall) -> ChatMessage:
    return ChatMessage.assistant(None, tool_calls)


def get_weather(city: str) -> str:
    """Today's weather in a city."""
    return f"sunny in {city}"


def divide(a: float, b: float) -> float:
    """Divide a by b."""
    return a / b


def tool_results(agent: ReActAgent) -> list[str]:
    return [m.text for m in agent.memory.messages if m.role == "tool"]


async def test_it_runs_a_tool_round_then_returns_the_final_answer() -> None:
    client = FakeClient([calling(call("get_weather", {"city": "Paris"})), "It is sunny in Paris."])
    agent = ReActAgent(
        client=client, model_name="gpt-4o", system_prompt="Be brief.", tools=[get_weather]
    )

    assert await agent.run("Weather in Paris?") == "It is sunny in Paris."

    messages = agent.memory.messages
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[2] == ChatMessage.tool("sunny in Paris", "c1", name="get_weather")
    assert [r.model for r in client.requests] == ["gpt-4o", "gpt-4o"]
    assert client.requests[0].tools == agent.tool_schemas
    assert client.requests[0].messages[0] == ChatMessage.system("Be brief.")


async def test_the_messages_sent_to_the_model_are_exactly_the_memory_context() -> None:
    memory = CompactionMemory(
        config=CompactionMemoryConfig(token_threshold=400),
        compact_fn=lambda messages, system_prompt: "they asked about Paris",
    )
    sent_equals_context: list[bool] = []
    client = FakeClient(
        ["Paris is in France. " + "word " * 600, calling(call("read", {})), "Done."],
        on_request=lambda messages: sent_equals_context.append(messages == memory.get_context()),
    )

    def read() -> str:
        """Read the file."""
        return "file contents"

    agent = ReActAgent(client=client, model_name="gpt-4o", tools=[read], memory=memory)
    await agent.run("Where is Paris?")
    await agent.run("Read the file.")

    assert sent_equals_context == [True, True, True]
    assert memory.compaction_count == 1
    # No system prompt, so no system message: the continuation comes first.
    assert "they asked about Paris" in client.requests[-1].messages[0].text


async def test_parallel_tool_calls_run_concurrently_and_results_keep_the_call_order() -> None:
    started: list[str] = []
    both_started = asyncio.Event()

    async def slow(name: str, delay: float) -> str:
        """Wait, then echo the name."""
        started.append(name)
        if len(started) == 2:
            both_started.set()
        await asyncio.wait_for(both_started.wait(), timeout=2)
        await asyncio.sleep(delay)
        return name

    client = FakeClient(
        [
            calling(
                call("slow", {"name": "first", "delay": 0.05}, "c1"),
                call("slow", {"name": "second", "delay": 0}, "c2"),
            ),
            "both done",
        ]
    )
    agent = ReActAgent(client=client, model_name="gpt-4o", tools=[slow])

    assert await agent.run("go") == "both done"
    tools = [m for m in agent.memory.messages if m.role == "tool"]
    assert [(m.tool_call_id, m.text) for m in tools] == [("c1", "first"), ("c2", "second")]


async def test_an_unknown_tool_gets_an_error_result_and_the_model_recovers() -> None:
    client = FakeClient([calling(call("teleport", {})), "I cannot teleport."])
    agent = ReActAgent(client=client, model_name="gpt-4o", tools=[get_weather])

    assert await agent.run("Beam me up") == "I cannot teleport."
    assert tool_results(agent) == ["Error: unknown tool 'teleport'; the tools are ['get_weather']"]
    assert client.requests[1].messages[-1].role == "tool"


async def test_a_tool_that_raises_becomes_an_error_result() -> None:
    client = FakeClient([calling(call("divide", {"a": 1, "b": 0})), "Cannot divide by 0."])
    agent = ReActAgent(client=client, model_name="gpt-4o", tools=[divide])

    assert await agent.run("1/0?") == "Cannot divide by 0."
    assert tool_results(agent) == ["Error: divide raised ZeroDivisionError: division by zero"]


async def test_arguments_that_are_not_json_or_do_not_fit_become_error_results() -> None:
    client = FakeClient(
        [
            calling(
                call("divide", '{"a": 1, "b":', "c1"),
                call("divide", {"a": 1, "c": 2}, "c2"),
                call("divide", "[1, 2]", "c3"),
                call("divide", {"a": 6, "b": 3}, "c4"),
            ),
            "ok",
        ]
    )
    agent = ReActAgent(client=client, model_name="gpt-4o", tools=[divide])

    await agent.run("divide things")
    bad_json, bad_name, not_object, good = tool_results(agent)
    assert bad_json.startswith("Error: the arguments of divide are not valid JSON")
    assert bad_name.startswith("Error: bad arguments for divide:")
    assert not_object == "Error: bad arguments for divide: the arguments must be a JSON object"
    assert good == "2.0"


async def test_it_stops_after_max_steps_with_every_message_in_memory() -> None:
    client = FakeClient([calling(call("get_weather", {"city": "Oslo"}))] * 5)
    agent = ReActAgent(client=client, model_name="gpt-4o", tools=[get_weather], max_steps=3)

    with pytest.raises(MaxStepsExceeded, match="no final answer after 3 model calls") as caught:
        await agent.run("Weather?")

    assert isinstance(caught.value, MotusMemoryError)
    assert len(client.requests) == 3
    assert len(tool_results(agent)) == 3
    assert agent.memory.at_boundary


async def test_memory_type_compact_builds_a_compaction_memory_that_uses_the_agents_model() -> None:
    client = FakeClient(["Hello! " + "word " * 300, "they said hi"])
    agent = ReActAgent(client=client, model_name="gpt-4o", memory_type="compact")
    assert isinstance(agent.memory, CompactionMemory)
    assert agent.memory.model_name == "gpt-4o"

    await agent.run("Hi")
    assert await agent.memory.compact() == "they said hi"
    assert [r.model for r in client.requests] == ["gpt-4o", "gpt-4o"]


async def test_set_model_fills_only_what_the_memory_was_not_given() -> None:
    memory = CompactionMemory(model_name="claude-haiku-4-5")
    ReActAgent(client=FakeClient(), model_name="gpt-4o", memory=memory)
    assert memory.model_name == "claude-haiku-4-5"


def test_the_default_memory_is_basic_memory() -> None:
    assert type(ReActAgent(client=FakeClient(), model_name="gpt-4o").memory) is BasicMemory


def test_giving_both_memory_and_memory_type_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="not both"):
        ReActAgent(client=FakeClient(), model_name="m", memory=BasicMemory(), memory_type="basic")


@pytest.mark.parametrize("max_steps", [0, -1, True, 2.5])
def test_max_steps_below_one_is_a_configuration_error(max_steps: Any) -> None:
    with pytest.raises(ConfigurationError, match="max_steps"):
        ReActAgent(client=FakeClient(), model_name="m", max_steps=max_steps)


def test_an_empty_system_prompt_keeps_the_memorys_own() -> None:
    memory = BasicMemory(system_prompt="from the log")
    ReActAgent(client=FakeClient(), model_name="m", memory=memory)
    assert memory.system_prompt == "from the log"
    ReActAgent(client=FakeClient(), model_name="m", memory=memory, system_prompt="new")
    assert memory.system_prompt == "new"


async def test_a_provider_error_propagates_after_the_memory_recorded_everything() -> None:
    error = RateLimitError("slow down", status_code=429)
    client = FakeClient([calling(call("get_weather", {"city": "Rome"})), error])
    agent = ReActAgent(client=client, model_name="gpt-4o", tools=[get_weather])

    with pytest.raises(RateLimitError) as caught:
        await agent.run("Weather in Rome?")

    assert caught.value is error
    assert [m.role for m in agent.memory.messages] == ["user", "assistant", "tool"]


async def test_cancellation_propagates_and_leaves_a_context_the_next_run_continues() -> None:
    entered = asyncio.Event()

    async def hang() -> str:
        """Never returns."""
        entered.set()
        await asyncio.Event().wait()
        return "unreachable"

    client = FakeClient([calling(call("hang", {})), "fresh start"])
    agent = ReActAgent(client=client, model_name="gpt-4o", tools=[hang])
    task = asyncio.create_task(agent.run("wait forever"))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert agent.memory.at_boundary
    cancelled = agent.memory.messages[-1]
    assert (cancelled.role, cancelled.tool_call_id) == ("tool", "c1")
    assert cancelled.text.startswith("Cancelled:")
    assert await agent.run("never mind") == "fresh start"
    last_request = client.requests[-1].messages
    assert [m.role for m in last_request] == ["user", "assistant", "tool", "user"]
    assert last_request[2].tool_call_id == "c1"


async def test_it_accepts_a_chat_message_or_content_parts_as_the_user_message() -> None:
    agent = ReActAgent(client=FakeClient(["one", "two"]), model_name="gpt-4o")
    parts = [{"type": "text", "text": "look at this"}]

    await agent.run(ChatMessage.user("hello"))
    await agent.run(parts)

    assert agent.memory.messages[0] == ChatMessage.user("hello")
    assert agent.memory.messages[2] == ChatMessage.user(parts)


async def test_no_tools_are_sent_when_the_agent_has_none_and_results_are_json_encoded() -> None:
    def stats() -> dict[str, Any]:
        """Numbers."""
        return {"mean": 1.5, "city": "Zürich"}

    bare = FakeClient(["hi"])
    await ReActAgent(client=bare, model_name="m").run("hi")
    assert bare.requests[0].tools is None

    client = FakeClient([calling(call("stats", "")), "done"])
    agent = ReActAgent(client=client, model_name="m", tools=[stats])
    await agent.run("stats?")
    assert tool_results(agent) == ['{"mean": 1.5, "city": "Zürich"}']


def test_a_tool_schema_comes_from_the_signature_and_the_docstring() -> None:
    def search(
        query: str,
        limit: int,
        score: float = 0.5,
        exact: bool = False,
        tags: list[str] | None = None,
        filters: dict[str, int] | None = None,
        order: Literal["asc", "desc"] = "asc",
        lang: Optional[str] = None,  # noqa: UP045 (the typing spelling must work too)
        anything=None,
    ) -> list[str]:
        """Search the documents
        by keyword.

        Args:
            query: Words to look for.
            limit (int): At most this many hits.
        """
        return []

    function = tool_schema(search)["function"]

    assert function["name"] == "search"
    assert function["description"] == "Search the documents by keyword."
    assert function["parameters"] == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Words to look for."},
            "limit": {"type": "integer", "description": "At most this many hits."},
            "score": {"type": "number"},
            "exact": {"type": "boolean"},
            "tags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]},
            "filters": {
                "anyOf": [
                    {"type": "object", "additionalProperties": {"type": "integer"}},
                    {"type": "null"},
                ]
            },
            "order": {"enum": ["asc", "desc"]},
            "lang": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "anything": {},
        },
        "required": ["query", "limit"],
    }


class Point:
    pass


def takes_a_point(p: Point) -> None:
    """Unsupported."""


def test_tools_that_cannot_be_described_are_configuration_errors() -> None:
    client = FakeClient()
    with pytest.raises(ConfigurationError, match="parameter p: no JSON schema"):
        ReActAgent(client=client, model_name="m", tools=[takes_a_point])
    with pytest.raises(ConfigurationError, match="a tool must be a function named"):
        ReActAgent(client=client, model_name="m", tools=[lambda: "x"])
    with pytest.raises(ConfigurationError, match="two tools are named 'get_weather'"):
        ReActAgent(client=client, model_name="m", tools=[get_weather, get_weather])
