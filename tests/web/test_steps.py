"""What the model saw for a reply: the step page rebuilds the request from the log."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from pytest_django import Settings

from memory import CompactionMemory, CompactionMemoryConfig, InMemoryLogStore, Usage
from memory.testing.scripted_server import ScriptedReply, ScriptedServer
from motus_web.chat.turns import ChatTurn
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import CompactionEvent, Message, Session

from .chat_helpers import chat_session, scripted_model
from .helpers import logged_in, make_session

pytestmark = pytest.mark.django_db

SYSTEM_PROMPT = "Be brief."  # chat_session's


def url(name: str, *args: Any) -> str:
    return reverse(f"dashboard:{name}", args=args)


@pytest.fixture
def server(settings: Settings) -> Iterator[ScriptedServer]:
    script = [
        ScriptedReply(
            tool_calls=[{"id": "call_1", "name": "calculator", "arguments": {"expression": "6*7"}}],
            usage={"input_tokens": 410, "output_tokens": 12},
        ),
        ScriptedReply(text="It is 42.", usage={"input_tokens": 470, "output_tokens": 5}),
    ]
    with ScriptedServer(openai=script, fallback="echo", api_key="test-key-123") as running:
        settings.MOTUS_CHAT_MODELS = (scripted_model(running.openai_base_url),)
        yield running


async def _publish(frame: dict[str, Any]) -> None:
    return None


def chatted(owner: User, settings: Settings, turns: list[str], threshold: int) -> Session:
    """A chat session that ran ``turns`` through the real chat turn and its agent."""
    session = chat_session(owner, threshold=threshold)
    model = settings.MOTUS_CHAT_MODELS[0]
    for text in turns:
        async_to_sync(ChatTurn(session, model, _publish).run)(text)
    session.refresh_from_db()
    return session


def agent_requests(server: ScriptedServer) -> list[dict[str, Any]]:
    """The bodies of the agent's own requests (a compaction's request has its own prompt)."""
    return [
        r.body
        for r in server.requests_for("openai")
        if r.body["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    ]


TURNS = [
    "What is six times seven?",
    *(
        f"Tell me about booking B{n}, reference ZX{n:03d}, in a few words please."
        for n in range(16)
    ),
]


# A chat turn's database_sync_to_async closes the connection it ran on, as after a
# request: the test's own transaction cannot wrap it.
@pytest.mark.django_db(transaction=True)
def test_each_replys_step_is_the_request_the_agent_really_sent(
    owner: User, settings: Settings, server: ScriptedServer
) -> None:
    session = chatted(owner, settings, TURNS, threshold=700)
    sent = agent_requests(server)
    replies = list(session.messages.filter(role="assistant").order_by("seq"))
    assert len(replies) == len(sent) == len(TURNS) + 1  # the tool round took two requests
    assert session.compaction_events.filter(kind=CompactionEvent.Kind.OK).count() >= 2
    client = logged_in(owner)

    for reply, body in zip(replies, sent, strict=True):
        rebuilt = json.loads(client.get(url("step_request", session.public_id, reply.seq)).content)
        wanted = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
        assert wanted["tools"]  # the chat's tools and the memory's
        assert rebuilt == wanted, reply.seq
        # The page's estimate is that of this request: the gauge's pairing agrees with it.
        page = client.get(url("step_detail", session.public_id, reply.seq)).content.decode()
        assert f'<dd id="step-estimate">{reply.context_tokens - reply.tokens:,}</dd>' in page


def measured(owner: User, turns: int) -> Session:
    """A session the library logged, each answer with the provider's usage."""
    store = InMemoryLogStore()
    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="measured", token_threshold=5000),
        log_store=store,
        model_name="gpt-4o",
    )
    memory.set_system_prompt(SYSTEM_PROMPT)

    async def feed() -> None:
        for turn in range(turns):
            await memory.add_message({"role": "user", "content": f"Where is booking B{turn}?"})
            estimate = memory.estimate_context_tokens()
            usage = Usage(input_tokens=estimate + 7, output_tokens=9)
            await memory.add_message(
                {"role": "assistant", "content": f"In Lyon ({turn})."}, usage=usage
            )

    async_to_sync(feed)()
    DatabaseLogStore(owner=owner).extend("measured", store.read("measured"))
    return Session.objects.get(public_id="measured")


def test_the_step_page_shows_the_estimate_and_the_providers_count_of_the_same_request(
    owner: User,
) -> None:
    session = measured(owner, turns=3)
    answer = session.messages.filter(role="assistant").order_by("seq").last()
    assert answer is not None
    assert answer.provider_tokens is not None
    client = logged_in(owner)

    html = client.get(url("step_detail", session.public_id, answer.seq)).content.decode()
    detail = client.get(url("session_detail", session.public_id)).content.decode()

    # The estimate of the request is the context before the reply: its logged size less its own.
    estimate = answer.context_tokens - answer.tokens
    assert answer.provider_tokens == estimate + 7
    ratio = f"{answer.provider_tokens / estimate:.2f}"
    assert f'<dd id="step-estimate">{estimate:,}</dd>' in html
    assert f"{answer.provider_tokens:,} input tokens (&times;{ratio} the estimate)" in html
    step = url("step_detail", session.public_id, answer.seq)
    assert f'{answer.provider_tokens:,} input tokens for <a href="{step}">' in detail
    assert f"estimated {estimate:,} (&times;{ratio})" in detail


def test_after_a_compaction_the_providers_count_is_unknown_until_the_next_reply(
    owner: User,
) -> None:
    session = measured(owner, turns=6)
    memory = CompactionMemory.restore_from_log(
        session.public_id, log_store=DatabaseLogStore(), compact_fn=lambda *_: "B0-B5 in Lyon."
    )
    assert async_to_sync(memory.compact)() is not None
    assert session.compaction_events.filter(kind=CompactionEvent.Kind.OK).exists()

    html = logged_in(owner).get(url("session_detail", session.public_id)).content.decode()

    assert "unknown until the next reply: compaction 1 changed the context" in html
    assert "input tokens for" not in html


def test_a_step_lists_what_entered_and_left_since_the_previous_reply(owner: User) -> None:
    session = make_session(owner, turns=8, filler=60, threshold=600)
    event = session.compaction_events.filter(kind="ok").order_by("position").first()
    assert event is not None
    after = session.messages.filter(role="assistant", position__gt=event.position).order_by("seq")
    reply = after.first()
    assert reply is not None

    html = logged_in(owner).get(url("step_detail", session.public_id, reply.seq)).content.decode()

    assert f"Compaction {event.number}</a> folded #{event.summarized_first_seq}-" in html
    assert "left the context" in html
    assert "A summary entered the context" in html
    assert "entered:" in html


def test_the_step_page_costs_the_same_queries_early_and_late_in_a_session(owner: User) -> None:
    session = make_session(owner, turns=12, filler=60, threshold=600)
    replies = list(session.messages.filter(role="assistant").order_by("seq"))
    client = logged_in(owner)
    counts = []
    for reply in (replies[2], replies[-1]):
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url("step_detail", session.public_id, reply.seq)).status_code == 200
        counts.append(len(queries))

    assert counts[0] == counts[1]


def test_a_chart_point_on_a_user_message_leads_to_the_reply_that_answered_it(
    owner: User,
) -> None:
    session = make_session(owner, turns=2)
    user = session.messages.get(seq=4)
    assert user.role == Message.Role.USER

    response = logged_in(owner).get(url("step_detail", session.public_id, 4))

    assert response.status_code == 302
    assert response["Location"] == url("step_detail", session.public_id, 5)
