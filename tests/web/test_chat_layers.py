"""The chat over a channel layer that drops and times out: the browser's state stays right.

Channel layers drop a group message silently when the reader's channel is full
(channels_redis and the in-memory layer both do). A watcher that falls behind
must still end with every stored record once, in order, and knowing that the
turn is over; a layer that times out is retried, or the socket is closed with
``1013`` (try again), which the page reconnects from.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import InMemoryChannelLayer
from channels.routing import URLRouter
from django.contrib.auth.models import User
from django.urls import path
from pytest_django import Settings

from memory.testing.scripted_server import ScriptedReply, ScriptedServer
from motus_web.chat import consumers
from motus_web.chat.consumers import CLOSE_TRY_AGAIN, SessionConsumer
from motus_web.chat.render import last_position
from motus_web.sessions import lease
from motus_web.sessions.models import Session

from .chat_helpers import FRAME_TIMEOUT_S, follow, socket_for

pytestmark = pytest.mark.django_db(transaction=True)

CAPACITY = 3


class SlowReader(SessionConsumer):
    """A browser's consumer that handles each live frame late (a slow network, a busy tab)."""

    lag_s = 0.2

    async def chat_frame(self, event: dict[str, Any]) -> None:
        await asyncio.sleep(self.lag_s)
        await super().chat_frame(event)


class LaggingReader(SlowReader):
    lag_s = 0.1


slow_router = URLRouter([path("ws/sessions/<str:public_id>/", SlowReader.as_asgi())])
lagging_router = URLRouter([path("ws/sessions/<str:public_id>/", LaggingReader.as_asgi())])


def _layers() -> list[Any]:
    layers: list[Any] = ["memory"]
    if os.environ.get("REDIS_URL"):
        layers.append("redis")
    else:
        layers.append(pytest.param("redis", marks=pytest.mark.skip(reason="REDIS_URL is not set")))
    return layers


@pytest.fixture(params=_layers())
def small_layer(request: pytest.FixtureRequest, settings: Settings) -> str:
    """A channel layer whose channels hold ``CAPACITY`` messages (the default is 100)."""
    if request.param == "memory":
        settings.CHANNEL_LAYERS = {
            "default": {
                "BACKEND": "channels.layers.InMemoryChannelLayer",
                "CONFIG": {"capacity": CAPACITY},
            }
        }
    else:
        settings.CHANNEL_LAYERS = {
            "default": {
                "BACKEND": "channels_redis.core.RedisChannelLayer",
                "CONFIG": {
                    "hosts": [os.environ["REDIS_URL"]],
                    "capacity": CAPACITY,
                    "prefix": f"test-{uuid.uuid4().hex[:8]}",
                },
            }
        }
    return str(request.param)


async def quiet_frames(socket: Any, quiet_s: float = 1.5) -> list[dict[str, Any]]:
    """Every frame until none comes for ``quiet_s`` seconds (``receive_nothing`` polls:
    a timed-out ``receive_json_from`` would cancel the consumer)."""
    frames: list[dict[str, Any]] = []
    while not await socket.receive_nothing(timeout=quiet_s, interval=0.02):
        frames.append(await socket.receive_json_from(timeout=FRAME_TIMEOUT_S))
    return frames


async def turn_over(session: Session) -> None:
    """Wait until the stored state says the turn ended: its lease is given back."""
    await asyncio.sleep(0.2)
    for _ in range(300):
        if await database_sync_to_async(lease.holder_kind)(session.pk) is None:
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the turn did not end")


def running_after(frames: list[dict[str, Any]]) -> bool:
    """Whether a browser that applied ``frames`` in order thinks a turn still runs."""
    running = False
    for frame in frames:
        if frame["type"] == "turn_started":
            running = True
        elif frame["type"] == "finished":
            running = False
        elif frame["type"] == "sync":
            running = frame["running"]
    return running


async def test_a_reader_that_falls_behind_ends_with_every_record_once_and_the_turn_over(
    small_layer: str,
    owner: User,
    staff: User,
    session: Session,
    server: ScriptedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(consumers, "STALL_S", 0.3)
    calc = {"id": "call_1", "name": "calculator", "arguments": {"expression": "6 * 7"}}
    server.add(
        "openai",
        ScriptedReply(text="Let me work it out. " * 5, tool_calls=[calc], chunk_delay_s=0.01),
        ScriptedReply(text="It is 42. " * 40, chunk_delay_s=0.01),
    )
    writer = await socket_for(owner, session.public_id)
    watcher = await socket_for(staff, session.public_id, app=slow_router)
    for socket in (writer, watcher):
        await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)
    start = (await follow(watcher))[-1]["last_pos"]
    await follow(writer)

    await writer.send_json_to({"type": "send", "text": "What is 6 times 7?"})
    await turn_over(session)
    written, seen = await asyncio.gather(quiet_frames(writer), quiet_frames(watcher))

    end = await database_sync_to_async(last_position)(session)
    for frames in (written, seen):
        positions = [f["pos"] for f in frames if f["type"] == "record"]
        assert positions == list(range(max(start, 0) + 1, end + 1))  # each once, in order
        assert not running_after(frames)
    # Frames were lost on the way (the layer is that small), and the watcher noticed.
    numbered = [f["sn"] for f in seen if "sn" in f]
    assert numbered != list(range(1, len(numbered) + 1))
    assert any(f["type"] == "sync" for f in seen)
    await writer.disconnect()
    await watcher.disconnect()


