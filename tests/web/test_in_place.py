"""Actions that change a live session in place: rewind to a message, undo a
rewind, correct a compaction's summary, compact now.

Each asks first (or is a form on the page it acts from), acts on POST once
through storage, answers 303 to the result, and leaves every logged record as
it was; afterwards the live context (what a chat turn and a restore read) is
the library's.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils.html import escape

from memory import CompactionMemory, InMemoryLogStore, LogPoint
from motus_web.sessions import history, lease, memories, once
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.memories import ContextSize
from motus_web.sessions.models import ActionToken, CompactionEvent, Session

from .chat_helpers import chat_session
from .helpers import confirm, confirmation_form, logged_in, make_session
from .test_actions import (
    add_turns,
    assert_every_call_is_answered,
    context_of,
    form_of,
    latest_compaction,
    log_of,
    owner_client,
    url,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def compacted(owner: User) -> Session:
    return make_session(owner, turns=8, filler=60, threshold=600, title="Rebook Mia")


@pytest.fixture
def long_plain(owner: User) -> Session:
    """Eight turns, no compaction (a threshold it never reaches)."""
    return make_session(owner, turns=8, filler=20, threshold=100_000, title="Plain")


def library_copy(session: Session) -> CompactionMemory:
    """The session's memory restored by the library from a copy of its log, to act on."""
    store = InMemoryLogStore()
    for record in log_of(session.public_id):
        store.append(session.public_id, record)
    return CompactionMemory.restore_from_log(session.public_id, log_store=store)


def assert_restore_equals_live(session: Session) -> list[Any]:
    """The checkpointed restore (what the chat reads) equals a full replay of the log."""
    store = DatabaseLogStore()
    quick = CompactionMemory.restore_from_log(session.public_id, log_store=store)
    full = CompactionMemory.restore_from_log(session.public_id, log_store=store, full_replay=True)
    assert quick.get_context() == full.get_context()
    assert quick.estimate_context_tokens() == full.estimate_context_tokens()
    return quick.get_context()


# -- rewind ----------------------------------------------------------------------------


def test_the_rewind_page_states_the_context_afterwards_and_changes_nothing(
    long_plain: Session,
) -> None:
    before = log_of(long_plain.public_id)
    expected = library_copy(long_plain)
    expected.rewind(LogPoint("after_message", 7))

    page = owner_client(long_plain).get(url("rewind_confirm", long_plain.public_id, 7))

    html = page.content.decode()
    assert page.status_code == 200
    assert "Rewind to message #7?" in html
    tokens = expected.estimate_context_tokens()
    assert f"{len(expected.get_context())} messages in the context, {tokens:,} tokens" in html
    assert "over the threshold" not in html
    message_page = owner_client(long_plain).get(url("message_detail", long_plain.public_id, 7))
    assert url("rewind_confirm", long_plain.public_id, 7) in message_page.content.decode()
    _, hidden = confirmation_form(html)
    assert hidden["target"] == "7"
    assert hidden["as_of"] == str(len(before))
    assert log_of(long_plain.public_id) == before


def test_a_rewind_appends_one_record_and_the_live_context_is_the_librarys_prefix(
    long_plain: Session,
) -> None:
    before = log_of(long_plain.public_id)
    client = owner_client(long_plain)
    message_7 = long_plain.messages.get(seq=7)
    prefix = InMemoryLogStore()
    for record in before[: message_7.position + 1]:
        prefix.append(long_plain.public_id, record)
    expected = CompactionMemory.restore_from_log(long_plain.public_id, log_store=prefix)

    response = confirm(client, url("rewind_confirm", long_plain.public_id, 7), reason="wrong path")

    assert response.status_code == 303
    assert response["Location"] == url("session_detail", long_plain.public_id)
    after = log_of(long_plain.public_id)
    assert after[: len(before)] == before  # nothing rewritten or deleted
    assert [r["type"] for r in after[len(before) :]] == ["rewind"]
    assert after[-1]["target"] == {"after_message": 7}
    assert after[-1]["reason"] == "wrong path"
    live = assert_restore_equals_live(long_plain)
    assert live == expected.get_context()
    page = client.get(response["Location"]).content.decode()
    assert "Rewind 1:" in page  # the message
    # The rewound part stays on the page, marked inactive; what is before it is not.
    assert page.count("inactive: rewound by rewind 1") == len(before) - 1 - (7 + 1)
    assert 'id="m8"' in page
    assert "Undo rewind 1" in page


