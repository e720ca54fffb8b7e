"""A compaction's page: what it folded, the previous summary included, and what it lost."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.urls import reverse

from memory import ChatMessage, CompactionMemory, CompactionMemoryConfig, InMemoryLogStore
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import CompactionEvent, Session

from .helpers import logged_in

pytestmark = pytest.mark.django_db


def url(name: str, *args: Any) -> str:
    return reverse(f"dashboard:{name}", args=args)


def bash(call_id: str, command: str) -> dict[str, Any]:
    function = {"name": "Bash", "arguments": f'{{"command": "{command}"}}'}
    return {"id": call_id, "type": "function", "function": function}


TURNS: list[list[dict[str, Any]]] = [
    [
        {"role": "user", "content": "My booking is ZFA04Y, flight HAT123. Remember them."},
        {"role": "assistant", "content": None, "tool_calls": [bash("c1", "cat /etc/hosts")]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"host_name": "alpha-7", "ok": 1}'},
        {"role": "assistant", "content": "Noted ZFA04Y and HAT123."},
    ],
    [
        {"role": "user", "content": "Also seat 14C, please."},
        {"role": "assistant", "content": "Seat 14C it is."},
    ],
]


def compacted_twice(
    owner: User, summaries: list[str], turns: list[list[dict[str, Any]]] = TURNS
) -> Session:
    """A session of ``turns``, compacted (by ``compact_fn``) after each turn with ``summaries``."""
    store = InMemoryLogStore()
    written = iter(summaries)
    summarise: Callable[..., str] = lambda *_: next(written)  # noqa: E731
    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="twice", token_threshold=50_000),
        log_store=store,
        model_name="gpt-4o",
        compact_fn=summarise,
    )

    async def feed() -> None:
        for turn in turns:
            for message in turn:
                await memory.add_message(ChatMessage.from_dict(message))
            await memory.compact()

    async_to_sync(feed)()
    DatabaseLogStore(owner=owner).extend("twice", store.read("twice"))
    return Session.objects.get(public_id="twice")


def compactions(session: Session) -> list[CompactionEvent]:
    return list(session.compaction_events.filter(kind="ok").order_by("position"))


def test_a_loss_carried_over_from_the_previous_summary_is_counted(owner: User) -> None:
    session = compacted_twice(owner, ["Booking ZFA04Y on flight HAT123.", "Seat 14C on HAT123."])
    first, second = compactions(session)

    html = logged_in(owner).get(url("compaction_detail", "twice", second.position)).content.decode()

    assert "the previous summary and" in html
    assert "Booking ZFA04Y on flight HAT123." in html  # the summary it folded in, shown
    lost = html[html.index("<code>ZFA04Y</code>") - 60 : html.index("<code>ZFA04Y</code>") + 200]
    assert "lost" in lost
    assert "in the previous summary" in lost
    assert f'href="{url("compaction_detail", "twice", first.position)}"' in html


def test_tool_names_json_keys_and_call_ids_are_not_counted_but_arguments_are(
    owner: User,
) -> None:
    session = compacted_twice(owner, ["Booking ZFA04Y.", "Seat 14C."])
    first = compactions(session)[0]

    html = logged_in(owner).get(url("compaction_detail", "twice", first.position)).content.decode()
    listed = html[
        html.index('id="identifiers"') : html.index("</section>", html.index('id="identifiers"'))
    ]

    assert "<code>/etc/hosts</code>" in listed  # an argument of the call
    assert "<code>alpha-7</code>" in listed  # a value in a tool's JSON
    for noise in ("Bash", "host_name", "command", "c1"):
        assert f"<code>{noise}</code>" not in listed, noise


def test_the_page_can_list_only_the_lost_identifiers_each_linked_to_its_message(
    owner: User,
) -> None:
    session = compacted_twice(owner, ["Booking ZFA04Y.", "Seat 14C, booking ZFA04Y."])
    first = compactions(session)[0]
    client = logged_in(owner)
    page = url("compaction_detail", "twice", first.position)

    full = client.get(page + "?show=lost").content.decode()
    fragment = client.get(page + "?show=lost", HTTP_HX_REQUEST="true")

    for html in (full, fragment.content.decode()):
        assert "<code>HAT123</code>" in html  # lost
        assert "<code>ZFA04Y</code>" not in html  # kept: not listed
        assert f'in <a href="{url("message_detail", "twice", 0)}">#0</a>' in html
    assert "<html" not in fragment.content.decode()
    assert "HX-Request" in fragment["Vary"]
    assert 'hx-get="' + page + '"' in full  # back to all, with htmx and without


def test_a_compaction_page_links_the_compactions_before_and_after_it(owner: User) -> None:
    session = compacted_twice(owner, ["Booking ZFA04Y.", "Seat 14C."])
    first, second = compactions(session)
    client = logged_in(owner)

    one = client.get(url("compaction_detail", "twice", first.position)).content.decode()
    two = client.get(url("compaction_detail", "twice", second.position)).content.decode()

    assert f'href="{url("compaction_detail", "twice", second.position)}" rel="next"' in one
    assert "The first compaction" in one
    assert f'href="{url("compaction_detail", "twice", first.position)}" rel="prev"' in two
    assert "The latest compaction" in two


def test_the_compaction_requests_own_usage_is_on_its_page_and_not_in_the_gauge(
    owner: User,
) -> None:
    session = compacted_twice(owner, ["Booking ZFA04Y.", "Seat 14C."])
    first = compactions(session)[0]
    usage = {"input_tokens": 1234, "output_tokens": 56, "model": "gpt-4o-mini"}
    CompactionEvent.objects.filter(pk=first.pk).update(record_extra={"usage": usage})
    client = logged_in(owner)

    page = client.get(url("compaction_detail", "twice", first.position)).content.decode()
    detail = client.get(url("session_detail", "twice")).content.decode()

    assert "1,234 in, 56 out (gpt-4o-mini)" in page
    assert "1,234" not in detail


def test_the_names_inside_source_code_are_not_counted_but_its_paths_are(owner: User) -> None:
    source = "const rows = document.querySelectorAll('tr');\nrows.forEach(paint);\n}\n"
    listing = "".join(f"{n:>6}\u2192{line}\n" for n, line in enumerate(source.splitlines(), 1))
    edit = {
        "name": "Edit",
        "arguments": json.dumps({"file_path": "src/table.js", "new_string": source}),
    }
    coding: list[list[dict[str, Any]]] = [
        [
            {"role": "user", "content": "Fix the row colours in src/table.js."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": edit}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": listing},
            {"role": "assistant", "content": "Done."},
        ],
        [{"role": "user", "content": "Thanks."}, {"role": "assistant", "content": "Welcome."}],
    ]
    session = compacted_twice(owner, ["Fixed the rows.", "Fixed."], coding)
    first = compactions(session)[0]

    html = logged_in(owner).get(url("compaction_detail", "twice", first.position)).content.decode()
    listed = html[
        html.index('id="identifiers"') : html.index("</section>", html.index('id="identifiers"'))
    ]

    assert "<code>src/table.js</code>" in listed
    for name in ("querySelectorAll", "forEach"):
        assert f"<code>{name}</code>" not in listed, name
