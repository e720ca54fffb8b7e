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

from memory import ChatMessage, CompactionMemory, CompactionMemoryConfig, InMemoryLogStore
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


RECALLED: list[list[dict[str, Any]]] = [
    [
        {"role": "user", "content": "Please refund reservation BOH180 to card ref PAY-88213."},
        {"role": "assistant", "content": "I will refund it."},
    ],
]
BLOCK = "Long-term memories:\n- [m1] The user's refund card ref is PAY-88213."


def with_recall_before_the_compaction(owner: User, block: str) -> CompactionEvent:
    """A session of ``RECALLED`` compacted once by a summary naming neither id,
    with a ``memory_recall`` record placing ``block`` before the compaction."""
    store = InMemoryLogStore()
    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="recalled", token_threshold=50_000),
        log_store=store,
        model_name="gpt-4o",
        compact_fn=lambda *_: "The user asked for a refund.",
    )

    async def feed() -> None:
        for message in RECALLED[0]:
            await memory.add_message(ChatMessage.from_dict(message))
        await memory.compact()

    async_to_sync(feed)()
    records = list(store.read("recalled"))
    at = next(i for i, r in enumerate(records) if r["type"] == "compaction")
    recall = {"type": "memory_recall", "ts": records[at]["ts"], "block": block, "through_seq": 1}
    records.insert(at, recall)
    DatabaseLogStore(owner=owner).extend("recalled", records)
    event = CompactionEvent.objects.get(session__public_id="recalled", kind="ok")
    assert event.session.context_changes.filter(kind="memory_recall").count() == 1
    return event


def test_an_identifier_only_in_the_recalled_memory_block_is_not_lost(owner: User) -> None:
    event = with_recall_before_the_compaction(owner, BLOCK)
    page = reverse("dashboard:compaction_detail", args=["recalled", event.position])
    html = logged_in(owner).get(page).content.decode()
    section = html[
        html.index('id="identifiers"') : html.index("</section>", html.index('id="identifiers"'))
    ]

    assert "PAY-88213" in section  # checked: the user named it
    assert "PAY-88213" not in lost_values(section)
    assert "BOH180" in lost_values(section)  # in neither the summary nor the block

    timeline = logged_in(owner).get(reverse("dashboard:session_detail", args=["recalled"]))
    flagged = timeline.content.decode().split("user-named identifier", 1)[1].split("</span>", 1)[0]
    assert "BOH180" in flagged
    assert "PAY-88213" not in flagged


def test_without_the_block_the_same_identifier_is_lost(owner: User) -> None:
    event = with_recall_before_the_compaction(owner, "")
    page = reverse("dashboard:compaction_detail", args=["recalled", event.position])
    html = logged_in(owner).get(page).content.decode()
    section = html[
        html.index('id="identifiers"') : html.index("</section>", html.index('id="identifiers"'))
    ]
    assert "PAY-88213" in lost_values(section)


def test_the_session_page_counts_a_kept_tool_calls_arguments_as_kept(owner: User) -> None:
    # The user names mia_li_3668 and ZFA04Y; the compaction folds that message
    # and keeps the assistant's call in flight, whose arguments carry the first.
    turn: list[dict[str, Any]] = [
        {"role": "user", "content": "My user id is mia_li_3668 and booking ZFA04Y."},
        {"role": "assistant", "content": "Let me look them up."},
        {"role": "user", "content": "Go ahead."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("c1", "get_user_details", '{"user_id": "mia_li_3668"}')],
        },
    ]
    store = InMemoryLogStore()
    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="args", token_threshold=50_000),
        log_store=store,
        model_name="gpt-4o",
        compact_fn=lambda *_: "The user gave their details.",
    )

    async def feed() -> None:
        for message in turn:
            await memory.add_message(ChatMessage.from_dict(message))
        await memory.compact()

    async_to_sync(feed)()
    DatabaseLogStore(owner=owner).extend("args", store.read("args"))
    event = CompactionEvent.objects.get(session__public_id="args", kind="ok")
    assert event.summarized_last_seq is not None
    assert event.through_seq is not None
    assert event.through_seq > event.summarized_last_seq  # the call was kept, not folded

    timeline = logged_in(owner).get(reverse("dashboard:session_detail", args=["args"]))
    flagged = timeline.content.decode().split("user-named identifier", 1)[1].split("</span>", 1)[0]
    assert "ZFA04Y" in flagged
    assert "mia_li_3668" not in flagged
