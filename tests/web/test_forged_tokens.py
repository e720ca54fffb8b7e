"""One-time tokens are issued by the server: a made-up one of the right shape, or
one issued to someone else, is refused as a form without one, and does nothing.

Issue 27: three forks with made-up tokens succeeded (the token was checked for
its shape only).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from memory.testing.scripted_server import ScriptedReply, ScriptedServer
from motus_web.chat import limits
from motus_web.sessions import once
from motus_web.sessions.models import ActionToken, ImportJob, Session

from .chat_helpers import chat_session, frames_until, socket_for
from .helpers import confirmation_form, logged_in, make_session
from .race import CONFIRMATIONS, ON_PAGE, outcome

UNCHANGED = {"reverts": 0, "forks": 0, "sessions": 1, "rewinds": 0, "corrections": 0, "manual": 0}


def made_up(_: User) -> str:
    return secrets.token_hex(28)  # 56 hexadecimal characters: the shape of an issued token


def old_shape(_: User) -> str:
    return secrets.token_urlsafe(24)  # what new_token() gave before: random, unsigned


def issued_to_another(other: User) -> str:
    return once.new_token(other)


FORGERIES: dict[str, Callable[[User], str]] = {
    "made up": made_up,
    "unsigned": old_shape,
    "another user's": issued_to_another,
}


def opened_form(owner: User, session: Session, kind: str) -> tuple[str, dict[str, str]]:
    """The action and fields of the ``kind`` form, as its page gives them to the owner."""
    client = logged_in(owner)
    if kind in ON_PAGE:
        page_name, action_name, typed = ON_PAGE[kind]
        compaction = session.compaction_events.filter(kind="ok").order_by("-position")[0]
        args = [session.public_id, *([compaction.position] if kind == "correct" else [])]
        page = client.get(reverse(f"dashboard:{page_name}", args=args)).content.decode()
        action, form = confirmation_form(page, reverse(f"dashboard:{action_name}", args=args))
        return action, {**form, **typed}
    if kind == "undo-rewind":
        from memory import LogPoint
        from motus_web.sessions import context_edits

        context_edits.rewind(session, LogPoint("after_message", 7), "", as_of=session.record_count)
    number = {"fork": [3], "rewind": [3], "undo-rewind": [1]}.get(kind, [])
    url = reverse(f"dashboard:{CONFIRMATIONS[kind]}", args=[session.public_id, *number])
    return confirmation_form(client.get(url).content.decode())


@pytest.mark.django_db
@pytest.mark.parametrize("forgery", sorted(FORGERIES))
@pytest.mark.parametrize("kind", sorted([*CONFIRMATIONS, *ON_PAGE]))
def test_a_forged_token_is_refused_like_a_missing_one_and_nothing_is_done(
    owner: User, teammate: User, kind: str, forgery: str
) -> None:
    session = make_session(owner, turns=6, filler=80, threshold=600)
    action, form = opened_form(owner, session, kind)
    before = outcome(kind, session.public_id)
    client = logged_in(owner)
    forged = client.post(action, {**form, "once": FORGERIES[forgery](teammate)})
    missing = client.post(action, {k: v for k, v in form.items() if k != "once"})
    assert forged.status_code == missing.status_code == 400
    assert "no one-time token issued to you" in forged.content.decode()
    assert outcome(kind, session.public_id) == before
    assert not ActionToken.objects.exists()
    # The form as the server issued it acts.
    assert client.post(action, form).status_code in (302, 303)
    assert outcome(kind, session.public_id) != before


@pytest.mark.django_db
def test_three_forks_with_made_up_tokens_make_no_session(owner: User) -> None:
    session = make_session(owner, turns=6)
    action, form = opened_form(owner, session, "fork")
    client = logged_in(owner)
    for _ in range(3):
        assert client.post(action, {**form, "once": made_up(owner)}).status_code == 400
    assert Session.objects.count() == 1


@pytest.mark.django_db
def test_uploads_refuse_a_forged_token(owner: User) -> None:
    client = logged_in(owner)
    log = b'{"type": "session_meta", "session_id": "s1", "ts": "2026-12-01T00:00:00Z"}\n'
    for page, action in (
        ("dashboard:import_form", "dashboard:import_upload"),
        ("dashboard:restore_upload_form", "dashboard:restore_upload"),
    ):
        url, form = confirmation_form(client.get(reverse(page)).content.decode(), reverse(action))
        response = client.post(
            url, {**form, "once": made_up(owner), "file": SimpleUploadedFile("a.jsonl", log)}
        )
        assert response.status_code == 400
    assert not ImportJob.objects.exists()


@pytest.mark.django_db(transaction=True)
async def test_compact_now_in_the_chat_takes_only_the_token_the_server_issued(
    owner: User, teammate: User, server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = await database_sync_to_async(chat_session)(owner, 5000)
    monkeypatch.setattr(limits, "WORK_BURST", 10)
    server.add("openai", *[ScriptedReply(text=f"Answer {n}: " + "noted " * 40) for n in range(3)])
    socket = await socket_for(owner, session.public_id)
    hello = await socket.receive_json_from(timeout=10)
    assert once.issued(hello["compact_token"], owner)
    await socket.send_json_to({"type": "resume", "last_pos": -1})
    for n in range(3):
        await socket.send_json_to({"type": "send", "text": f"Booking B{n} flies to Oslo."})
        await frames_until(socket, "finished")
    for forged in (made_up(owner), issued_to_another(teammate)):
        await socket.send_json_to({"type": "compact", "token": forged})
        refused = await frames_until(socket, "error")
        assert refused[-1]["code"] == "bad_token"
    assert not await database_sync_to_async(ActionToken.objects.exists)()
    server.add("openai", ScriptedReply(text="Bookings B0 to B2 fly to Oslo."))
    await socket.send_json_to({"type": "compact", "token": hello["compact_token"]})
    done = await frames_until(socket, "finished")
    assert done[-1]["reason"] == "compacted"
    assert once.issued(done[-1]["next_token"], owner)
    assert done[-1]["next_token"] != hello["compact_token"]
    await socket.disconnect()
