"""Uploads run as import jobs: kept, queued, run outside the request, watched and cancelled."""

from __future__ import annotations

import io
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.db import OperationalError, connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from pytest_django import Settings

from motus_web.sessions import jobs, runners
from motus_web.sessions.importers import (
    ImportCancelled,
    ImportOptions,
    Progress,
    commits,
    import_stream,
)
from motus_web.sessions.models import ImportJob, Session
from motus_web.sessions.signals import records_committed

from .helpers import confirmation_form, logged_in, run_tasks, upload_token
from .test_importers import CHAT, as_json, as_jsonl

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
THREE_RUNS = as_jsonl(*({"messages": CHAT} for _ in range(3)))
Status = ImportJob.Status


def upload(client: Client, name: str = "runs.jsonl", data: bytes = THREE_RUNS) -> ImportJob:
    response = client.post(
        reverse("dashboard:import_upload"),
        {**upload_token(client), "file": SimpleUploadedFile(name, data), "threshold": 3000},
    )
    assert response.status_code == 303, response.content.decode()
    job = ImportJob.objects.get(public_id=response["Location"].rstrip("/").rsplit("/", 1)[-1])
    assert response["Location"] == job_url(job)
    return job


def job_url(job: ImportJob, action: str = "") -> str:
    name = f"dashboard:import_job_{action}" if action else "dashboard:import_job"
    return reverse(name, args=[job.public_id])


def send(client: Client, job: ImportJob, action: str) -> Any:
    """Send the job page's form for ``action`` ("cancel", "retry") as a person would."""
    page = client.get(job_url(job)).content.decode()
    form_url, hidden = confirmation_form(page, job_url(job, action))
    return client.post(form_url, hidden)


def spooled(settings: Settings) -> list[Path]:
    folder = Path(settings.MOTUS_IMPORT_SPOOL_DIR)
    return sorted(folder.iterdir()) if folder.exists() else []


@pytest.fixture
def committed() -> Iterator[list[str]]:
    """The public ids of sessions as their transactions commit."""
    heard: list[str] = []

    def receiver(session_id: str, **kwargs: Any) -> None:
        heard.append(session_id)

    records_committed.connect(receiver)
    yield heard
    records_committed.disconnect(receiver)


# -- the upload --------------------------------------------------------------------------


def test_an_upload_is_kept_and_queued_and_the_request_imports_nothing(
    owner: User, settings: Settings
) -> None:
    job = upload(logged_in(owner))

    assert job.status == Status.QUEUED
    assert job.owner == owner
    assert job.file_name == "runs.jsonl"
    assert job.bytes_total == len(THREE_RUNS)
    [kept] = spooled(settings)
    assert kept.name == job.spool_name
    assert kept.read_bytes() == THREE_RUNS
    assert not Session.objects.exists()


def test_the_queued_job_page_polls_with_htmx_and_refreshes_without_it(owner: User) -> None:
    client = logged_in(owner)
    job = upload(client)

    page = client.get(job_url(job))
    fragment = client.get(job_url(job), headers=HTMX)

    html = page.content.decode()
    assert "Queued" in html
    assert '<noscript><meta http-equiv="refresh" content="2"></noscript>' in html
    assert 'hx-trigger="every 1s"' in html
    assert fragment.content.decode().strip().startswith('<div id="job-status"')
    assert "<html" not in fragment.content.decode()
    assert 'hx-trigger="every 1s"' in fragment.content.decode()
    assert page["Vary"] == fragment["Vary"]
    assert "HX-Request" in page["Vary"]


def test_a_finished_job_page_stops_polling(owner: User) -> None:
    client = logged_in(owner)
    job = upload(client)
    run_tasks()

    for response in (client.get(job_url(job)), client.get(job_url(job), headers=HTMX)):
        html = response.content.decode()
        assert "Imported 3 sessions from runs.jsonl." in html
        assert "hx-trigger" not in html
        assert "http-equiv" not in html
        assert job_url(job, "cancel") not in html


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"hello, world", "The file is not JSON or JSONL"),
        (b"", "The submitted file is empty."),
        ("[]".encode("utf-16"), "the file is UTF-16 text: save it as UTF-8"),
    ],
)
def test_a_file_whose_start_shows_it_cannot_be_imported_is_refused_at_once(
    owner: User, settings: Settings, data: bytes, reason: str
) -> None:
    response = logged_in(owner).post(
        reverse("dashboard:import_upload"),
        {"file": SimpleUploadedFile("notes.json", data), "threshold": 3000},
    )

    assert response.status_code == 400
    assert reason in response.content.decode()
    assert not ImportJob.objects.exists()
    assert spooled(settings) == []


