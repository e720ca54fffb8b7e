from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from pytest_django import DjangoAssertNumQueries

from motus_web.dashboard import charts
from motus_web.dashboard.templatetags.dashboard import PREVIEW_CHARS
from motus_web.sessions.importers import ImportOptions, import_path
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import Session
from tests.test_log_store_contract import message, meta

from .helpers import logged_in, make_session
from .test_importers import SWE_AGENT

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
    assert f'data-label="Context tokens">{mine.context_tokens:,}' in html


def test_the_list_says_what_context_and_message_tokens_are(owner: User) -> None:
    make_session(owner)

    html = logged_in(owner).get(reverse("dashboard:session_list")).content.decode()

    assert "<dt>Context tokens</dt><dd>what the model is sent now" in html
    assert "<dt>Message tokens</dt><dd>every message ever logged" in html


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

    # session, user, count, page (failed compactions, forks and the first user
    # message's first characters as subqueries), the model names for the filter
    with django_assert_num_queries(5):
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
    assert 'title="B: tool calls and results">B1</span>' in html
    assert "You are a booking assistant." in html


def test_a_swe_agent_tool_result_names_the_calls_it_answers(owner: User) -> None:
    report = import_path(SWE_AGENT, ImportOptions(owner=owner))
    session = Session.objects.get(public_id=report.imported[0])

    html = logged_in(owner).get(detail_url(session)).content.decode()

    assert "Tool result for <code>call_9diWc1DYm4RLmPfHgIaP2wd</code>" in html
    assert "Result of <code>tool</code>" not in html


def test_a_result_of_several_calls_names_them_all(owner: User) -> None:
    log = [meta("multi"), message(0, "tool", "both done", tool_call_ids=["c1", "c2", "c3"])]
    DatabaseLogStore().extend("multi", log)
    Session.objects.filter(public_id="multi").update(owner=owner)

    html = logged_in(owner).get(reverse("dashboard:session_detail", args=["multi"])).content
    assert "Tool result for <code>c1</code>, <code>c2</code> and <code>c3</code>" in html.decode()


def test_compaction_events_appear_right_after_the_message_they_followed(owner: User) -> None:
    session = make_session(owner, turns=6, filler=60, threshold=600)
    event = session.compaction_events.filter(kind="ok").first()
    assert event is not None
    assert event.through_seq is not None

    html = logged_in(owner).get(detail_url(session)).content.decode()

    event_at = html.index(f'id="e{event.position}"')
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