def test_the_chat_continues_from_the_rewound_context(long_plain: Session) -> None:
    confirm(owner_client(long_plain), url("rewind_confirm", long_plain.public_id, 3))
    expected = library_copy(long_plain)

    add_turns(long_plain, 1)  # a chat turn restores from the store and adds to it

    expected_messages = expected.get_context()
    live = assert_restore_equals_live(long_plain)
    assert live[: len(expected_messages)] == expected_messages
    assert next(m.text for m in live[len(expected_messages) :]).startswith("Question 0")
    seqs = list(long_plain.messages.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(32 + 4))  # seqs keep growing after the rewind


def test_the_chats_memory_is_the_rewound_and_corrected_context(compacted: Session) -> None:
    from motus_web.chat.turns import restore_memory

    from .chat_helpers import scripted_model

    client = owner_client(compacted)
    confirm(client, url("rewind_confirm", compacted.public_id, 27))
    client.post(*compact_form(client, compacted))
    event = latest_compaction(compacted)
    page = client.get(url("compaction_detail", compacted.public_id, event.position))
    action, form = confirmation_form(
        page.content.decode(), url("correct_summary", compacted.public_id, event.position)
    )
    client.post(action, {**form, "summary": "Bookings B0-B6 fly to cities 0-6."})
    model = scripted_model("http://127.0.0.1:9/v1")  # never called: the memory is only built

    chat_memory = restore_memory(compacted, model, model.client())

    assert chat_memory.get_context() == assert_restore_equals_live(compacted)
    assert chat_memory.summary == "Bookings B0-B6 fly to cities 0-6."
    assert chat_memory.rewind_count == 1


def test_a_rewind_asked_inside_a_tool_round_moves_to_its_end_and_says_so(
    long_plain: Session,
) -> None:
    calling = long_plain.messages.get(seq=5)
    assert calling.tool_calls
    assert calling.unit == "B"
    client = owner_client(long_plain)

    page = client.get(url("rewind_confirm", long_plain.public_id, 5)).content.decode()
    response = confirm(client, url("rewind_confirm", long_plain.public_id, 5))

    assert "Message #5 is inside a tool round (#5-#6): the rewind is cut after #6" in page
    assert response.status_code == 303
    assert log_of(long_plain.public_id)[-1]["target"] == {"after_message": 6}
    live = assert_restore_equals_live(long_plain)
    assert_every_call_is_answered(live)
    assert live[-1].role == "tool"


def test_a_rewind_before_a_compaction_brings_back_its_messages(compacted: Session) -> None:
    event = latest_compaction(compacted)
    assert event.summarized_first_seq is not None
    seq = event.summarized_first_seq + 3  # an answer the compaction folded
    client = owner_client(compacted)

    response = confirm(client, url("rewind_confirm", compacted.public_id, seq))

    assert response.status_code == 303
    expected = library_copy(compacted)  # already rewound: the log says so
    assert context_of(compacted.public_id) == expected.get_context()
    page = client.get(url("session_detail", compacted.public_id)).content.decode()
    assert f"Undo compaction {event.number}<" not in page  # rewound past it: not in force


def test_a_rewind_to_before_a_compaction_from_its_page_is_the_librarys(
    compacted: Session,
) -> None:
    event = latest_compaction(compacted)
    expected = library_copy(compacted)
    expected.rewind(LogPoint("before_compaction", event.number or 0, event.through_seq))
    client = owner_client(compacted)
    detail = client.get(url("compaction_detail", compacted.public_id, event.position)).content
    confirm_url = url("rewind_before_confirm", compacted.public_id, event.position)

    page = client.get(confirm_url).content.decode()
    response = confirm(client, confirm_url)

    assert confirm_url in detail.decode()
    assert f"Rewind to before compaction {event.number}?" in page
    tokens = expected.estimate_context_tokens()
    assert f"{len(expected.get_context())} messages in the context, {tokens:,} tokens" in page
    assert response.status_code == 303
    assert log_of(compacted.public_id)[-1]["target"] == {
        "before_compaction": event.number,
        "through_seq": event.through_seq,
    }
    assert assert_restore_equals_live(compacted) == expected.get_context()
    assert_pages_agree_with_the_library(compacted)


