"""Helpers of the chat tests: sessions to chat in, a socket as a user, reading frames."""

from __future__ import annotations

from importlib import import_module
from typing import Any

from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.sessions.backends.base import SessionBase
from django.test import Client

from memory import CompactionMemoryConfig
from motus_web.chat.routing import websocket_urlpatterns
from motus_web.chat.tools import new_chat_tool_schemas
from motus_web.providers import ChatModel
from motus_web.sessions.models import Session
from motus_web.sessions.operations import create_session

router = URLRouter(websocket_urlpatterns)


def scripted_model(base_url: str, name: str = "scripted") -> ChatModel:
    return ChatModel(
        name=name, provider="openai", model="gpt-4o", base_url=base_url, api_key="test-key-123"
    )


def chat_session(owner: AbstractBaseUser, threshold: int | None = None) -> Session:
    config = CompactionMemoryConfig(token_threshold=threshold)
    return create_session(
        owner,
        config,
        title="Chat",
        model_name="gpt-4o",
        system_prompt="Be brief.",
        tools=new_chat_tool_schemas(config),
    )


def log_in(user: Any) -> SessionBase:
    """A browser session logged in as ``user``, as ``login()`` leaves it (synchronous ORM)."""
    client = Client()
    client.force_login(user)
    store = import_module(settings.SESSION_ENGINE).SessionStore
    return store(client.cookies[settings.SESSION_COOKIE_NAME].value)


async def socket_for(
    user: Any, public_id: str, browser: SessionBase | None = None, app: Any = None
) -> WebsocketCommunicator:
    """A connected socket to the session as ``user``, logged in with ``browser`` (a
    new login by default): the auth middleware's job done."""
    if browser is None:
        browser = await database_sync_to_async(log_in)(user)
    communicator = WebsocketCommunicator(app or router, f"/ws/sessions/{public_id}/")
    communicator.scope["user"] = user
    communicator.scope["session"] = browser
    connected, _ = await communicator.connect(timeout=5)
    assert connected
    return communicator


# A safety bound, not a pace: every wait below ends on the frame it awaits, and
# only a frame that never comes waits this long. A loaded machine retries a
# model call (the SDK's backoff) for well over 10 s.
FRAME_TIMEOUT_S = 60


async def frames_until(communicator: WebsocketCommunicator, stop: str) -> list[dict[str, Any]]:
    """Frames received until (and with) the first of type ``stop``."""
    frames: list[dict[str, Any]] = []
    while True:
        frame = await communicator.receive_json_from(timeout=FRAME_TIMEOUT_S)
        frames.append(frame)
        if frame["type"] == stop:
            return frames


def bare(frame: dict[str, Any]) -> dict[str, Any]:
    """A run's frame without its ``run`` and ``sn``."""
    return {k: v for k, v in frame.items() if k not in ("run", "sn")}


def squeeze(frames: list[dict[str, Any]]) -> list[str]:
    """Frame types in order, a run of deltas as one, records with their role or kind;
    ``sync`` frames (the answer to ``resume``) and ``seen`` ones (a record sent
    already) left out."""
    out: list[str] = []
    for frame in frames:
        name = frame["type"]
        if name in ("sync", "seen"):
            continue
        if name == "record":
            name = f"record:{frame.get('role') or frame['kind']}"
        if name == "compaction":
            name = f"compaction:{frame['phase']}"
        if not out or out[-1] != name or name != "delta":
            out.append(name)
    return out


async def follow(communicator: WebsocketCommunicator, last_pos: int = -1) -> list[dict[str, Any]]:
    """Send ``resume`` and read its answer: the records after ``last_pos``, then ``sync``."""
    await communicator.send_json_to({"type": "resume", "last_pos": last_pos})
    return await frames_until(communicator, "sync")
