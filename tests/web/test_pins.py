"""The operator's pins on the session page: what Compact now's instructions named
(and a correction added) is listed with an unpin action, done once, owners only."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from memory import CompactionMemory
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import ActionToken, Session

from .helpers import _Forms, confirmation_form, logged_in, make_session
from .test_actions import latest_compaction, log_of, owner_client, url

pytestmark = pytest.mark.django_db


def unpin_forms(client: Client, session: Session) -> dict[str, dict[str, str]]:
    """The unpin forms of the session page, by the value each names."""
    parser = _Forms()
    parser.feed(client.get(url("session_detail", session.public_id)).content.decode())
    forms = [hidden for action, hidden in parser.forms if action == url("unpin", session.public_id)]
    for hidden in forms:
        hidden.pop("csrfmiddlewaretoken", None)
    return {hidden["value"]: hidden for hidden in forms}


def compact_now(client: Client, session: Session, instructions: str) -> None:
    page = client.get(url("session_detail", session.public_id)).content.decode()
    action, form = confirmation_form(page, url("compact_now", session.public_id))
    assert client.post(action, {**form, "instructions": instructions}).status_code == 303


def library_pins(session: Session) -> list[str]:
    memory = CompactionMemory.restore_from_log(session.public_id, log_store=DatabaseLogStore())
    return [pin.value for pin in memory.pins]


@pytest.fixture
def pinned(owner: User) -> Session:
    session = make_session(owner, turns=6, filler=20, threshold=100_000, title="Pins")
    compact_now(owner_client(session), session, 'keep bookings B1 and B4, and "window seat"')
    return session


def test_the_session_page_lists_what_compact_nows_instructions_pinned(pinned: Session) -> None:
    page = owner_client(pinned).get(url("session_detail", pinned.public_id)).content.decode()

    assert 'id="pins"' in page
    assert "Pinned by the operator" in page
    forms = unpin_forms(owner_client(pinned), pinned)
    assert list(forms) == ["B1", "B4", "window seat"] == library_pins(pinned)
    number = latest_compaction(pinned).number
    assert f"named in compaction {number}'s instructions" in page


def test_a_session_without_pins_shows_no_pins_card(owner: User) -> None:
    session = make_session(owner, turns=2, threshold=100_000)
    page = owner_client(session).get(url("session_detail", session.public_id)).content.decode()
    assert 'id="pins"' not in page


def test_unpin_lets_the_value_go_once_and_a_restore_agrees(pinned: Session) -> None:
    client = owner_client(pinned)
    form = unpin_forms(client, pinned)["B1"]
    before = log_of(pinned.public_id)

    answers = [client.post(url("unpin", pinned.public_id), form) for _ in range(2)]

    assert [a.status_code for a in answers] == [303, 409]
    assert answers[0]["Location"] == url("session_detail", pinned.public_id)
    after = log_of(pinned.public_id)
    assert after[: len(before)] == before
    (record,) = after[len(before) :]
    assert record["type"] == "unpin"
    assert record["values"] == ["B1"]
    assert list(unpin_forms(client, pinned)) == ["B4", "window seat"] == library_pins(pinned)
    assert ActionToken.objects.filter(action="unpin").count() == 1
    page = client.get(url("session_detail", pinned.public_id)).content.decode()
    assert "Unpinned <code>B1</code>" in page  # the timeline's event


def test_unpin_of_a_value_no_longer_pinned_is_refused_naming_it(pinned: Session) -> None:
    client = owner_client(pinned)
    forms = unpin_forms(client, pinned)
    assert client.post(url("unpin", pinned.public_id), forms["B1"]).status_code == 303
    stale: dict[str, Any] = {**forms["B4"], "value": "B1"}  # an old page's form, edited

    answer = client.post(url("unpin", pinned.public_id), stale)

    assert answer.status_code == 409
    assert "changed" in answer.content.decode() or "not pinned" in answer.content.decode()
    assert library_pins(pinned) == ["B4", "window seat"]


def test_someone_elses_pins_are_not_theirs_to_see_or_unpin(pinned: Session, outsider: User) -> None:
    form = unpin_forms(owner_client(pinned), pinned)["B4"]
    client = logged_in(outsider)

    assert client.get(url("session_detail", pinned.public_id)).status_code == 404
    assert client.post(url("unpin", pinned.public_id), form).status_code == 404
    assert library_pins(pinned) == ["B1", "B4", "window seat"]


def test_a_correction_that_adds_an_id_pins_it_and_one_it_drops_goes(pinned: Session) -> None:
    client = owner_client(pinned)
    event = latest_compaction(pinned)
    page = client.get(url("compaction_detail", pinned.public_id, event.position)).content.decode()
    action, form = confirmation_form(page, url("correct_summary", pinned.public_id, event.position))
    text = "Mia rebooked: bookings B4 and NEWB77, a window seat."

    assert client.post(action, {**form, "summary": text}).status_code == 303

    forms = unpin_forms(client, pinned)
    assert list(forms) == ["B4", "window seat", "NEWB77"] == library_pins(pinned)
    page = client.get(url("session_detail", pinned.public_id)).content.decode()
    assert f"added by the correction of compaction {event.number}" in page
