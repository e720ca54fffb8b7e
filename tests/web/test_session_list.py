"""The session list: search, filters, sort and pages kept in the query string."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from motus_web.dashboard.lost import preview
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import Session
from motus_web.sessions.previews import PREVIEW_CHARS, preview_of
from tests.test_log_store_contract import message, meta

from .helpers import logged_in, make_session
from .test_inspection import add_failed_compaction

pytestmark = pytest.mark.django_db

LIST = reverse("dashboard:session_list")


def titles(response: object) -> list[str]:
    return [session.title for session in response.context["page"].object_list]  # type: ignore[attr-defined]


def test_search_finds_titles_message_text_and_ids(owner: User, teammate: User) -> None:
    seattle = make_session(owner, title="Seattle trip")
    other = make_session(owner, title="Other")
    Session.objects.filter(pk=other.pk).update(original_id="imported-xyz")
    make_session(teammate, title="Seattle, but not mine")
    client = logged_in(owner)

    assert titles(client.get(LIST, {"q": "seattle"})) == ["Seattle trip"]
    assert sorted(titles(client.get(LIST, {"q": "booking B1"}))) == ["Other", "Seattle trip"]
    assert titles(client.get(LIST, {"q": seattle.public_id[:12]})) == ["Seattle trip"]
    assert titles(client.get(LIST, {"q": "imported-xyz"})) == ["Other"]
    assert titles(client.get(LIST, {"q": "nothing like this"})) == []


def test_filters_narrow_the_list(owner: User) -> None:
    plain = make_session(owner, title="Plain")
    compacted = make_session(owner, turns=6, filler=60, threshold=600, title="Compacted")
    failing = make_session(owner, turns=6, filler=60, threshold=600, title="Failing")
    add_failed_compaction(failing)
    make_session(owner, title="A fork", parent=plain)
    Session.objects.filter(pk=compacted.pk).update(model_name="claude-haiku-4-5")
    Session.objects.filter(pk=plain.pk).update(updated_at=dt.datetime(2024, 1, 5, tzinfo=dt.UTC))
    client = logged_in(owner)

    assert sorted(titles(client.get(LIST, {"compacted": "on"}))) == ["Compacted", "Failing"]
    assert titles(client.get(LIST, {"failed": "on"})) == ["Failing"]
    assert titles(client.get(LIST, {"forks": "on"})) == ["A fork"]
    assert titles(client.get(LIST, {"model": "claude-haiku-4-5"})) == ["Compacted"]
    assert titles(client.get(LIST, {"until": "2024-01-31"})) == ["Plain"]
    assert "Plain" not in titles(client.get(LIST, {"since": "2024-02-01"}))


def test_failed_compactions_and_forks_have_their_columns(owner: User) -> None:
    parent = make_session(owner, turns=6, filler=60, threshold=600, title="Parent")
    add_failed_compaction(parent)
    make_session(owner, title="Child", parent=parent)

    page = logged_in(owner).get(LIST, {"q": "Parent"})

    row = page.context["page"].object_list[0]
    assert (row.failed_count, row.fork_count) == (1, 1)
    assert '<td class="num bad" data-label="Failed">1</td>' in page.content.decode()
    assert 'class="context-bar"' in page.content.decode()


def test_every_column_sorts_both_ways(owner: User) -> None:
    small = make_session(owner, turns=1, title="b small")
    big = make_session(owner, turns=5, title="a big")
    client = logged_in(owner)

    most = client.get(LIST, {"sort": "-messages"})
    assert titles(most) == ["a big", "b small"]
    assert '<option value="-messages" selected>Most messages</option>' in most.content.decode()
    assert titles(client.get(LIST, {"sort": "messages"})) == ["b small", "a big"]
    assert titles(client.get(LIST, {"sort": "title"})) == ["a big", "b small"]
    assert small.message_count < big.message_count
    for key in ("compactions", "failed", "forks", "context", "tokens", "updated"):
        assert client.get(LIST, {"sort": key}).status_code == 200


def test_pages_and_sort_links_keep_the_search(owner: User) -> None:
    for n in range(30):
        make_session(owner, turns=1, title=f"Trip {n}")

    html = logged_in(owner).get(LIST, {"q": "trip", "sort": "title"}).content.decode()

    assert 'href="?q=trip&amp;sort=title&page=2"' in html
    assert 'href="?q=trip&amp;sort=-title"' in html  # the title column toggles


def test_htmx_gets_only_the_table_and_a_history_restore_gets_the_page(owner: User) -> None:
    make_session(owner, title="Seattle trip")
    client = logged_in(owner)

    fragment = client.get(LIST, {"q": "seattle"}, headers={"HX-Request": "true"})
    restore = client.get(LIST, headers={"HX-Request": "true", "HX-History-Restore-Request": "true"})

    assert fragment.content.decode().lstrip().startswith('<section id="session-table">')
    assert "Seattle trip" in fragment.content.decode()
    assert b'role="search"' in restore.content
    assert "HX-Request" in fragment["Vary"]


def test_a_bad_date_is_reported_and_filters_nothing(owner: User) -> None:
    make_session(owner, title="Kept")

    response = logged_in(owner).get(LIST, {"since": "not a date"})

    assert response.status_code == 200
    assert titles(response) == ["Kept"]
    assert "Enter a valid date" in response.content.decode()


def test_the_list_never_reads_a_message_s_content_however_huge_the_first_one(
    owner: User,
) -> None:
    huge = "Where is my booking? " + "x" * 5_000_000
    DatabaseLogStore().extend("huge", [meta("huge"), message(0, "user", huge)])
    Session.objects.filter(public_id="huge").update(owner=owner, title="")
    client = logged_in(owner)

    with CaptureQueriesContext(connection) as queries:
        response = client.get(LIST)

    row = response.context["page"].object_list[0]
    assert row.preview == huge[:PREVIEW_CHARS]
    assert "Where is my booking? xxx" in response.content.decode()
    assert len(response.content) < 50_000
    listed = [q["sql"] for q in queries.captured_queries if "dashboard_message" in q["sql"]]
    assert listed, "the preview comes from the messages table"
    assert not [sql for sql in listed if '"content"' in sql]


@pytest.mark.parametrize(
    ("role", "content", "kept"),
    [
        ("user", "Question 0: where", "Question 0: where"),
        ("user", [{"type": "image_url"}, {"type": "text", "text": "hello"}], "hello"),
        ("user", "nul\x00 and lone \ud83d half", "nul\ufffd and lone \ufffd half"),
        ("user", None, ""),
        ("user", {"not": "text"}, ""),
        ("assistant", "not listed", ""),
        ("user", "é" * (PREVIEW_CHARS + 5), "é" * PREVIEW_CHARS),
    ],
)
def test_a_user_message_s_stored_preview_is_the_start_of_its_text(
    role: str, content: object, kept: str
) -> None:
    assert preview_of(role, content) == kept


@pytest.mark.django_db(transaction=True)
def test_the_migration_fills_the_preview_of_messages_stored_before_it(owner: User) -> None:
    before = [("motus_sessions", "0009_message_indexes_for_long_sessions")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    stored = old.get_model("motus_sessions", "Session").objects.create(
        public_id="before", owner_id=owner.pk
    )
    for seq, (role, content) in enumerate(
        [("system", "You help."), ("user", "Book a table for 2"), ("user", "Later")]
    ):
        old.get_model("motus_sessions", "Message").objects.create(
            session=stored, position=seq + 1, seq=seq, role=role, content=content,
            tokens=3, unit="A", unit_index=seq, context_tokens=3,
        )  # fmt: skip

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    session = Session.objects.get(public_id="before")
    assert list(session.messages.order_by("seq").values_list("preview", flat=True)) == [
        "",
        "Book a table for 2",
        "Later",
    ]
    row = logged_in(owner).get(LIST).context["page"].object_list[0]
    assert row.preview == "Book a table for 2"


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        ('"Question 0: wher', "Question 0: wher"),
        ('"a \\"quoted\\" caf\\u00e9 \\u00', 'a "quoted" café '),
        ('[{"type": "text", "text": "hello wor', "hello wor"),
        ('"cut at an escape \\', "cut at an escape "),
        ('"whole"', "whole"),
        ('{"not": "text"}', ""),
        (None, ""),
    ],
)
def test_a_cut_json_preview_reads_as_text(stored: str | None, shown: str) -> None:
    assert preview(stored) == shown


@pytest.mark.parametrize(
    ("q", "error"),
    [
        ("x" * 201, "Search is at most 200 characters (this one has 201)."),
        ("seattle\x00", "Search cannot contain control characters"),
        ("seattle\x07trip", "Search cannot contain control characters"),
    ],
)
def test_an_unreadable_search_is_reported_and_matches_nothing(
    owner: User, q: str, error: str
) -> None:
    make_session(owner, title="Seattle trip")
    client = logged_in(owner)

    for headers in ({}, {"HX-Request": "true"}):  # the page, and the table htmx swaps in
        response = client.get(LIST, {"q": q}, headers=headers)

        assert response.status_code == 200
        page = response.content.decode()
        assert "Seattle trip" not in page  # never "every session matches"
        assert "0 sessions match" in page
        assert error in page


def test_a_bad_field_is_reported_alone_and_the_valid_filters_still_apply(owner: User) -> None:
    old = make_session(owner, title="Old")
    make_session(owner, title="New")
    Session.objects.filter(pk=old.pk).update(updated_at=dt.datetime(2019, 6, 1, tzinfo=dt.UTC))

    response = logged_in(owner).get(LIST, {"since": "abc", "until": "2020-01-01"})

    assert titles(response) == ["Old"]
    page = response.content.decode()
    assert "Active since: Enter a valid date. This filter is not applied" in page
    assert "Until:" not in page
