"""Other people's requests while an import writes a long session: every one succeeds.

While an import wrote a 49,000-message session in one transaction (13-17 s),
logins, logouts, forks, another user's upload and Cancel answered 500
"database is locked" on SQLite. An import now writes in short committed
transactions (``importers.commits``), the long session ``incomplete`` (shown
nowhere) until its last batch. Here an upload's job replays a long transcript
in a thread, on the test database (a file, in WAL mode, on SQLite; or
PostgreSQL), while in the test's thread another user logs in, forks, uploads
and logs out, and the owner cancels. SQLite's busy timeout is cut to 2 s for
the test, shorter than the import: a writer that held the lock for the whole
session would fail these requests.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection, connections
from django.test import Client
from django.urls import reverse
from pytest_django import Settings

from memory import ChatMessage
from motus_web.sessions import jobs
from motus_web.sessions.importers import ingest, writer
from motus_web.sessions.models import ImportJob, Session

from .helpers import confirm, make_session, upload_token
from .test_import_jobs import send, upload
from .test_importers import CHAT, as_json

BUSY_SECONDS = 2
PACE_S = 0.05  # at least this long per batch of 100 messages: 10 s for the whole session
# Replayed at 3,000 tokens: longer than the requests take (tens of seconds), with a
# commit every 100 messages; Cancel ends it.
MESSAGES = 20_000


def long_transcript() -> bytes:
    turns = [
        {
            "role": "user" if n % 2 == 0 else "assistant",
            "content": f"Turn {n}: the booking reference is REF{n:05d}, "
            f"and the flight HAT{n % 997:03d} leaves at {n % 24:02d}:15 from gate B{n % 40}.",
        }
        for n in range(MESSAGES)
    ]
    return json.dumps({"messages": turns}).encode()


@pytest.fixture
def short_busy_timeout() -> Iterator[None]:
    """Connections opened from now on wait at most ``BUSY_SECONDS`` for SQLite's lock."""
    options = connection.settings_dict["OPTIONS"]
    before = options.get("timeout")
    if connection.vendor == "sqlite":
        options["timeout"] = BUSY_SECONDS
    yield
    if before is not None:
        options["timeout"] = before


def _run(job: ImportJob) -> None:
    try:
        claimed = jobs.claim(job.pk)
        assert claimed is not None
        jobs.run(claimed)
    finally:
        connections.close_all()


@pytest.mark.django_db(transaction=True)
def test_logins_forks_uploads_and_cancel_succeed_while_an_import_writes_a_long_session(
    owner: User,
    teammate: User,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    short_busy_timeout: None,
) -> None:
    settings.MOTUS_IMPORT_THREADS = 0  # the uploads wait; the long job runs in the thread below
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    teammate.set_password(_PASSWORD)
    teammate.save()
    monkeypatch.setattr(ingest, "BATCH", 100)
    # Each batch takes at least PACE_S, as a slow replay would: the import outlasts
    # the requests on a fast machine too (a batch's write still commits at once).
    monkeypatch.setattr(writer, "batched", _paced)
    theirs = make_session(teammate, turns=4)
    owners = Client(raise_request_exception=False)
    owners.force_login(owner)
    job = upload(owners, "long.json", long_transcript())
    importing = threading.Thread(target=_run, args=(job,))
    importing.start()
    answers: list[tuple[str, int]] = []
    try:
        # The long session is committed in part, and shown nowhere.
        while not Session.objects.filter(incomplete=True).exists():
            assert importing.is_alive(), "the import ended before its session was half-written"
            time.sleep(0.01)
        half = Session.objects.get(incomplete=True)
        detail = reverse("dashboard:session_detail", args=[half.public_id])
        answers.append(("the half-written session's page", owners.get(detail).status_code))
        listed = owners.get(reverse("dashboard:session_list")).content.decode()
        assert half.public_id not in listed

        answers.extend(_another_user(teammate, theirs))
        assert importing.is_alive(), "the import ended before the requests: make it longer"
        answers.append(("cancel", send(owners, job, "cancel").status_code))
    finally:
        importing.join(timeout=120)

    assert answers == [
        ("the half-written session's page", 404),
        ("login", 302),
        ("fork", 303),
        ("upload", 303),
        ("logout", 302),
        ("cancel", 303),
    ]
    job.refresh_from_db()
    assert job.status == ImportJob.Status.CANCELLED
    # The cancelled session is deleted, not left half-written.
    assert not Session.objects.filter(owner=owner).exists()
    assert not Session.objects.filter(incomplete=True).exists()
    assert Session.objects.filter(owner=teammate, parent=theirs).count() == 1
    assert ImportJob.objects.filter(owner=teammate, status=ImportJob.Status.QUEUED).count() == 1


def _another_user(user: User, session: Session) -> list[tuple[str, int]]:
    client = Client(raise_request_exception=False)
    answers: list[tuple[str, Any]] = []
    login = client.post(reverse("login"), {"username": user.username, "password": _PASSWORD})
    answers.append(("login", login.status_code))
    fork = confirm(client, reverse("dashboard:fork_confirm", args=[session.public_id, 1]))
    answers.append(("fork", fork.status_code))
    sent = client.post(
        reverse("dashboard:import_upload"),
        {**upload_token(client), "file": _file("mine.json", as_json(CHAT)), "threshold": 3000},
    )
    answers.append(("upload", sent.status_code))
    answers.append(("logout", client.post(reverse("logout")).status_code))
    return answers


_PASSWORD = "teammate-pass-1234"  # the ``teammate`` fixture's


def _paced(messages: Iterable[ChatMessage]) -> Iterator[list[ChatMessage]]:
    for batch in ingest.batched(messages):
        time.sleep(PACE_S)
        yield batch


def _file(name: str, data: bytes) -> Any:
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data)
