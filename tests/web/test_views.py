from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from pytest_django import DjangoAssertNumQueries

from motus_web.dashboard.models import Session

from .helpers import logged_in, make_session

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def detail_url(session: Session, page: int | None = None) -> str:
    url = reverse("dashboard:session_detail", args=[session.public_id])
    return f"{url}?page={page}" if page else url


# -- login --------------------------------------------------------------------


def test_an_anonymous_visitor_is_sent_to_log_in(client: Client) -> None:
    response = client.get(reverse("dashboard:session_list"))

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_a_user_logs_in_with_the_form_and_lands_on_the_session_list(
    client: Client, owner: User
) -> None:
    page = client.get(reverse("login"))
    assert page.status_code == 200
    assert b'name="password"' in page.content

    response = client.post(reverse("login"), {"username": "olivia", "password": "owner-pass-1234"})

    assert response.status_code == 302
    assert response["Location"] == reverse("dashboard:session_list")


def test_logging_out_takes_a_post(owner: User) -> None:
    client = logged_in(owner)

    response = client.post(reverse("logout"))

    assert response.status_code == 302
    assert client.get(reverse("dashboard:session_list")).status_code == 302


# -- session list -------------------------------------------------------------


def test_the_list_shows_the_owners_sessions_with_their_figures(owner: User, teammate: User) -> None:
    mine = make_session(owner, title="Rebook Mia's flight")
    make_session(teammate, title="Someone else's")

    response = logged_in(owner).get(reverse("dashboard:session_list"))

    assert response.status_code == 200
    html = response.content.decode()
    assert "Rebook Mia&#x27;s flight" in html
    assert "Someone else" not in html
    assert detail_url(mine) in html
    assert f">{mine.message_count}<" in html
    assert f">{mine.context_tokens:,}<" in html


def test_an_untitled_session_is_named_by_its_first_user_message(owner: User) -> None:
    make_session(owner)

    response = logged_in(owner).get(reverse("dashboard:session_list"))

    assert "Question 0: where is booking B0?" in response.content.decode()


def test_staff_see_every_session_including_unowned_ones(owner: User, staff: User) -> None:
    make_session(owner, title="Owned")
    make_session(None, title="Imported without owner")

    html = logged_in(staff).get(reverse("dashboard:session_list")).content.decode()

    assert "Owned" in html
    assert "Imported without owner" in html


def test_an_outsider_sees_an_empty_list(owner: User, outsider: User) -> None:
    make_session(owner, title="Private")

    html = logged_in(outsider).get(reverse("dashboard:session_list")).content.decode()

    assert "Private" not in html
    assert "No sessions yet" in html


def test_the_list_is_paginated_and_htmx_gets_only_the_table(owner: User) -> None:
    for number in range(27):
        make_session(owner, turns=1, title=f"Session {number:02}")
    client = logged_in(owner)

    full = client.get(reverse("dashboard:session_list"), {"page": 2})
    fragment = client.get(reverse("dashboard:session_list"), {"page": 2}, headers=HTMX)

    assert full.status_code == fragment.status_code == 200
    assert "<html" in full.content.decode()
    html = fragment.content.decode()
    assert "<html" not in html
    assert html.lstrip().startswith('<section id="session-table">')
    assert "Page 2 of 2" in html
    assert html.count("Session 0") == 2  # the two oldest: 00 and 01
    assert 'hx-get="?page=1"' in html


