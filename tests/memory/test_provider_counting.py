"""The estimate counts what the provider receives and counts: earlier reasoning
only where it is kept, tool schemas as the provider renders them, no empty
system message (``memory.tokens.provider_rules``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory import ChatMessage, CompactionMemory, CompactionMemoryConfig, TokenCounter, ToolCall
from memory.tokens import REPLY_PRIMING_TOKENS
from memory.tokens.provider_rules import CLAUDE_TOOL_PROMPT_TOKENS

THOUGHT = "The user asked about the weather in Lisbon, so I should call the tool."
BLOCK = {"type": "thinking", "thinking": THOUGHT, "signature": "s" * 400}
CALL = ToolCall(id="toolu_1", name="weather", arguments='{"city": "Lisbon"}')

# The OpenAI cookbook's example ("How to count tokens with tiktoken", section 7),
# with the prompt tokens the API reported for it.
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {
                    "type": "string",
                    "description": "The city and state, e.g. San Francisco, CA",
                },
                "unit": {
                    "type": "string",
                    "description": "The unit of temperature to return",
                    "enum": ["celsius", "fahrenheit"],
                },
            },
            "required": ["location"],
        },
    },
}
WEATHER_QUESTION = [
    ChatMessage.system(
        "You are a helpful assistant that can answer to questions about the weather."
    ),
    ChatMessage.user("What's the weather like in San Francisco?"),
]


def reply(*, calls: bool, blocks: bool = True, reasoning: bool = True) -> ChatMessage:
    return ChatMessage(
        role="assistant",
        content="Sunny." if not calls else None,
        tool_calls=(CALL,) if calls else (),
        reasoning_content=THOUGHT if reasoning else None,
        thinking_blocks=(BLOCK,) if blocks else None,
    )


def without_reasoning(message: ChatMessage) -> ChatMessage:
    return ChatMessage(role="assistant", content=message.content, tool_calls=message.tool_calls)


STRIPPING_MODELS = ["claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-4-1"]


def exchange(turns: int, *, blocks: bool = True) -> list[ChatMessage]:
    """``turns`` turns of: a question, a tool-use reply with thinking, its
    result, an answer with thinking."""
    messages: list[ChatMessage] = []
    for turn in range(turns):
        call = ToolCall(id=f"toolu_{turn}", name="weather", arguments='{"city": "Lisbon"}')
        messages += [
            ChatMessage.user(f"Question {turn}: what is the weather in Lisbon?"),
            ChatMessage(
                role="assistant",
                content=None,
                tool_calls=(call,),
                thinking_blocks=(BLOCK,) if blocks else None,
            ),
            ChatMessage.tool("Sunny, 24 C.", call.id),
            ChatMessage(
                role="assistant", content="Sunny.", thinking_blocks=(BLOCK,) if blocks else None
            ),
        ]
    return messages


@pytest.mark.parametrize("model", STRIPPING_MODELS)
def test_an_earlier_answers_thinking_is_not_counted_where_the_api_strips_it(model: str) -> None:
    counter = TokenCounter.for_model(model)
    answer = reply(calls=False)
    assert counter.message_tokens(answer) == counter.message_tokens(without_reasoning(answer))
    # A tool-use reply's thinking belongs to its turn, not to the message's own count.
    calling = reply(calls=True)
    assert counter.message_tokens(calling) == counter.message_tokens(without_reasoning(calling))
    assert counter.turn_reasoning_tokens(calling) == counter.count(THOUGHT)


@pytest.mark.parametrize("model", STRIPPING_MODELS)
def test_a_tool_use_replys_thinking_counts_until_the_next_user_message(model: str) -> None:
    counter = TokenCounter.for_model(model)
    loop = exchange(1)[:3]  # question, tool-use reply, its result: the turn goes on
    plain = exchange(1, blocks=False)[:3]
    assert counter.context_tokens(loop) == counter.context_tokens(plain) + counter.count(THOUGHT)
    # "context_window = (input_tokens - previous_thinking_tokens) + current_turn_tokens"
    three_turns = [*exchange(3), ChatMessage.user("And tomorrow?")]
    plain_turns = [*exchange(3, blocks=False), ChatMessage.user("And tomorrow?")]
    assert counter.context_tokens(three_turns) == counter.context_tokens(plain_turns)


@pytest.mark.parametrize("model", STRIPPING_MODELS)
async def test_a_memory_counts_earlier_turns_thinking_as_the_api_does(
    model: str, tmp_path: Path
) -> None:
    async def memory_of(messages: list[ChatMessage], session_id: str) -> CompactionMemory:
        config = CompactionMemoryConfig(
            token_threshold=100_000, session_id=session_id, log_base_path=str(tmp_path)
        )
        memory = CompactionMemory(config=config, model_name=model)
        for message in messages:
            await memory.add_message(message)
        return memory

    counter = TokenCounter.for_model(model)
    thinking = await memory_of(exchange(3), "thinking")
    plain = await memory_of(exchange(3, blocks=False), "plain")
    # Three turns of thinking, none of them counted once the turn is over.
    assert thinking.estimate_context_tokens() == plain.estimate_context_tokens()
    # A new turn's tool-use reply: its thinking counts while its results are pending an answer.
    call = ToolCall(id="toolu_9", name="weather", arguments='{"city": "Porto"}')
    for memory, blocks in ((thinking, (BLOCK,)), (plain, None)):
        await memory.add_message(ChatMessage.user("And Porto?"))
        await memory.add_message(
            ChatMessage(role="assistant", content=None, tool_calls=(call,), thinking_blocks=blocks)
        )
    assert thinking.estimate_context_tokens() == plain.estimate_context_tokens() + counter.count(
        THOUGHT
    )
    # A restore reads the same figure back.
    restored = CompactionMemory.restore_from_log(
        session_id="thinking", log_base_path=str(tmp_path), model_name=model
    )
    assert restored.estimate_context_tokens() == thinking.estimate_context_tokens()


@pytest.mark.parametrize(
    "model",
    [
        "claude-opus-4-5",
        "claude-opus-4-8",
        "claude-sonnet-4-6",
        "claude-opus-5",
        "claude-fable-5-1",
    ],
)
def test_models_that_keep_earlier_thinking_count_it_on_every_reply(model: str) -> None:
    counter = TokenCounter.for_model(model)
    assert counter.rules.counts_earlier_thinking
    answer = reply(calls=False)
    assert counter.message_tokens(answer) == counter.message_tokens(
        without_reasoning(answer)
    ) + counter.count(THOUGHT)


def test_the_chat_format_counts_reasoning_content_on_tool_call_turns_only() -> None:
    counter = TokenCounter.for_model("deepseek-chat")
    answer, calling = reply(calls=False), reply(calls=True)
    assert counter.message_tokens(answer) == counter.message_tokens(without_reasoning(answer))
    assert counter.message_tokens(calling) == counter.message_tokens(
        without_reasoning(calling)
    ) + counter.count(THOUGHT)
    # Anthropic thinking blocks have no field in the chat format: never sent, never counted.
    blocks_only = reply(calls=True, reasoning=False)
    assert counter.message_tokens(blocks_only) == counter.message_tokens(
        without_reasoning(blocks_only)
    )


@pytest.mark.parametrize(
    ("model", "reported"), [("gpt-4o", 101), ("gpt-4o-mini", 101), ("gpt-4", 105)]
)
def test_tool_schemas_count_as_openai_renders_them(model: str, reported: int) -> None:
    counter = TokenCounter.for_model(model)
    assert (
        counter.context_tokens(WEATHER_QUESTION) + counter.tools_tokens([WEATHER_TOOL]) == reported
    )


def test_nested_schemas_beyond_the_cookbooks_rule_still_count() -> None:
    counter = TokenCounter.for_model("gpt-4o")
    flat = {
        "type": "function",
        "function": {
            "name": "f",
            "description": "",
            "parameters": {"type": "object", "properties": {"ids": {"type": "array"}}},
        },
    }
    nested = {
        "type": "function",
        "function": {
            "name": "f",
            "description": "",
            "parameters": {
                "type": "object",
                "properties": {
                    "ids": {"type": "array", "items": {"type": "string", "pattern": "^[A-Z]{6}$"}}
                },
            },
        },
    }
    assert counter.tools_tokens([nested]) > counter.tools_tokens([flat]) > 0
    assert counter.tools_tokens([]) == 0


def test_anthropic_adds_its_tool_use_system_prompt_to_the_schemas() -> None:
    counter = TokenCounter.for_model("claude-sonnet-4-5")
    schemas = counter.tools_tokens([WEATHER_TOOL])
    assert schemas > CLAUDE_TOOL_PROMPT_TOKENS
    assert TokenCounter.for_model("claude-3-sonnet-20240229").tools_tokens([WEATHER_TOOL]) == (
        schemas - CLAUDE_TOOL_PROMPT_TOKENS + 159
    )


def test_a_memory_without_a_system_prompt_counts_no_system_message() -> None:
    memory = CompactionMemory(
        config=CompactionMemoryConfig(token_threshold=10_000), model_name="gpt-4o"
    )
    assert memory.estimate_context_tokens() == REPLY_PRIMING_TOKENS
    memory.set_system_prompt("Be brief.")
    counter = memory.token_counter
    assert memory.estimate_context_tokens() == REPLY_PRIMING_TOKENS + counter.message_tokens(
        ChatMessage.system("Be brief.")
    )
