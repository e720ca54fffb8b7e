"""The memory tools the agent gets from a logging memory, and their reading of the log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memory import (
    BasicMemory,
    CompactionMemory,
    CompactionMemoryConfig,
    InMemoryLogStore,
    JSONLLogStore,
    LogStore,
)
from memory.agent import tool_schema
from memory.compaction.tools import MAX_RESULTS, read_summary, search_records

from .conftest import answer, calls, result, user

LONG = "word " * 250


def logging_memory(
    store: LogStore, threshold: int = 400, *, enable_memory_tools: bool = True, **config: Any
) -> CompactionMemory:
    summaries = iter(["first summary", "second summary", "third summary"])
    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="tools", token_threshold=threshold, **config),
        compact_fn=lambda messages, system_prompt: next(summaries),
        log_store=store,
        model_name="gpt-4o",
        enable_memory_tools=enable_memory_tools,
    )
    memory.set_system_prompt("You book flights.")
    return memory


@pytest.fixture(params=["jsonl", "in-memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> LogStore:
    return JSONLLogStore(tmp_path) if request.param == "jsonl" else InMemoryLogStore()


def tools_by_name(memory: CompactionMemory) -> dict[str, Any]:
    return {fn.__name__: fn for fn in memory.build_tools()}


async def test_a_logging_memory_gives_two_tools_with_schemas_the_agent_can_derive(
    store: LogStore,
) -> None:
    memory = logging_memory(store)
    tools = tools_by_name(memory)
    assert sorted(tools) == ["read_compaction_summary", "search_conversation_log"]
    search = tool_schema(tools["search_conversation_log"])["function"]
    assert search["parameters"]["required"] == ["query"]
    assert search["parameters"]["properties"]["max_results"]["type"] == "integer"
    assert "case-insensitive" in search["description"]
    read = tool_schema(tools["read_compaction_summary"])["function"]
    assert read["parameters"]["required"] == []
    assert "-1" in read["parameters"]["properties"]["compaction_number"]["description"]


def test_no_tools_without_a_log_or_when_turned_off(store: LogStore) -> None:
    assert CompactionMemory(model_name="gpt-4o").build_tools() == []
    assert BasicMemory().build_tools() == []
    assert logging_memory(store, enable_memory_tools=False).build_tools() == []


async def test_search_finds_a_detail_that_was_compacted_away(store: LogStore) -> None:
    memory = logging_memory(store)
    await memory.add_message(user("My passport number is P-99812X. " + LONG))
    await memory.add_message(answer("Noted. " + LONG))
    assert memory.compaction_count == 1
    assert all("P-99812X" not in m.text for m in memory.get_context())

    found = json.loads(await tools_by_name(memory)["search_conversation_log"]("p-99812x"))

    assert found["status"] == "ok"
    assert found["count"] == found["total_matches"] == 1
    (hit,) = found["results"]
    assert hit["seq"] == 0
    assert hit["role"] == "user"
    assert "P-99812X" in hit["text"]


async def test_search_looks_in_tool_calls_and_full_tool_results(store: LogStore) -> None:
    memory = logging_memory(store, threshold=100_000, max_tool_result_tokens=500)
    await memory.add_message(user("find it"))
    await memory.add_message(calls("c1", name="lookup"))
    huge = "lorem ipsum " * 5_000 + "needle-at-the-end"
    await memory.add_message(result("c1", huge, name="lookup"))
    # The context holds a truncated result; the log holds the whole one.
    assert "needle-at-the-end" not in memory.get_context()[-1].text
    search = tools_by_name(memory)["search_conversation_log"]

    by_call = json.loads(await search('"q": "c1"'))
    by_result = json.loads(await search("NEEDLE-AT-THE-END"))

    assert [h["seq"] for h in by_call["results"]] == [1]
    (hit,) = by_result["results"]
    assert hit["seq"] == 2
    assert hit["name"] == "lookup"
    assert hit["text"].endswith("needle-at-the-end")
    assert hit["text"].startswith("...")
    assert len(hit["text"]) < 1_000


def test_search_output_is_bounded_in_results_and_characters() -> None:
    records = [
        {"type": "message", "seq": i, "message": {"role": "user", "content": f"item {i} " * 200}}
        for i in range(500)
    ]
    few = search_records(records, "item", max_results=3)
    assert few["count"] == 3
    assert few["total_matches"] == 500
    assert few["truncated"] is True
    assert [h["seq"] for h in few["results"]] == [0, 1, 2]
    many = search_records(records, "ITEM", max_results=10_000, output_chars=5_000)
    assert many["count"] <= MAX_RESULTS
    assert len(json.dumps(many["results"])) <= 5_000
    assert search_records(records, "   ")["status"] == "error"
    assert search_records(records, "absent")["results"] == []


async def test_read_summary_by_number_and_latest(store: LogStore) -> None:
    memory = logging_memory(store)
    read = tools_by_name(memory)["read_compaction_summary"]
    assert json.loads(await read())["status"] == "no_summaries"

    for i in range(2):
        await memory.add_message(user(f"q{i} " + LONG))
        await memory.add_message(answer(LONG))
    assert memory.compaction_count == 2

    latest = json.loads(await read())
    first = json.loads(await read(1))
    missing = json.loads(await read(7))
    assert (latest["compaction_number"], latest["summary"]) == (2, "second summary")
    assert (first["compaction_number"], first["summary"]) == (1, "first summary")
    assert first["reverted"] is False
    assert missing["status"] == "not_found"
    assert "1, 2" in missing["message"]


async def test_a_reverted_compaction_is_marked_and_reset_restarts_the_numbers(
    store: LogStore,
) -> None:
    memory = logging_memory(store)
    await memory.add_message(user("q " + LONG))
    await memory.add_message(answer(LONG))
    memory.revert_last_compaction("wrong")
    read = tools_by_name(memory)["read_compaction_summary"]
    assert json.loads(await read(1))["reverted"] is True

    memory.reset()
    await memory.add_message(user("again " + LONG))
    await memory.add_message(answer(LONG))
    again = json.loads(await read(1))
    assert again["summary"] == "second summary"
    assert again["reverted"] is False


def test_read_summary_numbers_compactions_of_reference_logs_by_order() -> None:
    records = [
        {"type": "compaction", "summary": "a"},
        {"type": "compaction", "summary": "b"},
    ]
    assert read_summary(records, 2)["summary"] == "b"
    assert read_summary(records, -1)["summary"] == "b"
    assert read_summary(records, 0)["status"] == "not_found"
