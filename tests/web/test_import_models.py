"""An imported session counts with the model its file names, not the importer's default.

Claude Code names the model on each assistant message, Codex on each turn
context, Gemini CLI on its messages, ChatGPT in ``metadata.model_slug``, an
Anthropic response in ``model``; the importer's model (``--model``, the
setting) is only for files that name none.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from django.urls import reverse

from motus_web.dashboard import charts
from motus_web.sessions.importers import ImportOptions, import_path, import_stream
from motus_web.sessions.importers.formats import ParsedSession, parse
from motus_web.sessions.importers.formats.model import named_model
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import Message, Session

from .helpers import logged_in
from .test_agent_formats import (
    CHATGPT_ONE,
    CODEX_SMALL,
    COMPACTED,
    GEMINI,
    SIMONW,
    conversation,
    node,
)

DEFAULT = "gpt-4o"


def cc_assistant(uuid: str, parent: str, text: str, model: str | None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "id": f"msg-{uuid}", "content": text}
    if model is not None:
        message["model"] = model
    return {"type": "assistant", "uuid": uuid, "parentUuid": parent, "message": message}


def claude_code(*models: str | None) -> bytes:
    """A Claude Code transcript: a user line, then one assistant line per model."""
    lines: list[dict[str, Any]] = [
        {
            "type": "user",
            "uuid": "u0",
            "parentUuid": None,
            "sessionId": "s1",
            "version": "2.1.3",
            "message": {"role": "user", "content": "Hello"},
        }
    ]
    for number, model in enumerate(models, start=1):
        lines.append(cc_assistant(f"a{number}", lines[-1]["uuid"], f"Reply {number}", model))
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def codex(*turn_models: str, meta_model: str | None = None) -> bytes:
    """A Codex rollout: one user and one assistant message per turn context."""
    meta: dict[str, Any] = {"id": "rollout-1", "cli_version": "0.104.0"}
    if meta_model is not None:
        meta["model"] = meta_model
    lines: list[dict[str, Any]] = [{"type": "session_meta", "payload": meta}]
    for number, model in enumerate(turn_models, start=1):
        lines += [
            {"type": "turn_context", "payload": {"turn_id": str(number), "model": model}},
            {
                "type": "response_item",
                "payload": {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": f"Question {number}"}],
                },
            },
            {
                "type": "response_item",
                "payload": {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": f"Answer {number}"}],
                },
            },
        ]
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def gemini(model: str | None) -> bytes:
    answer: dict[str, Any] = {"id": "g1", "type": "gemini", "content": "Hi"}
    if model is not None:
        answer["model"] = model
    document = {
        "sessionId": "g",
        "startTime": "2026-01-01T00:00:00Z",
        "messages": [{"id": "u1", "type": "user", "content": "Hello"}, answer],
    }
    return json.dumps(document).encode()


def chatgpt(*slugs: str | None, default: str | None = None) -> bytes:
    nodes = [node("root", None, None), node("u", "root", "user", "Hello")]
    for number, slug in enumerate(slugs, start=1):
        metadata = {"model_slug": slug} if slug is not None else {}
        nodes.append(node(f"a{number}", nodes[-1][0], "assistant", "Hi", metadata=metadata))
    more = {"default_model_slug": default} if default is not None else {}
    return json.dumps([conversation(*nodes, current=nodes[-1][0], **more)]).encode()


def anthropic(request_model: str | None, response_model: str | None) -> bytes:
    request: dict[str, Any] = {"max_tokens": 9, "messages": [{"role": "user", "content": "Hi"}]}
    if request_model is not None:
        request["model"] = request_model
    response: dict[str, Any] = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "Hello"}],
    }
    if response_model is not None:
        response["model"] = response_model
    return json.dumps({"request": request, "response": response}).encode()


def parsed(data: bytes, name: str) -> ParsedSession:
    [session] = list(parse(io.BytesIO(data), name))
    assert isinstance(session, ParsedSession), session
    return session


@pytest.mark.parametrize(
    ("data", "name", "model"),
    [
        # The last model that answered: a /model switch mid-session moves the session.
        (claude_code("claude-sonnet-4-5", "claude-opus-4-6"), "s.jsonl", "claude-opus-4-6"),
        # Claude Code's own made-up messages (an API error) name no model.
        (claude_code("claude-opus-4-6", "<synthetic>"), "s.jsonl", "claude-opus-4-6"),
        (claude_code(None, None), "s.jsonl", None),
        (codex("gpt-5-codex", "gpt-5.3-codex", "gpt-5-codex"), "r.jsonl", "gpt-5-codex"),
        (codex(meta_model="gpt-5.1-codex"), "r.jsonl", "gpt-5.1-codex"),
        (codex("gpt-5.2", meta_model="gpt-5.1-codex"), "r.jsonl", "gpt-5.2"),
        (gemini("gemini-2.5-pro"), "session-1.json", "gemini-2.5-pro"),
        (gemini(None), "session-1.json", None),
        (chatgpt("gpt-4o", "o3"), "conversations.json", "o3"),
        (chatgpt("auto", None, default="gpt-5"), "conversations.json", "gpt-5"),
        (chatgpt(None), "conversations.json", None),
        # The response names the model that answered; the request, the one asked for.
        (
            anthropic("claude-sonnet-4-5", "claude-sonnet-4-5-20250929"),
            "a.json",
            "claude-sonnet-4-5-20250929",
        ),
        (anthropic("claude-haiku-4-5", None), "a.json", "claude-haiku-4-5"),
    ],
)
def test_each_format_names_the_model_its_file_names(
    data: bytes, name: str, model: str | None
) -> None:
    assert parsed(data, name).model == model


def test_named_model_skips_what_is_not_a_model_name() -> None:
    assert named_model(["gpt-4o", None, 3, "", "  ", "<synthetic>", "auto"]) == "gpt-4o"
    assert named_model([" o3 "]) == "o3"
    assert named_model([]) is None


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("data", "name", "model", "window"),
    [
        (claude_code("claude-sonnet-4-5"), "s.jsonl", "claude-sonnet-4-5", 200_000),
        (codex("gpt-5.3-codex"), "r.jsonl", "gpt-5.3-codex", 400_000),
        (gemini("gemini-2.5-pro"), "session-1.json", "gemini-2.5-pro", 1_048_576),
        (chatgpt("o3"), "conversations.json", "o3", 200_000),
    ],
)
def test_an_imported_session_counts_with_its_files_model_over_the_options(
    owner: User, data: bytes, name: str, model: str, window: int
) -> None:
    report = import_stream(
        io.BytesIO(data), name, ImportOptions(owner=owner, model_name="gpt-3.5-turbo")
    )

    assert report.problems == []
    session = Session.objects.get()
    assert session.model_name == model
    gauge = charts.gauge(session.context_tokens, session.config, session.model_name)
    assert gauge.window == window
    assert gauge.threshold is not None
    assert gauge.threshold > 96_000  # not gpt-4o's (nor gpt-3.5's) window


@pytest.mark.django_db
@override_settings(MOTUS_MODEL_NAME="gpt-4.1")
def test_a_file_that_names_no_model_falls_back_to_the_options_then_its_sources_estimate(
    owner: User,
) -> None:
    data = claude_code(None)
    import_stream(io.BytesIO(data), "a.jsonl", ImportOptions(owner=owner, model_name="o3"))
    other = data.replace(b'"sessionId": "s1"', b'"sessionId": "s2"')  # another conversation
    import_stream(io.BytesIO(other), "b.jsonl", ImportOptions(owner=owner))
    runs = b'[{"role": "user", "content": "hi"}]'  # OpenAI chat: no estimate of its own
    import_stream(io.BytesIO(runs), "c.json", ImportOptions(owner=owner))

    assert dict(Session.objects.values_list("source", "model_name")) == {
        "a.jsonl": "o3",
        "b.jsonl": "claude-sonnet-4-5",
        "c.json": "gpt-4.1",
    }
    counted = Session.objects.get(source="b.jsonl").record_extra["token_count"]
    assert counted == {"model": "claude-sonnet-4-5", "named_in_file": False, "approximate": True}


@pytest.mark.django_db
def test_a_claude_ai_export_says_its_counts_are_a_claude_estimate(owner: User) -> None:
    export = [
        {
            "uuid": "conv-1",
            "name": "Plan",
            "created_at": "2025-05-01T10:00:00Z",
            "chat_messages": [
                {"uuid": "m1", "sender": "human", "text": "Plan my week."},
                {"uuid": "m2", "sender": "assistant", "text": "Monday: rest."},
            ],
        }
    ]
    import_stream(
        io.BytesIO(json.dumps(export).encode()), "conversations.json", ImportOptions(owner)
    )

    session = Session.objects.get()
    assert session.model_name == "claude-sonnet-4-5"
    assert session.record_extra["token_count"]["approximate"] is True
    page = logged_in(owner).get(reverse("dashboard:session_detail", args=[session.public_id]))
    assert "the file names no model: tokens estimated as claude-sonnet-4-5" in page.content.decode()


@pytest.mark.django_db
def test_a_claude_session_is_counted_with_the_approximate_claude_tokenizer(owner: User) -> None:
    # claude-* is not a tiktoken model: cl100k_base counts it, as it counts any
    # model it does not know; gpt-4o would have counted with o200k_base.
    text = "Ünïcödé wörds ünd 東京 punctuation!?" * 20
    data = claude_code("claude-opus-4-6").replace(b"Reply 1", json.dumps(text)[1:-1].encode())
    for source, model in (("s.jsonl", b"claude-opus-4-6"), ("t.jsonl", b"gpt-4o")):
        changed = data.replace(b"claude-opus-4-6", model)
        report = import_stream(io.BytesIO(changed), source, ImportOptions(owner=owner))
        assert report.problems == []

    claude, gpt = (
        Message.objects.get(session__source=source, role="assistant").tokens
        for source in ("s.jsonl", "t.jsonl")
    )
    assert claude != gpt


# -- the shared real files ---------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "model"),
    [
        (COMPACTED, "claude-opus-4-6"),
        (CODEX_SMALL, "gpt-5.3-codex"),
        (GEMINI, "gemini-matrix"),
        (CHATGPT_ONE, "gpt-5-6-pro"),
        (SIMONW, "claude-sonnet-4-5"),  # no model fields: Claude's estimate, not the setting's
    ],
)
def test_real_files_import_with_the_model_they_name(owner: User, path: Path, model: str) -> None:
    if not path.is_file():
        pytest.skip(f"the shared agent-session file {path} is absent")
    with override_settings(MOTUS_MODEL_NAME=DEFAULT):
        report = import_path(path, ImportOptions(owner=owner))

    assert report.problems == []
    main = Session.objects.filter(parent__isnull=True).get()
    assert main.model_name == model


@pytest.mark.django_db
def test_an_attachments_text_is_part_of_its_message_and_counted(owner: User) -> None:
    def export(attachments: list[dict[str, Any]]) -> bytes:
        message = {"uuid": "m1", "sender": "human", "text": "Sum it.", "attachments": attachments}
        reply = {"uuid": "m2", "sender": "assistant", "text": "42."}
        conversation = {"uuid": "c", "name": "Sum", "chat_messages": [message, reply]}
        return json.dumps([conversation]).encode()

    csv = "n\n" + "\n".join(str(n) for n in range(200))
    import_stream(io.BytesIO(export([])), "a.json", ImportOptions(owner))
    bare = Session.objects.get()
    Session.objects.all().delete()
    import_stream(
        io.BytesIO(export([{"file_name": "n.csv", "extracted_content": csv}])),
        "b.json",
        ImportOptions(owner),
    )

    session = Session.objects.get()
    first = session.messages.get(seq=0)
    assert isinstance(first.content, list)
    assert "<source>n.csv</source>" in first.content[0]["text"]
    assert "199" in first.content[0]["text"]
    assert first.content[-1]["text"] == "Sum it."
    assert session.total_tokens > bare.total_tokens + 150


@pytest.mark.django_db
def test_a_requests_tool_definitions_are_counted_in_its_context(owner: User) -> None:
    def request(tools: list[dict[str, Any]]) -> bytes:
        messages = [{"role": "user", "content": "Weather in Paris?"}]
        body: dict[str, Any] = {"model": "claude-sonnet-4-5", "messages": messages}
        if tools:
            body["tools"] = tools
        return json.dumps(body).encode()

    weather = {
        "name": "get_weather",
        "description": "The current weather of a city, in degrees Celsius and a summary.",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city's name"}},
            "required": ["city"],
        },
    }
    import_stream(io.BytesIO(request([])), "bare.json", ImportOptions(owner))
    import_stream(io.BytesIO(request([weather])), "tools.json", ImportOptions(owner))

    bare, with_tools = (Session.objects.get(source=n) for n in ("bare.json", "tools.json"))
    assert with_tools.context_tokens > bare.context_tokens + 30
    meta = next(DatabaseLogStore().read(with_tools.public_id))
    assert meta["tools"][0]["function"]["name"] == "get_weather"


@pytest.mark.django_db
def test_the_gauge_of_a_claude_code_session_uses_claude_codes_own_trigger_point(
    owner: User,
) -> None:
    if not COMPACTED.is_file():
        pytest.skip(f"the shared agent-session file {COMPACTED} is absent")
    import_path(COMPACTED, ImportOptions(owner=owner))
    session = Session.objects.filter(parent__isnull=True).get()

    page = logged_in(owner).get(reverse("dashboard:session_detail", args=[session.public_id]))

    gauge = page.context["gauge"]
    assert (gauge.window, gauge.threshold) == (200_000, 167_000)  # not 1,000,000 and 750,000
    html = page.content.decode()
    assert "Window and threshold from" in html
    assert "this session compacted itself at 167,094 tokens" in html