class _BreaksMidway(SimpleUploadedFile):
    def chunks(self, chunk_size: int | None = None) -> Iterator[bytes]:
        yield self.read(10)
        raise OSError(28, "No space left on device")


def test_an_upload_that_cannot_be_written_leaves_no_file_and_no_job(
    owner: User, settings: Settings
) -> None:
    with pytest.raises(OSError, match="No space left"):
        jobs.create(_BreaksMidway("a.json", as_json(CHAT)), "a.json", owner, None)

    assert spooled(settings) == []
    assert not ImportJob.objects.exists()


# -- running -------------------------------------------------------------------------------


def test_the_runner_imports_the_file_records_the_report_and_deletes_the_file(
    owner: User, settings: Settings
) -> None:
    job = upload(logged_in(owner), data=THREE_RUNS + b"{oops\n")

    assert run_tasks() == 1

    job.refresh_from_db()
    assert job.status == Status.DONE
    assert job.started_at is not None
    assert job.finished_at is not None
    assert job.bytes_read == job.bytes_total
    assert job.sessions_imported == 3
    assert job.messages_imported == sum(s.message_count for s in Session.objects.all()) > 0
    assert job.problem_count == 1
    report = jobs.report_of(job)
    assert sorted(report.imported) == sorted(Session.objects.values_list("public_id", flat=True))
    [problem] = report.problems
    assert (problem.source, problem.location) == ("runs.jsonl", "line 4")
    assert problem.message.startswith("invalid JSON")
    assert spooled(settings) == []
    assert run_tasks() == 0


def test_the_refused_sessions_of_a_run_are_listed_with_their_reasons(owner: User) -> None:
    client = logged_in(owner)
    runs = as_jsonl({"messages": CHAT}, {"messages": [{"role": ["user"]}]})
    job = upload(client, "runs.jsonl", runs)
    run_tasks()

    html = client.get(job_url(job)).content.decode()

    assert "1 session imported, 0 already there. This could not be imported:" in html
    assert "runs.jsonl: line 2, message 1: field &#x27;role&#x27;: expected a string" in html
    [session] = Session.objects.all()
    assert reverse("dashboard:session_detail", args=[session.public_id]) in html


