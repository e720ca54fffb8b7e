"""A one-time token answers "Already done" only to the same request sent again:
another action from the same page, or other content in the same form, is a
request of its own and is judged on its own; an action that failed spends
nothing."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from memory.testing.scripted_server import ScriptedReply, ScriptedServer
from motus_web.sessions.models import ActionToken, CompactionEvent

from .helpers import confirmation_form, logged_in, make_session
from .test_actions import latest_compaction, log_of, owner_client, url
from .test_memories_page import form, remembered, store

pytestmark = pytest.mark.django_db


def test_forget_sent_from_a_second_tab_after_an_edit_is_judged_not_already_done(
    owner: User,
) -> None:
    scope, sister, _ = remembered(owner)
    client = logged_in(owner)
    edit_url, edit_form = form(client, scope, sister, "edit")
    forget_url, forget_form = form(client, scope, sister, "forget")  # the second tab

    edited = client.post(edit_url, {**edit_form, "text": "My sister Jane lives in Denver."})
    forget = client.post(forget_url, forget_form)

    assert edited.status_code == 303
    assert forget.status_code == 409
    html = forget.content.decode()
    assert "Already done" not in html
    assert "Not done: it changed" in html
    assert "version 2" in html  # what changed since the tab was opened
    assert store.get(scope, sister).status == "active"


def test_an_edit_sent_again_with_the_same_text_is_already_done_and_with_other_text_judged(
    owner: User,
) -> None:
    scope, sister, _ = remembered(owner)
    client = logged_in(owner)
    edit_url, edit_form = form(client, scope, sister, "edit")

    first = client.post(edit_url, {**edit_form, "text": "Jane lives in Denver."})
    again = client.post(edit_url, {**edit_form, "text": "Jane lives in Denver."})
    other = client.post(edit_url, {**edit_form, "text": "Jane lives in Austin."})

    assert [first.status_code, again.status_code, other.status_code] == [303, 409, 409]
    assert "Already done" in again.content.decode()
    assert "Already done" not in other.content.decode()
    assert store.get(scope, sister).text == "Jane lives in Denver."


def test_a_second_tabs_other_correction_is_judged_not_silently_dropped(owner: User) -> None:
    session = make_session(owner, turns=8, filler=60, threshold=600)
    event = latest_compaction(session)
    client = owner_client(session)
    page = client.get(url("compaction_detail", session.public_id, event.position))
    action, hidden = confirmation_form(
        page.content.decode(), url("correct_summary", session.public_id, event.position)
    )

    first = client.post(action, {**hidden, "summary": "Bookings B0 to B7."})
    second = client.post(action, {**hidden, "summary": "Bookings B0 to B7, and B3 to Lyon."})

    assert first.status_code == 303
    assert second.status_code == 409
    assert "Already done" not in second.content.decode()
    assert "Not done: it changed" in second.content.decode()
    corrections = [r for r in log_of(session.public_id) if r["type"] == "summary_correction"]
    assert [r["summary"] for r in corrections] == ["Bookings B0 to B7."]


def test_a_compact_now_that_failed_spends_nothing(owner: User, server: ScriptedServer) -> None:
    # The session's model is configured, and its summary request fails (a bad key).
    server.add("openai", ScriptedReply(error="bad_key"))
    session = make_session(owner, turns=1, threshold=100_000)
    client = owner_client(session)
    page = client.get(url("session_detail", session.public_id)).content.decode()
    action, hidden = confirmation_form(page, url("compact_now", session.public_id))

    failed = client.post(action, hidden)
    again = client.post(action, hidden)

    assert "Not compacted" in failed.content.decode()
    assert session.compaction_events.filter(kind=CompactionEvent.Kind.FAILED).count() == 1
    assert not ActionToken.objects.filter(action="compact").exists()
    assert "Already done" not in again.content.decode()
