"""Operator actions: undo a compaction, restore, fork, restore from a file, delete.

Each asks first (GET), acts on POST, and leaves every logged record as it was.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from memory import CompactionMemory, InMemoryLogStore
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import CompactionEvent, Message, Session

from .helpers import logged_in, make_session

pytestmark = pytest.mark.django_db


@pytest.fixture
def compacted(owner: User) -> Session:
    return make_session(owner, turns=8, filler=60, threshold=600, title="Rebook Mia")


def owner_of(session: Session) -> User:
    assert session.owner is not None
    return session.owner


def owner_client(session: Session) -> Client:
    return logged_in(owner_of(session))


def url(name: str, *args: Any) -> str:
    return reverse(f"dashboard:{name}", args=args)


def log_of(session_id: str) -> list[dict[str, Any]]:
    return list(DatabaseLogStore().read(session_id))


def context_of(session_id: str) -> list[Any]:
    memory = CompactionMemory.restore_from_log(session_id, log_store=DatabaseLogStore())
    return memory.get_context()


def restore_of_prefix(session: Session, stop: int) -> CompactionMemory:
    """What the library restores from the first ``stop`` records of the session's log."""
    store = InMemoryLogStore()
    for record in log_of(session.public_id)[:stop]:
        store.append(session.public_id, record)
    return CompactionMemory.restore_from_log(session.public_id, log_store=store)


def latest_compaction(session: Session) -> CompactionEvent:
    event = session.compaction_events.filter(kind="ok").order_by("-position").first()
    assert event is not None
    return event


# -- undo -----------------------------------------------------------------------------


def test_undo_asks_first_and_changes_nothing_on_get(compacted: Session) -> None:
    before = log_of(compacted.public_id)

    page = owner_client(compacted).get(url("undo_confirm", compacted.public_id))

    assert page.status_code == 200
    assert f"Undo compaction {latest_compaction(compacted).number}?" in page.content.decode()
    assert 'name="csrfmiddlewaretoken"' in page.content.decode()
    assert log_of(compacted.public_id) == before


def test_undo_appends_a_revert_through_the_library(compacted: Session) -> None:
    before = log_of(compacted.public_id)
    expected = restore_of_prefix(compacted, len(before))
    expected.revert_last_compaction("too lossy")

    client = owner_client(compacted)
    response = client.post(url("undo_compaction", compacted.public_id), {"reason": "too lossy"})

    assert response.status_code == 302
    after = log_of(compacted.public_id)
    assert after[: len(before)] == before  # nothing rewritten
    assert [r["type"] for r in after[len(before) :]] == ["compaction_revert"]
    assert after[-1]["reason"] == "too lossy"
    assert context_of(compacted.public_id) == expected.get_context()
    page = client.get(response["Location"]).content.decode()
    assert "undone" in page
    assert "Undo compaction" not in page  # reverted once, only once


def test_undo_without_a_compaction_is_refused_with_a_page_that_says_why(owner: User) -> None:
    plain = make_session(owner, turns=1)

    page = logged_in(owner).get(url("undo_confirm", plain.public_id))

    assert page.status_code == 404
    html = page.content.decode()
    assert "No compaction to undo" in html
    assert "no compaction yet" in html
    assert url("session_detail", plain.public_id) in html  # a way back, in the site's own page
    assert 'class="topbar"' in html
    response = logged_in(owner).post(url("undo_compaction", plain.public_id), follow=True)

    assert "Nothing was undone. This session has no compaction yet" in response.content.decode()
    assert not plain.compaction_events.exists()


def test_after_an_undo_the_page_counts_it_and_a_second_undo_says_it_was_done(
    compacted: Session,
) -> None:
    client = owner_client(compacted)
    number = latest_compaction(compacted).number
    compactions = Session.objects.get(pk=compacted.pk).compaction_count
    client.post(url("undo_compaction", compacted.public_id))

    detail = client.get(url("session_detail", compacted.public_id)).content.decode()
    again = client.get(url("undo_confirm", compacted.public_id))

    assert f'<dd>{compactions} <span class="muted">(1 undone)</span></dd>' in detail
    assert again.status_code == 404
    assert f"The latest compaction (compaction {number}) was already undone" in (
        again.content.decode()
    )


