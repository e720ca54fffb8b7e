"""The context page of a long session without compactions restores only its latest turns."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from motus_web.dashboard import context_now, live_context, steps
from motus_web.sessions import memories

from .helpers import logged_in, make_session

pytestmark = pytest.mark.django_db


@pytest.fixture
def counted_early(monkeypatch: pytest.MonkeyPatch) -> None:
    # A small session takes the long sessions' path: 30 messages listed, past 50 counted.
    monkeypatch.setattr(live_context, "SHOWN_TAIL", 30)
    monkeypatch.setattr(context_now, "COUNTED_FROM", 50)


@pytest.mark.usefixtures("counted_early")
def test_the_counted_context_is_the_librarys_whole_restore(owner: User) -> None:
    session = make_session(owner, turns=40, filler=30)
    assert session.compaction_count == 0
    assert session.message_count == 160

    counted = context_now.request_now(session).live
    whole = steps.request_of(session, memories.restore(session)).live

    assert counted.earlier > 0  # the path under test, not the whole restore
    assert counted.count == whole.count == 161
    assert counted.tokens == whole.tokens
    assert counted.totals() == whole.totals()
    assert counted.estimate == whole.estimate
    assert counted.hidden == whole.hidden
    assert [(p.kind, p.tokens, p.index, p.message) for p in counted.head + counted.tail] == [
        (p.kind, p.tokens, p.index, p.message) for p in whole.head + whole.tail
    ]


@pytest.mark.usefixtures("counted_early")
def test_the_context_page_reads_as_many_rows_for_a_long_session_as_for_a_short_one(
    owner: User,
) -> None:
    client = logged_in(owner)
    sizes = []
    for turns in (20, 80):
        session = make_session(owner, turns=turns)
        with CaptureQueriesContext(connection) as queries:
            html = client.get(reverse("dashboard:session_context", args=[session.public_id]))
        assert f"Context now: {session.message_count + 1} messages" in html.content.decode()
        sizes.append((len(queries), html.content.count(b'class="message part')))

    assert sizes[0] == sizes[1]


def test_a_session_with_a_compaction_is_restored_whole(owner: User) -> None:
    session = make_session(owner, turns=6, filler=60, threshold=600)
    assert session.compaction_count > 0

    assert context_now.request_now(session).live.earlier == 0


@pytest.mark.usefixtures("counted_early")
def test_a_count_the_log_does_not_bear_out_falls_back_to_the_whole_restore(owner: User) -> None:
    session = make_session(owner, turns=40)
    whole = steps.request_of(session, memories.restore(session)).live
    # As if a message had not entered the context as logged (an abandoned call's placeholder).
    session.context_tokens += 1

    live = context_now.request_now(session).live

    assert live.earlier == 0
    assert live.estimate == whole.estimate
