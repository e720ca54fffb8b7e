"""Runs past ``MOTUS_RUN_SLOTS`` wait their turn, told so, and lose nothing."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from pytest_django import Settings

from memory.testing.scripted_server import ScriptedReply, ScriptedServer
from motus_web.sessions.models import Message, Session

from .chat_helpers import FRAME_TIMEOUT_S, chat_session, frames_until, socket_for

pytestmark = pytest.mark.django_db(transaction=True)


def contents(session: Session) -> list[str]:
    return [m.as_dict()["content"] for m in Message.objects.filter(session=session).order_by("seq")]


async def test_a_turn_past_the_run_slots_waits_told_so_then_runs_and_is_stored(
    session: Session, owner: User, server: ScriptedServer, settings: Settings
) -> None:
    settings.MOTUS_RUN_SLOTS = 1
    other = await database_sync_to_async(chat_session)(owner)
    server.add("openai", ScriptedReply(text="word " * 60, chunk_delay_s=0.02))
    server.add("openai", ScriptedReply(text="second answer"))
    first = await socket_for(owner, session.public_id)
    second = await socket_for(owner, other.public_id)
    for socket in (first, second):
        await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)  # hello
    await first.send_json_to({"type": "send", "text": "one"})
    await frames_until(first, "delta")  # the first turn holds the one slot

    await second.send_json_to({"type": "send", "text": "two"})
    waited = await frames_until(second, "queued")

    assert waited[-1]["ahead"] == 0
    assert not any(f["type"] == "turn_started" for f in waited)
    assert len(server.requests) == 1  # the second turn has not started
    await frames_until(first, "finished")
    ended = await frames_until(second, "finished")
    assert ended[-1]["reason"] == "answer"
    assert await database_sync_to_async(contents)(other) == ["two", "second answer"]
    for socket in (first, second):
        await socket.disconnect()


async def test_a_stop_while_waiting_for_a_slot_ends_the_turn_interrupted(
    session: Session, owner: User, server: ScriptedServer, settings: Settings
) -> None:
    settings.MOTUS_RUN_SLOTS = 1
    other = await database_sync_to_async(chat_session)(owner)
    server.add("openai", ScriptedReply(text="word " * 60, chunk_delay_s=0.02))
    first = await socket_for(owner, session.public_id)
    second = await socket_for(owner, other.public_id)
    for socket in (first, second):
        await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)
    await first.send_json_to({"type": "send", "text": "one"})
    await frames_until(first, "delta")
    await second.send_json_to({"type": "send", "text": "two"})
    await frames_until(second, "queued")

    await second.send_json_to({"type": "stop"})

    ended = await frames_until(second, "finished")
    assert ended[-1]["reason"] == "interrupted"
    assert len(server.requests) == 1  # the waiting turn never called the model
    await frames_until(first, "finished")
    for socket in (first, second):
        await socket.disconnect()
