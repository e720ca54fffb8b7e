"""The session page reads a log that only compacted as the whole walk of its events would."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from motus_web.dashboard import page_events, timeline
from motus_web.sessions import history, operations
from motus_web.sessions.models import Session

from .helpers import make_session
from .test_actions import add_turns

pytestmark = pytest.mark.django_db


def _undone_twice_then_on(owner: User) -> Session:
    """A compacted session whose two latest compactions were undone, then went on
    (compacting again) and undid once more."""
    session = make_session(owner, turns=30, filler=60, threshold=600)
    for _ in range(2):
        now = Session.objects.get(pk=session.pk)
        event, _ = operations.undoable_now(now)
        assert event is not None
        operations.undo_compaction(now, "test", target=event.position, as_of=now.record_count)
    add_turns(Session.objects.get(pk=session.pk), 6)
    now = Session.objects.get(pk=session.pk)
    event, _ = operations.undoable_now(now)
    assert event is not None
    operations.undo_compaction(now, "test", target=event.position, as_of=now.record_count)
    return Session.objects.get(pk=session.pk)


@pytest.mark.parametrize("undone", [False, True])
def test_every_page_of_a_compacted_log_reads_as_the_whole_walk(owner: User, undone: bool) -> None:
    session = (
        _undone_twice_then_on(owner)
        if undone
        else make_session(owner, turns=30, filler=60, threshold=600)
    )
    assert session.compaction_count > 3
    assert session.revert_count == (3 if undone else 0)
    walked = page_events._walked(operations.events_of(session), 5)
    messages = list(session.messages.order_by("seq"))

    for start in range(0, len(messages), 10):
        page = messages[start : start + 10]
        found = page_events.of(session, page, first_page=start == 0, listed=5)
        assert not found.walked

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


def test_the_compaction_in_force_at_every_position_is_the_walks(owner: User) -> None:
    session = _undone_twice_then_on(owner)
    events = operations.events_of(session)

    for position in [e.position for e in events] + [session.record_count]:
        walked = history.compactions_in_force([e for e in events if e.position < position])
        expected = walked[-1] if walked else None
        assert operations.in_force(session, before=position) == expected
    assert operations.undoable_now(session) == operations.undoable(events)
