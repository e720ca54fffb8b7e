"""Every request the clients build is one a strict provider accepts
(``memory.testing.strict``), after any compaction, for both request shapes."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory import (
    AnthropicClient,
    ChatMessage,
    CompactionMemory,
    CompactionMemoryConfig,
    InvalidMessageError,
    OpenAIChatClient,
    ToolCall,
)
from memory.testing.scripted_server import ScriptedServer
from memory.testing.strict import (
    StrictRequestError,
    anthropic_messages_problems,
    assert_accepted,
    openai_chat_problems,
)

from .test_invariants import conversations

OPENAI = OpenAIChatClient("http://model.test/v1", api_key="k")
ANTHROPIC = AnthropicClient("http://model.test", api_key="k")
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the web.",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }
]


def bodies(messages: list[ChatMessage], **kwargs: Any) -> dict[str, dict[str, Any]]:
    return {
        "openai": OPENAI.request_body(model="gpt-4o", messages=messages, **kwargs),
        "anthropic": ANTHROPIC.request_body(model="claude-sonnet-4-5", messages=messages, **kwargs),
    }


def assert_both_accepted(messages: list[ChatMessage], **kwargs: Any) -> dict[str, dict[str, Any]]:
    built = bodies(messages, **kwargs)
    assert_accepted("openai", built["openai"])
    assert_accepted("anthropic", built["anthropic"])
    return built


# -- the property ---------------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    conversation=conversations(),
    system_prompt=st.sampled_from(["", "You are a careful agent."]),
    threshold=st.integers(150, 900),
    tools=st.booleans(),
)
def test_every_request_after_any_compaction_passes_the_strict_check_for_both_shapes(
    conversation: list[dict[str, Any]], system_prompt: str, threshold: int, tools: bool
) -> None:
    memory = CompactionMemory(
        config=CompactionMemoryConfig(token_threshold=threshold, max_tool_result_tokens=60),
        compact_fn=lambda messages, prompt: f"summary of {len(messages)} messages",
        model_name="gpt-4o",
    )
    memory.set_system_prompt(system_prompt)

    async def drive() -> None:
        for data in conversation:
            await memory.add_message(data)
            # A request is sent at a boundary only (no call waiting for its result),
            # and only when there is a conversation to continue.
            if not memory.at_boundary or not memory.messages:
                continue
            context = memory.get_context()
            conversation_part = [m for m in context if m.role not in ("system", "developer")]
            if all(nothing_to_send(m) for m in conversation_part):
                with pytest.raises(InvalidMessageError, match="nothing to send"):
                    ANTHROPIC.request_body(model="claude-sonnet-4-5", messages=context)
                continue
            assert_both_accepted(context, tools=TOOLS if tools else None)

    asyncio.run(drive())


def nothing_to_send(message: ChatMessage) -> bool:
    parts = isinstance(message.content, list) and any(
        p.get("type") != "text" or str(p.get("text", "")).strip() for p in message.content
    )
    return (
        message.role != "tool" and not message.text.strip() and not message.tool_calls and not parts
    )


# -- what the clients do to get there -----------------------------------------------


def call(call_id: str, arguments: str = '{"q": "x"}', name: str = "search") -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def test_no_system_prompt_sends_no_empty_system_message() -> None:
    built = assert_both_accepted([ChatMessage.system(""), ChatMessage.user("Hi")])
    assert built["openai"]["messages"] == [{"role": "user", "content": "Hi"}]
    assert "system" not in built["anthropic"]
    # The checker would have refused the empty one.
    assert openai_chat_problems(
        {
            "model": "m",
            "messages": [{"role": "system", "content": ""}, {"role": "user", "content": "Hi"}],
        }
    ) == ["messages[0]: an empty system message"]


def test_consecutive_user_messages_merge_into_one_anthropic_turn() -> None:
    continuation = ChatMessage.user("Summary of the earlier conversation.")
    built = assert_both_accepted(
        [ChatMessage.system("S"), continuation, ChatMessage.user("Go on.")]
    )
    assert built["anthropic"]["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Summary of the earlier conversation."},
                {"type": "text", "text": "Go on."},
            ],
        }
    ]
    assert len(built["openai"]["messages"]) == 3  # the chat format takes them as they are


def test_a_conversation_starting_with_the_assistant_gets_a_user_turn_first_for_anthropic() -> None:
    built = assert_both_accepted(
        [ChatMessage.assistant("Hello! How can I help?"), ChatMessage.user("Hi")]
    )
    first = built["anthropic"]["messages"][0]
    assert first["role"] == "user"
    assert first["content"][0]["text"].strip()


def test_arguments_that_are_not_json_go_back_as_an_object_holding_the_text() -> None:
    broken = call("c1", '{"q": "unterminated')
    built = assert_both_accepted(
        [
            ChatMessage.user("Search"),
            ChatMessage.assistant(tool_calls=[broken, call("c2", "")]),
            ChatMessage.tool("nothing", "c1"),
            ChatMessage.tool("nothing", "c2"),
        ]
    )
    sent = built["openai"]["messages"][1]["tool_calls"]
    assert [c["function"]["arguments"] for c in sent] == [
        '{"arguments": "{\\"q\\": \\"unterminated"}',
        "{}",
    ]
    uses = built["anthropic"]["messages"][1]["content"]
    assert [u["input"] for u in uses] == [{"arguments": '{"q": "unterminated'}, {}]


def test_an_image_in_a_tool_result_moves_to_a_user_message_after_the_batch_for_openai() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.com/chart.png"}}
    built = assert_both_accepted(
        [
            ChatMessage.user("Plot it"),
            ChatMessage.assistant(tool_calls=[call("c1"), call("c2")]),
            ChatMessage.tool([{"type": "text", "text": "the chart:"}, image], "c1"),
            ChatMessage.tool("done", "c2"),
        ]
    )
    sent = built["openai"]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool", "user"]
    assert sent[2]["content"] == [{"type": "text", "text": "the chart:"}]
    assert sent[4]["content"][1] == image
    # Anthropic takes images in a tool result as they are.
    result = built["anthropic"]["messages"][2]["content"][0]
    assert result["content"][1] == {
        "type": "image",
        "source": {"type": "url", "url": "https://example.com/chart.png"},
    }


def test_a_call_id_the_messages_api_refuses_is_sent_in_one_safe_form_in_both_places() -> None:
    odd = call("functions.search:0")
    built = assert_both_accepted(
        [
            ChatMessage.user("Search"),
            ChatMessage.assistant(tool_calls=[odd]),
            ChatMessage.tool("r", odd.id),
        ]
    )
    use = built["anthropic"]["messages"][1]["content"][0]
    result = built["anthropic"]["messages"][2]["content"][0]
    assert use["id"] == result["tool_use_id"] != odd.id
    assert use["id"].startswith("functions_search_0_")
    assert built["openai"]["messages"][1]["tool_calls"][0]["id"] == odd.id  # OpenAI takes any


def test_a_failed_reply_no_user_message_follows_is_left_out_of_anthropic_requests() -> None:
    failed = ChatMessage(
        role="assistant", content="Let me check the", extra={"finish_reason": "length"}
    )
    retry = [ChatMessage.user("Check the flight"), failed]
    built = assert_both_accepted(retry)
    assert [m["role"] for m in built["anthropic"]["messages"]] == ["user"]
    assert built["openai"]["messages"][-1]["content"] == "Let me check the"
    # Once the user answers it, it is part of the conversation again.
    built = assert_both_accepted([*retry, ChatMessage.user("Go on")])
    assert [m["role"] for m in built["anthropic"]["messages"]] == ["user", "assistant", "user"]


def test_an_empty_assistant_message_is_not_sent() -> None:
    failed = ChatMessage(
        role="assistant",
        content="",
        extra={"finish_reason": "invalid_tool_calls", "invalid_tool_calls": []},
    )
    built = assert_both_accepted([ChatMessage.user("Go"), failed, ChatMessage.user("Again")])
    assert [m["role"] for m in built["openai"]["messages"]] == ["user", "user"]


def test_thinking_blocks_of_the_tool_use_turn_go_back_unchanged_with_their_signature() -> None:
    thinking = {"type": "thinking", "thinking": "I need the weather.", "signature": "c2lnbmVk"}
    client = AnthropicClient(
        "http://model.test",
        api_key="k",
        params={"thinking": {"type": "enabled", "budget_tokens": 2048}},
    )
    reply = ChatMessage(
        role="assistant", tool_calls=(call("toolu_1"),), thinking_blocks=(thinking,)
    )
    body = client.request_body(
        model="claude-sonnet-4-5",
        messages=[ChatMessage.user("Weather?"), reply, ChatMessage.tool("12 C", "toolu_1")],
        tools=TOOLS,
    )
    assert_accepted("anthropic", body)
    assert body["messages"][1]["content"][0] == thinking
    # Without it, a strict provider refuses the request.
    body["messages"][1]["content"].pop(0)
    assert any("start with its thinking block" in p for p in anthropic_messages_problems(body))


def test_the_checker_finds_what_strict_providers_refuse() -> None:
    orphan = {"role": "tool", "tool_call_id": "nope", "content": "x"}
    unanswered = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{"}}
        ],
    }
    problems = openai_chat_problems(
        {"model": "m", "messages": [{"role": "user", "content": "q"}, orphan, unanswered]}
    )
    assert any("'nope' is not one" in p for p in problems)
    assert any("not valid JSON" in p for p in problems)
    assert any("c1 have no tool message" in p for p in problems)

    problems = anthropic_messages_problems(
        {
            "model": "m",
            "max_tokens": 10,
            "system": "",
            "messages": [
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "a.b", "name": "f", "input": {}}],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "x"},
                        {"type": "tool_result", "tool_use_id": "a.b"},
                    ],
                },
                {"role": "user", "content": " "},
            ],
        }
    )
    for expected in (
        "empty system prompt",
        'first message must use the "user" role',
        "tool_use id must match",
        "tool_result blocks must come first",
        "two user messages are in a row",
        "text is empty",
    ):
        assert any(expected in p for p in problems), expected


async def test_the_strict_server_refuses_a_faulty_request_and_consumes_no_reply() -> None:
    with ScriptedServer(openai=[{"text": "ok"}], strict=True) as server:
        async with httpx2.AsyncClient() as http:
            body = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 0}
            refused = await http.post(f"{server.openai_base_url}/chat/completions", json=body)
        async with OpenAIChatClient(server.openai_base_url, api_key="k") as client:
            done = await client.create(model="m", messages=[ChatMessage.user("Hi")])
    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == "max_tokens: must be a positive integer"
    assert done.message.text == "ok"
    assert server.requests[0].problems == ["max_tokens: must be a positive integer"]
    assert server.requests[1].problems == []


def test_assert_accepted_names_every_problem() -> None:
    with pytest.raises(StrictRequestError) as raised:
        assert_accepted("anthropic", {"model": "m", "messages": []})
    assert raised.value.problems == [
        "max_tokens: a positive integer is required",
        "messages: a non-empty list is required",
    ]