@pytest.fixture
def commit_per_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each session of a small file committed on its own (it ends past the bound)."""
    monkeypatch.setattr(commits, "COMMIT_MESSAGES", 1)


@pytest.mark.django_db(transaction=True)
def test_progress_is_written_after_each_commit(
    owner: User, committed: list[str], commit_per_session: None
) -> None:
    job = upload(logged_in(owner))
    seen: list[tuple[int, int, int]] = []

    def look(**kwargs: Any) -> None:
        row = ImportJob.objects.get(pk=job.pk)
        seen.append((row.sessions_imported, row.messages_imported, row.bytes_read))

    records_committed.connect(look)
    try:
        run_tasks()
    finally:
        records_committed.disconnect(look)

    # Each session's commit sees the figures written after the one before it.
    assert [sessions for sessions, _, _ in seen] == [0, 1, 2]
    assert seen[1][1] > 0
    assert seen[2][1] == 2 * seen[1][1]
    assert seen[0][2] <= seen[1][2] <= seen[2][2]
    job.refresh_from_db()
    assert (job.sessions_imported, job.status) == (3, Status.DONE)


@pytest.mark.django_db(transaction=True)  # the worker's loop wants autocommit, as in production
def test_the_database_backends_worker_command_runs_the_queued_jobs(owner: User) -> None:
    job = upload(logged_in(owner))
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    try:
        call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)

    job.refresh_from_db()
    assert job.status == Status.DONE
    assert Session.objects.count() == 3


def test_two_runners_never_claim_one_job(owner: User) -> None:
    job = upload(logged_in(owner))

    first, second = jobs.claim(job.pk), jobs.claim(job.pk)

    assert first is not None
    assert first.status == Status.RUNNING
    assert first.worker == jobs.worker_id()
    assert second is None


# -- cancelling ----------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_cancel_stops_the_job_between_sessions_and_keeps_what_was_committed(
    owner: User, settings: Settings, committed: list[str], commit_per_session: None
) -> None:
    client = logged_in(owner)
    job = upload(client)

    def cancel_after_the_first(**kwargs: Any) -> None:
        if len(committed) == 1:
            assert send(client, job, "cancel").status_code == 303

    records_committed.connect(cancel_after_the_first)
    try:
        run_tasks()
    finally:
        records_committed.disconnect(cancel_after_the_first)

    job.refresh_from_db()
    assert job.status == Status.CANCELLED
    [session] = Session.objects.all()
    assert jobs.report_of(job).imported == [session.public_id] == committed
    assert session.message_count == session.messages.count() > 0
    assert spooled(settings) == []
    html = client.get(job_url(job)).content.decode()
    assert "Cancelled: the sessions finished before stay imported" in html
    assert reverse("dashboard:session_detail", args=[session.public_id]) in html


def test_a_checkpoint_that_cancels_mid_session_deletes_that_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(commits, "COMMIT_MESSAGES", 1)  # its first batch is committed
    short = {"messages": CHAT}
    long = {"messages": [{"role": "user", "content": f"turn {n}"} for n in range(1200)]}
    data = as_jsonl(short, long)

    def checkpoint(progress: Progress) -> None:
        if progress.messages_read > 600:  # after the long session's second batch
            raise ImportCancelled

    report = import_stream(io.BytesIO(data), "f.jsonl", ImportOptions(checkpoint=checkpoint))

    assert report.cancelled
    [kept] = Session.objects.all()
    assert report.imported == [kept.public_id]
    assert kept.message_count == len(CHAT) - 1  # the system prompt is no message
    assert report.messages == kept.message_count


def test_cancelling_a_queued_job_ends_it_at_once(owner: User, settings: Settings) -> None:
    client = logged_in(owner)
    job = upload(client)

    assert send(client, job, "cancel").status_code == 303

    job.refresh_from_db()
    assert job.status == Status.CANCELLED
    assert spooled(settings) == []
    assert run_tasks() == 0
    assert not Session.objects.exists()


def test_the_same_cancel_form_sent_twice_is_told_it_was_done(owner: User) -> None:
    client = logged_in(owner)
    job = upload(client)
    page = client.get(job_url(job)).content.decode()
    form_url, hidden = confirmation_form(page, job_url(job, "cancel"))

    first, second = client.post(form_url, hidden), client.post(form_url, hidden)

    assert (first.status_code, second.status_code) == (303, 409)
    assert "Already done" in second.content.decode()
    assert job_url(job) in second.content.decode()


def test_an_import_again_form_of_a_job_that_changed_since_is_refused_naming_its_state(
    owner: User,
) -> None:
    client = logged_in(owner)
    job = upload(client)
    running(job, f"{socket.gethostname()}:{dead_pid()}:1:earlier")
    jobs.interrupt_stale()
    page = client.get(job_url(job)).content.decode()
    form_url, hidden = confirmation_form(page, job_url(job, "retry"))
    send(client, job, "cancel")  # another tab discards the file first

    response = client.post(form_url, hidden)

    assert response.status_code == 409
    assert "The job is cancelled now; the page showed it interrupted" in response.content.decode()
    job.refresh_from_db()
    assert job.status == Status.CANCELLED


def test_cancel_is_a_post(owner: User) -> None:
    client = logged_in(owner)
    job = upload(client)

    assert client.get(job_url(job, "cancel")).status_code == 405
    job.refresh_from_db()
    assert job.status == Status.QUEUED


# -- a runner that died --------------------------------------------------------------------


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def running(job: ImportJob, worker: str, heartbeat_age: timedelta = timedelta(0)) -> None:
    now = timezone.now()
    ImportJob.objects.filter(pk=job.pk).update(
        status=Status.RUNNING, worker=worker, started_at=now, heartbeat_at=now - heartbeat_age
    )


def test_a_job_left_running_by_a_dead_process_becomes_interrupted_and_can_run_again(
    owner: User, settings: Settings
) -> None:
    client = logged_in(owner)
    job = upload(client)
    running(job, f"{socket.gethostname()}:{dead_pid()}:1:earlier")

    assert run_tasks() == 0

    job.refresh_from_db()
    assert job.status == Status.INTERRUPTED
    assert "The server stopped while this file was being imported" in job.error
    assert [path.name for path in spooled(settings)] == [job.spool_name]
    html = client.get(job_url(job)).content.decode()
    assert "Import again" in html
    assert "Discard the file" in html

    assert send(client, job, "retry").status_code == 303
    assert run_tasks() == 1
    job.refresh_from_db()
    assert (job.status, job.sessions_imported, job.error) == (Status.DONE, 3, "")


def test_a_runner_elsewhere_is_dead_only_when_silent_for_the_stale_time(
    owner: User, settings: Settings
) -> None:
    settings.MOTUS_IMPORT_STALE_SECONDS = 600
    client = logged_in(owner)
    silent, recent, ours = upload(client), upload(client, "b.json"), upload(client, "c.json")
    running(silent, "elsewhere:12:34:token", heartbeat_age=timedelta(seconds=601))
    running(recent, "elsewhere:12:34:token", heartbeat_age=timedelta(seconds=30))
    # Claimed by this process, which no longer runs it (its thread died).
    running(ours, jobs.worker_id(), heartbeat_age=timedelta(seconds=1))

    assert jobs.interrupt_stale() == 2

    statuses = {job.pk: job.status for job in ImportJob.objects.all()}
    assert statuses == {
        silent.pk: Status.INTERRUPTED,
        recent.pk: Status.RUNNING,
        ours.pk: Status.INTERRUPTED,
    }


@pytest.fixture
def live_process() -> Iterator[int]:
    """The pid of a process that runs for the test."""
    child = subprocess.Popen(["sleep", "60"])
    yield child.pid
    child.kill()
    child.wait()


def test_a_runner_whose_pid_now_names_another_process_is_dead(
    owner: User, live_process: int
) -> None:
    client = logged_in(owner)
    reused, same, silent = upload(client), upload(client, "b.json"), upload(client, "c.json")
    host, start = socket.gethostname(), runners.process_start(live_process)
    # The runner of ``reused`` had this pid in an earlier container: another start time.
    running(reused, f"{host}:{live_process}:{int(start) - 1}:earlier")
    running(same, f"{host}:{live_process}:{start}:token")
    running(silent, f"{host}:{live_process}:{start}:token", heartbeat_age=timedelta(days=1))

    assert jobs.interrupt_stale() == 2

    statuses = {job.pk: job.status for job in ImportJob.objects.all()}
    assert statuses == {
        reused.pk: Status.INTERRUPTED,
        same.pk: Status.RUNNING,
        silent.pk: Status.INTERRUPTED,
    }


def test_the_job_page_right_after_a_restart_says_interrupted(owner: User) -> None:
    client = logged_in(owner)
    job = upload(client)
    running(job, f"{socket.gethostname()}:{dead_pid()}:1:before-the-restart")

    html = client.get(job_url(job)).content.decode()

    assert "Interrupted" in html
    assert "Importing…" not in html
    assert "Import again" in html
    job.refresh_from_db()
    assert job.status == Status.INTERRUPTED


def test_a_job_stopped_at_the_message_cap_does_not_say_it_read_the_whole_file(
    owner: User, settings: Settings
) -> None:
    settings.MOTUS_UPLOAD_MAX_MESSAGES = len(CHAT)  # the first run fits, the second does not
    client = logged_in(owner)
    many_runs = as_jsonl(*({"messages": CHAT} for _ in range(2000)))  # past the read buffer
    job = upload(client, data=many_runs)

    assert run_tasks() == 1

    job.refresh_from_db()
    assert jobs.report_of(job).stopped
    assert job.status == Status.DONE
    assert 0 < job.bytes_read < job.bytes_total
    assert job.percent < 100
    assert "(100%)" not in client.get(job_url(job)).content.decode()


def test_uploads_wait_in_the_configured_storage(owner: User, settings: Settings) -> None:
    settings.STORAGES = {
        **settings.STORAGES,
        "motus_imports": {"BACKEND": "django.core.files.storage.InMemoryStorage"},
    }
    job = upload(logged_in(owner))

    assert jobs.spool().exists(job.spool_name)
    assert spooled(settings) == []  # nothing in the local folder
    assert run_tasks() == 1
    job.refresh_from_db()
    assert (job.status, job.sessions_imported) == (Status.DONE, 3)
    assert not jobs.spool().exists(job.spool_name)


def test_discarding_an_interrupted_job_deletes_its_file(owner: User, settings: Settings) -> None:
    client = logged_in(owner)
    job = upload(client)
    running(job, f"{socket.gethostname()}:{dead_pid()}:1:earlier")
    jobs.interrupt_stale()

    assert send(client, job, "cancel").status_code == 303

    job.refresh_from_db()
    assert job.status == Status.CANCELLED
    assert spooled(settings) == []


# -- who may see and cancel ----------------------------------------------------------------


def test_only_the_owner_and_staff_see_a_job(
    client: Client, owner: User, teammate: User, staff: User
) -> None:
    job = upload(logged_in(owner))

    assert logged_in(owner).get(job_url(job)).status_code == 200
    assert logged_in(staff).get(job_url(job)).status_code == 200
    assert logged_in(teammate).get(job_url(job)).status_code == 404
    anonymous = client.get(job_url(job))
    assert anonymous.status_code == 302
    assert anonymous["Location"].startswith(reverse("login"))


def test_only_the_owner_and_staff_cancel_a_job(
    client: Client, owner: User, teammate: User, staff: User
) -> None:
    job, staffs = upload(logged_in(owner)), upload(logged_in(owner), "b.json")

    assert logged_in(teammate).post(job_url(job, "cancel")).status_code == 404
    assert client.post(job_url(job, "cancel")).status_code == 302  # to the login page
    assert logged_in(teammate).post(job_url(job, "retry")).status_code == 404
    job.refresh_from_db()
    assert job.status == Status.QUEUED
    assert send(logged_in(staff), staffs, "cancel").status_code == 303
    staffs.refresh_from_db()
    assert staffs.status == Status.CANCELLED


def test_a_cancel_without_the_csrf_token_is_refused(owner: User) -> None:
    job = upload(logged_in(owner))
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)

    assert client.post(job_url(job, "cancel")).status_code == 403
    job.refresh_from_db()
    assert job.status == Status.QUEUED


def test_the_import_page_lists_only_your_own_recent_jobs(owner: User, teammate: User) -> None:
    job = upload(logged_in(owner), "mine.json", as_json(CHAT))

    assert job_url(job) in logged_in(owner).get(reverse("dashboard:import_form")).content.decode()
    theirs = logged_in(teammate).get(reverse("dashboard:import_form")).content.decode()
    assert job_url(job) not in theirs


# -- the web process's thread --------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_web_process_thread_runs_an_uploaded_job(owner: User, settings: Settings) -> None:
    settings.MOTUS_IMPORT_THREADS = 2
    job = upload(logged_in(owner))

    assert wait_until_finished(job).status == Status.DONE
    assert Session.objects.filter(owner=owner).count() == 3
    assert spooled(settings) == []


def wait_until_finished(job: ImportJob, patience: float = 120.0) -> ImportJob:
    """The job's row once it is finished; fails the test after ``patience`` seconds."""
    deadline = time.monotonic() + patience
    while time.monotonic() < deadline:
        try:
            job.refresh_from_db()
        except OperationalError:
            # SQLite's shared in-memory test database locks a table being written.
            continue
        if job.finished:
            return job
        time.sleep(0.02)
    pytest.fail(f"the import job is still {job.status} after {patience} seconds")


