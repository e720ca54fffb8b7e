"""Small things a person reads: figures grouped, no "None", one count of a
context, errors in the product's words."""

from __future__ import annotations

import io
import re
from html import unescape
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.urls import reverse
from pytest_django import Settings

from motus_web.sessions import memories
from motus_web.sessions.models import Session

from .chat_helpers import scripted_model
from .helpers import logged_in, make_session
from .test_memories_page import page_url, remembered

pytestmark = pytest.mark.django_db


def test_figures_in_tooltips_and_labels_are_grouped(owner: User) -> None:
    session = make_session(owner, turns=40, filler=80, threshold=12_000)
    client = logged_in(owner)
    pages = [
        reverse("dashboard:session_list"),
        reverse("dashboard:session_detail", args=[session.public_id]),
        reverse("dashboard:session_context", args=[session.public_id]),
    ]
    for url in pages:
        html = client.get(url).content.decode()
        ungrouped = re.findall(r"\b\d{4,} tokens", html)
        assert not ungrouped, f"{url}: {ungrouped[:3]}"
    listing = client.get(pages[0]).content.decode()
    assert "of the threshold (12,000 tokens)" in listing


def test_a_session_made_from_another_without_a_seq_says_no_none(owner: User) -> None:
    parent = make_session(owner, turns=2)
    child = make_session(owner, turns=1, parent=parent)
    Session.objects.filter(pk=child.pk).update(parent_seq=None)  # a subagent's link

    html = logged_in(owner).get(reverse("dashboard:session_trace", args=[parent.public_id]))

    assert "None" not in html.content.decode()


def test_a_confirmation_and_the_context_page_count_the_same_messages(owner: User) -> None:
    session = make_session(owner, turns=3)
    client = logged_in(owner)
    live = memories.restore(session).get_context()

    context = client.get(reverse("dashboard:session_context", args=[session.public_id]))
    fork = client.get(reverse("dashboard:fork_confirm", args=[session.public_id, 11]))

    assert f"Context now: {len(live)} messages" in context.content.decode()
    assert f"{len(live)} messages in the context" in fork.content.decode()


def test_a_memory_name_a_scope_cannot_hold_is_refused_in_the_forms_words(
    owner: User, settings: Settings
) -> None:
    settings.MOTUS_CHAT_MODELS = (scripted_model("http://127.0.0.1:9/v1"),)
    form = {"title": "x", "model": "scripted", "system_prompt": "Be brief."}
    refused = logged_in(owner).post(
        "/chat/new/", {**form, "remember": "on", "memory_name": "my trips"}
    )

    html = refused.content.decode()
    assert refused.status_code == 400
    assert "cannot name a memory" in html
    assert "[A-Za-z0-9" not in html
    assert "agent_id" not in html


def test_an_unknown_filter_and_an_unknown_scope_are_answered_in_the_products_pages(
    owner: User, staff: User
) -> None:
    scope, _, _ = remembered(owner)
    client = logged_in(owner)

    bogus = client.get(page_url(scope) + "?kind=bogus")

    assert bogus.status_code == 400
    html = unescape(bogus.content.decode())
    assert "No memory is of the kind 'bogus'" in html
    assert "<title>Cannot answer that" in html
    assert logged_in(staff).get(page_url(scope)).status_code == 200
    assert logged_in(staff).get("/memories/nobody-at-all/").status_code == 404
    assert logged_in(owner).get(f"/memories/user-{owner.pk}/").status_code == 200  # own, empty


def test_a_sync_that_finds_no_file_says_so(tmp_path: Path) -> None:
    out = io.StringIO()

    call_command("sync_sessions", "--folder", str(tmp_path), stdout=out, stderr=io.StringIO())

    assert f"no session files found in {tmp_path}" in out.getvalue()


def test_an_import_with_a_model_this_version_does_not_know_is_refused(tmp_path: Path) -> None:
    transcript = tmp_path / "chat.json"
    transcript.write_text('[{"role": "user", "content": "Hi"}]')

    with pytest.raises(CommandError, match="'not-a-model' is not a model this version knows"):
        call_command("import_sessions", str(transcript), "--model", "not-a-model")

    assert not Session.objects.exists()
    call_command(
        "import_sessions", str(transcript), "--model", "gpt-4o-2024-08-06", stdout=io.StringIO()
    )
    assert Session.objects.get().model_name == "gpt-4o-2024-08-06"