def test_a_forks_starting_summary_is_not_undoable_and_the_page_says_so(
    compacted: Session,
) -> None:
    client = owner_client(compacted)
    client.post(url("fork_session", compacted.public_id, 20))
    child = Session.objects.exclude(pk=compacted.pk).get()

    page = client.get(url("undo_confirm", child.public_id))

    assert page.status_code == 404
    assert "the summary this session started from when it was forked" in page.content.decode()


# -- restore and fork -------------------------------------------------------------------


def test_restore_before_a_compaction_makes_a_linked_session_with_that_context(
    compacted: Session,
) -> None:
    event = latest_compaction(compacted)
    before = log_of(compacted.public_id)

    response = owner_client(compacted).post(
        url("restore_session", compacted.public_id, event.position)
    )

    child = Session.objects.exclude(pk=compacted.pk).get()
    assert response["Location"] == url("session_detail", child.public_id)
    assert child.parent == compacted
    assert child.owner == compacted.owner
    assert context_of(child.public_id) == restore_of_prefix(compacted, event.position).get_context()
    assert log_of(compacted.public_id) == before


def test_fork_from_a_message_starts_from_the_context_right_after_it(compacted: Session) -> None:
    message = compacted.messages.get(seq=20)

    owner_client(compacted).post(url("fork_session", compacted.public_id, 20))

    child = Session.objects.exclude(pk=compacted.pk).get()
    expected = restore_of_prefix(compacted, message.position + 1)
    assert context_of(child.public_id) == expected.get_context()
    assert (child.parent, child.parent_seq) == (compacted, 20)
    assert "fork at #20" in child.title
    html = owner_client(compacted).get(url("session_detail", child.public_id)).content.decode()
    assert "Forked from" in html
    # Seq 20 is past a compaction: the fork starts from its parent's summary, and says so.
    assert expected.summary is not None
    assert "The summary this session started from" in html
    assert "Folded 0 messages" not in html


def test_the_fork_page_asks_first(compacted: Session) -> None:
    page = owner_client(compacted).get(url("fork_confirm", compacted.public_id, 5))

    assert "Fork from message #5?" in page.content.decode()
    assert Session.objects.count() == 1


def test_restore_from_a_log_file_gives_the_librarys_context(owner: User, tmp_path: Any) -> None:
    source = make_session(owner, turns=8, filler=60, threshold=600)
    export = logged_in(owner).get(url("export_jsonl", source.public_id))
    raw = b"".join(export.streaming_content)  # type: ignore[attr-defined]
    torn = raw + b'{"type": "message", "seq": 99, "mess'
    (tmp_path / "disk.jsonl").write_bytes(torn.replace(source.public_id.encode(), b"disk"))
    expected = CompactionMemory.restore_from_log("disk", log_base_path=tmp_path).get_context()

    upload = SimpleUploadedFile("run.jsonl", torn)
    response = logged_in(owner).post(url("restore_upload"), {"file": upload}, follow=True)

    restored = Session.objects.exclude(pk=source.pk).get()
    assert context_of(restored.public_id) == expected
    assert restored.parent == source
    assert restored.owner == owner
    html = response.content.decode()
    assert "run.jsonl: torn last line" in html  # reported, not silently dropped


@pytest.mark.parametrize(
    "content",
    [b"hello\nworld\n", b'[{"role": "user", "content": "hi"}]', b"\x00\x01binary"],
    ids=["text", "a chat transcript", "binary"],
)
def test_a_file_that_is_not_a_log_is_refused_with_a_reason(owner: User, content: bytes) -> None:
    upload = SimpleUploadedFile("notes.txt", content)

    response = logged_in(owner).post(url("restore_upload"), {"file": upload})

    assert response.status_code == 400
    html = response.content.decode()
    assert "notes.txt could not be restored: this is not a Motus JSONL conversation log" in html
    assert not Session.objects.exists()


# -- delete ---------------------------------------------------------------------------------


