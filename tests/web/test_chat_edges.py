"""The chat socket at the edges: revoked logins, one turn at a time, crash paths, limits."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.contrib.sessions.backends.base import SessionBase
from django.db import connection
from django.test import Client
from pytest_django import Settings

from memory.testing.scripted_server import ScriptedReply, ScriptedServer
from motus_web.asgi import application
from motus_web.chat import consumers, limits
from motus_web.chat.consumers import CLOSE_NOT_FOUND, CLOSE_UNAUTHENTICATED
from motus_web.chat.render import last_position
from motus_web.sessions import once
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import ActionToken, Message, Session

from .chat_helpers import FRAME_TIMEOUT_S, chat_session, follow, frames_until, log_in, socket_for

pytestmark = pytest.mark.django_db(transaction=True)


def stored(session: Session) -> list[str]:
    return [m.content for m in Message.objects.filter(session=session).order_by("seq")]


async def closed_with(socket: WebsocketCommunicator, code: int) -> None:
    """Frames until the close; it must come with ``code``, within a second."""
    deadline = time.monotonic() + 1.0
    while True:
        output = await socket.receive_output(timeout=max(0.01, deadline - time.monotonic()))
        if output["type"] == "websocket.close":
            assert output.get("code") == code
            return


async def opened(user: User, session: Session, browser: SessionBase | None = None) -> Any:
    socket = await socket_for(user, session.public_id, browser)
    assert (await socket.receive_json_from(timeout=FRAME_TIMEOUT_S))["type"] == "hello"
    await follow(socket)
    return socket


# -- a login that ends while its socket is open ---------------------------------------


def _log_out(browser: SessionBase) -> None:
    client = Client()
    client.cookies["sessionid"] = browser.session_key or ""
    client.post("/logout/")


def _deactivate(user: User, browser: SessionBase) -> None:
    user.is_active = False
    user.save()


def _new_password(user: User, browser: SessionBase) -> None:
    user.set_password("a brand new password 7")
    user.save()


def _delete_row(user: User, browser: SessionBase) -> None:
    from django.contrib.sessions.models import Session as BrowserSession

    BrowserSession.objects.filter(session_key=browser.session_key).delete()


@pytest.mark.parametrize(
    "revoke",
    [
        lambda user, browser: _log_out(browser),
        _deactivate,
        _new_password,
        _delete_row,
    ],
    ids=["logout", "deactivated", "password-changed", "session-row-deleted"],
)
async def test_a_revoked_login_closes_its_socket_at_once_and_it_hears_nothing_more(
    session: Session, owner: User, staff: User, server: ScriptedServer, revoke: Any
) -> None:
    browser = await database_sync_to_async(log_in)(owner)
    socket = await opened(owner, session, browser)
    other = await opened(staff, session)

    await database_sync_to_async(revoke)(owner, browser)

    await closed_with(socket, CLOSE_UNAUTHENTICATED)
    # Out of the session's group at once: another user's turn does not reach it.
    server.add("openai", ScriptedReply(text="Only for staff."))
    await other.send_json_to({"type": "send", "text": "hello"})
    await frames_until(other, "finished")
    assert await socket.receive_nothing(timeout=0.2)
    await other.disconnect()


async def test_every_frame_checks_the_login_again_even_without_a_signal(
    session: Session, owner: User, server: ScriptedServer
) -> None:
    browser = await database_sync_to_async(log_in)(owner)
    socket = await opened(owner, session, browser)

    def delete_quietly() -> None:  # no post_delete signal: as another process would
        with connection.cursor() as cursor:
            cursor.execute(
                "DELETE FROM django_session WHERE session_key = %s", [browser.session_key]
            )

    await database_sync_to_async(delete_quietly)()
    await socket.send_json_to({"type": "send", "text": "am I still here?"})
    await closed_with(socket, CLOSE_UNAUTHENTICATED)
    assert await database_sync_to_async(stored)(session) == []
    assert not server.requests


@pytest.mark.parametrize("column", ["is_active", "password"])
async def test_a_login_ended_where_no_signal_reaches_hears_no_more_broadcasts(
    session: Session, owner: User, staff: User, server: ScriptedServer, column: str
) -> None:
    """Deactivated or given a new password by another process (``manage.py
    changepassword`` beside a server on the in-memory layer): no signal reaches
    this process, and the socket, which sends nothing, must not hear the next turn."""
    browser = await database_sync_to_async(log_in)(owner)
    socket = await opened(owner, session, browser)
    other = await opened(staff, session)

    def change_quietly() -> None:  # no post_save signal: as another process would
        value = False if column == "is_active" else "pbkdf2_sha256$1$x$y"
        with connection.cursor() as cursor:
            cursor.execute(f"UPDATE auth_user SET {column} = %s WHERE id = %s", [value, owner.pk])

    await database_sync_to_async(change_quietly)()
    server.add("openai", ScriptedReply(text="Only for staff."))
    await other.send_json_to({"type": "send", "text": "hello"})
    await frames_until(other, "finished")
    output = await socket.receive_output(timeout=FRAME_TIMEOUT_S)
    assert output == {"type": "websocket.close", "code": CLOSE_UNAUTHENTICATED}
    await other.disconnect()


async def test_a_staff_flag_taken_away_stops_writing_and_seeing_at_once(
    owner: User, staff: User, server: ScriptedServer
) -> None:
    session = await database_sync_to_async(chat_session)(owner)
    socket = await opened(staff, session)

    def unstaff() -> None:
        staff.is_staff = False
        staff.save()

    await database_sync_to_async(unstaff)()
    await closed_with(socket, CLOSE_NOT_FOUND)  # the session is not theirs to see any more
    assert not server.requests


# -- one turn per session, from one socket too ----------------------------------------


async def test_two_sends_back_to_back_on_one_socket_run_one_turn(
    session: Session, owner: User, server: ScriptedServer
) -> None:
    server.add("openai", ScriptedReply(text="The first answer.", delay_s=0.5))
    socket = await opened(owner, session)
    for text in ("first", "second", "third", "fourth"):
        await socket.send_json_to({"type": "send", "text": text})

    frames = await frames_until(socket, "finished")
    refusals = [f for f in frames if f["type"] == "error"]
    assert [f["code"] for f in refusals] == ["busy"] * 3
    assert frames[-1]["reason"] == "answer"
    assert await database_sync_to_async(stored)(session) == ["first", "The first answer."]
    await socket.disconnect()


# -- no crash path ---------------------------------------------------------------------


async def test_an_unrouted_socket_path_is_closed_4404_not_a_500(settings: Settings) -> None:
    socket = WebsocketCommunicator(
        application,
        "/ws/no/such/thing/",
        headers=[(b"origin", b"http://localhost"), (b"host", b"localhost")],
    )
    connected, _ = await socket.connect(timeout=5)
    assert connected
    assert await socket.receive_output(timeout=5) == {
        "type": "websocket.close",
        "code": CLOSE_NOT_FOUND,
    }


async def test_a_deeply_nested_frame_gets_an_error_frame(session: Session, owner: User) -> None:
    socket = await opened(owner, session)
    await socket.send_to(text_data="[" * 30_000 + "]" * 30_000)
    error = await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)
    assert (error["type"], error["code"]) == ("error", "bad_frame")
    await socket.send_to(text_data='{"type": "resume", "last_pos": -1}')
    assert (await frames_until(socket, "sync"))[-1]["type"] == "sync"  # still open
    await socket.disconnect()


async def test_a_send_after_the_session_was_deleted_closes_4404(
    session: Session, owner: User, server: ScriptedServer
) -> None:
    socket = await opened(owner, session)
    await database_sync_to_async(session.delete)()
    await closed_with(socket, CLOSE_NOT_FOUND)
    assert not server.requests


async def test_a_resume_past_the_end_is_answered_at_once(session: Session, owner: User) -> None:
    socket = await socket_for(owner, session.public_id)
    await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)
    await socket.send_json_to({"type": "resume", "last_pos": 500})
    error = await socket.receive_json_from(timeout=1)
    assert error["code"] == "bad_position"
    end = await database_sync_to_async(last_position)(session)
    assert await socket.receive_json_from(timeout=1) == {
        "type": "sync",
        "last_pos": end,
        "running": False,
    }
    await socket.disconnect()


# -- every frame kind is metered, per user -----------------------------------------------


async def test_resume_frames_are_metered_per_user_and_read_the_store_once_per_position(
    session: Session, owner: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = []
    real = consumers.record_frames

    def counted(*args: Any, **kwargs: Any) -> Any:
        reads.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(consumers, "record_frames", counted)
    # The buckets' clock stands still: a slow machine's round trips refill nothing.
    monkeypatch.setattr(limits, "time", SimpleNamespace(monotonic=lambda: 1_000.0))
    sockets = [await socket_for(owner, session.public_id) for _ in range(2)]
    for socket in sockets:
        await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)
    answers: list[dict[str, Any]] = []
    end = await database_sync_to_async(last_position)(session)
    for index in range(limits.FRAME_BURST + 4):
        socket = sockets[index % 2]
        await socket.send_json_to({"type": "resume", "last_pos": end})
        answers.append(await socket.receive_json_from(timeout=FRAME_TIMEOUT_S))
    assert [a["type"] for a in answers[: limits.FRAME_BURST]] == ["sync"] * limits.FRAME_BURST
    assert all(a["code"] == "rate_limited" for a in answers[limits.FRAME_BURST :])
    assert len(reads) == 2  # one catch-up per socket; the other resumes read nothing
    for socket in sockets:
        await socket.disconnect()


# -- deltas flushed on a timer -------------------------------------------------------------


async def test_text_before_a_pause_is_sent_within_the_batching_interval(
    session: Session, owner: User, server: ScriptedServer
) -> None:
    # Two OpenAI events (the role, then "Hello, ") and then a two-second pause.
    server.add("openai", ScriptedReply(text="Hello, world.", pause_after=2, pause_s=2.0))
    socket = await opened(owner, session)
    await socket.send_json_to({"type": "send", "text": "hi"})
    frames = await frames_until(socket, "delta")
    started = time.monotonic()
    while frames[-1]["type"] != "delta":  # pragma: no cover - the first delta ends the read
        frames += await frames_until(socket, "delta")
    assert frames[-1]["text"].startswith("Hello")
    rest = await frames_until(socket, "finished")
    # The first delta came before the pause ended, not with the text after it.
    assert "orld" not in frames[-1]["text"]
    assert time.monotonic() - started > 1.0
    assert "orld" in "".join(f.get("text", "") for f in rest if f["type"] == "delta")
    await socket.disconnect()


# -- "Compact now" -----------------------------------------------------------------------


async def test_compact_now_compacts_once_however_often_the_frame_is_sent(
    owner: User, server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "WORK_BURST", 10)
    session = await database_sync_to_async(chat_session)(owner, 5000)
    server.add("openai", *[ScriptedReply(text=f"Answer {n}: " + "noted " * 40) for n in range(3)])
    socket = await opened(owner, session)
    for n in range(3):
        await socket.send_json_to({"type": "send", "text": f"Booking B{n} flies to Oslo."})
        await frames_until(socket, "finished")
    server.add("openai", ScriptedReply(text="Bookings B0 to B2 fly to Oslo."))
    frame = {"type": "compact", "token": once.new_token(owner), "instructions": "keep bookings"}
    await socket.send_json_to(frame)
    await socket.send_json_to(frame)  # a double click

    frames = await frames_until(socket, "finished")
    assert [f["code"] for f in frames if f["type"] == "error"] == ["busy"]
    done = next(f for f in frames if f["type"] == "compaction" and f["phase"] == "finished")
    assert done["tokens_after"] < done["tokens_before"]
    assert frames[-1]["reason"] == "compacted"
    await socket.send_json_to(frame)  # the same form once more, after the compaction
    again = await frames_until(socket, "finished")
    assert [f["code"] for f in again if f["type"] == "error"] == ["already_done"]

    log = await database_sync_to_async(lambda: list(DatabaseLogStore().read(session.public_id)))()
    compactions = [r for r in log if r["type"] == "compaction"]
    assert len(compactions) == 1
    assert compactions[0]["instructions"] == "keep bookings"
    assert await database_sync_to_async(ActionToken.objects.filter(action="compact").count)() == 1
    await socket.disconnect()


async def test_compact_now_with_nothing_to_fold_says_why_and_a_longer_summary_still_compacts(
    owner: User, server: ScriptedServer
) -> None:
    session = await database_sync_to_async(chat_session)(owner, 600)
    socket = await opened(owner, session)
    frame = {"type": "compact", "token": once.new_token(owner), "instructions": "keep bookings"}
    await socket.send_json_to(frame)
    empty = await frames_until(socket, "finished")
    server.add("openai", ScriptedReply(text="Noted."))
    await socket.send_json_to({"type": "send", "text": "Booking B1 flies to Oslo."})
    await frames_until(socket, "finished")
    server.add("openai", ScriptedReply(text="A summary far longer than the turn. " * 30))
    await socket.send_json_to({**frame, "token": once.new_token(owner)})
    longer = await frames_until(socket, "finished")
    await socket.disconnect()

    started = next(f for f in empty if f["type"] == "compaction" and f["phase"] == "started")
    assert started["manual"] is True
    assert started["instructions"] == "keep bookings"
    assert empty[-1]["reason"] == "not_compacted"
    assert empty[-1]["why"].startswith("nothing to fold: the context holds no message yet")
    # Asked for, a compaction is done even when its summary is the longer text.
    done = next(f for f in longer if f["type"] == "compaction" and f["phase"] == "finished")
    assert done["tokens_after"] >= done["tokens_before"]
    assert longer[-1]["reason"] == "compacted"
    log = await database_sync_to_async(lambda: list(DatabaseLogStore().read(session.public_id)))()
    (compaction,) = [r for r in log if r["type"] == "compaction"]
    assert "would not make the context smaller" in compaction["warning"]
    # The empty one gave its token back; the one that compacted spent its own.
    assert await database_sync_to_async(ActionToken.objects.filter(action="compact").count)() == 1
