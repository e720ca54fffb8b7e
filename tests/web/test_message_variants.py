"""Real-world message variants (issue 7) through the importer and on the pages."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from memory import ChatMessage, CompactionMemory, CompactionMemoryConfig
from motus_web.sessions.importers import ImportOptions, ImportReport, import_stream
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import Session
from tests.memory import variants as v

from .helpers import logged_in

pytestmark = pytest.mark.django_db

DEVELOPER = {"role": "developer", "content": "Sell mugs. Answer briefly."}


def run(data: bytes, name: str, owner: User) -> ImportReport:
    return import_stream(io.BytesIO(data), name, ImportOptions(owner=owner))


def live_context(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The context a live memory holds after ``messages`` (instructions first)."""
    memory = CompactionMemory(config=CompactionMemoryConfig(session_id="live", auto_compact=False))
    memory.set_system_prompt(str(messages[0]["content"]), role=messages[0]["role"])

    async def feed() -> None:
        for message in messages[1:]:
            await memory.add_message(message)

    asyncio.run(feed())
    return [m.to_dict() for m in memory.get_context()]


def test_a_file_that_starts_with_a_developer_message_imports_it_as_the_instructions(
    owner: User,
) -> None:
    chat = [DEVELOPER, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hi!"}]

    report = run(json.dumps(chat).encode(), "dev.json", owner)

    assert report.problems == []
    session = Session.objects.get(public_id=report.imported[0])
    assert session.system_prompt == DEVELOPER["content"]
    meta = next(iter(DatabaseLogStore().read(session.public_id)))
    assert meta["system_role"] == "developer"
    restored = CompactionMemory.restore_from_log(session.public_id, log_store=DatabaseLogStore())
    assert restored.get_context()[0].to_api_dict() == DEVELOPER
    assert session.messages.count() == 2


@pytest.mark.parametrize("layout", ["json", "jsonl"])
def test_every_real_world_variant_imports_whole_and_restores_as_it_was_live(
    owner: User, layout: str
) -> None:
    chat = [DEVELOPER, *v.REAL_WORLD]
    # json.dumps writes each lone surrogate as an escape ("\ud83d"), as Python tools do.
    data = (
        json.dumps(chat).encode()
        if layout == "json"
        else json.dumps({"messages": chat}).encode() + b"\n"
    )

    report = run(data, f"variants.{layout}", owner)

    assert report.problems == []
    session = Session.objects.get(public_id=report.imported[0])
    store = DatabaseLogStore()
    logged = [r["message"] for r in store.read(session.public_id) if r["type"] == "message"]
    assert logged == [ChatMessage.from_dict(m).to_dict() for m in v.REAL_WORLD]
    assert logged[0]["content"] == v.LONE_CLEAN
    restored = CompactionMemory.restore_from_log(session.public_id, log_store=store)
    assert restored.restore_problems == []
    assert [m.to_dict() for m in restored.get_context()] == live_context(chat)
    legacy = session.messages.get(seq=v.REAL_WORLD.index(v.LEGACY_RESULT))
    assert (legacy.role, legacy.as_dict()) == ("tool", v.LEGACY_RESULT)


def test_the_timeline_shows_reasoning_folded_and_a_custom_calls_input(owner: User) -> None:
    chat = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "bump the stock"},
        {**v.CUSTOM_CALL, "reasoning_content": "a one-line patch will do"},
        v.CUSTOM_RESULT,
        v.THINKING_ANSWER,
    ]
    public_id = run(json.dumps(chat).encode(), "r.json", owner).imported[0]

    html = logged_in(owner).get(reverse("dashboard:session_detail", args=[public_id]))
    page = html.content.decode()

    assert html.status_code == 200
    assert page.count('<details class="reasoning">') == 2
    assert "a one-line patch will do" in page
    assert "sku 2 is sold out, say so" in page
    assert "<code>apply_patch</code>" in page
    assert "+stock = 3" in page


def test_a_file_whose_name_is_not_utf8_imports_under_the_name_with_replacement_characters(
    owner: User,
) -> None:
    # Linux hands Python a file name that is not UTF-8 with lone surrogates in it.
    report = run(json.dumps([{"role": "user", "content": "hi"}]).encode(), "caf\udce9.json", owner)

    assert report.problems == []
    session = Session.objects.get(public_id=report.imported[0])
    assert (session.source, session.title) == ("caf\ufffd.json", "caf\ufffd")
