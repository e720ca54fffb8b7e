from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from motus_web.sessions.models import CompactionEvent, Session

from .helpers import make_session

pytestmark = pytest.mark.django_db


def test_the_totals_match_the_messages_after_a_replay(owner: User) -> None:
    session = make_session(owner, turns=6, filler=60, threshold=600)
    session.refresh_from_db()

    messages = list(session.messages.order_by("seq"))
    assert session.message_count == len(messages) == 24
    assert session.total_tokens == sum(m.tokens for m in messages)
    assert session.compaction_count == session.compaction_events.filter(kind="ok").count() > 0
    assert [m.seq for m in messages] == list(range(24))


def test_the_context_tokens_are_those_after_the_latest_record(owner: User) -> None:
    session = make_session(owner, turns=6, filler=60, threshold=600)

    last_message = session.messages.order_by("-seq").first()
    last_compaction = session.compaction_events.filter(kind=CompactionEvent.Kind.OK).last()
    assert last_message is not None
    assert last_compaction is not None
    latest = max([last_message, last_compaction], key=lambda row: row.position)
    expected = latest.context_tokens if latest is last_message else last_compaction.tokens_after
    assert session.context_tokens == expected


def test_owners_see_their_own_sessions_and_staff_see_all(
    owner: User, teammate: User, outsider: User, staff: User
) -> None:
    mine = make_session(owner)
    theirs = make_session(teammate)
    unowned = make_session(None)

    assert list(Session.objects.visible_to(owner)) == [mine]
    assert list(Session.objects.visible_to(teammate)) == [theirs]
    assert not Session.objects.visible_to(outsider).exists()
    assert set(Session.objects.visible_to(staff)) == {mine, theirs, unowned}


def test_a_public_id_that_could_name_a_path_is_invalid() -> None:
    with pytest.raises(ValidationError, match="invalid session id"):
        Session(public_id="../etc").full_clean()


def test_a_session_without_a_title_shows_its_public_id() -> None:
    assert str(Session(public_id="abc")) == "abc"
    assert str(Session(public_id="abc", title="Rebooking")) == "Rebooking"