def test_the_list_takes_the_same_number_of_queries_for_many_sessions(
    owner: User, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    for _ in range(5):
        make_session(owner, turns=1)
    client = logged_in(owner)

    # session, user, count, page (with the first user message as a subquery)
    with django_assert_num_queries(4):
        client.get(reverse("dashboard:session_list"))


# -- session detail -----------------------------------------------------------


def test_the_detail_shows_every_message_in_order_with_its_figures(owner: User) -> None:
    session = make_session(owner, turns=2)

    response = logged_in(owner).get(detail_url(session))

    assert response.status_code == 200
    html = response.content.decode()
    positions = [html.index(f'id="m{seq}"') for seq in range(8)]
    assert positions == sorted(positions)
    assert "Question 1: where is booking B1?" in html
    assert "get_booking" in html  # the tool call
    assert "&quot;id&quot;: &quot;B1&quot;" in html  # its arguments, indented
    assert "Result of <code>get_booking</code> for <code>call_1</code>" in html
    assert "unit B" in html
    assert "You are a booking assistant." in html


def test_compaction_events_appear_right_after_the_message_they_followed(owner: User) -> None:
    session = make_session(owner, turns=6, filler=60, threshold=600)
    event = session.compaction_events.filter(kind="ok").first()
    assert event is not None
    assert event.through_seq is not None

    html = logged_in(owner).get(detail_url(session)).content.decode()

    event_at = html.index(f"Compaction {event.number}")
    assert html.index(f'id="m{event.through_seq}"') < event_at
    assert event_at < html.index(f'id="m{event.through_seq + 1}"')
    assert f"{event.tokens_before:,} &rarr; {event.tokens_after:,} tokens" in html


def test_the_detail_is_paginated_and_htmx_gets_only_the_timeline(owner: User) -> None:
    session = make_session(owner, turns=15)  # 60 messages
    client = logged_in(owner)

    full = client.get(detail_url(session, page=2))
    fragment = client.get(detail_url(session, page=2), headers=HTMX)

    assert full.status_code == fragment.status_code == 200
    assert "<html" in full.content.decode()
    html = fragment.content.decode()
    assert html.lstrip().startswith('<section id="timeline">')
    assert 'id="m50"' in html
    assert 'id="m49"' not in html
    assert "Page 2 of 2" in html


def test_the_detail_takes_a_fixed_number_of_queries(
    owner: User, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    session = make_session(owner, turns=6, filler=60, threshold=600)
    client = logged_in(owner)

    # session, user, the session, count, messages, compaction events, context changes
    with django_assert_num_queries(7):
        client.get(detail_url(session))


@pytest.mark.parametrize("who", ["owner", "staff"])
def test_the_owner_and_staff_may_open_a_session(
    who: str, request: pytest.FixtureRequest, owner: User
) -> None:
    session = make_session(owner)

    response = logged_in(request.getfixturevalue(who)).get(detail_url(session))

    assert response.status_code == 200


@pytest.mark.parametrize("who", ["teammate", "outsider"])
def test_anyone_else_gets_not_found(who: str, request: pytest.FixtureRequest, owner: User) -> None:
    session = make_session(owner)

    client = logged_in(request.getfixturevalue(who))

    assert client.get(detail_url(session)).status_code == 404
    assert client.get(detail_url(session), headers=HTMX).status_code == 404


def test_an_unowned_session_is_for_staff_only(owner: User, staff: User) -> None:
    session = make_session(None)

    assert logged_in(owner).get(detail_url(session)).status_code == 404
    assert logged_in(staff).get(detail_url(session)).status_code == 200


def test_pages_refuse_other_methods(owner: User) -> None:
    session = make_session(owner)
    client = logged_in(owner)

    assert client.post(detail_url(session)).status_code == 405
    assert client.post(reverse("dashboard:session_list")).status_code == 405
    assert client.get(reverse("dashboard:import_upload")).status_code == 405


# -- admin --------------------------------------------------------------------


def test_the_admin_shows_sessions_messages_and_events_read_only(owner: User) -> None:
    session = make_session(owner, turns=6, filler=60, threshold=600)
    admin = User.objects.create_superuser("root", password="root-pass-1234")
    client = logged_in(admin)
    message = session.messages.get(seq=0)

    for name in ("session", "message", "compactionevent", "contextchange"):
        assert client.get(reverse(f"admin:dashboard_{name}_changelist")).status_code == 200
    page = client.get(reverse("admin:dashboard_message_change", args=[message.pk]))
    assert page.status_code == 200
    assert b'name="_save"' not in page.content
    assert client.get(reverse("admin:dashboard_session_add")).status_code == 403
    assert (
        client.post(reverse("admin:dashboard_session_delete", args=[session.pk])).status_code == 403
    )
