"""The session page reads a log that only compacted as the whole walk of its events would."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from motus_web.dashboard import page_events, timeline
from motus_web.sessions import operations

from .helpers import make_session

pytestmark = pytest.mark.django_db


def test_every_page_of_a_compacted_log_reads_as_the_whole_walk(owner: User) -> None:
    session = make_session(owner, turns=30, filler=60, threshold=600)
    assert session.compaction_count > 3
    walked = page_events._walked(operations.events_of(session), 5)
    messages = list(session.messages.order_by("seq"))

    for start in range(0, len(messages), 10):
        page = messages[start : start + 10]
        found = page_events.of(session, page, first_page=start == 0, listed=5)

        assert [timeline.folded_by(m.seq, found.active) for m in page] == [
            timeline.folded_by(m.seq, walked.active) for m in page
        ]
        assert found.in_context_from == walked.in_context_from
        assert found.undoable == walked.undoable
        assert [e.position for e in found.listed] == [e.position for e in walked.listed]
        on_page = timeline.group(page, found.shown, found.active, first_page=start == 0)
        whole = timeline.group(page, walked.shown, walked.active, first_page=start == 0)
        assert [(u.kind, u.index, [e.position for e in u.events]) for u in on_page.units] == [
            (u.kind, u.index, [e.position for e in u.events]) for u in whole.units
        ]