def test_a_rewind_form_sent_twice_rewinds_once_and_links_the_result(long_plain: Session) -> None:
    client = owner_client(long_plain)
    action, form = form_of(client, url("rewind_confirm", long_plain.public_id, 7))
    before = len(log_of(long_plain.public_id))

    first, second = client.post(action, form), client.post(action, form)

    assert (first.status_code, second.status_code) == (303, 409)
    html = second.content.decode()
    assert "Already done" in html
    assert f'href="{url("session_detail", long_plain.public_id)}"' in html
    assert [r["type"] for r in log_of(long_plain.public_id)[before:]] == ["rewind"]
    assert ActionToken.objects.get(token=once.spent_key(form["once"], "rewind")).action == "rewind"


def test_a_rewind_form_opened_before_newer_messages_is_refused_naming_them(
    long_plain: Session,
) -> None:
    client = owner_client(long_plain)
    action, form = form_of(client, url("rewind_confirm", long_plain.public_id, 7))
    add_turns(long_plain, 1)
    before = log_of(long_plain.public_id)

    response = client.post(action, form)

    assert response.status_code == 409
    assert "messages #32-#35 were added" in response.content.decode()
    assert log_of(long_plain.public_id) == before
    assert not ActionToken.objects.exists()  # refused: the token is not spent


def test_a_rewind_while_a_chat_turn_writes_the_session_is_refused(long_plain: Session) -> None:
    client = owner_client(long_plain)
    action, form = form_of(client, url("rewind_confirm", long_plain.public_id, 7))
    assert lease.acquire(long_plain.pk, "channel-1", "turn")
    before = log_of(long_plain.public_id)

    busy = client.post(action, form)
    lease.release(long_plain.pk, "channel-1")
    again = client.post(action, form)

    assert busy.status_code == 409
    assert "a chat turn is running in this session" in busy.content.decode()
    assert again.status_code == 303
    assert len(log_of(long_plain.public_id)) == len(before) + 1


def test_a_rewind_can_be_undone_and_the_context_comes_back(long_plain: Session) -> None:
    client = owner_client(long_plain)
    whole = context_of(long_plain.public_id)
    confirm(client, url("rewind_confirm", long_plain.public_id, 7))
    assert context_of(long_plain.public_id) != whole

    page = client.get(url("undo_rewind_confirm", long_plain.public_id, 1)).content.decode()
    response = confirm(client, url("undo_rewind_confirm", long_plain.public_id, 1))

    assert "Undo rewind 1?" in page
    assert f"{len(whole)} messages in the context" in page  # the system prompt included
    assert response.status_code == 303
    assert log_of(long_plain.public_id)[-1]["target"] == {"before_rewind": 1}
    assert assert_restore_equals_live(long_plain) == whole
    shown = client.get(url("session_detail", long_plain.public_id)).content.decode()
    assert "inactive: rewound" not in shown  # every message is in force again
    assert "Undo rewind 2" in shown  # and the undo can itself be undone


def test_an_undo_rewind_form_sent_twice_undoes_once(long_plain: Session) -> None:
    client = owner_client(long_plain)
    confirm(client, url("rewind_confirm", long_plain.public_id, 7))
    action, form = form_of(client, url("undo_rewind_confirm", long_plain.public_id, 1))
    before = len(log_of(long_plain.public_id))

    answers = [client.post(action, form), client.post(action, form)]

    assert [a.status_code for a in answers] == [303, 409]
    assert "Already done" in answers[1].content.decode()
    assert [r["target"] for r in log_of(long_plain.public_id)[before:]] == [{"before_rewind": 1}]


def test_after_a_rewind_past_every_compaction_undo_says_none_is_in_force(
    compacted: Session,
) -> None:
    client = owner_client(compacted)
    confirm(client, url("rewind_confirm", compacted.public_id, 3))

    page = client.get(url("undo_confirm", compacted.public_id))

    assert page.status_code == 404
    assert "No compaction is in force: a rewind or a reset went back before them" in (
        page.content.decode()
    )
    assert (
        "Undo compaction"
        not in client.get(url("session_detail", compacted.public_id)).content.decode()
    )


