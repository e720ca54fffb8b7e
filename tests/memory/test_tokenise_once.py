"""Each text is tokenised once on its way in, and never again on restore."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from memory import ChatMessage, CompactionMemory, CompactionMemoryConfig, TokenCounter, ToolCall

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
    assert encoded[continuation] == 1