async def test_a_flood_of_deltas_never_costs_the_socket_running_the_turn_its_end_or_its_text(
    small_layer: str,
    owner: User,
    staff: User,
    session: Session,
    server: ScriptedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The owner's socket and a viewer's both handle frames slower than the turn
    # streams them, over channels that hold 3 messages.
    monkeypatch.setattr(consumers, "STALL_S", 0.3)
    answer = "".join(f"piece {n}, " for n in range(60))
    server.add("openai", ScriptedReply(text=answer, chunk_delay_s=0.005))
    writer = await socket_for(owner, session.public_id, app=lagging_router)
    viewer = await socket_for(staff, session.public_id, app=lagging_router)
    for socket in (writer, viewer):
        await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)
        await follow(socket)

    await writer.send_json_to({"type": "send", "text": "Count to sixty."})
    await turn_over(session)
    written, seen = await asyncio.gather(quiet_frames(writer), quiet_frames(viewer))

    # The running socket has every frame of its turn, in order: the whole text
    # as it streamed, and the end, which carries the text too.
    numbered = [f["sn"] for f in written if "sn" in f]
    assert numbered == list(range(1, len(numbered) + 1))
    assert "".join(f["text"] for f in written if f["type"] == "delta") == answer
    assert [f["text"] for f in written if f["type"] == "finished"] == [answer]
    assert not any(f["type"] == "sync" for f in written)  # nothing to mend from the store
    # The viewer ends right: every record once, the answer last, the turn over.
    end = await database_sync_to_async(last_position)(session)
    positions = [f["pos"] for f in seen if f["type"] == "record"]
    assert positions == list(range(1, end + 1))
    assert [f["role"] for f in seen if f["type"] == "record"][-1] == "assistant"
    assert not running_after(seen)
    assert all(f["text"] == answer for f in seen if f["type"] == "finished")
    await writer.disconnect()
    await viewer.disconnect()


class FlakyLayer(InMemoryChannelLayer):
    """An in-memory layer whose ``receive`` times out ``failures`` times first."""

    failures = 0

    async def receive(self, channel: str) -> dict[str, Any]:
        if FlakyLayer.failures > 0:
            FlakyLayer.failures -= 1
            await asyncio.sleep(0.01)
            raise TimeoutError("Timeout reading from the layer")
        return await super().receive(channel)


@pytest.fixture
def flaky_layer(settings: Settings) -> Iterator[type[FlakyLayer]]:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": f"{__name__}.FlakyLayer"}}
    yield FlakyLayer
    FlakyLayer.failures = 0


async def test_a_channel_layer_timeout_is_retried_and_the_socket_lives_on(
    flaky_layer: type[FlakyLayer], owner: User, session: Session
) -> None:
    flaky_layer.failures = consumers.LAYER_ATTEMPTS - 1
    socket = await socket_for(owner, session.public_id)
    assert (await socket.receive_json_from(timeout=FRAME_TIMEOUT_S))["type"] == "hello"
    assert (await follow(socket))[-1]["type"] == "sync"
    await socket.disconnect()


async def test_a_channel_layer_that_keeps_failing_closes_with_try_again(
    flaky_layer: type[FlakyLayer], owner: User, session: Session
) -> None:
    flaky_layer.failures = 1_000
    socket = await socket_for(owner, session.public_id)
    frames = []
    while True:
        output = await socket.receive_output(timeout=FRAME_TIMEOUT_S)
        frames.append(output)
        if output["type"] == "websocket.close":
            break
    assert frames[-1]["code"] == CLOSE_TRY_AGAIN


async def test_a_turn_whose_end_never_arrives_is_read_as_over_from_the_store(
    owner: User, session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    from channels.layers import get_channel_layer

    from motus_web.sessions.signals import session_group

    monkeypatch.setattr(consumers, "STALL_S", 0.2)
    socket = await socket_for(owner, session.public_id)
    await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)
    await follow(socket)
    await database_sync_to_async(lease.acquire)(session.pk, "a worker elsewhere", "turn")
    frame = {"type": "turn_started", "retry": False}
    message = {"type": "chat.frame", "frame": frame, "run": "r1", "sn": 1}
    await get_channel_layer().group_send(session_group(session.public_id), message)
    assert (await socket.receive_json_from(timeout=FRAME_TIMEOUT_S))["type"] == "turn_started"
    # The worker ends (its lease given back) and its "finished" frame is lost.
    await database_sync_to_async(lease.release)(session.pk, "a worker elsewhere")

    sync = await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)
    assert (sync["type"], sync["running"]) == ("sync", False)
    await socket.disconnect()
