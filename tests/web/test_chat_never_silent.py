"""An open socket never goes silent: its group memberships are renewed while it is
open, and a tab that missed what the group carried reaches the stored state by
itself, without a reload; its database work does not queue behind the process's
one thread for synchronous code; a turn runs off the web process's event loop."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from asgiref.sync import SyncToAsync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.contrib.auth.models import User
from pytest_django import Settings

from memory.testing.scripted_server import ScriptedReply, ScriptedServer
from motus_web.chat import consumers
from motus_web.chat.render import last_position
from motus_web.sessions.models import Session
from motus_web.sessions.signals import session_group

from .chat_helpers import FRAME_TIMEOUT_S, follow, frames_until, log_in, socket_for

pytestmark = pytest.mark.django_db(transaction=True)


async def until(condition: Any, what: str) -> None:
    """Wait (polling) until ``condition()`` holds, at most ``FRAME_TIMEOUT_S``."""
    for _ in range(FRAME_TIMEOUT_S * 20):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never: {what}")


def members(group: str) -> set[str]:
    return set(get_channel_layer().groups.get(group, {}))


async def test_a_socket_joins_its_session_group_again_after_its_membership_lapsed(
    settings: Settings, owner: User, session: Session
) -> None:
    # A layer forgets a membership after group_expiry (channels-redis: a day);
    # here it is short, and the membership is dropped as the layer would.
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels.layers.InMemoryChannelLayer",
            "CONFIG": {"group_expiry": 0.8},
        }
    }
    socket = await socket_for(owner, session.public_id)
    await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)  # hello: its groups joined
    group = session_group(session.public_id)
    (channel,) = members(group)
    await get_channel_layer().group_discard(group, channel)
    assert members(group) == set()

    await until(lambda: members(group) == {channel}, "the socket joined its group again")
    await socket.disconnect()


async def test_a_tab_that_missed_a_whole_turn_reaches_the_stored_state_without_a_reload(
    settings: Settings,
    owner: User,
    session: Session,
    server: ScriptedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Everything the group carried for the watcher is lost (a layer restart:
    # its membership gone): the store is all it can learn the turn from. The
    # in-memory layer, whose members the test can see, on every database.
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    monkeypatch.setattr(consumers, "CHECK_S", 0.2)
    server.add("openai", ScriptedReply(text="Stored all the same."))
    watcher = await socket_for(owner, session.public_id)
    await watcher.receive_json_from(timeout=FRAME_TIMEOUT_S)  # hello
    await follow(watcher)
    group = session_group(session.public_id)
    (lost,) = members(group)
    await get_channel_layer().group_discard(group, lost)

    writer = await socket_for(owner, session.public_id)
    await writer.receive_json_from(timeout=FRAME_TIMEOUT_S)
    await writer.send_json_to({"type": "send", "text": "Tell the other tab"})
    await frames_until(writer, "finished")
    end = await database_sync_to_async(last_position)(session)

    seen: list[dict[str, Any]] = []
    while not seen or seen[-1].get("pos") != end:
        frame = await watcher.receive_json_from(timeout=FRAME_TIMEOUT_S)
        if frame["type"] == "record":
            seen.append(frame)
    assert [f["pos"] for f in seen] == [1, 2]
    assert "Stored all the same." in seen[-1]["html"]
    await writer.disconnect()
    await watcher.disconnect()


async def test_a_socket_answers_while_the_process_sync_thread_is_held(
    owner: User, session: Session, server: ScriptedServer
) -> None:
    # A slow call on the process's one thread for synchronous code (every sync
    # view's, channels' database_sync_to_async's) used to hold every socket's
    # reads and every turn's writes behind it.
    browser = await database_sync_to_async(log_in)(owner)
    released = threading.Event()
    held = threading.Event()

    def hold() -> None:
        held.set()
        released.wait(FRAME_TIMEOUT_S * 3)

    holding = asyncio.ensure_future(
        asyncio.get_running_loop().run_in_executor(SyncToAsync.single_thread_executor, hold)
    )
    await asyncio.get_running_loop().run_in_executor(None, held.wait)
    try:
        server.add("openai", ScriptedReply(text="Answered meanwhile."))
        socket = await socket_for(owner, session.public_id, browser)
        await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)
        assert (await follow(socket))[-1]["type"] == "sync"
        await socket.send_json_to({"type": "send", "text": "Are you there?"})
        frames = await frames_until(socket, "finished")
        assert frames[-1]["reason"] == "answer"
        assert any(f["type"] == "record" and "Answered meanwhile." in f["html"] for f in frames)
        assert not holding.done()  # all of it while the thread was still held
    finally:
        released.set()
        await holding
    await socket.disconnect()


async def test_a_turn_runs_its_agent_off_the_web_event_loop(
    owner: User, session: Session, server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Building and counting the context is CPU work: on the loop's thread it
    # held every socket of the process (45 s on a 49,000-message session).
    from memory import CompactionMemory

    web = threading.get_ident()
    threads: list[int] = []
    get_context = CompactionMemory.get_context

    def recorded(self: CompactionMemory) -> Any:
        threads.append(threading.get_ident())
        return get_context(self)

    monkeypatch.setattr(CompactionMemory, "get_context", recorded)
    server.add("openai", ScriptedReply(text="Off the loop."))
    socket = await socket_for(owner, session.public_id)
    await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)
    await socket.send_json_to({"type": "send", "text": "Where do you run?"})
    frames = await frames_until(socket, "finished")
    assert frames[-1]["reason"] == "answer"
    assert threads
    assert web not in threads
    await socket.disconnect()