def test_an_undo_rewind_form_for_an_older_rewind_is_refused_naming_the_newer_one(
    long_plain: Session,
) -> None:
    client = owner_client(long_plain)
    confirm(client, url("rewind_confirm", long_plain.public_id, 11))
    action, form = form_of(client, url("undo_rewind_confirm", long_plain.public_id, 1))
    form["as_of"] = str(len(log_of(long_plain.public_id)) + 1)  # as if opened after rewind 2
    confirm(client, url("rewind_confirm", long_plain.public_id, 7))

    response = client.post(action, form)

    assert response.status_code == 409
    assert "This page was for rewind 1, but rewind 2 is the latest now" in response.content.decode()


# -- correcting a summary ----------------------------------------------------------------


def test_a_corrected_summary_is_appended_shown_beside_the_original_and_used_everywhere(
    compacted: Session,
) -> None:
    event = latest_compaction(compacted)
    original = event.summary
    assert original
    client = owner_client(compacted)
    page_url = url("compaction_detail", compacted.public_id, event.position)
    action, form = confirmation_form(
        client.get(page_url).content.decode(),
        url("correct_summary", compacted.public_id, event.position),
    )
    corrected = "The user asked about bookings B0 to B7; booking B7 flies to city 7."
    before = log_of(compacted.public_id)

    response = client.post(action, {**form, "summary": corrected, "reason": "lost B3"})

    assert response.status_code == 303
    assert response["Location"] == page_url
    after = log_of(compacted.public_id)
    assert after[: len(before)] == before  # the original is kept in its record
    assert [r["type"] for r in after[len(before) :]] == ["summary_correction"]
    live = assert_restore_equals_live(compacted)
    expected = library_copy(compacted)
    assert live == expected.get_context()
    assert corrected in live[1].text
    assert original not in live[1].text
    page = client.get(page_url).content.decode()
    assert 'id="corrected-summary"' in page
    assert 'id="original-summary"' in page
    assert corrected in page
    assert "lost B3" in page
    assert escape(original.splitlines()[0]) in page  # the original, shown beside it


def test_the_lost_identifier_check_runs_on_the_corrected_summary(owner: User) -> None:
    from motus_web.dashboard import lost

    session = make_session(owner, turns=8, filler=60, threshold=600)
    event = latest_compaction(session)
    client = owner_client(session)
    page_url = url("compaction_detail", session.public_id, event.position)
    folded = session.messages.filter(
        seq__gte=event.summarized_first_seq, seq__lte=event.summarized_last_seq
    )
    previous = (
        session.compaction_events.filter(kind="ok", position__lt=event.position)
        .order_by("-position")
        .first()
    )
    assert previous is not None  # its summary was folded in: its identifiers count too
    found = lost.report(event, lost.texts(folded), previous.summary).found
    assert len(found) > 2
    keeping_all = "Kept: " + ", ".join(item.identifier.value for item in found)
    correct = url("correct_summary", session.public_id, event.position)

    action, form = confirmation_form(client.get(page_url).content.decode(), correct)
    client.post(action, {**form, "summary": "The user asked about some bookings."})
    losing = client.get(page_url).content.decode()
    action, form = confirmation_form(losing, correct)
    client.post(action, {**form, "summary": keeping_all})
    keeping = client.get(page_url).content.decode()

    assert f"Identifiers: 0 of {len(found)} kept" in losing
    assert f"Identifiers: {len(found)} of {len(found)} kept" in keeping


def test_a_summary_not_in_force_has_no_correction_form_and_a_stale_form_is_refused(
    compacted: Session,
) -> None:
    event = latest_compaction(compacted)
    client = owner_client(compacted)
    page_url = url("compaction_detail", compacted.public_id, event.position)
    action, form = confirmation_form(
        client.get(page_url).content.decode(),
        url("correct_summary", compacted.public_id, event.position),
    )
    confirm(client, url("undo_confirm", compacted.public_id))  # compaction undone meanwhile
    form["as_of"] = str(len(log_of(compacted.public_id)))  # only the target is stale
    before = log_of(compacted.public_id)

    response = client.post(action, {**form, "summary": "A better summary."})

    assert response.status_code == 409
    html = response.content.decode()
    assert f"This page was for the summary at log position {event.position}" in html
    assert "is the one in force now" in html or "no compaction is in force now" in html
    assert log_of(compacted.public_id) == before
    assert "Correct this summary" not in client.get(page_url).content.decode()


