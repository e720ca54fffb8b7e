from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from pytest_django import Settings

from motus_web.dashboard.models import Session

from .helpers import logged_in
from .test_importers import CHAT, as_json, as_jsonl

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def upload(name: str, data: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/json")


def test_the_import_page_needs_a_login(client: Client) -> None:
    assert client.get(reverse("dashboard:import_form")).status_code == 302
    response = client.post(
        reverse("dashboard:import_upload"), {"file": upload("a.json", as_json(CHAT))}
    )
    assert response.status_code == 302
    assert not Session.objects.exists()


def test_the_import_page_shows_the_form_in_full_and_to_htmx(owner: User) -> None:
    client = logged_in(owner)

    for response in (
        client.get(reverse("dashboard:import_form")),
        client.get(reverse("dashboard:import_form"), headers=HTMX),
    ):
        assert response.status_code == 200
        assert b'enctype="multipart/form-data"' in response.content
        assert b"up to 20.0\xc2\xa0MB" in response.content


def test_an_uploaded_transcript_becomes_the_uploaders_session(owner: User) -> None:
    response = logged_in(owner).post(
        reverse("dashboard:import_upload"),
        {"file": upload("cancel.json", as_json(CHAT)), "threshold": 3000},
    )

    session = Session.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("dashboard:session_detail", args=[session.public_id])
    assert session.owner == owner
    assert session.source == "cancel.json"


def test_an_upload_of_many_sessions_lands_on_the_list_with_a_notice(owner: User) -> None:
    client = logged_in(owner)
    data = as_jsonl({"messages": CHAT}, {"messages": CHAT})

    response = client.post(
        reverse("dashboard:import_upload"),
        {"file": upload("two.jsonl", data), "threshold": 3000},
        follow=True,
    )

    assert response.redirect_chain == [(reverse("dashboard:session_list"), 302)]
    assert "Imported 2 sessions from two.jsonl." in response.content.decode()


def test_an_upload_with_replay_records_compactions(owner: User) -> None:
    long_chat = [
        {"role": role, "content": f"{role} {i}: " + "words " * 150}
        for i in range(10)
        for role in ("user", "assistant")
    ]

    logged_in(owner).post(
        reverse("dashboard:import_upload"),
        {"file": upload("long.json", as_json(long_chat)), "replay": "on", "threshold": 800},
    )

    assert Session.objects.get().compaction_count > 0


def test_a_broken_upload_is_explained_with_its_line(owner: User) -> None:
    data = as_jsonl({"messages": CHAT}) + b"{oops\n"

    response = logged_in(owner).post(
        reverse("dashboard:import_upload"), {"file": upload("chats.jsonl", data), "threshold": 3000}
    )

    assert response.status_code == 400
    html = response.content.decode()
    assert "1 sessions imported, 0 already there" in html
    assert "chats.jsonl: line 2: invalid JSON" in html


def test_a_file_over_the_size_limit_is_refused(owner: User, settings: Settings) -> None:
    settings.MOTUS_UPLOAD_MAX_BYTES = 100
    data = json.dumps(CHAT).encode()

    response = logged_in(owner).post(
        reverse("dashboard:import_upload"), {"file": upload("big.json", data), "threshold": 3000}
    )

    assert response.status_code == 400
    assert "the limit is 100\xa0bytes" in response.content.decode()
    assert not Session.objects.exists()


def test_an_upload_without_the_csrf_token_is_refused(owner: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)

    response = client.post(
        reverse("dashboard:import_upload"), {"file": upload("a.json", as_json(CHAT))}
    )

    assert response.status_code == 403
    assert not Session.objects.exists()
