"""Two chat servers (uvicorn processes) sharing PostgreSQL and Redis.

A viewer on one sees, in order, a turn streamed by the other; the two write
one session in turn without a duplicate or missing position; the
one-writer-per-session lease holds across them; an operator action sent to
one while a turn runs on the other is refused, saying so. Runs only when
``DATABASE_URL`` and ``REDIS_URL`` point at PostgreSQL and Redis.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import User

from memory.testing.scripted_server import ScriptedReply, ScriptedServer
from motus_web.sessions.models import CompactionEvent, ContextChange, Message, Session

from .chat_helpers import chat_session
from .live_servers import (
    Server,
    chat_model_env,
    followed,
    frames_until,
    http_client,
    log_in,
    server_env,
    servers,
    socket_to,
)

pytestmark = pytest.mark.django_db(transaction=True)
PASSWORD = "owner-pass-1234"


@pytest.fixture
def model() -> Iterator[ScriptedServer]:
    with ScriptedServer(api_key="test-key-123", strict=True) as running:
        yield running


@pytest.fixture
def two(model: ScriptedServer, tmp_path: Path) -> Iterator[list[Server]]:
    env = server_env(tmp_path, redis=True, **chat_model_env(model.openai_base_url))
    with servers(env, 2, tmp_path) as both:
        yield both


def positions(session: Session) -> list[int]:
    """Every stored record's position after the session's first (its meta), in order."""
    found: list[int] = []
    for model in (Message, CompactionEvent, ContextChange):
        found += model.objects.filter(session=session).values_list("position", flat=True)
    return sorted(found)


def send(text: str) -> str:
    return json.dumps({"type": "send", "text": text})


async def test_a_viewer_on_one_server_sees_in_order_a_turn_streamed_by_the_other(
    owner: User, model: ScriptedServer, two: list[Server]
) -> None:
    words = " ".join(f"w{n:03d}" for n in range(120))
    model.add("openai", ScriptedReply(text=words, chunk_delay_s=0.01))
    session = await database_sync_to_async(chat_session)(owner)
    cookie = log_in(two[0].base, "olivia", PASSWORD)
    async with (
        socket_to(two[0].base, session.public_id, cookie) as writer,
        socket_to(two[1].base, session.public_id, cookie) as viewer,
    ):
        await followed(writer)
        await followed(viewer)
        await writer.send(send("Count for me"))
        seen = await frames_until(viewer, "finished")
        await frames_until(writer, "finished")

    run = [f for f in seen if f.get("run") == seen[-1]["run"]]
    assert [f["sn"] for f in run] == list(range(1, len(run) + 1))  # every frame, in order
    assert "".join(f["text"] for f in run if f["type"] == "delta") == words
    # A record may come twice (the run's frame and the store's catch-up): the page
    # keeps the first; those arrive in order and are every stored record.
    records = list(dict.fromkeys(f["pos"] for f in seen if f["type"] == "record"))
    assert records == sorted(records)
    assert records == await database_sync_to_async(positions)(session)


async def test_the_lease_holds_across_servers_and_their_turns_leave_every_position_once(
    owner: User, model: ScriptedServer, two: list[Server]
) -> None:
    model.add("openai", ScriptedReply(text="First answer, slowly. " * 20, chunk_delay_s=0.02))
    model.add("openai", ScriptedReply(text="Second answer."))
    session = await database_sync_to_async(chat_session)(owner)
    cookie = log_in(two[0].base, "olivia", PASSWORD)
    async with (
        socket_to(two[0].base, session.public_id, cookie) as first,
        socket_to(two[1].base, session.public_id, cookie) as second,
    ):
        await followed(first)
        await followed(second)
        await first.send(send("one"))
        await frames_until(first, "delta")  # the turn runs on the first server
        await second.send(send("two"))
        refusal = await frames_until(second, "error")
        assert refusal[-1]["code"] == "busy"
        assert "another turn is running" in refusal[-1]["message"]
        await frames_until(first, "finished")
        await frames_until(second, "finished")  # the first server's turn, seen here

        await second.send(send("two, again"))
        turn = await frames_until(second, "finished")
        assert turn[-1]["reason"] == "answer"

    def stored() -> tuple[list[int], int, list[Any]]:
        fresh = Session.objects.get(pk=session.pk)
        rows = Message.objects.filter(session=session).order_by("seq")
        return positions(session), fresh.record_count, list(rows.values_list("role", "content"))

    found, record_count, messages = await database_sync_to_async(stored)()
    assert found == list(range(1, record_count))  # no position twice, none missing
    assert [m for m in messages if m[0] == "user"] == [("user", "one"), ("user", "two, again")]
    assert messages[-1] == ("assistant", "Second answer.")
    assert not [r.problems for r in model.requests if r.problems]


async def test_an_operator_action_on_one_server_during_a_turn_on_the_other_is_refused_clearly(
    owner: User, model: ScriptedServer, two: list[Server]
) -> None:
    model.add("openai", ScriptedReply(text="A slow answer. " * 30, chunk_delay_s=0.03))
    session = await database_sync_to_async(chat_session)(owner)
    cookie = log_in(two[0].base, "olivia", PASSWORD)
    with http_client(two[1].base, cookie) as browser:
        confirm = browser.get(f"/sessions/{session.public_id}/delete/").text
        form = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', confirm))
        async with socket_to(two[0].base, session.public_id, cookie) as writer:
            await followed(writer)
            await writer.send(send("Take your time"))
            await frames_until(writer, "delta")

            answer = await asyncio.to_thread(
                browser.post, f"/sessions/{session.public_id}/delete/do/", data=form
            )

            assert answer.status_code == 409
            assert "Not done: the session is busy" in answer.text
            assert "send this form again when the turn has finished" in answer.text
            finished = await frames_until(writer, "finished")
            assert finished[-1]["reason"] == "answer"
        assert await database_sync_to_async(Session.objects.filter(pk=session.pk).exists)()