def test_an_empty_correction_is_refused_and_changes_nothing(compacted: Session) -> None:
    event = latest_compaction(compacted)
    client = owner_client(compacted)
    page_url = url("compaction_detail", compacted.public_id, event.position)
    action, form = confirmation_form(
        client.get(page_url).content.decode(),
        url("correct_summary", compacted.public_id, event.position),
    )
    before = log_of(compacted.public_id)

    response = client.post(action, {**form, "summary": "   "})

    assert response.status_code == 400
    assert "must not be empty" in response.content.decode()
    assert log_of(compacted.public_id) == before
    assert client.post(action, {**form, "summary": "Fine now."}).status_code == 303


def test_a_correction_sent_twice_is_done_once(compacted: Session) -> None:
    event = latest_compaction(compacted)
    client = owner_client(compacted)
    action, form = confirmation_form(
        client.get(url("compaction_detail", compacted.public_id, event.position)).content.decode(),
        url("correct_summary", compacted.public_id, event.position),
    )
    before = len(log_of(compacted.public_id))

    answers = [client.post(action, {**form, "summary": "Once."}) for _ in range(2)]

    assert [a.status_code for a in answers] == [303, 409]
    assert [r["type"] for r in log_of(compacted.public_id)[before:]] == ["summary_correction"]


# -- compact now ------------------------------------------------------------------------


def compact_form(client: Any, session: Session) -> tuple[str, dict[str, str]]:
    page = client.get(url("session_detail", session.public_id)).content.decode()
    return confirmation_form(page, url("compact_now", session.public_id))


def test_compact_now_folds_the_context_with_the_instructions_and_shows_them(
    long_plain: Session,
) -> None:
    client = owner_client(long_plain)
    action, form = compact_form(client, long_plain)
    expected = library_copy(long_plain)
    from asgiref.sync import async_to_sync

    async_to_sync(expected.compact)(instructions="keep booking B3")
    before = log_of(long_plain.public_id)

    response = client.post(action, {**form, "instructions": "keep booking B3"})

    assert response.status_code == 303
    event = latest_compaction(long_plain)
    assert response["Location"] == url("compaction_detail", long_plain.public_id, event.position)
    after = log_of(long_plain.public_id)
    assert after[: len(before)] == before
    assert [r["type"] for r in after[len(before) :]] == ["compaction"]
    assert after[-1]["trigger"] == "manual"
    assert after[-1]["instructions"] == "keep booking B3"
    assert after[-1]["model"] == "offline"  # no model configured: the offline summariser
    assert "B3" in after[-1]["summary"]
    assert assert_restore_equals_live(long_plain) == expected.get_context()
    page = client.get(response["Location"]).content.decode()
    assert 'id="compaction-instructions"' in page
    assert "keep booking B3" in page


def test_compact_now_with_nothing_to_fold_says_why_and_shows_the_instructions(
    owner: User,
) -> None:
    session = chat_session(owner)
    client = owner_client(session)
    action, form = compact_form(client, session)
    before = log_of(session.public_id)

    response = client.post(action, {**form, "instructions": "keep booking B3"})

    page = response.content.decode()
    assert response.status_code == 409
    assert "Not compacted" in page
    assert "nothing to fold: the context holds no message yet" in page
    assert "keep booking B3" in page
    # Nothing logged, nothing spent: the same form may be sent again.
    assert log_of(session.public_id) == before
    assert not ActionToken.objects.filter(action="compact").exists()


def test_compact_now_on_a_one_turn_session_compacts_as_asked_and_says_it_did_not_shrink(
    owner: User,
) -> None:
    session = make_session(owner, turns=1, threshold=100_000)
    client = owner_client(session)
    action, form = compact_form(client, session)
    before = log_of(session.public_id)

    response = client.post(action, {**form, "instructions": "keep booking B0"})

    assert response.status_code == 303
    event = latest_compaction(session)
    assert response["Location"] == url("compaction_detail", session.public_id, event.position)
    after = log_of(session.public_id)
    assert [r["type"] for r in after[len(before) :]] == ["compaction"]
    assert after[-1]["trigger"] == "manual"
    page = client.get(response["Location"]).content.decode()
    # One short turn: its summary is no smaller than what it folds, and the page says so.
    assert after[-1]["tokens_after"] >= after[-1]["tokens_before"]
    assert 'id="compaction-warning"' in page
    assert "would not make the context smaller" in page
    assert assert_restore_equals_live(session)


