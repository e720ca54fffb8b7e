"""What the user named in passing survives many compactions at 2,000 tokens,
amid long tool results full of decoys, with either summariser."""

from __future__ import annotations

from typing import Any

import pytest

from memory import ChatMessage, CompactionMemory, CompactionMemoryConfig, OpenAIChatClient
from memory.testing.scripted_server import ScriptedReply, ScriptedServer
from memory.testing.support_chat import fragments_in, named_in, support_chat

THRESHOLD = 2_000
# A careless model summary: it names none of the user's identifiers.
CARELESS = "The user is following up on a broken dishwasher and a refund; the agent is checking."


def context_text(memory: CompactionMemory) -> str:
    return "\n".join(message.text for message in memory.get_context())


async def run(**kwargs: Any) -> tuple[CompactionMemory, int]:
    compactions: list[dict[str, Any]] = []
    memory = CompactionMemory(
        config=CompactionMemoryConfig(token_threshold=THRESHOLD),
        on_compact=compactions.append,
        **kwargs,
    )
    message: ChatMessage
    for message in support_chat():
        await memory.add_message(message)
    return memory, sum(1 for c in compactions if c.get("status") == "ok")


async def test_offline_summaries_keep_what_the_user_named_through_many_compactions() -> None:
    memory, compactions = await run()
    context = context_text(memory)

    assert compactions >= 5
    assert len(named_in(context)) >= 15, named_in(context)
    assert fragments_in(context) == []


@pytest.mark.parametrize("replies", [80])
async def test_the_ledger_restores_what_a_careless_model_summary_dropped(replies: int) -> None:
    with ScriptedServer(openai=[ScriptedReply(text=CARELESS)] * replies) as server:
        async with OpenAIChatClient(server.openai_base_url, api_key="k", timeout_s=5) as client:
            memory, compactions = await run(client=client, model_name="gpt-4o")
    context = context_text(memory)

    assert compactions >= 5
    assert len(named_in(context)) >= 15, named_in(context)
    assert fragments_in(context) == []
