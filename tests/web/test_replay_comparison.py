"""A what-if replay ends with its figures beside the original's."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.urls import reverse

from motus_web.chat.replay import ReplayRun, ReplaySettings, create_replay
from motus_web.dashboard import lost
from motus_web.dashboard.comparison import compare
from motus_web.sessions import context_edits, memories
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import Session

from .helpers import logged_in, make_session

pytestmark = pytest.mark.django_db


async def _publish(frame: dict[str, Any]) -> None:
    return None


# The replay's database_sync_to_async closes the connection it ran on, as after a
# request: the test's own transaction cannot wrap it.
@pytest.mark.django_db(transaction=True)
def test_a_replay_without_compaction_compares_with_its_compacting_original(owner: User) -> None:
    original = make_session(owner, turns=8, filler=60, threshold=600)
    settings = ReplaySettings(
        token_threshold=50_000,
        safety_ratio=0.75,
        max_tool_result_tokens=50_000,
        model_name="gpt-4o",
    )
    replay = create_replay(original, settings, owner)
    async_to_sync(ReplayRun(replay, original.public_id, _publish).run)(0)
    client = logged_in(owner)
    page = reverse("dashboard:replay_comparison", args=[replay.public_id])

    full = client.get(page).content.decode()
    fragment = client.get(page, HTTP_HX_REQUEST="true").content.decode()

    compactions = original.compaction_events.filter(kind="ok").count()
    assert compactions > 0
    for html in (full, fragment):
        assert f"Over the {original.message_count} messages replayed" in html
        row = html[html.index(">Compactions<") :][:160]
        assert f'<td class="num">{compactions}</td><td class="num">0</td>' in row
        kept = html[html.index(">Identifiers kept in the final context<") :][:200]
        # Nothing folded in the replay: every identifier of its messages is still there.
        named, _ = lost.identifiers_in(lost.texts(original.messages.all()))
        assert f'<td class="num">{len(named)} of {len(named)}</td></tr>' in kept
    assert "<html" not in fragment
    chat = client.get(reverse("chat:chat", args=[replay.public_id])).content.decode()
    assert f'hx-get="{page}" hx-trigger="load, replay-ended from:body"' in chat


def test_a_session_that_is_no_replay_has_no_comparison(owner: User) -> None:
    plain = make_session(owner)

    response = logged_in(owner).get(reverse("dashboard:replay_comparison", args=[plain.public_id]))

    assert response.status_code == 404


@pytest.mark.django_db(transaction=True)
def test_a_whole_replay_counts_every_compaction_of_the_original_and_sends_only_its_tools(
    owner: User,
) -> None:
    original = make_session(owner, turns=8, filler=60, threshold=600)
    # A compaction logged after the last message (Compact now) is the original's too.
    context_edits.compact_now(original, "", as_of=original.record_count)
    original.refresh_from_db()
    assert list(DatabaseLogStore().read(original.public_id))[-1]["type"] == "compaction"
    settings = ReplaySettings(
        token_threshold=600, safety_ratio=0.75, max_tool_result_tokens=50_000, model_name="gpt-4o"
    )
    replay = create_replay(original, settings, owner)
    async_to_sync(ReplayRun(replay, original.public_id, _publish).run)(0)
    replay.refresh_from_db()

    figures = compare(original, replay)

    assert figures.original.compactions == original.compaction_count
    assert figures.replay.compactions == replay.compaction_count
    # The original sent no tools: the replay sends none and says so, never the chat's own.
    assert next(iter(DatabaseLogStore().read(replay.public_id))).get("tools") is None
    chat = logged_in(owner).get(reverse("chat:chat", args=[replay.public_id])).content.decode()
    assert "no tool schemas (the original sent none)" in chat
    assert "calculator" not in chat


def test_a_replay_of_a_session_with_tools_sends_the_originals(owner: User) -> None:
    original = make_session(owner, turns=2)
    schema = {"type": "function", "function": {"name": "str_replace_editor", "parameters": {}}}
    in_place_tools(original, [schema])
    settings = ReplaySettings(
        token_threshold=600, safety_ratio=0.75, max_tool_result_tokens=50_000, model_name="gpt-4o"
    )
    replay = create_replay(original, settings, owner)

    assert next(iter(DatabaseLogStore().read(replay.public_id)))["tools"] == [schema]
    chat = logged_in(owner).get(reverse("chat:chat", args=[replay.public_id])).content.decode()
    assert "the original's tool schemas (" in chat
    assert "tokens for str_replace_editor)" in chat
    assert "calculator" not in chat


def in_place_tools(session: Session, schemas: list[dict[str, Any]]) -> None:
    """Log a change of the session's tools, as a memory that was given them does."""
    memory = memories.restore(session)
    memory.set_tools(schemas)
    async_to_sync(memory.flush)()