def test_compact_now_sent_twice_compacts_once(long_plain: Session) -> None:
    client = owner_client(long_plain)
    action, form = compact_form(client, long_plain)

    answers = [client.post(action, form) for _ in range(2)]

    assert [a.status_code for a in answers] == [303, 409]
    assert long_plain.compaction_events.filter(kind=CompactionEvent.Kind.OK).count() == 1


def test_compact_now_while_a_turn_runs_or_after_the_session_moved_on_is_refused(
    long_plain: Session,
) -> None:
    client = owner_client(long_plain)
    action, form = compact_form(client, long_plain)
    assert lease.acquire(long_plain.pk, "channel-1", "turn")

    busy = client.post(action, form)
    lease.release(long_plain.pk, "channel-1")
    add_turns(long_plain, 1)
    stale = client.post(action, form)

    assert busy.status_code == 409
    assert "a chat turn is running" in busy.content.decode()
    assert stale.status_code == 409
    assert "messages #32-#35 were added" in stale.content.decode()
    assert not long_plain.compaction_events.exists()


# -- who may act -------------------------------------------------------------------------


def in_place_posts(session: Session) -> list[str]:
    event = latest_compaction(session)
    return [
        url("rewind_session", session.public_id, 7),
        url("undo_rewind", session.public_id, 1),
        url("correct_summary", session.public_id, event.position),
        url("compact_now", session.public_id),
    ]


@pytest.mark.parametrize("who", ["teammate", "outsider"])
def test_other_users_get_404_on_every_in_place_action_and_change_nothing(
    compacted: Session, who: str, request: pytest.FixtureRequest
) -> None:
    client = logged_in(request.getfixturevalue(who))
    before = log_of(compacted.public_id)
    event = latest_compaction(compacted)

    pages = [
        client.get(url("rewind_confirm", compacted.public_id, 7)),
        client.get(url("undo_rewind_confirm", compacted.public_id, 1)),
    ]
    posts = [
        client.post(target, {"once": "x" * 32, "as_of": len(before), "target": 7, "summary": "s"})
        for target in in_place_posts(compacted)
    ]

    assert [r.status_code for r in pages + posts] == [404] * 6
    assert log_of(compacted.public_id) == before
    detail = logged_in(owner_of_session(compacted)).get(
        url("compaction_detail", compacted.public_id, event.position)
    )
    assert "Correct this summary" in detail.content.decode()  # the owner has the form


def owner_of_session(session: Session) -> User:
    assert session.owner is not None
    return session.owner


def test_staff_may_rewind_correct_and_compact_anyones_session(
    compacted: Session, staff: User
) -> None:
    client = logged_in(staff)
    event = latest_compaction(compacted)
    page = client.get(url("compaction_detail", compacted.public_id, event.position)).content
    action, form = confirmation_form(
        page.decode(), url("correct_summary", compacted.public_id, event.position)
    )

    corrected = client.post(action, {**form, "summary": "Staff's summary."})
    compacted_now = client.post(*compact_form(client, compacted))
    rewound = confirm(client, url("rewind_confirm", compacted.public_id, 7))

    assert [r.status_code for r in (corrected, compacted_now, rewound)] == [303, 303, 303]
    types = [r["type"] for r in log_of(compacted.public_id)[-3:]]
    assert types[0] == "summary_correction"
    assert types[-1] == "rewind"
    assert_restore_equals_live(compacted)


def test_in_place_actions_refuse_get_where_they_want_post(compacted: Session) -> None:
    client = owner_client(compacted)
    for target in in_place_posts(compacted):
        assert client.get(target).status_code == 405
    assert reverse("dashboard:compact_now", args=[compacted.public_id]).endswith("/compact/")


# -- the page's reading of the rows agrees with the library ----------------------------


def assert_pages_agree_with_the_library(session: Session) -> None:
    """The messages the session page shows in force (read from the event rows,
    no restore) are exactly the live context's, and the compaction it offers
    to undo is the library's compaction in force."""
    from motus_web.dashboard import timeline
    from motus_web.sessions.operations import events_of, undoable

    live = CompactionMemory.restore_from_log(session.public_id, log_store=DatabaseLogStore())
    in_context = {seq for seq in live.get_session_state().seqs if seq is not None}
    events = events_of(session)
    active = timeline.folds(events)
    seqs = session.messages.values_list("seq", flat=True)
    assert {seq for seq in seqs if timeline.folded_by(seq, active) is None} == in_context
    offered, _ = undoable(events)
    assert (offered.number if offered else None) == live.compaction_in_force


