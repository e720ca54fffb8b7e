"""Chat messages convert losslessly to and from OpenAI chat dicts."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory import ChatMessage, InvalidMessageError

EXAMPLES: list[dict[str, Any]] = [
    {"role": "user", "content": "hello"},
    {"role": "user", "content": ""},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
        ],
    },
    {"role": "tool", "content": "42", "tool_call_id": "call_1", "name": "f"},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
        ],
    },
    {
        "role": "assistant",
        "content": "thinking",
        "thought": "hmm",
        "agent": "main",
        "tool_calls": None,
    },
    {"role": "assistant", "content": "x", "tool_calls": []},
    {"role": "tool", "content": "out", "tool_call_ids": ["call_9"], "message_type": "observation"},
]


@pytest.mark.parametrize("data", EXAMPLES)
def test_a_message_dict_round_trips_unchanged(data: dict[str, Any]) -> None:
    assert ChatMessage.from_dict(data).to_dict() == {"content": None, **data}


def test_content_null_stays_distinct_from_an_empty_string() -> None:
    assert ChatMessage.from_dict({"role": "assistant", "content": None}).content is None
    assert ChatMessage.from_dict({"role": "assistant", "content": ""}).content == ""


def test_a_tool_call_ids_list_with_one_id_is_read_as_the_tool_call_id() -> None:
    message = ChatMessage.from_dict({"role": "tool", "content": "x", "tool_call_ids": ["c1"]})
    assert message.tool_call_id == "c1"
    assert message.to_api_dict() == {"role": "tool", "content": "x", "tool_call_id": "c1"}


def test_object_arguments_become_their_json_text() -> None:
    message = ChatMessage.from_dict(
        {
            "role": "assistant",
            "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"k": "v"}}}],
        }
    )
    assert message.tool_calls[0].arguments == '{"k":"v"}'


@pytest.mark.parametrize(
    "data",
    [
        {"role": "robot", "content": "x"},
        {"content": "no role"},
        {"role": "user", "content": 12},
        {"role": "user", "content": ["not a part"]},
        {"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]},
        {"role": "tool", "content": "x", "tool_call_id": 5},
        "not a dict",
    ],
)
def test_malformed_messages_raise_a_clear_error(data: Any) -> None:
    with pytest.raises(InvalidMessageError):
        ChatMessage.from_dict(data)


@given(
    role=st.sampled_from(["user", "assistant", "tool"]),
    content=st.one_of(st.none(), st.text()),
    extra=st.dictionaries(
        st.text(min_size=1).filter(
            lambda k: (
                k not in {"role", "content", "tool_calls", "tool_call_id", "name", "tool_call_ids"}
                and not k.startswith("_")
            )
        ),
        # Integers a JSON log can write (64 bits): a message refuses the others.
        st.one_of(st.text(), st.integers(-(2**63), 2**64 - 1), st.booleans()),
    ),
)
def test_any_message_with_extra_fields_round_trips(
    role: str, content: str | None, extra: dict[str, Any]
) -> None:
    data = {"role": role, "content": content, **extra}
    message = ChatMessage.from_dict(data)
    assert message.to_dict() == data
    assert message.to_dict() == data  # built once, then copied


LEGACY_AND_REASONING: list[dict[str, Any]] = [
    {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}},
    {
        "role": "assistant",
        "content": "ok",
        "reasoning_content": "because",
        "thinking_blocks": [{"type": "thinking", "thinking": "hm", "signature": "s"}],
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c", "type": "custom", "custom": {"name": "g", "input": "x"}}],
    },
]


@pytest.mark.parametrize("data", EXAMPLES + LEGACY_AND_REASONING)
def test_editing_a_to_dict_result_does_not_change_the_message(data: dict[str, Any]) -> None:
    message = ChatMessage.from_dict(data)
    expected = message.to_dict()
    edited = message.to_dict()
    assert edited == expected
    assert edited is not expected
    edited["role"] = "edited"
    edited["added"] = True
    for call in edited.get("tool_calls") or ():
        call["id"] = "edited"
        call[call["type"]]["name"] = "edited"
    if edited.get("tool_calls"):
        edited["tool_calls"].append({"id": "more"})
    if "function_call" in edited:
        edited["function_call"]["name"] = "edited"
    for block in edited.get("thinking_blocks") or ():
        block["thinking"] = "edited"
    if edited.get("thinking_blocks"):
        edited["thinking_blocks"].append({"type": "thinking"})
    assert message.to_dict() == expected == {"content": None, **data}


def test_to_dict_shares_the_message_text_rather_than_copying_it() -> None:
    text = "a long tool result " * 1000
    message = ChatMessage.tool(text, "c1")
    assert message.to_dict()["content"] is message.content
    assert message.to_dict()["content"] is message.to_dict()["content"]


def test_a_replaced_message_writes_its_own_dict_not_the_original_one() -> None:
    message = ChatMessage.user("first")
    message.to_dict()
    assert dataclasses.replace(message, content="second").to_dict() == {
        "role": "user",
        "content": "second",
    }
    assert message == ChatMessage.user("first")  # the cached form takes no part in equality


@pytest.mark.parametrize("depth", [201, 3_000, 100_000])
def test_a_value_nested_deeper_than_a_log_can_write_is_refused_by_name(depth: int) -> None:
    deep: list[Any] = []
    for _ in range(depth - 1):
        deep = [deep]

    with pytest.raises(InvalidMessageError, match="nested more than 200 levels deep") as caught:
        ChatMessage.from_dict({"role": "tool", "tool_call_id": "c1", "content": "x", "meta": deep})
    assert len(str(caught.value)) < 200  # the path is shortened, not 100,000 steps long


def test_a_value_nested_as_deep_as_a_log_can_write_is_kept() -> None:
    deep: list[Any] = []
    for _ in range(198):  # 199 lists, in the message: 200 levels
        deep = [deep]
    message = ChatMessage.from_dict({"role": "user", "content": "x", "meta": deep})

    assert orjson.loads(orjson.dumps({"type": "message", "message": message.to_dict()}))
