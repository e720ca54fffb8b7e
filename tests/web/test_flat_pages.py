"""A long session's pages read ranges by index where an offset or a count
would read every row before them, and show what the offset would have shown."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth.models import User
from django.core.paginator import Paginator
from django.urls import reverse

from motus_web.dashboard import trace
from motus_web.dashboard.views import MESSAGES_PER_PAGE, _CountedPaginator, _page_of
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import Session

from .helpers import log_records, logged_in, make_session

pytestmark = pytest.mark.django_db


def _offset_pages(session: Session) -> list[list[int]]:
    messages = session.messages.order_by("seq")
    pages = Paginator(messages, MESSAGES_PER_PAGE)
    return [[m.seq for m in pages.page(n).object_list] for n in pages.page_range]


def _gapped(owner: User) -> Session:
    """A session whose seqs are 0, 2, 4...: an import may skip seqs."""
    from .helpers import chat

    session_id = uuid.uuid4().hex
    records = log_records(
        session_id,
        chat(40),
        system_prompt="You are a booking assistant.",
        model_name="gpt-4o",
        threshold=None,
    )
    for record in records:
        if record.get("type") == "message":
            record["seq"] *= 2
    DatabaseLogStore(owner=owner).extend(session_id, records)
    return Session.objects.get(public_id=session_id)


@pytest.mark.parametrize("gaps", [False, True])
def test_every_timeline_page_and_page_number_is_the_offsets(owner: User, gaps: bool) -> None:
    session = _gapped(owner) if gaps else make_session(owner, turns=40)
    assert session.message_count > 2 * MESSAGES_PER_PAGE
    pages = _CountedPaginator(session.messages.order_by("seq"), MESSAGES_PER_PAGE, session)
    assert pages.dense is not gaps

    expected = _offset_pages(session)
    assert [[m.seq for m in pages.page(n).object_list] for n in pages.page_range] == expected
    for number, seqs in enumerate(expected, start=1):
        assert {_page_of(session, seq) for seq in seqs} == {number}


def test_the_session_page_shows_the_range_of_its_page(owner: User) -> None:
    session = make_session(owner, turns=40)
    url = reverse("dashboard:session_detail", args=[session.public_id])

    page = logged_in(owner).get(url, {"page": 3}).content.decode()

    seqs = range(2 * MESSAGES_PER_PAGE, 3 * MESSAGES_PER_PAGE)
    assert all(f'id="m{seq}"' in page for seq in seqs)
    assert f'id="m{seqs.start - 1}"' not in page
    assert f'id="m{seqs.stop}"' not in page


def test_the_unfiltered_trace_pages_by_position_as_the_union_would(owner: User) -> None:
    session = make_session(owner, turns=30, filler=60, threshold=600)
    assert session.compaction_count > 1
    by_offset = Paginator(trace.keys(session, ""), 25)

    by_position = trace.paginator(session, "", 25)

    assert by_position.count == by_offset.count
    assert [list(by_position.page(n)) for n in by_offset.page_range] == [
        list(by_offset.page(n)) for n in by_offset.page_range
    ]