def test_what_the_page_marks_in_force_is_the_live_context_after_every_action(
    compacted: Session,
) -> None:
    client = owner_client(compacted)
    session_id = compacted.public_id
    folded_from = latest_compaction(compacted).summarized_first_seq
    assert folded_from is not None
    steps = [
        lambda: confirm(client, url("rewind_confirm", session_id, folded_from + 3)),
        lambda: add_turns(compacted, 3),
        lambda: client.post(*compact_form(client, compacted)),
        lambda: confirm(client, url("rewind_confirm", session_id, 27)),
        lambda: add_turns(compacted, 1),
        lambda: confirm(client, url("undo_rewind_confirm", session_id, 2)),
        lambda: confirm(client, url("undo_confirm", session_id)),
        lambda: confirm(client, url("rewind_confirm", session_id, 11)),
        lambda: confirm(client, url("undo_rewind_confirm", session_id, 4)),
    ]
    assert_pages_agree_with_the_library(compacted)
    for step in steps:
        response = step()
        assert response is None or response.status_code == 303, response.content.decode()
        assert_pages_agree_with_the_library(compacted)
        assert_restore_equals_live(compacted)
        assert_every_call_is_answered(context_of(session_id))
    kinds = [r["type"] for r in log_of(session_id)]
    assert kinds.count("rewind") == 5


def test_a_stale_form_names_the_rewind_or_correction_logged_since(compacted: Session) -> None:
    client = owner_client(compacted)
    event = latest_compaction(compacted)
    action, form = form_of(client, url("rewind_confirm", compacted.public_id, 7))
    page = client.get(url("compaction_detail", compacted.public_id, event.position))
    correct, fields = confirmation_form(
        page.content.decode(), url("correct_summary", compacted.public_id, event.position)
    )
    client.post(correct, {**fields, "summary": "Better."})
    confirm(client, url("rewind_confirm", compacted.public_id, 3))

    response = client.post(action, form)

    assert response.status_code == 409
    assert (
        f"the summary of compaction {event.number} was corrected, rewind 1 happened"
        in response.content.decode()
    )


SEEDS = [1, 2, 3, 4, 5]  # 30 seeds passed once; five keep the suite quick


@pytest.mark.parametrize("seed", SEEDS)
def test_random_runs_of_in_place_actions_keep_pages_restore_and_live_in_agreement(
    owner: User, seed: int
) -> None:
    """Rewinds (to any message, before any compaction), undos of rewinds and
    compactions, corrections, compactions now and new turns, in a random
    order through storage: after each, the page's reading, the checkpointed
    restore and the full replay agree, and every call has its result."""
    import random

    from motus_web.sessions import context_edits, operations

    rng = random.Random(seed)
    session = make_session(owner, turns=6, filler=60, threshold=600)

    def fresh() -> Session:
        return Session.objects.get(pk=session.pk)

    def rewind_to_a_message() -> None:
        now = fresh()
        message = rng.choice(list(now.messages.order_by("seq")))
        plan = context_edits.rewind_plan(now, message)
        context_edits.rewind(now, plan.point, "random", as_of=now.record_count)
        # The confirmation's preview (a prefix restore) states what the library's rewind left.
        assert ContextSize.of(memories.restore(fresh())) == plan.size

    def preview_of(point: LogPoint) -> ContextSize:
        now = fresh()
        expected = context_edits.rewind_preview(now, point)
        context_edits.rewind(now, point, "random", as_of=now.record_count)
        return expected

    def rewind_before_a_compaction() -> None:
        now = fresh()
        events = list(now.compaction_events.filter(kind="ok").order_by("position"))
        if events:
            event = rng.choice(events)
            expected = preview_of(context_edits.before(event))
            assert ContextSize.of(memories.restore(fresh())) == expected

    def undo_the_latest_rewind() -> None:
        now = fresh()
        latest = context_edits.latest_rewind(now)
        number = history.rewind_number(latest) if latest is not None else None
        if number is not None:
            expected = context_edits.rewind_preview(now, LogPoint("before_rewind", number))
            context_edits.undo_rewind(now, number, "random", as_of=now.record_count)
            assert ContextSize.of(memories.restore(fresh())) == expected

    def undo_a_compaction() -> None:
        now = fresh()
        event, _ = operations.undoable(operations.events_of(now))
        if event is not None:
            operations.undo_compaction(now, "random", target=event.position, as_of=now.record_count)

    def correct() -> None:
        now = fresh()
        event = context_edits.in_force(now)
        if event is not None:
            text = f"Corrected {rng.random():.6f}"
            context_edits.correct_summary(
                now, event.position, text, "random", as_of=now.record_count
            )

    def compact() -> None:
        now = fresh()
        context_edits.compact_now(now, rng.choice(["", "keep B2"]), as_of=now.record_count)

    actions = [
        rewind_to_a_message,
        rewind_before_a_compaction,
        undo_the_latest_rewind,
        undo_a_compaction,
        correct,
        compact,
        lambda: add_turns(fresh(), 1),
    ]
    for _ in range(10):
        rng.choice(actions)()
        now = fresh()
        assert_pages_agree_with_the_library(now)
        assert_every_call_is_answered(assert_restore_equals_live(now))


