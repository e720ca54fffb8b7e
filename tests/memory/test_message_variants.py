"""Real-world message variants (issue 7): each survives, counts and restores."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memory import (
    ChatMessage,
    CompactionMemory,
    CompactionMemoryConfig,
    CompactionSessionState,
    InMemoryLogStore,
    InvalidMessageError,
    JSONLLogStore,
    LogError,
    ReActAgent,
    ToolCall,
)
from memory.compaction.summariser.with_model import render_transcript_line
from memory.json_values import clean_text
from memory.log import records
from memory.tokens import TokenCounter

from . import variants as v
from .conftest import FakeClient

COUNTER = TokenCounter.for_model("gpt-4o")


def memory_on(store: Any, session_id: str = "s", **config: Any) -> CompactionMemory:
    return CompactionMemory(
        config=CompactionMemoryConfig(session_id=session_id, **config),
        compact_fn=lambda messages, system_prompt: "summary \ud83d so far",
        log_store=store,
        model_name="gpt-4o",
    )


def dicts(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    return [m.to_dict() for m in messages]


def assert_restores(memory: CompactionMemory, store: Any) -> CompactionMemory:
    restored = CompactionMemory.restore_from_log(memory.session_id, log_store=store)
    assert restored.restore_problems == []
    assert dicts(restored.get_context()) == dicts(memory.get_context())
    assert restored.estimate_context_tokens() == memory.estimate_context_tokens()
    assert restored.at_boundary == memory.at_boundary
    return restored


def logged_messages(store: Any, session_id: str = "s") -> list[dict[str, Any]]:
    return [r for r in store.read(session_id) if r["type"] == records.MESSAGE]


# -- 1. lone surrogates ---------------------------------------------------------------


def test_lone_surrogates_become_the_replacement_character_in_every_field() -> None:
    assert ChatMessage.from_dict(v.CALL_WITH_SURROGATE).to_dict() == v.CALL_WITH_SURROGATE_CLEAN
    user = ChatMessage.from_dict(v.USER_WITH_SURROGATE)
    assert user.content == v.LONE_CLEAN
    assert user.name == "mia_li"
    result = ChatMessage.from_dict(v.RESULT_WITH_SURROGATE)
    assert result.tool_call_id == "call_s\ufffd"
    assert result.content == [{"type": "text", "text": "3 in stock \ufffd"}]


def test_a_surrogate_pair_written_as_two_code_points_becomes_its_character() -> None:
    assert ChatMessage.from_dict(v.FINAL).content == v.SPLIT_PAIR_CLEAN
    assert clean_text("\udc00\ud83d") == "\ufffd\ufffd"  # a pair in the wrong order is two halves
    text = "naïve café ☕"
    assert clean_text(text) is text  # text without surrogates is not copied


def test_every_way_of_building_a_message_cleans_it() -> None:
    assert ChatMessage.user("\ud83d").content == "\ufffd"
    assert ChatMessage.developer("be \udfff").content == "be \ufffd"
    call = ToolCall(id="c\ud800", name="f", arguments="\udc00", extra={"k\ud800": ("v\ud800",)})
    assert (call.id, call.arguments, dict(call.extra)) == (
        "c\ufffd",
        "\ufffd",
        {"k\ufffd": ["v\ufffd"]},
    )
    message = ChatMessage(
        role="assistant",
        content=None,
        thinking_blocks=({"type": "thinking", "thinking": "\ud83d", "signature": "s"},),
        extra={"nested": {"deep": ["\ud83d"]}},
    )
    assert message.thinking_blocks == (
        {"type": "thinking", "thinking": "\ufffd", "signature": "s"},
    )
    assert message.extra == {"nested": {"deep": ["\ufffd"]}}


@pytest.mark.parametrize(
    ("extra", "where"),
    [
        ({"tags": {"a", "b"}}, "extra['tags'] is a set"),
        ({"score": float("nan")}, "extra['score'] is nan"),
        ({"big": [2**64]}, "extra['big'][0] is an integer past 64 bits"),
        ({"map": {1: "x"}}, "extra['map'] has a key 1"),
        ({"when": datetime(2025, 1, 1, tzinfo=UTC)}, "extra['when'] is a datetime"),
    ],
)
def test_values_a_json_log_cannot_hold_are_refused_when_the_message_is_built(
    extra: dict[str, Any], where: str
) -> None:
    with pytest.raises(InvalidMessageError, match=where.replace("[", r"\[")):
        ChatMessage(role="user", content="x", extra=extra)


async def test_messages_a_prompt_and_a_summary_with_lone_surrogates_log_and_restore(
    tmp_path: Path,
) -> None:
    store = JSONLLogStore(tmp_path)
    memory = memory_on(store, token_threshold=10_000)
    memory.set_system_prompt("Sell mugs \ud83d")
    for message in (v.USER_WITH_SURROGATE, v.CALL_WITH_SURROGATE, v.RESULT_WITH_SURROGATE):
        await memory.add_message(message)
    await memory.add_message({"role": "assistant", "content": "in stock " * 300})
    await memory.add_message({"role": "user", "content": "and \udbff?"})
    assert await memory.compact() == "summary \ufffd so far"

    assert memory.system_prompt == "Sell mugs \ufffd"
    assert [m["message"] for m in logged_messages(store)] == [
        {**v.USER_WITH_SURROGATE, "content": v.LONE_CLEAN},
        v.CALL_WITH_SURROGATE_CLEAN,
        {
            **v.RESULT_WITH_SURROGATE,
            "tool_call_id": "call_s\ufffd",
            "content": [{"type": "text", "text": "3 in stock \ufffd"}],
        },
        {"role": "assistant", "content": "in stock " * 300},
        {"role": "user", "content": "and \ufffd?"},
    ]
    restored = assert_restores(memory, store)
    assert restored.summary == "summary \ufffd so far"


def test_a_log_line_that_escapes_a_lone_surrogate_restores_with_the_replacement_character(
    tmp_path: Path,
) -> None:
    # Python's json.dumps writes a lone surrogate as "\ud83d", which orjson refuses.
    lines = [
        {"type": "session_meta", "session_id": "py", "system_prompt": "hi \udc00"},
        {"type": "message", "message": {"role": "user", "content": v.LONE}},
    ]
    (tmp_path / "py.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))

    restored = CompactionMemory.restore_from_log("py", log_base_path=tmp_path)

    assert restored.restore_problems == []
    assert restored.system_prompt == "hi \ufffd"
    assert dicts(restored.messages) == [{"role": "user", "content": v.LONE_CLEAN}]


@pytest.mark.parametrize("make_store", [InMemoryLogStore, "jsonl"])
def test_a_store_given_a_record_dict_with_lone_surrogates_writes_it_cleaned(
    make_store: Any, tmp_path: Path
) -> None:
    store = JSONLLogStore(tmp_path) if make_store == "jsonl" else make_store()
    store.append("s", {"type": "session_meta", "title": "mug \ud83d", "tags\udc00": ["\ud83d"]})
    assert list(store.read("s")) == [
        {"type": "session_meta", "title": "mug \ufffd", "tags\ufffd": ["\ufffd"]}
    ]


class FailingOnce(InMemoryLogStore):
    """A store whose disk is full for one write."""

    def __init__(self, fail_at: int) -> None:
        super().__init__()
        self.writes = 0
        self.fail_at = fail_at

    def append(self, session_id: str, record: Any) -> None:
        self.writes += 1
        if self.writes == self.fail_at:
            raise LogError("disk full")
        super().append(session_id, record)


async def test_a_message_whose_write_failed_raises_and_restore_reports_it_missing() -> None:
    store = FailingOnce(fail_at=3)  # session_meta, seq 0, then seq 1 fails
    memory = memory_on(store)
    await memory.add_message({"role": "user", "content": "one"})
    with pytest.raises(LogError, match="disk full"):
        await memory.add_message({"role": "assistant", "content": "two"})
    await memory.add_message({"role": "user", "content": "three"})

    restored = CompactionMemory.restore_from_log("s", log_store=store)

    assert [str(p) for p in restored.restore_problems] == [
        "corrupt line 3: message seq 1 is missing from the log (never written): "
        "the context lacks it"
    ]
    assert [m.text for m in restored.messages] == ["one", "three"]


# -- 2. the developer role ------------------------------------------------------------


def test_a_developer_message_reads_and_writes_back_unchanged() -> None:
    data = {"role": "developer", "content": "Answer in French."}
    message = ChatMessage.from_dict(data)
    assert message.role == "developer"
    assert message.to_dict() == data
    assert message.to_api_dict() == data


@pytest.mark.parametrize("role", ["system", "developer"])
async def test_instructions_are_refused_by_add_message_and_name_the_method_to_use(
    role: str,
) -> None:
    memory = memory_on(InMemoryLogStore())
    with pytest.raises(InvalidMessageError, match=f"set_system_prompt\\(text, role='{role}'\\)"):
        await memory.add_message({"role": role, "content": "x"})
    assert memory.next_seq == 0


async def test_developer_instructions_keep_their_role_live_in_the_log_and_on_restore(
    tmp_path: Path,
) -> None:
    store = JSONLLogStore(tmp_path)
    memory = memory_on(store)
    memory.set_system_prompt("Answer in French.", role="developer")
    await memory.add_message({"role": "user", "content": "hello"})

    assert memory.get_context()[0].to_api_dict() == {
        "role": "developer",
        "content": "Answer in French.",
    }
    meta = next(iter(store.read("s")))
    assert (meta["system_prompt"], meta["system_role"]) == ("Answer in French.", "developer")
    restored = assert_restores(memory, store)
    assert restored.system_role == "developer"
    state = CompactionSessionState.from_dict(
        json.loads(json.dumps(memory.get_session_state().to_dict()))
    )
    assert CompactionMemory.restore(state).get_context()[0].role == "developer"
    assert memory.fork().get_context()[0].role == "developer"


async def test_a_change_of_instruction_role_is_recorded_and_replayed() -> None:
    store = InMemoryLogStore()
    memory = memory_on(store)
    memory.set_system_prompt("Be brief.")
    await memory.add_message({"role": "user", "content": "hello"})
    memory.set_system_prompt("Be brief.", role="developer")
    memory.set_system_prompt("Be briefer.")  # keeps the role

    changes = [r for r in store.read("s") if r["type"] == records.SYSTEM_PROMPT]
    assert [(c["system_prompt"], c.get("system_role")) for c in changes] == [
        ("Be brief.", "developer"),
        ("Be briefer.", "developer"),
    ]
    assert "system_role" not in next(iter(store.read("s")))  # a system prompt writes as before
    assert assert_restores(memory, store).system_role == "developer"
    with pytest.raises(InvalidMessageError, match="not 'user'"):
        memory.set_system_prompt("x", role="user")  # type: ignore[arg-type]


# -- 4. custom (freeform) tool calls --------------------------------------------------


def test_a_custom_call_round_trips_and_is_sent_unchanged() -> None:
    message = ChatMessage.from_dict(v.CUSTOM_CALL)
    (call,) = message.tool_calls
    assert (call.type, call.name, call.input) == (
        "custom",
        "apply_patch",
        v.CUSTOM_CALL["tool_calls"][0]["custom"]["input"],
    )
    assert message.to_dict() == v.CUSTOM_CALL
    assert message.to_api_dict() == v.CUSTOM_CALL


def test_a_custom_calls_input_is_counted() -> None:
    with_input = ChatMessage.from_dict(v.CUSTOM_CALL)
    empty = copy.deepcopy(v.CUSTOM_CALL)
    empty["tool_calls"][0]["custom"]["input"] = ""
    patch = v.CUSTOM_CALL["tool_calls"][0]["custom"]["input"]
    assert COUNTER.message_tokens(with_input) - COUNTER.message_tokens(
        ChatMessage.from_dict(empty)
    ) == COUNTER.count(patch)


async def test_a_custom_call_pairs_with_its_result_and_restores() -> None:
    store = InMemoryLogStore()
    memory = memory_on(store)
    await memory.add_message({"role": "user", "content": "bump the stock"})
    await memory.add_message(v.CUSTOM_CALL)
    assert not memory.at_boundary
    await memory.add_message(v.CUSTOM_RESULT)
    assert memory.at_boundary
    assert dicts(memory.messages)[1:] == [v.CUSTOM_CALL, v.CUSTOM_RESULT]
    assert_restores(memory, store)


# -- 5. reasoning ---------------------------------------------------------------------


def test_reasoning_reads_as_text_from_either_form() -> None:
    assert ChatMessage.from_dict(v.THINKING_ANSWER).reasoning_text == "sku 2 is sold out, say so"
    assert ChatMessage.from_dict(v.CALL_WITH_SURROGATE).reasoning_text == "look it up \ufffd"
    assert ChatMessage.user("hi").reasoning_text == ""


def test_the_summary_transcript_shows_reasoning_and_refusals_like_text() -> None:
    assert render_transcript_line(ChatMessage.from_dict(v.THINKING_ANSWER)) == (
        "[assistant reasoning] sku 2 is sold out, say so\n[assistant] Both checked."
    )
    assert render_transcript_line(ChatMessage.from_dict(v.REFUSAL)) == (
        "[assistant]\n[assistant refusal] I can't help with that."
    )


def test_reasoning_is_counted_once() -> None:
    # A model that keeps earlier thinking in context counts an answer's thinking
    # (memory.tokens.provider_rules), once though the reply holds it in two forms.
    counter = TokenCounter.for_model("claude-opus-4-5")
    plain = ChatMessage.assistant("Both checked.")
    thinking = ChatMessage.from_dict(v.THINKING_ANSWER)
    assert counter.message_tokens(thinking) - counter.message_tokens(plain) == counter.count(
        "sku 2 is sold out, say so"
    )


# -- 6. empty tool-call ids -----------------------------------------------------------


def empty_id_batch_as_dicts() -> list[Any]:
    return [v.EMPTY_ID_CALLS, *v.EMPTY_ID_RESULTS]


def empty_id_batch_from_dict() -> list[Any]:
    return [ChatMessage.from_dict(m) for m in empty_id_batch_as_dicts()]


def empty_id_batch_built() -> list[Any]:
    calls = [ToolCall(id="", name="stock", arguments=f'{{"sku": {i}}}') for i in (1, 2)]
    return [
        ChatMessage.assistant(None, calls),
        ChatMessage.tool("sku 1: 4 left", tool_call_id=""),
        ChatMessage.tool("sku 2: sold out", tool_call_id=""),
    ]


@pytest.mark.parametrize(
    "batch", [empty_id_batch_as_dicts, empty_id_batch_from_dict, empty_id_batch_built]
)
async def test_two_calls_with_empty_ids_keep_their_two_results_live_and_restored(
    batch: Any, tmp_path: Path
) -> None:
    store = JSONLLogStore(tmp_path)
    memory = memory_on(store)
    await memory.add_message({"role": "user", "content": "stock of 1 and 2?"})
    for message in batch():
        await memory.add_message(message)

    context = memory.messages
    assert [c.id for c in context[1].tool_calls] == ["call_motus_1_0", "call_motus_1_1"]
    assert [(m.tool_call_id, m.text) for m in context[2:]] == [
        ("call_motus_1_0", "sku 1: 4 left"),
        ("call_motus_1_1", "sku 2: sold out"),
    ]
    assert memory.at_boundary
    logged = logged_messages(store)
    assert [r["message"] for r in logged[1:]] == [
        ChatMessage.coerce(m).to_dict() for m in batch()
    ]  # the log keeps what was added, "" ids included...
    assert [r["context_message"] for r in logged[1:]] == dicts(context[1:])  # ...and the mapping
    assert_restores(memory, store)


async def test_a_result_with_an_empty_id_and_no_call_waiting_for_one_stays_out() -> None:
    store = InMemoryLogStore()
    memory = memory_on(store)
    await memory.add_message({"role": "user", "content": "hi"})
    await memory.add_message({**v.EMPTY_ID_CALLS, "tool_calls": v.EMPTY_ID_CALLS["tool_calls"][:1]})
    await memory.add_message(v.EMPTY_ID_RESULTS[0])
    await memory.add_message(v.EMPTY_ID_RESULTS[1])  # a second result: nothing left to answer

    assert len(memory.messages) == 3
    assert memory.get_memory_trace()["anomalies"] == 1
    assert_restores(memory, store)


async def test_a_snapshot_taken_mid_batch_maps_the_remaining_results() -> None:
    memory = memory_on(InMemoryLogStore())
    await memory.add_message({"role": "user", "content": "hi"})
    await memory.add_message(v.EMPTY_ID_CALLS)
    await memory.add_message(v.EMPTY_ID_RESULTS[0])
    state = CompactionSessionState.from_dict(memory.get_session_state().to_dict())
    resumed = CompactionMemory.restore(state)
    await resumed.add_message(v.EMPTY_ID_RESULTS[1])
    assert resumed.messages[-1].tool_call_id == "call_motus_1_1"
    assert resumed.at_boundary


# -- the rest of each family ----------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        v.IMAGE_RESULT,
        v.ANTHROPIC_CALL,
        v.ANTHROPIC_RESULT,
        v.REFUSAL,
        v.AUDIO_ANSWER,
        v.LEGACY_CALL,
        v.LEGACY_RESULT,
        v.USER_WITH_SURROGATE | {"content": "plain"},
        v.THINKING_ANSWER,
    ],
)
def test_every_variant_round_trips_unchanged(data: dict[str, Any]) -> None:
    assert ChatMessage.from_dict(data).to_dict() == data


def test_a_refusal_and_an_audio_reply_are_sent_back_in_the_form_a_request_takes() -> None:
    assert ChatMessage.from_dict(v.REFUSAL).to_api_dict() == v.REFUSAL
    assert ChatMessage.from_dict(v.AUDIO_ANSWER).to_api_dict() == {
        "role": "assistant",
        "content": None,
        "audio": {"id": "audio_abc123"},
    }


def test_a_refusal_is_counted() -> None:
    refusal = ChatMessage.from_dict(v.REFUSAL)
    empty = ChatMessage.assistant(None)
    assert COUNTER.message_tokens(refusal) - COUNTER.message_tokens(empty) == COUNTER.count(
        "I can't help with that."
    )


def test_a_name_on_a_user_message_is_sent_and_counted() -> None:
    named = ChatMessage.from_dict({"role": "user", "content": "hi", "name": "mia_li"})
    assert named.to_api_dict() == {"role": "user", "content": "hi", "name": "mia_li"}
    assert COUNTER.message_tokens(named) == COUNTER.message_tokens(ChatMessage.user("hi")) + (
        COUNTER.count("mia_li") + 1
    )


def test_images_and_files_inside_a_tool_result_are_counted_as_media() -> None:
    result = ChatMessage.from_dict(v.IMAGE_RESULT)
    text_only = ChatMessage.tool([v.IMAGE_RESULT["content"][0]], tool_call_id="call_img")
    # A low-detail image is 85 tokens for gpt-4o; the file is counted too.
    assert COUNTER.message_tokens(result) - COUNTER.message_tokens(text_only) >= 85 + 1


def test_legacy_function_calls_are_sent_in_the_current_form_once_they_have_ids() -> None:
    call = ChatMessage.from_dict(v.LEGACY_CALL)
    assert call.tool_calls == (ToolCall(id="", name="stock", arguments='{"sku": 3}'),)
    result = ChatMessage.from_dict(v.LEGACY_RESULT)
    assert (result.role, result.name, result.tool_call_id) == ("tool", "stock", None)


async def test_a_legacy_function_call_pairs_with_its_function_result_and_restores() -> None:
    store = InMemoryLogStore()
    memory = memory_on(store)
    await memory.add_message({"role": "user", "content": "And sku 3?"})
    await memory.add_message(v.LEGACY_CALL)
    await memory.add_message(v.LEGACY_RESULT)

    assert [m.to_api_dict() for m in memory.messages[1:]] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_motus_1_0",
                    "type": "function",
                    "function": {"name": "stock", "arguments": '{"sku": 3}'},
                }
            ],
        },
        {
            "role": "tool",
            "content": "sku 3: 1 left",
            "tool_call_id": "call_motus_1_0",
            "name": "stock",
        },
    ]
    assert [r["message"] for r in logged_messages(store)[1:]] == [v.LEGACY_CALL, v.LEGACY_RESULT]
    assert_restores(memory, store)


async def test_the_whole_real_world_conversation_is_kept_counted_and_restored(
    tmp_path: Path,
) -> None:
    store = JSONLLogStore(tmp_path)
    memory = memory_on(store, token_threshold=100_000)
    memory.set_system_prompt("Sell mugs.", role="developer")
    for message in v.REAL_WORLD:
        await memory.add_message(message)

    assert memory.get_memory_trace()["anomalies"] == 0
    assert len(memory.messages) == len(v.REAL_WORLD)  # nothing left out of the context
    assert memory.at_boundary
    assert [r["message"] for r in logged_messages(store)] == [
        ChatMessage.from_dict(m).to_dict() for m in v.REAL_WORLD
    ]
    assert memory.estimate_context_tokens() == memory.token_counter.context_tokens(
        memory.get_context()
    )
    assert_restores(memory, store)


async def test_an_agent_whose_server_sends_empty_call_ids_gets_both_results_back_paired() -> None:
    def stock(sku: int) -> str:
        """Units left of ``sku``."""
        return f"sku {sku}: {4 - sku} left"

    reply = ChatMessage.from_dict(v.EMPTY_ID_CALLS)
    client = FakeClient([reply, "Four of sku 1, two of sku 2."])
    agent = ReActAgent(client=client, model_name="gpt-4o", tools=[stock], memory_type="compact")

    assert await agent.run("stock of 1 and 2?") == "Four of sku 1, two of sku 2."

    second_request = [m.to_api_dict() for m in client.requests[1].messages]
    assert [c["id"] for c in second_request[1]["tool_calls"]] == [
        "call_motus_1_0",
        "call_motus_1_1",
    ]
    assert [(m["tool_call_id"], m["content"]) for m in second_request[2:]] == [
        ("call_motus_1_0", "sku 1: 3 left"),
        ("call_motus_1_1", "sku 2: 2 left"),
    ]


def test_a_content_part_whose_type_is_not_a_string_is_refused_clearly() -> None:
    from memory import InvalidMessageError

    with pytest.raises(InvalidMessageError, match="'type' must be a string"):
        ChatMessage.from_dict({"role": "user", "content": [{"type": [], "text": "x"}]})


async def test_two_calls_with_one_id_keep_their_two_results_live_and_restored(
    tmp_path: Path,
) -> None:
    store = JSONLLogStore(tmp_path)
    memory = memory_on(store)
    await memory.add_message({"role": "user", "content": "stock of 1 and 2?"})
    call = {"id": "call_1", "type": "function", "function": {"name": "stock", "arguments": "{}"}}
    await memory.add_message({"role": "assistant", "content": None, "tool_calls": [call, call]})
    assert not memory.at_boundary
    await memory.add_message({"role": "tool", "tool_call_id": "call_1", "content": "sku 1: 4"})
    assert not memory.at_boundary  # the second call is still waiting for its result
    await memory.add_message({"role": "tool", "tool_call_id": "call_1", "content": "sku 2: 0"})

    context = memory.messages
    assert [c.id for c in context[1].tool_calls] == ["call_1", "call_motus_1_1"]
    assert [(m.tool_call_id, m.text) for m in context[2:]] == [
        ("call_1", "sku 1: 4"),
        ("call_motus_1_1", "sku 2: 0"),
    ]
    assert memory.at_boundary
    assert memory.get_memory_trace()["anomalies"] == 0
    assert_restores(memory, store)