def test_delete_asks_then_removes_the_session_and_forks_keep_their_copy(owner: User) -> None:
    parent = make_session(owner, title="Parent run")
    fork = make_session(owner, title="Its fork", parent=parent)
    client = logged_in(owner)

    assert (
        "Delete Parent run?" in client.get(url("delete_confirm", parent.public_id)).content.decode()
    )
    response = client.post(url("delete_session", parent.public_id))

    assert response["Location"] == url("session_list")
    assert not Session.objects.filter(pk=parent.pk).exists()
    assert not Message.objects.filter(session_id=parent.pk).exists()
    fork.refresh_from_db()
    assert fork.parent is None
    assert fork.messages.count() == fork.message_count


# -- who may act -----------------------------------------------------------------------------


def action_urls(session: Session) -> list[tuple[str, str]]:
    event = latest_compaction(session)
    return [
        ("get", url("undo_confirm", session.public_id)),
        ("post", url("undo_compaction", session.public_id)),
        ("get", url("restore_confirm", session.public_id, event.position)),
        ("post", url("restore_session", session.public_id, event.position)),
        ("get", url("fork_confirm", session.public_id, 3)),
        ("post", url("fork_session", session.public_id, 3)),
        ("get", url("delete_confirm", session.public_id)),
        ("get", url("session_context", session.public_id)),
        ("get", url("compaction_detail", session.public_id, event.position)),
        ("get", url("session_trace", session.public_id)),
        ("get", url("session_trace_json", session.public_id)),
        ("get", url("export_jsonl", session.public_id)),
        ("get", url("export_openai", session.public_id)),
        ("post", url("delete_session", session.public_id)),
    ]


@pytest.mark.parametrize("who", ["teammate", "outsider"])
def test_other_users_get_404_everywhere_and_change_nothing(
    compacted: Session, who: str, request: pytest.FixtureRequest
) -> None:
    client = logged_in(request.getfixturevalue(who))
    before = log_of(compacted.public_id)

    for method, path in action_urls(compacted):
        assert getattr(client, method)(path).status_code == 404, path
        assert getattr(client, method)(path, HTTP_HX_REQUEST="true").status_code == 404, path

    assert log_of(compacted.public_id) == before
    assert Session.objects.count() == 1


def test_anonymous_visitors_are_sent_to_log_in(compacted: Session) -> None:
    for method, path in action_urls(compacted):
        response = getattr(Client(), method)(path)
        assert response.status_code == 302, path
        assert response["Location"].startswith(reverse("login")), path


def test_staff_may_act_on_anyones_session(compacted: Session, staff: User) -> None:
    client = logged_in(staff)

    for method, path in action_urls(compacted):
        assert getattr(client, method)(path).status_code in (200, 302), path

    assert not Session.objects.filter(pk=compacted.pk).exists()  # the last action deletes
    assert Session.objects.filter(parent__isnull=True).count() == 2  # restore and fork copies


def test_actions_refuse_get_where_they_want_post_and_need_csrf(compacted: Session) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner_of(compacted))

    assert client.get(url("undo_compaction", compacted.public_id)).status_code == 405
    assert client.post(url("undo_compaction", compacted.public_id)).status_code == 403
    assert client.post(url("delete_session", compacted.public_id)).status_code == 403
    assert Session.objects.filter(pk=compacted.pk).exists()


def test_the_restore_form_is_a_page(owner: User) -> None:
    page = logged_in(owner).get(url("restore_upload_form"))

    assert page.status_code == 200
    assert 'enctype="multipart/form-data"' in page.content.decode()


@pytest.mark.django_db(transaction=True)
def test_four_undos_at_once_append_one_revert(owner: User) -> None:
    import threading

    from django.db import connection, connections

    from memory import CompactionError
    from motus_web.dashboard.operations import undo_latest_compaction

    if connection.vendor != "postgresql":
        pytest.skip("concurrent writers need PostgreSQL (DATABASE_URL)")
    session = make_session(owner, turns=6, filler=80, threshold=600)
    before = len(log_of(session.public_id))
    start = threading.Barrier(4)
    outcomes: list[str] = []

    def undo() -> None:
        try:
            start.wait()
            undo_latest_compaction(Session.objects.get(pk=session.pk), "at once")
            outcomes.append("reverted")
        except CompactionError:
            outcomes.append("nothing left to revert")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=undo) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(outcomes) == ["nothing left to revert"] * 3 + ["reverted"]
    assert [r["type"] for r in log_of(session.public_id)[before:]] == ["compaction_revert"]