@pytest.mark.parametrize("chart_points", [2000, 20])
def test_the_detail_takes_as_many_queries_for_a_long_session_as_for_a_short_one(
    chart_points: int, owner: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With a chart of 20 points both sessions are past it: the chart samples the messages.
    monkeypatch.setattr(charts, "MAX_POINTS", chart_points)
    short = make_session(owner, turns=6, filler=60, threshold=600)
    long = make_session(owner, turns=60, filler=60, threshold=600)
    assert long.message_count > 8 * short.message_count
    # Both read every point, or both past the chart's points.
    assert (short.message_count > chart_points) == (long.message_count > chart_points)
    client = logged_in(owner)

    counts = []
    for session in (short, long):
        with CaptureQueriesContext(connection) as queries:
            assert client.get(detail_url(session)).status_code == 200
        counts.append(len(queries))

    # Never one query per message, compaction or page row.
    assert counts[0] == counts[1]


def test_a_fork_links_to_its_parent_for_whoever_may_see_both(owner: User, staff: User) -> None:
    parent = make_session(owner, title="The original run")
    fork = make_session(owner, title="The fork", parent=parent)

    for viewer in (owner, staff):
        html = logged_in(viewer).get(detail_url(fork)).content.decode()
        assert "Forked from" in html
        assert f'href="{detail_url(parent)}">The original run</a> at #3' in html


def test_a_fork_does_not_show_a_parent_the_viewer_may_not_see(owner: User, staff: User) -> None:
    parent = make_session(staff, title="Staff's secret run")
    fork = make_session(owner, title="Owner's fork", parent=parent)
    assert fork.parent == parent

    html = logged_in(owner).get(detail_url(fork)).content.decode()

    assert "Forked from" not in html
    assert "secret" not in html
    assert parent.public_id not in html
    assert "Staff&#x27;s secret run" in logged_in(staff).get(detail_url(fork)).content.decode()


def huge_tool_result(owner: User, size: int = 5 * 1024 * 1024) -> Session:
    """A session whose second message calls a tool with long arguments and whose third is
    a tool result of ``size`` characters."""
    call = {"id": "c1", "type": "function", "function": {"name": "cat", "arguments": "a" * 9000}}
    log = [
        meta("huge"),
        message(0, "user", "Show me the log file."),
        message(1, "assistant", None, tool_calls=[call]),
        message(2, "tool", "L" * (size - 1) + "Z", tool_call_id="c1", name="cat"),
    ]
    DatabaseLogStore().extend("huge", log)
    Session.objects.filter(public_id="huge").update(owner=owner)
    return Session.objects.get(public_id="huge")


def message_url(session: Session, seq: int) -> str:
    return reverse("dashboard:message_detail", args=[session.public_id, seq])


def test_a_huge_tool_result_shows_its_start_its_size_and_a_link_to_all_of_it(owner: User) -> None:
    session = huge_tool_result(owner)

    response = logged_in(owner).get(detail_url(session))

    assert response.status_code == 200
    assert len(response.content) < 100_000
    html = response.content.decode()
    assert "L" * PREVIEW_CHARS in html
    assert "L" * (PREVIEW_CHARS + 1) not in html
    assert "Showing the first 3,000 of 5,242,880 characters (5.0\xa0MB)." in html
    url = message_url(session, 2)
    assert f'<a href="{url}" hx-get="{url}" hx-target="#m2" hx-swap="outerHTML">' in html


def test_long_tool_call_arguments_are_clipped_too(owner: User) -> None:
    session = huge_tool_result(owner, size=10)

    html = logged_in(owner).get(detail_url(session)).content.decode()

    assert "Showing the first 3,000 of 9,000 characters" in html  # the arguments
    assert message_url(session, 1) in html
    assert message_url(session, 2) not in html  # a short result is shown whole


def test_the_whole_message_is_a_page_of_its_own(owner: User) -> None:
    session = huge_tool_result(owner)

    response = logged_in(owner).get(message_url(session, 2))

    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" in html
    assert "L" * (5 * 1024 * 1024 - 1) + "Z" in html
    assert "Showing the first" not in html
    assert f'href="{detail_url(session)}?page=1#m2"' in html


def test_htmx_gets_the_whole_message_as_the_timelines_fragment(owner: User) -> None:
    session = huge_tool_result(owner)

    response = logged_in(owner).get(message_url(session, 2), headers=HTMX)

    html = response.content.decode()
    assert "<html" not in html
    assert '<li class="message role-tool" id="m2">' in html
    assert "L" * (5 * 1024 * 1024 - 1) + "Z" in html


def test_the_message_page_links_back_to_the_page_the_message_is_on(owner: User) -> None:
    session = make_session(owner, turns=15)  # 60 messages, 50 a page

    html = logged_in(owner).get(message_url(session, 55)).content.decode()

    assert f'href="{detail_url(session)}?page=2#m55"' in html


def test_the_message_page_takes_a_fixed_number_of_queries(
    owner: User, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    session = make_session(owner, turns=15)
    client = logged_in(owner)

    # session, user, the session, the message, messages before it
    with django_assert_num_queries(5):
        client.get(message_url(session, 55))
    with django_assert_num_queries(4):
        client.get(message_url(session, 55), headers=HTMX)


@pytest.mark.parametrize("who", ["teammate", "outsider"])
def test_a_message_of_someone_elses_session_is_not_found(
    who: str, request: pytest.FixtureRequest, owner: User
) -> None:
    session = make_session(owner)
    client = logged_in(request.getfixturevalue(who))

    assert client.get(message_url(session, 0)).status_code == 404
    assert client.get(message_url(session, 0), headers=HTMX).status_code == 404
    assert logged_in(owner).get(message_url(session, 99)).status_code == 404


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


def test_the_admin_writes_out_bidirectional_controls_as_the_dashboard_does(owner: User) -> None:
    session = make_session(owner, turns=2)
    session.title = "invoice\u202eexe.pdf"
    session.save(update_fields=["title"])
    message = session.messages.get(seq=0)
    message.content = "run \u2067this\u2069 now"
    message.save(update_fields=["content"])
    client = logged_in(User.objects.create_superuser("root", password="root-pass-1234"))

    pages = [
        client.get(reverse("admin:motus_sessions_session_changelist")),
        client.get(reverse("admin:motus_sessions_session_change", args=[session.pk])),
        client.get(reverse("admin:motus_sessions_message_change", args=[message.pk])),
    ]

    for page in pages:
        text = page.content.decode()
        assert page.status_code == 200
        assert not any(c in text for c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
    assert "invoice⟨U+202E⟩exe.pdf" in pages[0].content.decode()
    assert "invoice⟨U+202E⟩exe.pdf" in pages[1].content.decode()
    assert "run ⟨U+2067⟩this⟨U+2069⟩ now" in pages[2].content.decode()


def test_the_admin_shows_sessions_messages_and_events_read_only(owner: User) -> None:
    session = make_session(owner, turns=6, filler=60, threshold=600)
    admin = User.objects.create_superuser("root", password="root-pass-1234")
    client = logged_in(admin)
    message = session.messages.get(seq=0)

    for name in ("session", "message", "compactionevent", "contextchange"):
        assert client.get(reverse(f"admin:motus_sessions_{name}_changelist")).status_code == 200
    page = client.get(reverse("admin:motus_sessions_message_change", args=[message.pk]))
    assert page.status_code == 200
    assert b'name="_save"' not in page.content
    assert client.get(reverse("admin:motus_sessions_session_add")).status_code == 403
    assert (
        client.post(reverse("admin:motus_sessions_session_delete", args=[session.pk])).status_code
        == 403
    )


def test_an_htmx_history_restore_gets_the_whole_page_and_responses_vary_on_htmx(
    owner: User,
) -> None:
    session = make_session(owner)
    client = logged_in(owner)
    for url in (reverse("dashboard:session_list"), detail_url(session)):
        restore = client.get(url, headers={**HTMX, "HX-History-Restore-Request": "true"})
        fragment = client.get(url, headers=HTMX)
        assert "<html" in restore.content.decode()
        assert "<html" not in fragment.content.decode()
        assert "HX-Request" in restore["Vary"]
        assert "HX-Request" in fragment["Vary"]
