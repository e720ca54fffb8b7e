"""A chat that remembers across chats: a background-memory session per scope."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from django.urls import reverse
from pytest_django import Settings

from memory import BackgroundMemory, CompactionMemoryConfig
from memory.testing.scripted_server import ScriptedReply, ScriptedServer
from motus_web.chat.forms import memory_config
from motus_web.chat.tools import new_chat_tool_schemas
from motus_web.sessions import memories, operations
from motus_web.sessions.long_term_store import DjangoLongTermStore, owner_scope
from motus_web.sessions.models import Session
from motus_web.sessions.operations import create_session

from .chat_helpers import FRAME_TIMEOUT_S, frames_until, scripted_model, socket_for
from .helpers import logged_in


@pytest.fixture
def server(settings: Settings) -> Iterator[ScriptedServer]:
    with ScriptedServer(api_key="test-key-123") as running:
        settings.MOTUS_CHAT_MODELS = (scripted_model(running.openai_base_url),)
        yield running


def remembering_chat(
    owner: User, name: str = "", config: CompactionMemoryConfig | None = None
) -> Session:
    config = config or CompactionMemoryConfig()
    scope = owner_scope(owner.pk, name)
    return create_session(
        owner,
        config,
        title="Remembers",
        model_name="gpt-4o",
        system_prompt="Be brief.",
        tools=new_chat_tool_schemas(config, remember=True),
        memory_type="background",
        extra={"long_term": {"scope": scope.to_dict()}},
    )


@pytest.mark.django_db
def test_remember_across_chats_makes_a_background_session_of_the_owners_scope(
    owner: User, settings: Settings
) -> None:
    settings.MOTUS_CHAT_MODELS = (scripted_model("http://127.0.0.1:9/v1"),)
    form = {"title": "Trip", "model": "scripted", "system_prompt": "Be brief."}
    client = logged_in(owner)
    response = client.post("/chat/new/", {**form, "remember": "on", "memory_name": "trips"})
    assert response.status_code == 302
    session = Session.objects.get(title="Trip")
    assert session.memory_type == "background"
    assert session.record_extra["long_term"]["scope"] == {
        "user_id": f"user-{owner.pk}",
        "agent_id": "trips",
    }
    refused = client.post(
        "/chat/new/", {**form, "title": "x", "remember": "on", "memory_name": "a b"}
    )
    assert refused.status_code == 400
    plain = client.post("/chat/new/", {**form, "title": "Plain"})
    assert plain.status_code == 302
    assert Session.objects.get(title="Plain").memory_type == "compact"


def step_of_reply(owner: User, session: Session) -> tuple[dict[str, Any], str]:
    """The rebuilt request body and the step page of the session's first reply."""
    reply = session.messages.filter(role="assistant").order_by("seq").first()
    assert reply is not None
    client = logged_in(owner)
    args = [session.public_id, reply.seq]
    body = json.loads(client.get(reverse("dashboard:step_request", args=args)).content)
    page = client.get(reverse("dashboard:step_detail", args=args)).content.decode()
    return body, page


def forked(owner: User, session: Session) -> tuple[str, dict[str, Any]]:
    """Fork ``session`` at its first reply as the dashboard does; the child's
    block and scope as its restored memory has them."""
    reply = session.messages.filter(role="assistant").order_by("seq").first()
    assert reply is not None
    child = operations.fork(operations.fork_cut(session, reply), session, owner, "Fork")
    assert child.memory_type == "background"
    memory = memories.restore(child)
    assert isinstance(memory, BackgroundMemory)
    return memory.memory_block, memory.scope.to_dict()


def session_pages(owner: User, *sessions: Session) -> list[str]:
    client = logged_in(owner)
    return [client.get(f"/sessions/{s.public_id}/").content.decode() for s in sessions]


def extraction(*memories: dict[str, Any]) -> ScriptedReply:
    return ScriptedReply(text=json.dumps({"memories": list(memories)}))


async def turn(owner: User, session: Session, text: str) -> list[dict[str, Any]]:
    socket = await socket_for(owner, session.public_id)
    await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)
    await socket.send_json_to({"type": "resume", "last_pos": -1})
    await socket.send_json_to({"type": "send", "text": text})
    frames = await frames_until(socket, "finished")
    # What the extractor wrote arrives after the reply, as its own record.
    while not any(f.get("event") == "memory_extraction" for f in frames):
        frames.append(await socket.receive_json_from(timeout=FRAME_TIMEOUT_S))
    await socket.disconnect()
    return frames


