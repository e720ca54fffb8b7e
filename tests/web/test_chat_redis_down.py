"""The chat while Redis (the channel layer) goes away and comes back.

The test runs its own ``redis-server`` on a free port, so it can stop it and
start it again on the same port. While it is down a chat socket is told
plainly that live updates are unavailable, then closed ``1013`` (the page
reconnects); what the turn stored stays stored and valid, pages answer; once
Redis is back a new socket catches up and streams again.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import channel_layers
from django.contrib.auth.models import User
from django.urls import reverse
from pytest_django import Settings

from memory.testing.scripted_server import ScriptedReply, ScriptedServer
from motus_web.chat.consumers import CLOSE_TRY_AGAIN
from motus_web.sessions.models import Message, Session, WriterLease

from .chat_helpers import FRAME_TIMEOUT_S, chat_session, follow, frames_until, socket_for
from .helpers import logged_in

pytestmark = pytest.mark.django_db(transaction=True)


class RedisServer:
    """A throwaway ``redis-server`` on one loopback port, stopped and started at will."""

    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None


@pytest.fixture
def redis(settings: Settings) -> Iterator[RedisServer]:
    if shutil.which("redis-server") is None:
        pytest.skip("needs redis-server on PATH, to stop and start Redis during the test")
    server = RedisServer()
    server.start()
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [f"redis://127.0.0.1:{server.port}/0"]},
        }
    }
    channel_layers.backends.clear()
    try:
        yield server
    finally:
        server.stop()
        channel_layers.backends.clear()


@pytest.fixture
def strict_server(settings: Settings) -> Iterator[ScriptedServer]:
    from .chat_helpers import scripted_model

    with ScriptedServer(api_key="test-key-123", strict=True) as running:
        settings.MOTUS_CHAT_MODELS = (scripted_model(running.openai_base_url),)
        yield running


def stored(session: Session) -> list[tuple[str, Any]]:
    rows = Message.objects.filter(session=session).order_by("seq")
    return list(rows.values_list("role", "content"))


async def free_of_writers(session: Session, patience: float = 30.0) -> None:
    deadline = time.monotonic() + patience
    held = WriterLease.objects.filter(session=session).exists
    while await database_sync_to_async(held)():
        assert time.monotonic() < deadline, "the stopped turn still holds the session's lease"
        await asyncio.sleep(0.1)


def pages_answer(owner: User, session: Session) -> list[int]:
    client = logged_in(owner)
    pages = [
        reverse("dashboard:session_list"),
        reverse("dashboard:session_detail", args=[session.public_id]),
        reverse("chat:chat", args=[session.public_id]),
    ]
    return [client.get(page).status_code for page in pages]


async def closed_with_a_clear_message(socket: Any) -> dict[str, Any]:
    """Frames until the close: the last error frame before a 1013."""
    said: dict[str, Any] = {}
    while True:
        output = await socket.receive_output(timeout=FRAME_TIMEOUT_S)
        if output["type"] == "websocket.close":
            assert output["code"] == CLOSE_TRY_AGAIN
            return said
        frame = json.loads(output.get("text") or "{}")
        if frame.get("type") == "error":
            said = frame


async def test_with_redis_gone_mid_turn_the_chat_says_so_keeps_what_it_stored_and_streams_again(
    owner: User, redis: RedisServer, strict_server: ScriptedServer
) -> None:
    strict_server.add(
        "openai", ScriptedReply(text="A long answer, word by word. " * 40, chunk_delay_s=0.02)
    )
    session = await database_sync_to_async(chat_session)(owner)
    writer = await socket_for(owner, session.public_id)
    await writer.receive_json_from(timeout=FRAME_TIMEOUT_S)  # hello
    await follow(writer)
    await writer.send_json_to({"type": "send", "text": "Tell me a story"})
    acknowledged = [f for f in await frames_until(writer, "delta") if f["type"] == "record"]
    assert {f["role"] for f in acknowledged} == {"user"}

    redis.stop()

    said = await closed_with_a_clear_message(writer)
    assert said["code"] == "live_unavailable"
    assert "live updates are unavailable" in said["message"].lower()
    assert "stored" in said["message"]
    messages = await database_sync_to_async(stored)(session)
    assert ("user", "Tell me a story") in messages
    assert await database_sync_to_async(pages_answer)(owner, session) == [200, 200, 200]
    late = await socket_for(owner, session.public_id)
    assert (await closed_with_a_clear_message(late))["code"] == "live_unavailable"

    redis.start()
    strict_server.add("openai", ScriptedReply(text="Back again.", chunk_delay_s=0.01))

    back = await socket_for(owner, session.public_id)
    await back.receive_json_from(timeout=FRAME_TIMEOUT_S)  # hello
    records = [f for f in await follow(back) if f["type"] == "record"]
    assert [f["pos"] for f in records] == sorted({f["pos"] for f in records})
    assert {f["pos"] for f in acknowledged} <= {f["pos"] for f in records}
    viewer = await socket_for(owner, session.public_id)
    await viewer.receive_json_from(timeout=FRAME_TIMEOUT_S)
    await follow(viewer)
    await free_of_writers(session)  # the stopped turn has written its end and given its lease back
    await back.send_json_to({"type": "send", "text": "Are you there?"})
    seen = await frames_until(viewer, "finished")
    run = seen[-1]["run"]  # (a frame the first turn published during the outage may come late)
    assert "".join(f["text"] for f in seen if f["type"] == "delta" and f["run"] == run) == (
        "Back again."
    )
    assert seen[-1]["reason"] == "answer"
    assert not [r.problems for r in strict_server.requests if r.problems]
    assert [m[0] for m in await database_sync_to_async(stored)(session)] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]  # the interrupted answer kept (marked), then the new turn
    for open_socket in (back, viewer):
        await open_socket.disconnect()
