"""Fuzz: mutations of a valid file of every import format.

Whatever the mutation (a value of the wrong type, a missing or extra field, a
huge or deep value, the file cut short), the importer answers with sessions
and problems: no exception escapes it, no problem is an internal error, a
refused session leaves no row, and every page of every imported session
answers 200. Example counts are small to stay within CI time; raise them with
``MOTUS_FUZZ_EXAMPLES``.
"""

from __future__ import annotations

import io
import json
import os
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from motus_web.sessions.importers import ImportOptions, import_stream
from motus_web.sessions.importers.writer import INTERNAL_ERROR
from motus_web.sessions.models import Session

from .helpers import logged_in
from .test_agent_formats import CHATGPT_EXPORT, DATA, GEMINI, SHORT, lines_of
from .test_importers import CHAT, OLD_MOTUS_LOG

pytestmark = pytest.mark.django_db

EXAMPLES = int(os.environ.get("MOTUS_FUZZ_EXAMPLES", "12"))

ANTHROPIC_REQUEST = {
    "model": "claude-sonnet-4-5",
    "system": "Be brief.",
    "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Use the tool.", "signature": "sig"},
                {"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Paris"}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "Sunny"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Sunny."}]},
    ],
}
CODEX = [
    {"timestamp": "t0", "type": "session_meta", "payload": {"id": "c1", "cli_version": "0.1"}},
    {
        "timestamp": "t1",
        "type": "response_item",
        "payload": {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "fix it"}],
        },
    },
    {
        "timestamp": "t2",
        "type": "response_item",
        "payload": {"type": "function_call", "name": "sh", "arguments": "{}", "call_id": "k1"},
    },
    {
        "timestamp": "t3",
        "type": "response_item",
        "payload": {"type": "function_call_output", "call_id": "k1", "output": "ok"},
    },
    {
        "timestamp": "t4",
        "type": "compacted",
        "payload": {"message": "summary", "replacement_history": []},
    },
    {
        "timestamp": "t5",
        "type": "response_item",
        "payload": {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "done"}],
        },
    },
]


# (name, kind, document): "json" files are one document, "jsonl" files a list of lines.
SEEDS: list[tuple[str, str, Any]] = [
    ("chat.json", "json", CHAT),
    ("runs.json", "json", [{"messages": CHAT}, {"messages": CHAT[1:3]}]),
    ("chat.jsonl", "jsonl", [{"messages": CHAT}, {"messages": CHAT[1:]}]),
    ("motus.jsonl", "jsonl", [json.loads(line) for line in lines_of(OLD_MOTUS_LOG)]),
    ("codex.jsonl", "jsonl", CODEX),
    ("anthropic.json", "json", ANTHROPIC_REQUEST),
]
if DATA.is_dir():  # real files of other tools, read beside the checkout (not shipped)
    SEEDS += [
        ("claude.jsonl", "jsonl", [json.loads(line) for line in lines_of(SHORT)]),
        ("conversations.json", "json", json.loads(CHATGPT_EXPORT.read_bytes())),
        ("gemini.json", "json", json.loads(GEMINI.read_bytes())),
    ]

HOSTILE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.just("x" * 5000),
    st.just([]),
    st.just({}),
    st.just({"type": []}),
    st.just([["deep"]]).map(lambda v: _deep(v, 40)),
    st.lists(st.integers(), max_size=3),
)


def _deep(value: Any, depth: int) -> Any:
    for _ in range(depth):
        value = [value]
    return value


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in ``value`` a mutation may touch (bounded, for big documents)."""
    found = [prefix]
    if len(prefix) > 8:
        return found
    if isinstance(value, dict):
        for key, item in list(value.items())[:30]:
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in list(enumerate(value))[:30]:
            found += _paths(item, (*prefix, index))
    return found


def _mutate(document: Any, path: tuple[Any, ...], action: str, value: Any) -> Any:
    if not path:
        return value if action == "replace" else document
    parent = document
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if action == "replace":
        parent[last] = value
    elif action == "delete":
        del parent[last]
    elif isinstance(parent, dict):
        parent[f"extra_{action}"] = value
    else:
        parent.insert(last, value)
    return document


def _encode(kind: str, document: Any) -> bytes:
    if kind == "jsonl" and isinstance(document, list):
        return b"".join(json.dumps(line).encode() + b"\n" for line in document)
    return json.dumps(document).encode()


@st.composite
def mutated_files(draw: st.DrawFn) -> tuple[str, bytes]:
    name, kind, seed = draw(st.sampled_from(SEEDS))
    document = json.loads(json.dumps(seed))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        path = draw(st.sampled_from(_paths(document)))
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        value = json.loads(json.dumps(draw(HOSTILE)))  # a fresh copy: mutations nest in it
        document = _mutate(document, path, action, value)
    data = _encode(kind, document)
    if draw(st.booleans()) and draw(st.booleans()):
        data = data[: draw(st.integers(min_value=0, max_value=len(data)))]
    return name, data


@settings(
    max_examples=EXAMPLES * len(SEEDS),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(found=mutated_files())
def test_no_mutation_of_a_valid_file_breaks_the_importer_or_a_page(
    staff: User, found: tuple[str, bytes]
) -> None:
    name, data = found
    Session.objects.all().delete()

    report = import_stream(io.BytesIO(data), name, ImportOptions(owner=staff))

    assert not [p for p in report.problems if INTERNAL_ERROR in p.message], report.problems
    assert sorted(Session.objects.values_list("public_id", flat=True)) == sorted(report.imported)
    client = logged_in(staff)
    for session in Session.objects.all():
        url = reverse("dashboard:session_detail", args=[session.public_id])
        assert client.get(url).status_code == 200
        for seq in session.messages.values_list("seq", flat=True)[:5]:
            url = reverse("dashboard:message_detail", args=[session.public_id, seq])
            assert client.get(url).status_code == 200
    assert client.get(reverse("dashboard:session_list")).status_code == 200


def test_a_stored_text_part_that_is_not_text_shows_as_its_json() -> None:
    """The fuzz test's find: a Codex reply whose text part is a list holding an
    integer past 64 bits was stored, and its page failed to render (500)."""
    from motus_web.dashboard.templatetags.dashboard import message_text

    content = [{"type": "output_text", "text": [18716959364157014016]}]
    assert "18716959364157014016" in message_text(content)
    assert message_text([{"type": "text", "text": "fine"}]) == "fine"