def test_the_next_compaction_folds_in_the_corrected_summary_and_its_page_says_so(
    long_plain: Session,
) -> None:
    client = owner_client(long_plain)
    client.post(*compact_form(client, long_plain))
    first = latest_compaction(long_plain)
    action, form = confirmation_form(
        client.get(url("compaction_detail", long_plain.public_id, first.position)).content.decode(),
        url("correct_summary", long_plain.public_id, first.position),
    )
    client.post(action, {**form, "summary": "Booking reference ZX81QP matters most."})
    add_turns(long_plain, 2)
    client.post(*compact_form(client, long_plain))
    second = latest_compaction(long_plain)
    assert second.position != first.position

    page = client.get(url("compaction_detail", long_plain.public_id, second.position))

    html = page.content.decode()
    folded_in = html[html.index('class="previous-summary"') :]
    folded_in = folded_in[: folded_in.index("</details>")]
    assert "Booking reference ZX81QP matters most." in folded_in  # as corrected
    assert "Summary of the earlier conversation" not in folded_in  # not the original
    assert "ZX81QP" in (second.summary or "")  # the library folded in the corrected text


def test_the_session_pages_lost_identifier_flag_reads_the_corrected_summary(
    compacted: Session,
) -> None:
    event = latest_compaction(compacted)
    client = owner_client(compacted)
    flag = "user-named identifier"
    before = client.get(url("session_detail", compacted.public_id)).content.decode()
    action, form = confirmation_form(
        client.get(url("compaction_detail", compacted.public_id, event.position)).content.decode(),
        url("correct_summary", compacted.public_id, event.position),
    )

    client.post(action, {**form, "summary": "The user asked about some bookings."})

    after = client.get(url("session_detail", compacted.public_id)).content.decode()
    assert before.count(flag) < after.count(flag)


def test_compact_now_uses_the_sessions_own_model_when_it_is_configured(
    long_plain: Session, settings: Any
) -> None:
    from memory.testing.scripted_server import ScriptedReply, ScriptedServer

    from .chat_helpers import scripted_model

    client = owner_client(long_plain)
    with ScriptedServer(api_key="test-key-123") as server:
        settings.MOTUS_CHAT_MODELS = (scripted_model(server.openai_base_url),)
        server.add("openai", ScriptedReply(text="Bookings B0 to B7, each to its city."))
        action, form = compact_form(client, long_plain)

        response = client.post(action, {**form, "instructions": "keep every booking"})

        sent = [r.body for r in server.requests_for("openai")]
    assert response.status_code == 303
    assert len(sent) == 1
    assert sent[0]["model"] == "gpt-4o"
    assert "keep every booking" in str(sent[0]["messages"])  # the instructions reach the model
    record = log_of(long_plain.public_id)[-1]
    assert record["type"] == "compaction"
    assert record["model"] == "gpt-4o"
    assert record["instructions"] == "keep every booking"
    assert "Bookings B0 to B7, each to its city." in record["summary"]
    assert_restore_equals_live(long_plain)


def test_undo_rewind_without_a_rewind_is_a_styled_page_that_says_so(long_plain: Session) -> None:
    page = owner_client(long_plain).get(url("undo_rewind_confirm", long_plain.public_id, 1))

    assert page.status_code == 404
    html = page.content.decode()
    assert "No rewind to undo" in html
    assert "This session has no rewind." in html
    assert url("session_detail", long_plain.public_id) in html
    assert 'class="topbar"' in html
