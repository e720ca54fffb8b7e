"""The live-chat recipe of the docs: at the threshold it names, a first-time
user's chat with the echo model compacts, and keeps what the user asked it to
remember."""

from __future__ import annotations

import re
from pathlib import Path

from pytest_django import Settings

from memory import ChatMessage, CompactionMemory, CompactionMemoryConfig, InMemoryLogStore
from motus_web.chat.forms import NewChatForm
from motus_web.chat.tools import chat_tool_schemas

from .chat_helpers import scripted_model

ROOT = Path(__file__).resolve().parents[2]
RECIPE = re.compile(r"enter `([\d,]+)` as the token threshold")
NAMED = [
    "QX7B2M",
    "771-20394-5",
    "INV/2024/00817",
    "SUP-48213",
    "DE89 3704 0044 0532 0130 00",
    "+44 20 7946 0958",
    "LH 1234",
    "acct_9f8e7d",
]
SMALL_TALK = [
    "I am planning a trip to Lisbon in March and want to know what the weather is usually "
    "like, and which neighbourhoods are good for walking around in the evening.",
    "I need to rebook my flight because the meeting moved by two days; what should I ask "
    "the airline when I call them tomorrow morning?",
    "Let us talk about packing: I usually bring too much. What is a sensible list for five "
    "days of meetings and one free day?",
    "One more thing about dinner: we are six people, two vegetarians, and we want somewhere "
    "quiet near the river.",
]


def recipe_thresholds() -> list[int]:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
    texts = [path.read_text(encoding="utf-8") for path in docs if path.exists()]
    return [int(found.replace(",", "")) for text in texts for found in RECIPE.findall(text)]


async def test_the_recipes_threshold_compacts_a_short_chat_and_keeps_what_the_user_named(
    settings: Settings,
) -> None:
    settings.MOTUS_CHAT_MODELS = (scripted_model("http://127.0.0.1:9/v1"),)
    thresholds = recipe_thresholds()
    assert thresholds, "the live-chat recipe names a threshold"
    form = NewChatForm()
    fixed = form.overhead()
    assert fixed is not None
    for threshold in thresholds:
        assert threshold >= fixed.suggested_threshold  # the form would not warn about it
        config = CompactionMemoryConfig(
            token_threshold=threshold, compact_model_name="offline", session_id="recipe"
        )
        memory = CompactionMemory(config=config, model_name="gpt-4o", log_store=InMemoryLogStore())
        memory.set_system_prompt(form.fields["system_prompt"].initial)
        memory.set_tools(chat_tool_schemas(memory))
        said = ["Hi! Please remember these for me: " + ", ".join(NAMED) + ".", *SMALL_TALK * 3]
        for text in said:  # the echo model says each message back
            await memory.add_message(ChatMessage.user(text))
            await memory.add_message(ChatMessage(role="assistant", content=text))

        context = "\n".join(m.text for m in memory.get_context())
        assert memory.compaction_count >= 1
        first = said[0]
        assert all(m.text != first for m in memory.messages)  # the first message was folded...
        assert [value for value in NAMED if value not in context] == []  # ...and kept
