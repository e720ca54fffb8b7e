from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import DataError
from django.test import Client
from django.urls import reverse
from django.utils.html import escape
from pytest_django import Settings

from motus_web.dashboard.views import _import_notice
from motus_web.sessions.importers import ImportReport, Skipped
from motus_web.sessions.models import ImportJob, Message, Session

from .helpers import import_upload, logged_in, make_session, run_tasks, upload_token
from .test_importers import CHAT, as_json, as_jsonl, exported

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
    client = logged_in(owner)
    response = client.post(
        reverse("dashboard:import_upload"),
        {**upload_token(client), "file": upload("cancel.json", as_json(CHAT)), "threshold": 3000},
    )

    assert response.status_code == 303
    job = ImportJob.objects.get()
    assert response["Location"] == reverse("dashboard:import_job", args=[job.public_id])
    assert not Session.objects.exists()  # the request only queued the import
    assert run_tasks() == 1

    page = client.get(response["Location"]).content.decode()
    session = Session.objects.get()
    assert session.owner == owner
    assert session.source == "cancel.json"
    assert "Imported 1 session from cancel.json." in page
    assert reverse("dashboard:session_detail", args=[session.public_id]) in page


def test_an_upload_of_many_sessions_lists_them_with_a_notice(owner: User) -> None:
    data = as_jsonl({"messages": CHAT}, {"messages": CHAT})

    page = import_upload(logged_in(owner), "two.jsonl", data).content.decode()

    assert "Imported 2 sessions from two.jsonl." in page
    for session in Session.objects.all():
        assert reverse("dashboard:session_detail", args=[session.public_id]) in page


def test_an_upload_with_replay_records_compactions(owner: User) -> None:
    long_chat = [
        {"role": role, "content": f"{role} {i}: " + "words " * 150}
        for i in range(10)
        for role in ("user", "assistant")
    ]

    import_upload(logged_in(owner), "long.json", as_json(long_chat), replay="on", threshold=800)

    assert Session.objects.get().compaction_count > 0


def test_a_broken_upload_is_explained_with_its_line(owner: User) -> None:
    data = as_jsonl({"messages": CHAT}) + b"{oops\n"

    html = import_upload(logged_in(owner), "chats.jsonl", data).content.decode()

    assert "1 session imported, 0 already there. This could not be imported:" in html
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


def test_an_upload_of_someone_elses_log_becomes_the_uploaders_own_session(
    owner: User, staff: User
) -> None:
    admins = make_session(staff, title="Admin's run")
    client = logged_in(owner)

    page = import_upload(client, "admin.jsonl", exported(admins)).content.decode()

    copy = Session.objects.get(owner=owner)
    assert "Imported 1 session" in page
    assert "before" not in page
    detail = client.get(reverse("dashboard:session_detail", args=[copy.public_id]))
    html = detail.content.decode()
    assert "Admin&#x27;s run" in html
    assert f"<code>{admins.public_id}</code>" in html  # the id the uploaded file gave it
    assert "Admin&#x27;s run" in client.get(reverse("dashboard:session_list")).content.decode()


def test_uploading_your_own_export_leads_to_the_session_you_have(owner: User) -> None:
    session = make_session(owner, title="Mine")

    page = import_upload(logged_in(owner), "mine.jsonl", exported(session)).content.decode()

    assert "Nothing new in mine.jsonl: it was imported before." in page
    assert reverse("dashboard:session_detail", args=[session.public_id]) in page
    assert Session.objects.count() == 1


def test_a_database_failure_is_explained_without_sql(
    owner: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise DataError('INSERT INTO "dashboard_message" ("content") VALUES (...)')

    monkeypatch.setattr(Message.objects, "bulk_create", refuse)

    html = import_upload(logged_in(owner), "a.json", as_json(CHAT)).content.decode()

    assert "a.json: the database could not store session" in html
    assert "INSERT" not in html
    assert not Session.objects.exists()


def test_the_notice_counts_sessions_in_words_that_agree(owner: User) -> None:
    client = logged_in(owner)

    def notice(name: str, data: bytes) -> str:
        response = import_upload(client, name, data)
        return str(response.context["notice"])

    one, three = as_json(CHAT), as_jsonl(*({"messages": CHAT[: 2 + n]} for n in range(3)))
    assert notice("one.json", one) == "Imported 1 session from one.json."
    assert notice("one.json", one) == "Nothing new in one.json: it was imported before."
    assert notice("three.jsonl", three) == "Imported 3 sessions from three.jsonl."
    assert notice("three.jsonl", three) == (
        "Nothing new in three.jsonl: its 3 sessions were imported before."
    )


@pytest.mark.parametrize(
    ("imported", "skipped", "expected"),
    [
        (0, 0, "No sessions found in f.jsonl."),
        (1, 1, "Imported 1 session from f.jsonl; 1 was imported before."),
        (2, 3, "Imported 2 sessions from f.jsonl; 3 were imported before."),
    ],
)
def test_the_notice_agrees_with_any_counts(imported: int, skipped: int, expected: str) -> None:
    report = ImportReport(imported=["id"] * imported, skipped=[Skipped("line 1", "id")] * skipped)

    assert _import_notice(report, "f.jsonl") == expected


@pytest.mark.parametrize("threshold", ["1", "99", "10000001", "99999999999999999999"])
def test_a_threshold_out_of_bounds_is_refused_with_the_reason(owner: User, threshold: str) -> None:
    response = logged_in(owner).post(
        reverse("dashboard:import_upload"),
        {"file": upload("a.json", as_json(CHAT)), "replay": "on", "threshold": threshold},
    )

    assert response.status_code == 400
    html = response.content.decode()
    assert "The token threshold must be between 100 and 10,000,000 tokens" in html
    assert "a replay would compact at every message" in html
    assert not Session.objects.exists()


def test_the_import_page_lists_every_supported_format_and_so_does_the_readme(
    owner: User,
) -> None:
    from pathlib import Path

    from motus_web.sessions.importers.formats import SUPPORTED

    page = logged_in(owner).get(reverse("dashboard:import_form")).content.decode()
    readme = (Path(__file__).parents[2] / "docs" / "importing.md").read_text()
    table = [
        line
        for line in readme.splitlines()
        if line.endswith(".json` |") or line.endswith(".jsonl` |")
    ]

    assert len(SUPPORTED) == 9
    for label in SUPPORTED.values():
        assert escape(label) in page
    assert len(table) == len(SUPPORTED)  # the docs table has one row per format
    for label in SUPPORTED.values():
        name = label.split(" (")[0].replace(" API", "")
        assert any(row.startswith(f"| {name}") for row in table), name


def test_an_upload_needs_the_forms_one_time_token_and_sent_twice_imports_once(
    owner: User,
) -> None:
    client = logged_in(owner)
    token = upload_token(client)

    def form() -> dict[str, object]:
        return {"file": upload("a.json", as_json(CHAT)), "threshold": 3000}

    without = client.post(reverse("dashboard:import_upload"), form())
    first = client.post(reverse("dashboard:import_upload"), {**token, **form()})
    again = client.post(reverse("dashboard:import_upload"), {**token, **form()})

    assert without.status_code == 400
    assert first.status_code == 303
    assert again.status_code == 409
    assert first["Location"] in again.content.decode()  # the job the first made
    assert ImportJob.objects.count() == 1
    assert upload_token(client) != token  # a page opened again gets a new one