@pytest.mark.django_db(transaction=True)
async def test_a_second_chat_in_the_scope_recalls_what_the_first_learned(
    owner: User, teammate: User, server: ScriptedServer
) -> None:
    first = await database_sync_to_async(remembering_chat)(owner)
    server.add(
        "openai",
        ScriptedReply(text="Noted!"),
        extraction(
            {"kind": "fact", "text": "The user's sister Jane lives in Boston.", "action": "add"}
        ),
    )
    frames = await turn(owner, first, "My sister Jane lives in Boston.")
    finished = next(i for i, f in enumerate(frames) if f["type"] == "finished")
    written = next(i for i, f in enumerate(frames) if f.get("event") == "memory_extraction")
    assert finished < written  # the reply did not wait for the extraction
    assert "sister Jane lives in Boston" in frames[written]["html"]

    second = await database_sync_to_async(remembering_chat)(owner)
    server.add("openai", ScriptedReply(text="In Boston."), extraction())
    await turn(owner, second, "Where does my sister live?")
    asked = server.requests[2].body["messages"][0]["content"]
    assert "<long_term_memory>" in asked
    assert "The user's sister Jane lives in Boston." in asked
    # "What the model saw" at that step is the request sent, memory block included.
    rebuilt, page = await database_sync_to_async(step_of_reply)(owner, second)
    assert rebuilt["messages"][0]["content"] == asked
    assert "Long-term memories" in page
    assert "The user&#x27;s sister Jane lives in Boston." in page

    # Another user's chat, and another scope of the same user, recall nothing.
    for other in (
        await database_sync_to_async(remembering_chat)(teammate),
        await database_sync_to_async(remembering_chat)(owner, "work"),
    ):
        server.add("openai", ScriptedReply(text="I don't know."), extraction())
        await turn(
            owner if other.owner_id == owner.pk else teammate, other, "Where does my sister live?"
        )
        assert "<long_term_memory>" not in server.requests[-2].body["messages"][0]["content"]
    # A fork of it, from the dashboard, is a remembering session of the same scope.
    child_block, child_meta = await database_sync_to_async(forked)(owner, second)
    assert "The user's sister Jane lives in Boston." in child_block
    assert child_meta == {"user_id": f"user-{owner.pk}"}
    # The session pages show, per reply, what was placed and what was written.
    first_page, second_page = await database_sync_to_async(session_pages)(owner, first, second)
    assert "Long-term memory written" in first_page
    assert "The user&#x27;s sister Jane lives in Boston." in first_page
    assert "Long-term memories placed" in second_page
    store = DjangoLongTermStore()
    remembered = await database_sync_to_async(store.memories)(owner_scope(owner.pk))
    assert [m.provenance[0].session_id for m in remembered] == [first.public_id]


@pytest.mark.django_db(transaction=True)
async def test_the_readmes_echo_recipe_extracts_offline_and_a_second_chat_recalls(
    owner: User, settings: Settings
) -> None:
    # The README's recipe: an echo model that cannot extract, COMPACT_MODEL=offline.
    with ScriptedServer(api_key="test-key-123", fallback="echo") as echo:
        model = dataclasses.replace(scripted_model(echo.openai_base_url), compact_model="offline")
        settings.MOTUS_CHAT_MODELS = (model,)
        said = "My dog's name is Biscuit and my passport number is P4829173."
        config = memory_config(None, model)
        first = await database_sync_to_async(remembering_chat)(owner, config=config)
        frames = await turn(owner, first, said)
        second = await database_sync_to_async(remembering_chat)(owner, config=config)
        await turn(owner, second, "What is my dog's name?")
    card = next(f for f in frames if f.get("event") == "memory_extraction")["html"]
    assert "extraction failed" not in card
    assert "by offline" in card
    assert "Biscuit" in card
    # Only the chat turns reached the echo model: no extraction request was sent to it.
    assert len(echo.requests) == 2
    assert all("EXISTING MEMORIES" not in json.dumps(r.body) for r in echo.requests)
    _, page = await database_sync_to_async(step_of_reply)(owner, second)
    assert "Long-term memories" in page
    assert "Biscuit" in page
