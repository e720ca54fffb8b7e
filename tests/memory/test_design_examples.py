"""Every code example of the memory design document, run as written.

Only the import path is adapted (``motus.memory`` -> ``memory``, and
``ReActAgent`` from ``memory.agent``); ``client`` is a ``FakeClient``. Each test
then checks what the document says the example does.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory import BasicMemory, ChatMessage, CompactionMemory, CompactionMemoryConfig
from memory.agent import ReActAgent
from memory.compaction.summariser.with_model import SUMMARY_INSTRUCTIONS

from .conftest import FakeClient

BIG = "word " * 60_000  # about 60,000 tokens: two of them pass gpt-4o's 96,000 threshold


async def test_basic_memory_is_what_an_agent_gets_by_name_or_by_default() -> None:
    client = FakeClient(replies=["one", "two"])

    agent = ReActAgent(client=client, model_name="gpt-4o", memory_type="basic")

    assert type(agent.memory) is BasicMemory
    assert type(ReActAgent(client=client, model_name="gpt-4o").memory) is BasicMemory
    await agent.run("first")
    await agent.run("second")
    assert [m.text for m in agent.memory.messages] == ["first", "one", "second", "two"]


async def test_memory_type_compact_gives_a_compaction_memory_sized_for_the_agents_model() -> None:
    client = FakeClient()

    agent = ReActAgent(client=client, model_name="gpt-4o", memory_type="compact")

    assert type(agent.memory) is CompactionMemory
    assert agent.memory.model_name == "gpt-4o"
    assert agent.memory.token_threshold == 96_000  # 128,000 x 0.75


async def test_a_configured_compaction_memory_compacts_and_calls_on_compact(
    capsys: pytest.CaptureFixture[str],
) -> None:
    client = FakeClient(replies=["Noted.", "the user sent a long text", "Noted again."])

    memory = CompactionMemory(
        config=CompactionMemoryConfig(
            compact_model_name="claude-haiku-4-5-20251001",
            safety_ratio=0.75,
        ),
        on_compact=lambda stats: print(f"Compacted {stats['messages_compacted']} messages"),
    )

    agent = ReActAgent(client=client, model_name="gpt-4o", memory=memory)

    assert agent.memory is memory
    assert await agent.run(BIG) == "Noted."
    assert await agent.run(BIG) == "Noted again."

    assert capsys.readouterr().out == "Compacted 2 messages\n"
    summary_request, last_request = client.requests[1].messages, client.requests[2].messages
    assert summary_request[0].text.startswith(SUMMARY_INSTRUCTIONS[:40])
    assert "the user sent a long text" in last_request[0].text  # no system prompt: none sent
    assert last_request == memory.get_context()[:-1]
    [event] = [e for e in memory.get_memory_trace()["events"] if e["type"] == "compaction"]
    assert event["model"] == "claude-haiku-4-5-20251001"


async def test_restore_from_log_continues_the_previous_conversation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    client = FakeClient(replies=["Lisbon it is.", "You picked Lisbon."])
    earlier = CompactionMemory(
        config=CompactionMemoryConfig(session_id="user-123", log_base_path="./conversation_logs")
    )
    first_agent = ReActAgent(
        client=client, model_name="gpt-4o", system_prompt="You plan trips.", memory=earlier
    )
    await first_agent.run("I want to go to Lisbon.")

    restored = CompactionMemory.restore_from_log(
        session_id="user-123",
        log_base_path="./conversation_logs",
    )
    agent = ReActAgent(client=client, model_name="gpt-4o", memory=restored)
    # Agent continues with the previous conversation's context

    assert restored.get_context() == earlier.get_context()
    assert await agent.run("Which city did I pick?") == "You picked Lisbon."
    assert client.requests[-1].messages == [
        *earlier.get_context(),
        ChatMessage.user("Which city did I pick?"),
    ]
    log = tmp_path / "conversation_logs" / "user-123.jsonl"
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["message"]["content"] for r in logged if r["type"] == "message"] == [
        "I want to go to Lisbon.",
        "Lisbon it is.",
        "Which city did I pick?",
        "You picked Lisbon.",
    ]


async def test_compaction_session_state_round_trips_through_a_json_dict(tmp_path: Path) -> None:
    from memory import CompactionSessionState

    client = FakeClient(replies=["Sure. " + "word " * 300, "they asked for help"])
    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="user-123", log_base_path=tmp_path)
    )
    await ReActAgent(
        client=client, model_name="gpt-4o", system_prompt="Be kind.", memory=memory
    ).run("Help me.")
    await memory.compact()

    # Snapshot current state
    state = memory.get_session_state()
    data = state.to_dict()  # serialize to a JSON-compatible dict

    # Restore later
    restored_state = CompactionSessionState.from_dict(data)

    assert json.loads(json.dumps(data)) == data
    assert restored_state == state
    assert restored_state.system_prompt == "Be kind."
    assert restored_state.summary == "they asked for help"
    assert (restored_state.session_id, restored_state.log_base_path) == ("user-123", str(tmp_path))
    assert CompactionMemory.restore(restored_state).get_context() == memory.get_context()


async def test_a_custom_compaction_function_writes_the_summary() -> None:
    client = FakeClient(replies=["First answer. " + "word " * 300, "Second answer."])

    def my_compaction(messages, system_prompt):
        """Return a summary string from the conversation."""
        return f"Summary: {len(messages)} messages processed"

    memory = CompactionMemory(compact_fn=my_compaction)

    agent = ReActAgent(client=client, model_name="gpt-4o", memory=memory)
    await agent.run("Question one")
    await agent.run("Question two")

    assert await memory.compact() == "Summary: 4 messages processed"
    assert "Summary: 4 messages processed" in memory.get_context()[0].text
    assert len(client.requests) == 2  # the model was never asked for a summary


async def test_a_custom_memory_subclass_works_with_the_agent() -> None:
    from memory import BaseMemory

    class MyMemory(BaseMemory):
        async def compact(self, **kwargs):
            """Implement your compaction strategy."""
            ...

        def reset(self):
            """Clear all state and return counts."""
            count = len(self._messages)
            self._messages.clear()
            return {"messages": count}

    client = FakeClient(replies=["Hi there.", "Hello again."])

    agent = ReActAgent(client=client, model_name="gpt-4o", memory=MyMemory())

    assert await agent.run("Hi") == "Hi there."
    assert [m.text for m in agent.memory.messages] == ["Hi", "Hi there."]
    assert agent.memory.estimate_context_tokens() > 0
    assert agent.memory.get_memory_trace()["total_events"] == 2
    assert agent.memory.reset() == {"messages": 2}
    assert await agent.run("Hello") == "Hello again."
    # No system prompt: no empty system message, which strict providers refuse.
    assert client.requests[-1].messages == [ChatMessage.user("Hello")]


def test_compaction_memory_config_defaults_are_the_documented_ones() -> None:
    config = CompactionMemoryConfig()

    assert config.compact_model_name is None
    assert config.token_threshold is None
    assert config.safety_ratio == 0.75
    assert config.session_id is None
    assert config.log_base_path is None
    assert config.max_tool_result_tokens == 50_000
    assert CompactionMemory().session_id  # an automatic UUID
