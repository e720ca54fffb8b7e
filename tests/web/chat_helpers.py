"""Helpers of the chat tests: sessions to chat in, a socket as a user, reading frames."""

from __future__ import annotations

from typing import Any

from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AbstractBaseUser

from memory import CompactionMemoryConfig
from motus_web.chat.providers import ChatModel
from motus_web.chat.routing import websocket_urlpatterns
from motus_web.chat.tools import new_chat_tool_schemas
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


async def socket_for(user: Any, public_id: str) -> WebsocketCommunicator:
    """A connected socket to the session as ``user`` (the auth middleware's job done)."""
    communicator = WebsocketCommunicator(router, f"/ws/sessions/{public_id}/")
    communicator.scope["user"] = user
    connected, _ = await communicator.connect(timeout=5)
    assert connected
    return communicator


FRAME_TIMEOUT_S = 10


async def frames_until(communicator: WebsocketCommunicator, stop: str) -> list[dict[str, Any]]:
    """Frames received until (and with) the first of type ``stop``."""
    frames: list[dict[str, Any]] = []
    while True:
        frame = await communicator.receive_json_from(timeout=FRAME_TIMEOUT_S)
        frames.append(frame)
        if frame["type"] == stop:
            return frames


def squeeze(frames: list[dict[str, Any]]) -> list[str]:
    """Frame types in order, a run of deltas as one, records with their role or kind."""
    out: list[str] = []
    for frame in frames:
        name = frame["type"]
        if name == "record":
            name = f"record:{frame.get('role') or frame['kind']}"
        if name == "compaction":
            name = f"compaction:{frame['phase']}"
        if not out or out[-1] != name or name != "delta":
            out.append(name)
    return out
