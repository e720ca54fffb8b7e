"""Operator actions: undo a compaction, restore, fork, restore from a file, delete.

Each asks first (GET, stating the result), acts on POST once, answers 303 to
the result, and leaves every logged record as it was.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from memory import ChatMessage, CompactionMemory, InMemoryLogStore
from motus_web.sessions import lease, once
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import ActionToken, CompactionEvent, ImportJob, Message, Session

from .helpers import chat, confirm, confirmation_form, logged_in, make_session, run_tasks

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


def add_turns(session: Session, turns: int) -> None:
    """Go on with the session through the library, as a chat turn would."""
    memory = CompactionMemory.restore_from_log(session.public_id, log_store=DatabaseLogStore())
    for message in chat(turns, filler=60)[: 4 * turns]:
        async_to_sync(memory.add_message)(message)


def form_of(client: Client, confirm_url: str) -> tuple[str, dict[str, str]]:
    page = client.get(confirm_url)
    assert page.status_code == 200, page.content.decode()
    return confirmation_form(page.content.decode())


def assert_every_call_is_answered(context: list[ChatMessage]) -> None:
    """The tool-pairing check: each result follows its call, no call lacks a result."""
    open_ids: set[str] = set()
    for message in context:
        if message.role == "tool":
            assert set(message.tool_call_ids) <= open_ids, message
            open_ids -= set(message.tool_call_ids)
            continue
        assert not open_ids, f"calls {open_ids} have no result before {message}"
        open_ids = {call.id for call in message.tool_calls}
    assert not open_ids, f"calls {open_ids} have no result"


# -- undo -----------------------------------------------------------------------------


def test_undo_asks_first_stating_the_context_afterwards_and_changes_nothing(
    compacted: Session,
) -> None:
    before = log_of(compacted.public_id)
    expected = restore_of_prefix(compacted, len(before))
    expected.revert_last_compaction("preview")

    page = owner_client(compacted).get(url("undo_confirm", compacted.public_id))

    html = page.content.decode()
    assert page.status_code == 200
    assert f"Undo compaction {latest_compaction(compacted).number}?" in html
    assert 'name="csrfmiddlewaretoken"' in html
    tokens = expected.estimate_context_tokens()
    assert (
        f"{len(expected.get_context())} messages in the context, {tokens:,} tokens: "
        f"{100 * tokens / expected.token_threshold:.0f}% of the compaction threshold (600)"
    ) in html
    assert "over the threshold: the next message will compact again" in html  # 600 is tight
    _, hidden = confirmation_form(html)
    assert hidden["target"] == str(latest_compaction(compacted).position)
    assert hidden["as_of"] == str(len(before))
    assert log_of(compacted.public_id) == before


def test_undo_appends_a_revert_through_the_library(compacted: Session) -> None:
    before = log_of(compacted.public_id)
    expected = restore_of_prefix(compacted, len(before))
    expected.revert_last_compaction("too lossy")
    client = owner_client(compacted)

    response = confirm(client, url("undo_confirm", compacted.public_id), reason="too lossy")

    assert response.status_code == 303
    after = log_of(compacted.public_id)
    assert after[: len(before)] == before  # nothing rewritten
    assert [r["type"] for r in after[len(before) :]] == ["compaction_revert"]
    assert after[-1]["reason"] == "too lossy"
    assert context_of(compacted.public_id) == expected.get_context()
    page = client.get(response["Location"]).content.decode()
    assert "undone" in page
    undone = latest_compaction(compacted).number
    assert undone is not None
    assert f"Undo compaction {undone}<" not in page  # undone once, only once
    assert f"Undo compaction {undone - 1}<" in page  # the one before is in force again


def test_undo_without_a_compaction_is_refused_with_a_page_that_says_why(owner: User) -> None:
    plain = make_session(owner, turns=1)

    page = logged_in(owner).get(url("undo_confirm", plain.public_id))

    assert page.status_code == 404
    html = page.content.decode()
    assert "No compaction to undo" in html
    assert "no compaction yet" in html
    assert url("session_detail", plain.public_id) in html  # a way back, in the site's own page
    assert 'class="topbar"' in html
    assert not plain.compaction_events.exists()


def test_a_post_without_the_forms_token_does_nothing_and_says_so(compacted: Session) -> None:
    before = log_of(compacted.public_id)
    event = latest_compaction(compacted)
    form = {"target": event.position, "as_of": len(before)}

    response = owner_client(compacted).post(url("undo_compaction", compacted.public_id), form)

    assert response.status_code == 400
    assert "no one-time token" in response.content.decode()
    assert log_of(compacted.public_id) == before


def test_the_same_undo_form_sent_twice_undoes_once_and_the_second_is_told_so(
    compacted: Session,
) -> None:
    client = owner_client(compacted)
    action, form = form_of(client, url("undo_confirm", compacted.public_id))
    before = len(log_of(compacted.public_id))

    first = client.post(action, form)
    second = client.post(action, form)  # a double click, or back and resubmit

    assert first.status_code == 303
    assert second.status_code == 409
    html = second.content.decode()
    assert "Already done" in html
    assert "Sending it again did nothing" in html
    assert f'href="{url("session_detail", compacted.public_id)}"' in html  # the result
    assert [r["type"] for r in log_of(compacted.public_id)[before:]] == ["compaction_revert"]
    assert ActionToken.objects.get(token=once.spent_key(form["once"], "undo")).action == "undo"


def test_an_undo_form_for_an_older_compaction_is_refused_naming_the_newer_one(
    compacted: Session,
) -> None:
    client = owner_client(compacted)
    opened = latest_compaction(compacted)
    action, form = form_of(client, url("undo_confirm", compacted.public_id))
    add_turns(compacted, 4)  # the session moves on and compacts again
    newer = latest_compaction(compacted)
    assert newer.number is not None
    assert opened.number is not None
    assert newer.number > opened.number
    before = log_of(compacted.public_id)

    response = client.post(action, form)

    assert response.status_code == 409
    html = response.content.decode()
    assert f"This page was for compaction {opened.number}" in html
    assert f"compaction {newer.number} is the latest now" in html
    assert log_of(compacted.public_id) == before
    assert url("undo_confirm", compacted.public_id) in html  # open it again


def test_an_undo_form_opened_before_newer_messages_is_refused_naming_them(
    compacted: Session,
) -> None:
    client = owner_client(compacted)
    action, form = form_of(client, url("undo_confirm", compacted.public_id))
    seq = compacted.message_count
    memory = CompactionMemory.restore_from_log(compacted.public_id, log_store=DatabaseLogStore())
    async_to_sync(memory.add_message)({"role": "user", "content": "One more question."})
    before = log_of(compacted.public_id)

    response = client.post(action, form)

    assert response.status_code == 409
    assert f"message #{seq} was added" in response.content.decode()
    assert log_of(compacted.public_id) == before
    # Nothing was spent: the page opened again acts on what is there now.
    assert confirm(client, url("undo_confirm", compacted.public_id)).status_code == 303


def test_an_undo_while_a_chat_turn_writes_the_session_is_refused_and_can_be_sent_again(
    compacted: Session,
) -> None:
    client = owner_client(compacted)
    action, form = form_of(client, url("undo_confirm", compacted.public_id))
    assert lease.acquire(compacted.pk, "a-streaming-turn", "turn")
    before = log_of(compacted.public_id)

    busy = client.post(action, form)
    lease.release(compacted.pk, "a-streaming-turn")
    after_the_turn = client.post(action, form)

    assert busy.status_code == 409
    assert "a chat turn is running in this session" in busy.content.decode()
    assert after_the_turn.status_code == 303
    assert [r["type"] for r in log_of(compacted.public_id)[len(before) :]] == ["compaction_revert"]


def test_undo_reaches_every_compaction_in_turn_back_to_the_whole_conversation(
    compacted: Session,
) -> None:
    client = owner_client(compacted)
    compactions = list(compacted.compaction_events.filter(kind="ok").order_by("-position"))
    assert len(compactions) >= 2
    count = Session.objects.get(pk=compacted.pk).compaction_count

    for undone, event in enumerate(compactions, start=1):
        page = client.get(url("undo_confirm", compacted.public_id)).content.decode()
        assert f"Undo compaction {event.number}?" in page
        expected = restore_of_prefix(compacted, len(log_of(compacted.public_id)))
        assert expected.revert_last_compaction("the library's own undo") == event.number
        assert confirm(client, url("undo_confirm", compacted.public_id)).status_code == 303
        # The context before that compaction, plus every message added since.
        assert context_of(compacted.public_id) == expected.get_context()
        detail = client.get(url("session_detail", compacted.public_id)).content.decode()
        assert f'<dd>{count} <span class="muted">({undone} undone)</span></dd>' in detail

    again = client.get(url("undo_confirm", compacted.public_id))
    assert again.status_code == 404
    assert f"Every compaction of this session was undone ({len(compactions)})" in (
        again.content.decode()
    )


def test_a_forks_starting_summary_is_not_undoable_and_the_page_says_so(
    compacted: Session,
) -> None:
    client = owner_client(compacted)
    confirm(client, url("fork_confirm", compacted.public_id, 20))
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
    expected = restore_of_prefix(compacted, event.position)
    client = owner_client(compacted)

    page = client.get(url("restore_confirm", compacted.public_id, event.position))
    response = confirm(client, url("restore_confirm", compacted.public_id, event.position))

    assert f"{len(expected.get_context())} messages in the context" in page.content.decode()
    child = Session.objects.exclude(pk=compacted.pk).get()
    assert response.status_code == 303
    assert response["Location"] == url("session_detail", child.public_id)
    assert child.parent == compacted
    assert child.owner == compacted.owner
    assert context_of(child.public_id) == expected.get_context()
    assert log_of(compacted.public_id) == before


def test_a_restore_sent_twice_makes_one_session_and_links_the_second_to_it(
    compacted: Session,
) -> None:
    client = owner_client(compacted)
    event = latest_compaction(compacted)
    action, form = form_of(client, url("restore_confirm", compacted.public_id, event.position))

    first = client.post(action, form)
    second = client.post(action, form)

    assert (first.status_code, second.status_code) == (303, 409)
    child = Session.objects.exclude(pk=compacted.pk).get()  # one, not two
    assert f'href="{url("session_detail", child.public_id)}"' in second.content.decode()


def test_fork_from_a_message_starts_from_the_context_right_after_it(compacted: Session) -> None:
    message = compacted.messages.get(seq=20)
    assert message.unit == "A"

    response = confirm(owner_client(compacted), url("fork_confirm", compacted.public_id, 20))

    assert response.status_code == 303
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


def test_the_fork_page_asks_first_and_states_the_forks_context(compacted: Session) -> None:
    expected = restore_of_prefix(compacted, compacted.messages.get(seq=4).position + 1)

    page = owner_client(compacted).get(url("fork_confirm", compacted.public_id, 4))

    html = page.content.decode()
    assert "Fork from message #4?" in html
    tokens = expected.estimate_context_tokens()
    assert f"{len(expected.get_context())} messages in the context, {tokens:,} tokens" in html
    assert "right after message #4" in html
    assert 'id="cut-moved"' not in html  # #4 is a user message: a boundary already
    assert Session.objects.count() == 1


def test_a_fork_asked_at_a_tool_call_is_cut_after_its_results_and_says_so(
    compacted: Session,
) -> None:
    calling = compacted.messages.get(seq=5)
    assert calling.tool_calls
    assert calling.unit == "B"
    answered = compacted.messages.get(seq=6)
    client = owner_client(compacted)

    page = client.get(url("fork_confirm", compacted.public_id, 5)).content.decode()
    response = confirm(client, url("fork_confirm", compacted.public_id, 5))

    assert "Message #5 is inside a tool round (#5-#6): the fork is cut after #6" in page
    assert response.status_code == 303
    child = Session.objects.exclude(pk=compacted.pk).get()
    forked = context_of(child.public_id)
    assert forked == restore_of_prefix(compacted, answered.position + 1).get_context()
    assert_every_call_is_answered(forked)
    assert forked[-1].role == "tool"
    assert forked[-1].text == answered.content  # the real result, not "interrupted"
    assert "fork at #6" in child.title


def parallel_calls_then_an_abandoned_round(owner: User) -> Session:
    """A session with two parallel calls answered, then a call that never got a result."""
    from tests.test_log_store_contract import meta

    from .helpers import log_records

    def call(call_id: str) -> dict[str, Any]:
        function = {"name": "lookup", "arguments": f'{{"id": "{call_id}"}}'}
        return {"id": call_id, "type": "function", "function": function}

    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Look up A and B."},
        {"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]},
        {"role": "tool", "tool_call_id": "a", "content": "A is in Lyon."},
        {"role": "tool", "tool_call_id": "b", "content": "B is in Oslo."},
        {"role": "assistant", "content": "A is in Lyon, B in Oslo."},
        {"role": "user", "content": "And C?"},
        {"role": "assistant", "content": None, "tool_calls": [call("c")]},
        {"role": "user", "content": "Never mind."},  # C's call never got its result
        {"role": "assistant", "content": "Fine."},
    ]
    records = log_records(
        "shapes",
        [ChatMessage.from_dict(m) for m in messages],
        system_prompt="Be brief.",
        model_name="gpt-4o",
        threshold=None,
    )
    assert records[0]["type"] == meta("shapes")["type"]
    DatabaseLogStore(owner=owner).extend("shapes", records)
    return Session.objects.get(public_id="shapes")


def test_a_fork_at_any_message_gives_a_context_whose_every_call_has_its_result(
    owner: User,
) -> None:
    from motus_web.sessions.operations import fork_cut

    session = parallel_calls_then_an_abandoned_round(owner)
    cuts = {}
    for message in session.messages.order_by("seq"):
        cut = fork_cut(session, message)
        assert_every_call_is_answered(cut.memory.get_context())
        assert cut.memory.at_boundary
        cuts[message.seq] = cut

    assert [cuts[seq].after for seq in range(9)] == [0, 3, 3, 3, 4, 5, 5, 7, 8]
    assert "(#1-#3): the fork is cut after #3" in cuts[2].moved
    assert "whose calls do not all have a result in the log" in cuts[6].moved
    assert "cut before the round, after #5." in cuts[6].moved
    assert not cuts[3].moved
    assert not cuts[7].moved


def test_a_fork_sent_twice_makes_one_session(compacted: Session) -> None:
    client = owner_client(compacted)
    action, form = form_of(client, url("fork_confirm", compacted.public_id, 8))

    responses = [client.post(action, form), client.post(action, form)]

    assert [r.status_code for r in responses] == [303, 409]
    assert Session.objects.exclude(pk=compacted.pk).count() == 1


@pytest.mark.parametrize("how", ["a second tab", "back and resubmit"])
def test_a_fork_confirmation_opened_again_in_the_same_state_forks_once(
    compacted: Session, how: str
) -> None:
    client = owner_client(compacted)
    confirm = url("fork_confirm", compacted.public_id, 8)
    action, first = form_of(client, confirm)
    if how == "a second tab":  # both tabs open the page before either is sent
        _, second = form_of(client, confirm)
        responses = [client.post(action, first), client.post(action, second)]
    else:  # the page comes back from the server (it is never stored), then is sent again
        responses = [client.post(action, first)]
        _, second = form_of(client, confirm)
        responses.append(client.post(action, second))

    assert [r.status_code for r in responses] == [303, 409]
    [fork] = Session.objects.exclude(pk=compacted.pk)
    assert url("session_detail", fork.public_id) in responses[1].content.decode()


def test_the_same_confirmation_is_a_new_form_for_another_user_or_a_changed_session(
    compacted: Session, staff: User
) -> None:
    confirm = url("fork_confirm", compacted.public_id, 8)
    _, mine = form_of(owner_client(compacted), confirm)
    _, theirs = form_of(logged_in(staff), confirm)
    add_turns(compacted, 1)
    _, later = form_of(owner_client(compacted), confirm)

    tokens = {form[once.TOKEN_FIELD] for form in (mine, theirs, later)}
    assert len(tokens) == 3


def test_a_delete_sent_from_a_second_tab_is_told_it_was_done(compacted: Session) -> None:
    client = owner_client(compacted)
    confirm = url("delete_confirm", compacted.public_id)
    action, first = form_of(client, confirm)
    _, second = form_of(client, confirm)

    responses = [client.post(action, first), client.post(action, second)]

    assert [r.status_code for r in responses] == [303, 409]
    assert "Already done" in responses[1].content.decode()


def test_restore_from_a_log_file_gives_the_librarys_context(owner: User, tmp_path: Any) -> None:
    source = make_session(owner, turns=8, filler=60, threshold=600)
    export = logged_in(owner).get(url("export_jsonl", source.public_id))
    raw = b"".join(export.streaming_content)  # type: ignore[attr-defined]
    torn = raw + b'{"type": "message", "seq": 99, "mess'
    (tmp_path / "disk.jsonl").write_bytes(torn.replace(source.public_id.encode(), b"disk"))
    expected = CompactionMemory.restore_from_log("disk", log_base_path=tmp_path).get_context()
    client = logged_in(owner)
    action, form = form_of(client, url("restore_upload_form"))

    response = client.post(action, {**form, "file": SimpleUploadedFile("run.jsonl", torn)})
    assert not Session.objects.exclude(pk=source.pk).exists()  # the request restored nothing
    assert run_tasks() == 1  # the restore is an import job
    html = client.get(response["Location"]).content.decode()
    again = client.post(action, {**form, "file": SimpleUploadedFile("run.jsonl", torn)})

    restored = Session.objects.exclude(pk=source.pk).get()  # one: the second did nothing
    assert context_of(restored.public_id) == expected
    assert restored.parent == source
    assert restored.owner == owner
    assert "Restore of" in html
    assert "(a torn last line)" in html  # reported, not silently dropped
    assert url("session_detail", restored.public_id) in html
    assert again.status_code == 409
    assert response["Location"] in again.content.decode()
    assert run_tasks() == 0


def test_a_restore_past_the_message_cap_is_refused_by_its_job(owner: User, settings: Any) -> None:
    source = make_session(owner, turns=8, filler=60, threshold=600)
    raw = b"".join(logged_in(owner).get(url("export_jsonl", source.public_id)).streaming_content)  # type: ignore[attr-defined]
    settings.MOTUS_UPLOAD_MAX_MESSAGES = 5
    client = logged_in(owner)
    action, form = form_of(client, url("restore_upload_form"))

    response = client.post(action, {**form, "file": SimpleUploadedFile("big.jsonl", raw)})
    run_tasks()

    html = client.get(response["Location"]).content.decode()
    assert "big.jsonl: the log holds more than 5 messages" in html
    assert Session.objects.get() == source  # nothing restored


@pytest.mark.parametrize(
    "content",
    [b"hello\nworld\n", b'[{"role": "user", "content": "hi"}]', b"\x00\x01binary"],
    ids=["text", "a chat transcript", "binary"],
)
def test_a_file_that_is_not_a_log_is_refused_with_a_reason(owner: User, content: bytes) -> None:
    client = logged_in(owner)
    action, form = form_of(client, url("restore_upload_form"))

    response = client.post(action, {**form, "file": SimpleUploadedFile("notes.txt", content)})

    assert response.status_code == 400
    html = response.content.decode()
    assert "notes.txt could not be restored: this is not a Motus JSONL conversation log" in html
    assert not Session.objects.exists()
    assert not ActionToken.objects.exists()  # refused: the form may be sent again


# -- delete ---------------------------------------------------------------------------------


def test_delete_asks_then_removes_the_session_and_forks_keep_their_copy(owner: User) -> None:
    parent = make_session(owner, title="Parent run")
    fork = make_session(owner, title="Its fork", parent=parent)
    client = logged_in(owner)

    assert (
        "Delete Parent run?" in client.get(url("delete_confirm", parent.public_id)).content.decode()
    )
    action, form = form_of(client, url("delete_confirm", parent.public_id))
    response = client.post(action, form)
    again = client.post(action, form)

    assert response.status_code == 303
    assert response["Location"] == url("session_list")
    assert not Session.objects.filter(pk=parent.pk).exists()
    assert not Message.objects.filter(session_id=parent.pk).exists()
    fork.refresh_from_db()
    assert fork.parent is None
    assert fork.messages.count() == fork.message_count
    assert again.status_code == 409  # not a 404: it says the delete was done
    assert "Deleted Parent run." in again.content.decode()


def test_a_delete_form_opened_before_the_session_moved_on_is_refused(compacted: Session) -> None:
    client = owner_client(compacted)
    action, form = form_of(client, url("delete_confirm", compacted.public_id))
    add_turns(compacted, 1)

    response = client.post(action, form)

    assert response.status_code == 409
    assert "messages #32-#35 were added" in response.content.decode()
    assert Session.objects.filter(pk=compacted.pk).exists()


def test_a_delete_while_a_chat_turn_writes_the_session_is_refused(compacted: Session) -> None:
    client = owner_client(compacted)
    action, form = form_of(client, url("delete_confirm", compacted.public_id))
    assert lease.acquire(compacted.pk, "a-streaming-turn", "turn")

    response = client.post(action, form)

    assert response.status_code == 409
    assert "a chat turn is running in this session" in response.content.decode()
    assert Session.objects.filter(pk=compacted.pk).exists()


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
        ("get", url("step_detail", session.public_id, 3)),
        ("get", url("step_request", session.public_id, 3)),
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
    event = latest_compaction(compacted)

    for method, path in action_urls(compacted):
        if method == "get":
            assert client.get(path).status_code == 200, path
    for confirm_url in (
        url("undo_confirm", compacted.public_id),
        url("restore_confirm", compacted.public_id, event.position),
        url("fork_confirm", compacted.public_id, 3),
        url("delete_confirm", compacted.public_id),
    ):
        assert confirm(client, confirm_url).status_code == 303, confirm_url

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


def test_a_restore_shows_damaged_lines_as_warnings_with_the_right_counts(owner: User) -> None:
    source = make_session(owner, turns=8, filler=60, threshold=600)
    raw = b"".join(logged_in(owner).get(url("export_jsonl", source.public_id)).streaming_content)  # type: ignore[attr-defined]
    lines = raw.splitlines(keepends=True)
    messages = sum(1 for line in lines if b'"type":"message"' in line.replace(b" ", b""))
    damaged = b"".join([*lines[:3], b"not json\n", *lines[3:]]) + b'{"type": "message", "seq": 99'
    client = logged_in(owner)
    action, form = form_of(client, url("restore_upload_form"))

    response = client.post(action, {**form, "file": SimpleUploadedFile("run.jsonl", damaged)})
    assert run_tasks() == 1
    html = client.get(response["Location"]).content.decode()

    job = ImportJob.objects.get()
    assert (job.problem_count, job.sessions_imported, job.messages_read) == (0, 1, messages)
    assert "could not be imported" not in html
    assert "Damaged lines skipped" in html
    assert "run.jsonl: line 4: skipped: " in html
    assert f"run.jsonl: line {len(lines) + 2}: skipped: " in html
    assert "(a torn last line)" in html
