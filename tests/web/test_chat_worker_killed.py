"""A chat server (uvicorn) killed with SIGKILL in the middle of a turn.

After a new server starts on the same database, every record the browser was
sent before the kill is there, the session's context restores valid (the next
turn passes a strict provider's check), and the dead writer's lease refuses a
send clearly until it expires. PostgreSQL only: the servers share the test
database with this process.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from django.utils import timezone

from memory.testing.scripted_server import ScriptedReply, ScriptedServer
from motus_web.sessions.models import Message, Session, WriterLease

from .chat_helpers import chat_session
from .live_servers import (
    chat_model_env,
    followed,
    frames_until,
    log_in,
    server_env,
    servers,
    socket_to,
)

pytestmark = pytest.mark.django_db(transaction=True)


def expire_leases(session: Session) -> int:
    """What 60 s (``lease.LEASE_SECONDS``) would do to a dead writer's lease."""
    past = timezone.now() - timedelta(seconds=1)
    return WriterLease.objects.filter(session=session).update(expires_at=past)


async def test_a_server_killed_mid_turn_loses_nothing_acknowledged_and_the_context_stays_valid(
    owner: User, tmp_path: Path
) -> None:
    with ScriptedServer(api_key="test-key-123", strict=True) as model:
        env = server_env(tmp_path, redis=False, **chat_model_env(model.openai_base_url))
        model.add("openai", ScriptedReply(text="A long story, word by word. " * 60,
                                          chunk_delay_s=0.05))  # fmt: skip
        model.add("openai", ScriptedReply(text="Still here."))
        session = await database_sync_to_async(chat_session)(owner)
        with servers(env, 1, tmp_path) as [first]:
            cookie = log_in(first.base, "olivia", "owner-pass-1234")
            async with socket_to(first.base, session.public_id, cookie) as ws:
                await followed(ws)
                await ws.send(json.dumps({"type": "send", "text": "Tell me a story"}))
                seen = await frames_until(ws, "delta")
                seen += await frames_until(ws, "delta")
                first.kill()
        acknowledged = {f["pos"] for f in seen if f["type"] == "record"}
        assert acknowledged, seen

        with servers(env, 1, tmp_path) as [second]:
            cookie = log_in(second.base, "olivia", "owner-pass-1234")
            async with socket_to(second.base, session.public_id, cookie) as ws:
                records = [f for f in await followed(ws) if f["type"] == "record"]
                assert acknowledged <= {f["pos"] for f in records}
                await ws.send(json.dumps({"type": "send", "text": "Are you there?"}))
                refusal = await frames_until(ws, "error")
                assert refusal[-1]["code"] == "busy", refusal  # the dead writer's lease
                assert await database_sync_to_async(expire_leases)(session) == 1

                await ws.send(json.dumps({"type": "send", "text": "Are you there?"}))
                turn = await frames_until(ws, "finished")

        assert turn[-1]["reason"] == "answer", turn
        assert not [r.problems for r in model.requests if r.problems]
        sent = model.requests[-1].body["messages"]
        assert [m["content"] for m in sent if m["role"] == "user"][:1] == ["Tell me a story"]
        stored = await database_sync_to_async(
            lambda: list(Message.objects.filter(session=session).values_list("role", "content"))
        )()
        assert ("user", "Tell me a story") in stored
        assert stored[-1] == ("assistant", "Still here.")
