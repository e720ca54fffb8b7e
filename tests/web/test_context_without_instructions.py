"""A session with no system prompt (a Claude Code import): its context starts
with the summary or a message, and the context and step pages label and count
each part as what it is."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from motus_web.dashboard import live_context, steps
from motus_web.sessions import memories
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import Message, Session

from .helpers import chat, log_records, logged_in

pytestmark = pytest.mark.django_db


def session_without_instructions(owner: User, threshold: int | None) -> Session:
    session_id = uuid.uuid4().hex
    records = log_records(
        session_id,
        chat(6, filler=40),
        system_prompt="",
        model_name="gpt-4o",
        threshold=threshold,
    )
    DatabaseLogStore().extend(session_id, records)
    Session.objects.filter(public_id=session_id).update(owner=owner)
    return Session.objects.get(public_id=session_id)


@pytest.mark.parametrize("threshold", [None, 400])
def test_each_part_is_labelled_and_counted_as_what_it_is(
    owner: User, threshold: int | None
) -> None:
    session = session_without_instructions(owner, threshold)
    memory = memories.restore(session)
    assert memory.get_context()[0].role == "user"  # no instructions message
    assert (memory.summary is not None) == (threshold is not None)

    live = steps.request_of(session, memory).live

    expected = ["summary"] if memory.summary is not None else []
    context = memory.get_context()
    expected += [live_context.kind_of(m.role, bool(m.tool_calls)) for m in context[len(expected) :]]
    assert [part.kind for part in live.parts] == expected
    assert "system" not in live.totals() or live.totals()["system"] == 0
    # Each message's tokens are its own logged count: they add up to the estimate.
    assert live.tokens + live.tool_tokens + live.priming == live.estimate
    assert (
        live.priming
        == memory.estimate_context_tokens()
        - sum(memory.estimate_message_tokens(m) for m in context)
        - memory.tool_schema_tokens
    )
    assert live.priming > 0
    assert [part.index for part in live.parts] == list(range(len(context)))
    assert live.head == tuple(live.parts[: 1 if memory.summary is not None else 0])

    client = logged_in(owner)
    page = client.get(reverse("dashboard:session_context", args=[session.public_id]))
    html = page.content.decode()
    assert "System prompt" not in html
    assert f"and {live.priming} that prime the reply" in html
    last_reply = Message.objects.filter(session=session, role="assistant").latest("seq").seq
    step = client.get(reverse("dashboard:step_detail", args=[session.public_id, last_reply]))
    assert step.status_code == 200
    assert "System prompt" not in step.content.decode()
    assert f"and {live.priming} that prime the reply" in step.content.decode()
