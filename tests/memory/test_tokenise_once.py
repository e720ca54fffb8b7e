"""Each text is tokenised once on its way in, and never again on restore."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from memory import (
    BasicMemory,
    ChatMessage,
    CompactionMemory,
    CompactionMemoryConfig,
    TokenCounter,
    ToolCall,
)

MODEL = "gpt-4o"


@pytest.fixture
def encoded(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every text the model's counter hands to tiktoken, with how often."""
    counter = TokenCounter.for_model(MODEL)
    seen: Counter[str] = Counter()
    real = counter._encode

    def spy(text: str) -> Any:
        seen[text] += 1
        return real(text)

    monkeypatch.setattr(counter, "_encode", spy)
    return seen


def conversation() -> list[ChatMessage]:
    call = ToolCall(id="call_1", name="search_flights", arguments='{"from": "JFK", "to": "SEA"}')
    return [
        ChatMessage.user("Find me a direct flight from JFK to Seattle on May 20, please."),
        ChatMessage.assistant("Let me look that up.", tool_calls=[call]),
        ChatMessage.tool("HAT083 departs 08:10, arrives 11:25, $312. " * 40, "call_1"),
        ChatMessage.assistant("HAT083 leaves at 08:10 and costs $312."),
    ]


async def test_adding_messages_tokenises_each_text_once(
    encoded: Counter[str], tmp_path: Path
) -> None:
    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="once", log_base_path=tmp_path),
        model_name=MODEL,
    )
    messages = conversation()
    for message in messages:
        await memory.add_message(message)
    texts = [m.text for m in messages] + [messages[1].tool_calls[0].arguments]
    assert {text: encoded[text] for text in texts} == dict.fromkeys(texts, 1)


async def test_a_basic_memory_counts_a_message_when_a_size_is_first_asked_for(
    encoded: Counter[str],
) -> None:
    """Only the tool result is encoded on its way in (its count decides its
    cut); the rest when a size is asked for, once, and every figure is the
    one an eager count gives."""
    memory = BasicMemory(model_name=MODEL, max_tool_result_tokens=100)
    messages = conversation()
    for message in messages:
        await memory.add_message(message)
    others = [messages[0].text, messages[1].text, messages[3].text]
    assert [encoded[text] for text in others] == [0, 0, 0]
    assert encoded[messages[2].text] == 1

    trace = memory.get_memory_trace()["events"]
    size = memory.estimate_context_tokens()
    memory.get_memory_trace()
    assert [encoded[text] for text in others] == [1, 1, 1]
    assert encoded[messages[2].text] == 1

    eager = CompactionMemory(
        config=CompactionMemoryConfig(max_tool_result_tokens=100), model_name=MODEL
    )
    for message in messages:
        await eager.add_message(message)
    assert size == eager.estimate_context_tokens()
    figures = [(e["tokens"], e["context_tokens"]) for e in trace if e["type"] == "message"]
    assert figures == [
        (e["tokens"], e["context_tokens"])
        for e in eager.get_memory_trace()["events"]
        if e["type"] == "message"
    ]


async def test_a_tool_result_no_longer_in_bytes_than_its_limit_is_counted_only_when_read(
    encoded: Counter[str],
) -> None:
    """It cannot be over the limit (a token is at least a byte), so nothing
    is encoded on its way in; its figures are still an eager count's."""
    messages = conversation()
    result = messages[2].text
    assert len(result.encode()) <= 2_000 < len(result.encode()) * 4
    memory = BasicMemory(model_name=MODEL, max_tool_result_tokens=2_000)
    for message in messages:
        await memory.add_message(message)
    assert not any(encoded[text] for text in (*(m.text for m in messages), "call_1"))
    size = memory.estimate_context_tokens()
    assert encoded[result] == 1
    eager = CompactionMemory(
        config=CompactionMemoryConfig(max_tool_result_tokens=2_000), model_name=MODEL
    )
    for message in messages:
        await eager.add_message(message)
    assert size == eager.estimate_context_tokens()
    assert memory.get_context() == eager.get_context()


async def test_restoring_tokenises_no_message(encoded: Counter[str], tmp_path: Path) -> None:
    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="again", log_base_path=tmp_path),
        model_name=MODEL,
    )
    messages = conversation()
    for message in messages:
        await memory.add_message(message)
    encoded.clear()
    restored = CompactionMemory.restore_from_log("again", log_base_path=tmp_path)
    assert restored.get_context() == memory.get_context()
    assert not any(encoded[m.text] for m in messages)


async def test_a_compaction_counts_its_continuation_once(encoded: Counter[str]) -> None:
    summary = "The user flies JFK to SEA on May 20 on HAT083."
    memory = CompactionMemory(
        config=CompactionMemoryConfig(token_threshold=300),
        model_name=MODEL,
        compact_fn=lambda messages, prompt: summary,
    )
    for message in conversation():
        await memory.add_message(message)
    assert memory.compaction_count == 1
    continuation = memory.get_context()[0].text
    assert summary in continuation
    # Counted line by line (``TokenCounter.count_lines``): each part once, none twice.
    parts = {text: n for text, n in encoded.items() if text and text in continuation}
    assert any(summary in text for text in parts)
    assert set(parts.values()) == {1}
    assert sum(map(len, parts)) <= len(continuation)


async def test_long_tool_results_are_cut_without_tokenising_them_again(
    encoded: Counter[str], tmp_path: Path
) -> None:
    memory = CompactionMemory(
        config=CompactionMemoryConfig(
            session_id="long", log_base_path=tmp_path, max_tool_result_tokens=1_000
        ),
        model_name=MODEL,
    )
    messages: list[ChatMessage] = [ChatMessage.user("Read the three logs, please.")]
    for i in range(3):
        call = ToolCall(id=f"call_{i}", name="read_log", arguments=f'{{"part": {i}}}')
        messages.append(ChatMessage.assistant(None, tool_calls=[call]))
        lines = (
            f"{n:05d} INFO part {i}: request {n * 7} served in {n % 97} ms" for n in range(4_000)
        )
        messages.append(ChatMessage.tool("\n".join(lines), f"call_{i}"))
    for message in messages:
        await memory.add_message(message)
    results = [m for m in memory.get_context() if m.role == "tool"]
    assert len(results) == 3
    assert all("tool result truncated" in m.text for m in results)
    long_texts = {m.text for m in messages if m.role == "tool"}
    assert {text: encoded[text] for text in long_texts} == dict.fromkeys(long_texts, 1)
    # Anything else the encoder saw is short: markers, ids, the few characters at a cut.
    others = [text for text in encoded if text not in long_texts]
    assert max(map(len, others)) < 200, max(others, key=len)[:300]
