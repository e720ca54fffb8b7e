"""The chat when its model server fails: timeouts, 429, 5xx, a stream cut mid-way.

Each fault is retried a bounded number of times (the SDK's two retries), then the
chat gets an error frame that says what happened, and the stored context stays
one a strict provider accepts: the next turn, against a strict server, goes
through and answers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from pytest_django import Settings

from memory.testing.scripted_server import Api, ScriptedReply, ScriptedServer
from motus_web import providers
from motus_web.providers import ChatModel
from motus_web.sessions.models import Message, Session

from .chat_helpers import FRAME_TIMEOUT_S, chat_session, frames_until, socket_for

pytestmark = pytest.mark.django_db(transaction=True)

ATTEMPTS = 3  # the request and the SDK's two retries
TIMEOUT_S = 0.5


@pytest.fixture(params=["openai", "anthropic"])
def strict_server(
    request: pytest.FixtureRequest, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[ScriptedServer, Api]]:
    """A strict scripted server as the chat's only model, through either API."""
    api: Api = request.param
    monkeypatch.setattr(providers, "REQUEST_TIMEOUT_S", TIMEOUT_S)
    with ScriptedServer(api_key="test-key-123", strict=True) as running:
        base = running.openai_base_url if api == "openai" else running.anthropic_base_url
        model = "gpt-4o" if api == "openai" else "claude-haiku-4-5"
        settings.MOTUS_CHAT_MODELS = (
            ChatModel(name="scripted", provider=api, model=model, base_url=base,
                      api_key="test-key-123", compact_model="offline"),
        )  # fmt: skip
        yield running, api


FAULTS: dict[str, tuple[list[ScriptedReply], str]] = {
    "timeout": ([ScriptedReply(text="late", delay_s=3 * TIMEOUT_S)] * ATTEMPTS, "in time"),
    "429": ([ScriptedReply(error="rate_limit", retry_after=0.05)] * ATTEMPTS, "rate limit"),
    "500": ([ScriptedReply(error="server", retry_after=0.05)] * ATTEMPTS, "server"),
    "529": ([ScriptedReply(error="overloaded", retry_after=0.05)] * ATTEMPTS, "overloaded"),
}


def stored(session: Session) -> list[dict[str, Any]]:
    return [m.as_dict() for m in Message.objects.filter(session=session).order_by("seq")]


async def a_turn(owner: User, session: Session, text: str) -> list[dict[str, Any]]:
    socket = await socket_for(owner, session.public_id)
    await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)  # hello
    await socket.send_json_to({"type": "send", "text": text})
    frames = await frames_until(socket, "finished")
    await socket.disconnect()
    return frames


@pytest.mark.parametrize("fault", sorted(FAULTS))
async def test_a_failing_model_is_retried_boundedly_then_the_chat_says_so_and_goes_on(
    owner: User, strict_server: tuple[ScriptedServer, Api], fault: str
) -> None:
    server, api = strict_server
    replies, wording = FAULTS[fault]
    server.add(api, *replies, ScriptedReply(text="Recovered."))
    session = await database_sync_to_async(chat_session)(owner)

    frames = await a_turn(owner, session, "First question")

    errors = [f for f in frames if f["type"] == "error"]
    assert len(errors) == 1, frames
    assert wording in errors[0]["message"].lower(), errors[0]
    assert errors[0]["retryable"] is True
    assert frames[-1]["reason"] == "error"
    assert len(server.requests) == ATTEMPTS  # bounded: no fourth try

    frames = await a_turn(owner, session, "Second question")

    assert frames[-1]["reason"] == "answer", frames
    assert not [r.problems for r in server.requests if r.problems]
    messages = await database_sync_to_async(stored)(session)
    assert [m["content"] for m in messages if m["role"] == "assistant"][-1] == "Recovered."
    assert [m["content"] for m in messages if m["role"] == "user"][-1] == "Second question"


async def test_a_stream_closed_mid_way_is_an_error_and_the_context_stays_valid(
    owner: User, strict_server: tuple[ScriptedServer, Api]
) -> None:
    server, api = strict_server
    server.add(api, ScriptedReply(text="The answer is forty " * 10, cut_after=4))
    server.add(api, ScriptedReply(text="Recovered."))
    session = await database_sync_to_async(chat_session)(owner)

    frames = await a_turn(owner, session, "First question")

    errors = [f for f in frames if f["type"] == "error"]
    assert errors, frames
    assert frames[-1]["reason"] != "answer"
    assert len(server.requests) == 1  # a stream that began is not sent again

    frames = await a_turn(owner, session, "Second question")

    assert frames[-1]["reason"] == "answer", frames
    assert not [r.problems for r in server.requests if r.problems]
    messages = await database_sync_to_async(stored)(session)
    assert messages[-1]["content"] == "Recovered."
