"""What the agent sends is what the threshold guards: tool schemas, provider usage, calibration."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory import (
    BasicMemory,
    ChatMessage,
    CompactionMemory,
    CompactionMemoryConfig,
    InMemoryLogStore,
    InvalidMessageError,
    TokenCalibration,
    TokenCounter,
    Usage,
)
from memory.agent import tool_schema
from memory.log import records

from .conftest import answer, calls, result, user
from .test_invariants import conversations

COUNTER = TokenCounter.for_model("gpt-4o")


def find_hotels(city: str, nights: int = 1) -> str:
    """Find hotels."""
    return ""


def big_schema(tokens: int) -> dict[str, Any]:
    """A real tool schema whose JSON is ``tokens`` tokens, give or take a few."""
    schema = tool_schema(find_hotels)
    sentence = "Consider availability, price, rating and distance to the venue. "
    repeats = 0
    while COUNTER.count(json.dumps([schema])) < tokens - 10:
        repeats += 1
        schema["function"]["description"] = "Find hotels. " + sentence * repeats
    return schema


def request_tokens(messages: list[ChatMessage], tools: list[dict[str, Any]] | None) -> int:
    """The size of a request as sent: its messages and its tool schemas, as the
    provider renders them."""
    return COUNTER.context_tokens(messages) + COUNTER.tools_tokens(tools or [])


async def drive_agent_turns(memory: CompactionMemory, tools: list[dict[str, Any]]) -> list[int]:
    """Play an agent's loop (one tool call, then an answer, per turn) and return
    the size of every request it would send."""
    sizes: list[int] = []
    for turn in range(12):
        await memory.add_message(user(f"Turn {turn}: find a hotel in city {turn}. " + "x " * 60))
        sizes.append(request_tokens(memory.get_context(), tools))
        await memory.add_message(calls(f"c{turn}", name="find_hotels"))
        await memory.add_message(result(f"c{turn}", "Hotel Lisboa, 120 EUR. " * 12))
        sizes.append(request_tokens(memory.get_context(), tools))
        await memory.add_message(answer("Hotel Lisboa is free for 120 EUR a night. " * 4))
    return sizes


def compacting_memory(threshold: int = 2_000) -> CompactionMemory:
    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="size", token_threshold=threshold),
        compact_fn=lambda messages, system_prompt: "The user asked for hotels; all found.",
        model_name="gpt-4o",
        log_store=InMemoryLogStore(),
    )
    memory.set_system_prompt("You find hotels.")
    return memory


async def test_with_its_tool_schemas_known_no_request_passes_the_threshold() -> None:
    schema = big_schema(790)
    assert 780 <= COUNTER.count(json.dumps([schema])) <= 800
    memory = compacting_memory()
    memory.set_tools([schema])

    sizes = await drive_agent_turns(memory, [schema])

    assert memory.compaction_count >= 2
    assert max(sizes) <= 2_000


async def test_without_the_tool_schemas_requests_pass_the_threshold() -> None:
    # The control: the same run, the memory not told about the tools.
    schema = big_schema(790)
    memory = compacting_memory()

    sizes = await drive_agent_turns(memory, [schema])

    assert max(sizes) > 2_000


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    conversation=conversations(),
    schema_tokens=st.integers(50, 600),
    threshold=st.integers(700, 1_500),
)
def test_the_estimate_is_always_the_size_of_the_request_as_sent(
    conversation: list[dict[str, Any]], schema_tokens: int, threshold: int
) -> None:
    schema = big_schema(schema_tokens)
    memory = compacting_memory(threshold)
    memory.set_tools([schema])

    async def drive() -> None:
        for message in conversation:
            await memory.add_message(message)
            sent = request_tokens(memory.get_context(), [schema])
            assert memory.estimate_context_tokens() == sent

    asyncio.run(drive())


def test_set_tools_counts_the_schemas_once_and_the_estimate_includes_them() -> None:
    memory = BasicMemory(model_name="gpt-4o")
    before = memory.estimate_context_tokens()
    schema = big_schema(300)
    memory.set_tools([schema])
    assert memory.tool_schema_tokens == COUNTER.tools_tokens([schema])
    assert memory.estimate_context_tokens() == before + memory.tool_schema_tokens
    assert memory.tool_schemas == [schema]
    memory.set_tools([])
    assert memory.estimate_context_tokens() == before


def test_tools_set_before_the_model_is_known_are_counted_again_with_its_tokenizer() -> None:
    memory = BasicMemory()
    memory.set_tools([big_schema(300)])
    memory.set_model(model_name="gpt-4")  # cl100k, not the default o200k
    expected = TokenCounter.for_model("gpt-4").tools_tokens(memory.tool_schemas)
    assert expected != TokenCounter.for_model("gpt-4o").tools_tokens(memory.tool_schemas)
    assert memory.tool_schema_tokens == expected


# -- provider usage and calibration ---------------------------------------------------


async def test_provider_input_tokens_go_into_the_assistant_message_record() -> None:
    memory = compacting_memory(threshold=100_000)
    await memory.add_message(user("hello"))
    await memory.add_message(answer("hi"), usage=Usage(input_tokens=321, output_tokens=2))
    log = [r for r in memory.log_store.read("size") if r["type"] == records.MESSAGE]  # type: ignore[union-attr]
    assert "provider_tokens" not in log[0]
    assert log[1]["provider_tokens"] == 321


async def test_usage_on_a_message_that_is_not_a_reply_is_refused() -> None:
    memory = compacting_memory()
    with pytest.raises(InvalidMessageError):
        await memory.add_message(user("hello"), usage=Usage(input_tokens=10))


async def test_reported_usage_teaches_the_calibration_its_ratio_to_the_request_estimate() -> None:
    memory = compacting_memory(threshold=100_000)
    memory.set_tools([big_schema(300)])
    await memory.add_message(user("a question " * 40))
    sent = memory.estimate_context_tokens()  # what the request cost, tools included
    await memory.add_message(answer("ok"), usage=Usage(input_tokens=round(sent * 1.25)))
    assert memory.calibration.factor("gpt-4o") == pytest.approx(1.25, abs=0.01)
    assert memory.calibration.get("gpt-4o").samples == 1


async def test_a_learned_factor_makes_compaction_fire_before_the_provider_count_passes() -> None:
    threshold = 2_000
    plain = compacting_memory(threshold)
    calibrated = compacting_memory(threshold)
    for memory in (plain, calibrated):
        await memory.add_message(user("Plan a trip. " + "detail " * 700))
        # The provider counts 1.5 times what the library estimates for this model.
        reported = round(memory.estimate_context_tokens() * 1.5)
        usage = Usage(input_tokens=reported) if memory is calibrated else None
        await memory.add_message(answer("Planned."), usage=usage)
        await memory.add_message(user("Now book it."))
        await memory.add_message(calls("c1", content="Booking."))
        await memory.add_message(result("c1", "found " * 700))
    # Estimate ~1,400: under the threshold, but ~2,100 as the provider counts.
    assert 1_300 < plain.estimate_context_tokens() <= threshold
    assert plain.compaction_count == 0
    assert calibrated.threshold_estimate == int(threshold / calibrated.calibration.factor("gpt-4o"))
    assert calibrated.compaction_count == 1
    assert calibrated.estimate_context_tokens() <= calibrated.threshold_estimate


def test_a_memory_can_share_a_calibration_with_others() -> None:
    shared = TokenCalibration()
    shared.observe("gpt-4o", 1_000, 1_100)
    memory = compacting_memory(threshold=1_000)
    memory.calibration = shared
    assert memory.threshold_estimate == int(1_000 / 1.1)


async def test_a_fork_keeps_the_tools_and_the_calibration() -> None:
    memory = compacting_memory(threshold=100_000)
    memory.set_tools([big_schema(200)])
    await memory.add_message(user("hello " * 100))
    await memory.add_message(answer("hi"), usage=Usage(input_tokens=500))
    child = memory.fork()
    assert child.tool_schemas == memory.tool_schemas
    assert child.estimate_context_tokens() == memory.estimate_context_tokens()
    assert child.calibration is memory.calibration


async def test_a_restored_memory_learns_the_calibration_again_from_its_log() -> None:
    memory = compacting_memory(threshold=100_000)
    memory.set_tools([big_schema(300)])
    for turn, ratio in enumerate((1.2, 1.3, 1.25)):
        await memory.add_message(user(f"question {turn} " * 80))
        reported = round(memory.estimate_context_tokens() * ratio)
        await memory.add_message(answer("ok"), usage=Usage(input_tokens=reported))

    restored = CompactionMemory.restore_from_log("size", log_store=memory.log_store)

    assert restored.calibration.get("gpt-4o") == memory.calibration.get("gpt-4o")
    assert restored.calibration.get("gpt-4o").samples == 3
