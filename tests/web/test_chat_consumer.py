"""The session socket: who may connect, frames checked, the stream of a turn, one writer."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from pytest_django import Settings

from memory.testing.scripted_server import ScriptedReply, ScriptedServer
from motus_web.asgi import application
from motus_web.chat import limits
from motus_web.chat.consumers import CLOSE_NOT_FOUND, CLOSE_TOO_BIG, CLOSE_UNAUTHENTICATED
from motus_web.chat.frames import MAX_FRAME_BYTES
from motus_web.chat.replay import ReplaySettings, create_replay
from motus_web.sessions import lease
from motus_web.sessions.models import Message, Session, WriterLease

from .chat_helpers import (
    FRAME_TIMEOUT_S,
    bare,
    chat_session,
    follow,
    frames_until,
    router,
    socket_for,
    squeeze,
)
from .helpers import make_session

pytestmark = pytest.mark.django_db(transaction=True)


def stored(session: Session) -> list[dict[str, Any]]:
    return [m.as_dict() for m in Message.objects.filter(session=session).order_by("seq")]


async def test_a_socket_without_a_logged_in_user_is_closed_with_4401(session: Session) -> None:
    communicator = WebsocketCommunicator(
        application,
        f"/ws/sessions/{session.public_id}/",
        headers=[(b"origin", b"http://localhost"), (b"host", b"localhost")],
    )
    connected, _ = await communicator.connect(timeout=10)
    assert connected
    closed = await communicator.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": CLOSE_UNAUTHENTICATED}


# The security probe's list: the server is http://127.0.0.1:8101.
@pytest.mark.parametrize(
    "origin",
    [
        b"http://evil.example",
        b"http://127.0.0.1:9999",  # another port of the same host
        b"https://127.0.0.1:8101",  # another scheme
        b"http://127.0.0.1",  # the default port is another port
        b"http://[::1]:8101",  # an IPv6 literal of the same machine
        b"null",  # a sandboxed frame, a file: page
        None,  # no Origin header at all
        b"http://127.0.0.1:8101/chat/",  # not an origin
    ],
)
async def test_a_socket_from_any_other_origin_is_refused(
    session: Session, origin: bytes | None, settings: Settings
) -> None:
    settings.ALLOWED_HOSTS = ["127.0.0.1", "[::1]", "localhost"]
    headers = [(b"host", b"127.0.0.1:8101")]
    if origin is not None:
        headers.append((b"origin", origin))
    communicator = WebsocketCommunicator(
        application, f"/ws/sessions/{session.public_id}/", headers=headers
    )
    connected, _ = await communicator.connect(timeout=10)
    assert not connected


@pytest.mark.parametrize(
    ("origin", "host", "trusted"),
    [
        (b"http://127.0.0.1:8101", b"127.0.0.1:8101", []),
        (b"http://[::1]:8101", b"[::1]:8101", []),
        (b"http://localhost", b"localhost:80", []),
        (b"https://motus.example.com", b"127.0.0.1:8101", ["https://motus.example.com"]),
        (b"https://chat.motus.example.com", b"127.0.0.1:8101", ["https://*.motus.example.com"]),
    ],
)
async def test_the_servers_own_origin_and_trusted_origins_are_let_through(
    session: Session, origin: bytes, host: bytes, trusted: list[str], settings: Settings
) -> None:
    settings.ALLOWED_HOSTS = ["127.0.0.1", "[::1]", "localhost"]
    settings.CSRF_TRUSTED_ORIGINS = trusted
    communicator = WebsocketCommunicator(
        application,
        f"/ws/sessions/{session.public_id}/",
        headers=[(b"origin", origin), (b"host", host)],
    )
    connected, _ = await communicator.connect(timeout=10)
    assert connected  # then closed 4401: no one is logged in
    assert (await communicator.receive_output(timeout=5))["code"] == CLOSE_UNAUTHENTICATED


@pytest.mark.parametrize("whose", ["foreign", "unknown"])
async def test_a_foreign_or_unknown_session_closes_with_the_same_4404(
    session: Session, outsider: User, whose: str
) -> None:
    public_id = session.public_id if whose == "foreign" else "no-such-session"
    communicator = WebsocketCommunicator(
        router,
        f"/ws/sessions/{public_id}/",
    )
    communicator.scope["user"] = outsider
    connected, _ = await communicator.connect(timeout=5)
    assert connected
    assert await communicator.receive_output(timeout=5) == {
        "type": "websocket.close",
        "code": CLOSE_NOT_FOUND,
    }


async def test_malformed_frames_get_an_error_and_the_socket_stays_open(
    session: Session, owner: User, server: ScriptedServer
) -> None:
    socket = await socket_for(owner, session.public_id)
    hello = await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)
    assert hello["type"] == "hello"
    assert hello["can_send"] is True
    assert "test-key-123" not in str(hello)
    for text, wording in [
        ("not json", "JSON object"),
        ("[1, 2]", "JSON object"),
        ('{"type": "launch"}', "unknown frame type"),
        ('{"type": "send", "text": "   "}', "non-empty text"),
        ('{"type": "send", "text": "hi", "admin": true}', "no field 'admin'"),
        ('{"type": "resume", "last_pos": "7"}', "last_pos must be an integer"),
        ('{"type": "replay", "speed": -1}', "speed must be"),
    ]:
        await socket.send_to(text_data=text)
        error = await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)
        assert error["type"] == "error"
        assert error["code"] == "bad_frame"
        assert wording in error["message"]
    await socket.send_to(bytes_data=b"\x00\x01")
    assert (await socket.receive_json_from(timeout=FRAME_TIMEOUT_S))["code"] == "bad_frame"
    await socket.disconnect()


async def test_an_oversized_frame_closes_the_socket_with_1009(
    session: Session, owner: User
) -> None:
    socket = await socket_for(owner, session.public_id)
    await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)
    await socket.send_to(text_data='{"type": "send", "text": "' + "x" * MAX_FRAME_BYTES + '"}')
    assert await socket.receive_output(timeout=5) == {
        "type": "websocket.close",
        "code": CLOSE_TOO_BIG,
    }


async def test_a_turn_streams_in_order_and_every_message_is_stored_before_it_is_shown(
    session: Session, owner: User, server: ScriptedServer
) -> None:
    server.add("openai", ScriptedReply(text="Hello, how can I help you today?"))
    socket = await socket_for(owner, session.public_id)
    await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)
    await socket.send_json_to({"type": "resume", "last_pos": -1})
    await socket.send_json_to({"type": "send", "text": "Hi there"})

    frames = await frames_until(socket, "finished")

    names = squeeze(frames)
    assert (names[0], names[-1]) == ("turn_started", "finished")
    assert sorted(names[1:-1]) == ["delta", "record:assistant", "record:user", "usage"]
    # The user's message is stored (and shown) before the model is asked.
    assert names.index("record:user") < names.index("delta")
    text = "".join(f["text"] for f in frames if f["type"] == "delta")
    assert text == "Hello, how can I help you today?"
    records = [f for f in frames if f["type"] == "record"]
    assert [r["pos"] for r in records] == [1, 2]
    assert "Hi there" in records[0]["html"]
    assert 'id="m1"' in records[1]["html"]
    assert bare(frames[-1]) == {
        "type": "finished",
        "reason": "answer",
        "steps": 1,
        "text": "Hello, how can I help you today?",
    }
    assert [m["content"] for m in await database_sync_to_async(stored)(session)] == [
        "Hi there",
        "Hello, how can I help you today?",
    ]
    await socket.disconnect()


async def test_tool_calls_stream_their_progress_and_results(
    session: Session, owner: User, server: ScriptedServer
) -> None:
    calc = {"id": "call_1", "name": "calculator", "arguments": {"expression": "6 * 7"}}
    server.add("openai", ScriptedReply(tool_calls=[calc]), ScriptedReply(text="It is 42."))
    socket = await socket_for(owner, session.public_id)
    await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)
    await socket.send_json_to({"type": "resume", "last_pos": -1})
    await socket.send_json_to({"type": "send", "text": "What is 6 times 7?"})

    frames = await frames_until(socket, "finished")

    names = squeeze(frames)
    assert names.index("tool_call") < names.index("tool_result")
    assert "record:tool" in names
    result = next(f for f in frames if f["type"] == "tool_result")
    assert (result["name"], result["content"], result["is_error"]) == ("calculator", "42", False)
    tools_sent = server.requests[0].body["tools"]
    assert {t["function"]["name"] for t in tools_sent} >= {"calculator", "current_time"}
    await socket.disconnect()


async def test_every_tab_of_the_session_sees_the_stream_and_a_reconnect_catches_up_once(
    session: Session, owner: User, staff: User, server: ScriptedServer
) -> None:
    server.add("openai", ScriptedReply(text="First answer."), ScriptedReply(text="Second."))
    writer = await socket_for(owner, session.public_id)
    watcher = await socket_for(staff, session.public_id)
    for socket in (writer, watcher):
        await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)
        await socket.send_json_to({"type": "resume", "last_pos": -1})
    await writer.send_json_to({"type": "send", "text": "one"})
    seen = await frames_until(watcher, "finished")
    await frames_until(writer, "finished")
    assert squeeze(seen)[:2] == ["turn_started", "record:user"]
    first_pos = next(f["pos"] for f in seen if f["type"] == "record")
    await watcher.disconnect()

    await writer.send_json_to({"type": "send", "text": "two"})
    await frames_until(writer, "finished")
    back = await socket_for(staff, session.public_id)
    await back.receive_json_from(timeout=FRAME_TIMEOUT_S)
    await back.send_json_to({"type": "resume", "last_pos": first_pos})
    missed = [await back.receive_json_from(timeout=FRAME_TIMEOUT_S) for _ in range(3)]
    assert [f["pos"] for f in missed] == [first_pos + 1, first_pos + 2, first_pos + 3]
    assert [f["role"] for f in missed] == ["assistant", "user", "assistant"]
    assert await back.receive_json_from(timeout=FRAME_TIMEOUT_S) == {
        "type": "sync",
        "last_pos": first_pos + 3,
        "running": False,
    }
    assert await back.receive_nothing(timeout=0.3)
    await back.disconnect()
    await writer.disconnect()


async def test_a_second_writer_is_refused_while_a_turn_runs(
    session: Session, owner: User, server: ScriptedServer
) -> None:
    server.add("openai", ScriptedReply(text="slow answer", delay_s=1.0))
    first = await socket_for(owner, session.public_id)
    second = await socket_for(owner, session.public_id)
    for socket in (first, second):
        await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)
    await first.send_json_to({"type": "send", "text": "one"})
    await first.receive_json_from(timeout=FRAME_TIMEOUT_S)  # turn_started: the lease is taken
    await second.send_json_to({"type": "send", "text": "two"})

    refusal = await frames_until(second, "error")
    assert refusal[-1]["code"] == "busy"
    assert "another turn is running" in refusal[-1]["message"]
    await frames_until(first, "finished")
    messages = await database_sync_to_async(stored)(session)
    assert [m["content"] for m in messages] == ["one", "slow answer"]
    # The lease goes back as the run ends, which may be just after its end frame.
    deadline = time.monotonic() + FRAME_TIMEOUT_S
    while await database_sync_to_async(WriterLease.objects.exists)():
        assert time.monotonic() < deadline, "the finished turn kept its lease"
        await asyncio.sleep(0.05)
    await first.disconnect()
    await second.disconnect()


async def test_a_lease_held_elsewhere_refuses_the_send(
    session: Session, owner: User, server: ScriptedServer
) -> None:
    await database_sync_to_async(lease.acquire)(session.pk, "another-process", "turn")
    socket = await socket_for(owner, session.public_id)
    await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)
    await socket.send_json_to({"type": "send", "text": "hello"})
    assert (await socket.receive_json_from(timeout=FRAME_TIMEOUT_S))["code"] == "busy"
    assert not server.requests
    await socket.disconnect()


async def test_stop_interrupts_the_turn_and_keeps_the_partial_answer_marked(
    session: Session, owner: User, server: ScriptedServer
) -> None:
    long_text = "word " * 200
    server.add("openai", ScriptedReply(text=long_text, chunk_delay_s=0.02))
    socket = await socket_for(owner, session.public_id)
    await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)
    await socket.send_json_to({"type": "resume", "last_pos": -1})
    await socket.send_json_to({"type": "send", "text": "Tell me a long story"})
    await frames_until(socket, "delta")
    await socket.send_json_to({"type": "stop"})

    frames = await frames_until(socket, "finished")

    assert frames[-1]["reason"] == "interrupted"
    messages = await database_sync_to_async(stored)(session)
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[1]["interrupted"] is True
    assert 0 < len(messages[1]["content"]) < len(long_text)
    assert any(f["type"] == "record" and f.get("role") == "assistant" for f in frames)
    await socket.disconnect()


async def test_a_provider_error_is_shown_retryable_and_a_retry_loses_nothing(
    session: Session, owner: User, server: ScriptedServer
) -> None:
    server.add("openai", ScriptedReply(error="context_length"), ScriptedReply(text="Now it works."))
    socket = await socket_for(owner, session.public_id)
    await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)
    await socket.send_json_to({"type": "send", "text": "hello"})
    frames = await frames_until(socket, "finished")
    error = next(f for f in frames if f["type"] == "error")
    assert error["code"] == "ContextLengthExceededError"
    assert error["retryable"] is True
    assert frames[-1]["reason"] == "error"

    await socket.send_json_to({"type": "retry"})
    frames = await frames_until(socket, "finished")
    assert bare(frames[0]) == {"type": "turn_started", "retry": True}
    assert frames[-1]["reason"] == "answer"
    messages = await database_sync_to_async(stored)(session)
    assert [m["content"] for m in messages] == ["hello", "Now it works."]
    await socket.disconnect()


async def test_without_a_configured_model_a_send_says_how_to_configure_one(
    session: Session, owner: User, settings: Settings
) -> None:
    settings.MOTUS_CHAT_MODELS = ()
    socket = await socket_for(owner, session.public_id)
    await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)
    await socket.send_json_to({"type": "send", "text": "hello"})
    error = await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)
    assert error["code"] == "no_model"
    assert "MOTUS_CHAT_MODELS" in error["message"]
    await socket.disconnect()


async def test_sends_are_rate_limited_per_user_across_sockets(
    session: Session, owner: User, settings: Settings
) -> None:
    settings.MOTUS_CHAT_MODELS = ()
    sockets = [await socket_for(owner, session.public_id) for _ in range(3)]
    for socket in sockets:
        await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)
    answers = []
    for index in range(6):
        socket = sockets[index % 3]
        await socket.send_json_to({"type": "send", "text": "hello"})
        answers.append(await socket.receive_json_from(timeout=FRAME_TIMEOUT_S))
    assert [a["code"] for a in answers] == ["no_model"] * 4 + ["rate_limited"] * 2
    # Every refusal says nothing was done (the browser puts the message back) and when to retry.
    assert all(a["refused"] is True and a["retryable"] is False for a in answers)
    assert answers[-1]["message"] == (
        "too many messages: send again in 5 s (at most 4 at once, then 12 a minute)"
    )
    for socket in sockets:
        await socket.disconnect()


def test_the_docs_state_the_rate_limit_the_consumer_applies() -> None:
    from pathlib import Path

    docs = Path(__file__).parents[2] / "docs" / "live-chat.md"
    readme = " ".join(docs.read_text().split())
    assert (
        f"Sends, retries, replays and compactions are limited per user, across all of "
        f"their sockets, to {limits.WORK_BURST} at once, then {limits.WORK_PER_MINUTE} a minute"
        in readme
    )
    assert (
        f"every frame of any kind to {limits.FRAME_BURST} at once, then "
        f"{limits.FRAMES_PER_MINUTE} a minute" in readme
    )


async def test_closing_the_socket_mid_turn_stops_it_and_leaves_a_valid_context(
    session: Session, owner: User, server: ScriptedServer
) -> None:
    server.add("openai", ScriptedReply(text="word " * 200, chunk_delay_s=0.02))
    socket = await socket_for(owner, session.public_id)
    await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)
    await socket.send_json_to({"type": "send", "text": "go on"})
    await frames_until(socket, "delta")
    await socket.disconnect()

    messages = await database_sync_to_async(stored)(session)
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[1]["interrupted"] is True
    assert not await database_sync_to_async(WriterLease.objects.exists)()
    await asyncio.sleep(0)


async def test_closing_the_socket_while_a_write_never_ends_still_ends_the_turn(
    session: Session, owner: User, server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A store write that never answers (a lock never released): the turn's
    # task, cancelled with its socket, used to wait for it for ever (a test's
    # teardown hung); now it gives up after the grace and the lease goes back.
    import memory.run_to_end
    from memory.log.records import as_dict
    from motus_web.sessions.log_store import DatabaseLogStore

    monkeypatch.setattr(memory.run_to_end, "CANCEL_GRACE_S", 0.3)
    append = DatabaseLogStore.append_async
    never = asyncio.Event()

    async def stuck_on_the_answer(self: DatabaseLogStore, session_id: str, record: Any) -> None:
        if as_dict(record).get("message", {}).get("role") == "assistant":
            await never.wait()
        await append(self, session_id, record)

    monkeypatch.setattr(DatabaseLogStore, "append_async", stuck_on_the_answer)
    server.add("openai", ScriptedReply(text="word " * 200, chunk_delay_s=0.02))
    socket = await socket_for(owner, session.public_id)
    await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)
    await socket.send_json_to({"type": "send", "text": "go on"})
    await frames_until(socket, "delta")
    runs = [t for t in asyncio.all_tasks() if "hold_lease" in repr(t.get_coro())]
    assert len(runs) == 1
    await socket.disconnect()

    await asyncio.wait_for(asyncio.gather(*runs, return_exceptions=True), 10)
    assert not await database_sync_to_async(WriterLease.objects.exists)()
    messages = await database_sync_to_async(stored)(session)
    assert [m["role"] for m in messages] == ["user"]  # the stuck write never happened


async def test_a_compaction_in_a_chat_streams_its_start_and_its_token_counts(
    owner: User, server: ScriptedServer
) -> None:
    # The tool schemas go with every request, so the room is in the second,
    # long answer: after it everything is summarised.
    session = await database_sync_to_async(chat_session)(owner, 1000)
    server.add(
        "openai",
        ScriptedReply(text="Noted."),
        ScriptedReply(text="Still here: " + "noted " * 600),
        ScriptedReply(text="A summary of the talk so far."),
    )
    socket = await socket_for(owner, session.public_id)
    await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)
    await socket.send_json_to({"type": "resume", "last_pos": -1})
    await socket.send_json_to({"type": "send", "text": "Remember: " + "fact " * 150})
    await frames_until(socket, "finished")
    await socket.send_json_to({"type": "send", "text": "And more: " + "words " * 100})

    frames = await frames_until(socket, "finished")

    names = squeeze(frames)
    assert "compaction:started" in names
    assert names.index("compaction:started") < names.index("compaction:finished")
    done = next(f for f in frames if f["type"] == "compaction" and f["phase"] == "finished")
    assert done["tokens_after"] < done["tokens_before"]
    event = next(f for f in frames if f["type"] == "record" and f["kind"] == "compaction")
    assert "Compaction 1" in event["html"]
    assert frames[-1]["reason"] == "answer"
    await socket.disconnect()


async def test_a_replay_streams_the_original_through_a_fresh_memory_and_compacts(
    owner: User,
) -> None:
    def make() -> tuple[Session, Session]:
        original = make_session(owner, turns=6, filler=80, title="Booking")
        settings = ReplaySettings(
            token_threshold=600,
            safety_ratio=0.75,
            max_tool_result_tokens=50_000,
            model_name="gpt-4o",
        )
        return original, create_replay(original, settings, owner)

    original, replay = await database_sync_to_async(make)()
    socket = await socket_for(owner, replay.public_id)
    hello = await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)
    assert hello["replay_of"] == original.public_id
    await follow(socket)
    await socket.send_json_to({"type": "send", "text": "hello"})
    assert (await socket.receive_json_from(timeout=FRAME_TIMEOUT_S))["code"] == "replay_only"
    await socket.send_json_to({"type": "replay", "speed": 0})

    frames = await frames_until(socket, "replay")
    assert bare(frames[-1]) == {"type": "replay", "phase": "started", "done": 0, "total": 24}
    while frames[-1].get("phase") != "finished":
        frames += await frames_until(socket, "replay")

    records = [f for f in frames if f["type"] == "record"]
    assert [r["pos"] for r in records] == list(range(1, len(records) + 1))
    assert sum(r["kind"] == "message" for r in records) == 24
    assert any(r["kind"] == "compaction" and r["event"] == "ok" for r in records)
    replayed = await database_sync_to_async(stored)(replay)
    originals = await database_sync_to_async(stored)(original)
    assert replayed == originals
    await socket.disconnect()


async def test_a_replay_can_have_a_configured_model_write_its_summaries(
    owner: User, server: ScriptedServer
) -> None:
    server.add("openai", *[ScriptedReply(text="Bookings B0 to B2 fly to cities 0 to 2.")] * 5)

    def make() -> Session:
        original = make_session(owner, turns=6, filler=80)
        settings = ReplaySettings(
            token_threshold=600,
            safety_ratio=0.75,
            max_tool_result_tokens=50_000,
            model_name="gpt-4o",
            compactor="scripted",
        )
        return create_replay(original, settings, owner)

    replay = await database_sync_to_async(make)()
    socket = await socket_for(owner, replay.public_id)
    await socket.receive_json_from(timeout=FRAME_TIMEOUT_S)
    await socket.send_json_to({"type": "resume", "last_pos": -1})
    await socket.send_json_to({"type": "replay", "speed": 0})
    frames: list[dict[str, Any]] = []
    while not frames or frames[-1].get("phase") not in ("finished", "failed"):
        frames += await frames_until(socket, "replay")

    assert frames[-1]["phase"] == "finished"
    compactions = [f for f in frames if f["type"] == "record" and f["kind"] == "compaction"]
    assert compactions
    assert "Bookings B0 to B2 fly to cities 0 to 2." in compactions[0]["html"]
    assert server.requests[0].body["model"] == "gpt-4o"
    await socket.disconnect()
