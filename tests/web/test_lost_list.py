"""The lost-list counts an identifier lost only when the context after the
compaction holds it nowhere, and counts only what a person would call one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.urls import reverse

from memory import CompactionMemory, CompactionMemoryConfig, InMemoryLogStore
from memory.testing.support_chat import support_chat
from motus_web.dashboard import lost
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import CompactionEvent

from .helpers import logged_in
from .test_compaction_page import compacted_twice, compactions

pytestmark = pytest.mark.django_db


def listed(owner: User, event: CompactionEvent) -> str:
    page = reverse("dashboard:compaction_detail", args=["twice", event.position])
    html = logged_in(owner).get(page).content.decode()
    start = html.index('id="identifiers"')
    return html[start : html.index("</section>", start)]


def lost_values(section: str) -> list[str]:
    """The values the page marks lost: each ``<li>`` holding "lost"."""
    out = []
    for item in section.split("<li")[1:]:
        if "lost" in item.split("</li>")[0] and "<code>" in item:
            out.append(item.split("<code>", 1)[1].split("</code>", 1)[0])
    return out


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


TURNS: list[list[dict[str, Any]]] = [
    [
        {"role": "user", "content": "Please cancel reservation BOH180 for me."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("c1", "get_user_details", '{"user_id": "mia_li_3668"}')],
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": '{"flight_type": "one_way", "payment": "gift_card", '
            '"departure": "14:00:00", "seats": 312, "price": 1440}',
        },
        {"role": "assistant", "content": "I see BOH180 on your profile."},
        {"role": "user", "content": "Yes, BOH180. Thanks."},
    ],
]


def test_an_identifier_in_a_message_kept_verbatim_is_not_lost(owner: User) -> None:
    # The summary names none of them; the user's last message, replayed after
    # the summary word for word, still holds BOH180.
    session = compacted_twice(owner, ["The user wants a cancellation."], TURNS)
    event = compactions(session)[0]
    assert event.replayed_seqs or event.through_seq != event.summarized_last_seq

    lost = lost_values(listed(owner, event))

    assert "BOH180" not in lost
    assert "mia_li_3668" in lost  # only in the folded call's arguments


def test_clock_times_prices_counts_tool_names_and_enum_words_are_not_identifiers(
    owner: User,
) -> None:
    session = compacted_twice(owner, ["The user wants a cancellation."], TURNS)

    section = listed(owner, compactions(session)[0])

    for noise in ("14:00:00", "14:00", "312", "1440", "get_user_details", "one_way", "gift_card"):
        assert f"<code>{noise}</code>" not in section, noise


LABELLED = Path(__file__).resolve().parent.parent / "memory/fixtures/lost_list_labelled.json"


def test_on_labelled_real_sessions_precision_and_recall_are_at_least_0_9() -> None:
    items = json.loads(LABELLED.read_text())
    assert sum(len(item["identifiers"]) for item in items) >= 100
    sources = {item["source"].split()[0] for item in items}
    assert sources == {"tau-bench", "claude-code", "codex-cli"}

    scores = lost.labelled_scores(items)

    assert scores.precision >= 0.9, scores.false_positives
    assert scores.recall >= 0.9, scores.misses


def test_the_compaction_page_says_when_the_ledgers_budget_was_full(owner: User) -> None:
    store = InMemoryLogStore()
    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="full", token_threshold=2_000),
        log_store=store,
        model_name="gpt-4o",
    )

    async def feed() -> None:
        for message in support_chat(turns=4):
            await memory.add_message(message)

    async_to_sync(feed)()
    DatabaseLogStore(owner=owner).extend("full", store.read("full"))
    event = CompactionEvent.objects.filter(session__public_id="full", kind="ok").first()
    assert event is not None
    assert event.record_extra.get("ledger_given_way")

    page = reverse("dashboard:compaction_detail", args=["full", event.position])
    html = logged_in(owner).get(page).content.decode()

    assert "The ledger's budget was full" in html
    assert "What gives way first: identifiers only tool results named" in html
