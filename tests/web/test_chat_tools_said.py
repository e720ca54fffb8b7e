"""What a chat says about its tools is what its requests carry, and a chat's
frames follow the one-time token rule the dashboard spends by."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from pytest_django import Settings

from memory import ReActAgent
from motus_web.chat import frames
from motus_web.chat.tools import CHAT_TOOLS, tool_names
from motus_web.chat.turns import restore_memory
from motus_web.sessions import once
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import ContextChange, Session

from .chat_helpers import scripted_model
from .helpers import logged_in

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("remember", [False, True])
def test_the_chat_page_names_the_tools_and_tokens_a_turn_sends(
    owner: User, settings: Settings, remember: bool
) -> None:
    settings.MOTUS_CHAT_MODELS = (scripted_model("http://127.0.0.1:9/v1"),)
    client = logged_in(owner)
    form = {"title": "Trip", "model": "scripted", "system_prompt": "Be brief."}
    if remember:
        form |= {"remember": "on", "memory_name": "trips"}
    assert client.post("/chat/new/", form).status_code == 302
    session = Session.objects.get(title="Trip")
    # What a turn sends: the chat's tools and its memory's, as the agent gathers them.
    model = settings.MOTUS_CHAT_MODELS[0]
    client_ = model.client()
    memory = restore_memory(session, model, client_)
    ReActAgent(client=client_, model_name=model.model, memory=memory, tools=list(CHAT_TOOLS))
    sent = tool_names(memory.tool_schemas)
    assert ("remember" in sent) == remember

    page = client.get(reverse("chat:chat", args=[session.public_id])).content.decode()

    hint = page[page.index('id="gauge-tools"') :][:600]
    assert f"{memory.tool_schema_tokens:,} tokens for {', '.join(sent)})" in hint
    meta = next(DatabaseLogStore().read(session.public_id))
    assert tool_names(meta["tools"]) == sent  # the session is logged with the tools it sends


def test_a_change_of_tool_schemas_says_what_the_requests_carry_from_then_on(owner: User) -> None:
    schemas = [
        {"type": "function", "function": {"name": "calculator", "parameters": {}}},
        {"type": "function", "function": {"name": "recall", "parameters": {}}},
    ]
    change = ContextChange(
        kind="tools",
        position=3,
        created_at=timezone.now(),
        through_seq=1,
        record_extra={"schemas": schemas, "tokens": 88},
    )

    html = render_to_string("dashboard/_context_change.html", {"change": change})

    assert "Tool schemas changed" in html
    assert "<code>calculator</code>, <code>recall</code>" in html
    assert "2 tools, 88 tokens" in html
    none = ContextChange(kind="tools", position=4, created_at=timezone.now(), record_extra={})
    assert "no tool schemas" in render_to_string("dashboard/_context_change.html", {"change": none})


@pytest.mark.parametrize("token", ["abcdefgh12345678", "x" * 19, "bad token with spaces!!"])
def test_a_compact_frame_with_a_token_the_server_would_not_spend_is_refused_as_a_frame(
    token: str,
) -> None:
    with pytest.raises(frames.FrameError, match="20 to 64"):
        frames.parse_frame(f'{{"type": "compact", "token": "{token}"}}')
    assert not once.is_token(token)
    good = "c" + "0" * 32  # as chat.js makes them
    parsed = frames.parse_frame(f'{{"type": "compact", "token": "{good}"}}')
    assert isinstance(parsed, frames.Compact)
    assert parsed.token == good
    assert once.is_token(good)
