"""A what-if replay ends with its figures beside the original's."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.urls import reverse

from motus_web.chat.replay import ReplayRun, ReplaySettings, create_replay

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
        kept = html[html.index(">Identifiers kept<") :][:200]
        # Nothing folded in the replay: every identifier the user named is still there.
        assert '<td class="num">8 of 8</td></tr>' in kept
    assert "<html" not in fragment
    chat = client.get(reverse("chat:chat", args=[replay.public_id])).content.decode()
    assert f'hx-get="{page}" hx-trigger="load, replay-ended from:body"' in chat


def test_a_session_that_is_no_replay_has_no_comparison(owner: User) -> None:
    plain = make_session(owner)

    response = logged_in(owner).get(reverse("dashboard:replay_comparison", args=[plain.public_id]))

    assert response.status_code == 404