@pytest.mark.django_db(transaction=True)
def test_one_slow_job_does_not_hold_the_next(
    owner: User, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip(
            "two writing threads need PostgreSQL (DATABASE_URL): SQLite's test database "
            "is in memory, where a writer cannot wait"
        )
    settings.MOTUS_IMPORT_THREADS = 2
    second_done = threading.Event()
    checkpoint = jobs._Tracker.__call__

    def slow_first(tracker: Any, progress: Progress) -> None:
        if tracker.pk == slow.pk and not progress.in_transaction:
            second_done.wait(timeout=60)  # held until the other job is done
        checkpoint(tracker, progress)

    monkeypatch.setattr(jobs._Tracker, "__call__", slow_first)
    client = logged_in(owner)
    slow = upload(client, "slow.jsonl")
    quick = upload(client, "quick.json", as_json(CHAT))

    assert wait_until_finished(quick, patience=30).status == Status.DONE
    second_done.set()
    assert wait_until_finished(slow).status == Status.DONE
    assert Session.objects.filter(owner=owner).count() == 4


def test_an_upload_of_a_grown_transcript_says_updated_and_names_the_lines_it_skipped(
    owner: User,
) -> None:
    from .test_import_updates import transcript

    client = logged_in(owner)
    upload(client, "s.jsonl", transcript("q1", "a1"))
    run_tasks()
    grown = transcript("q1", "a1", "q2", "a2") + b'{"type": "user", "cut'
    job = upload(client, "s.jsonl", grown)
    run_tasks()

    html = client.get(job_url(job)).content.decode()

    assert "Updated 1 session from s.jsonl with what was new." in html
    assert "session 1: <a" in html
    assert "+2 messages" in html
    assert "Damaged line skipped" in html
    assert "s.jsonl: line 5: invalid JSON" in html
    assert Session.objects.get().message_count == 4
