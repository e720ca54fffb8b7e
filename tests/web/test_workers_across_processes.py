"""Two task workers (``manage.py db_worker``) on one queue, as separate processes.

Every job runs once; a worker killed with SIGKILL in the middle of a job
leaves it resumable: it is seen as interrupted, and "import again" (run by the
other worker) finds what was committed and adds nothing twice. PostgreSQL only:
the workers share the test database with this process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django_tasks_db.models import DBTaskResult
from pytest_django import Settings

from motus_web.sessions import jobs
from motus_web.sessions.models import ImportJob, Session

from .helpers import logged_in
from .test_import_jobs import send, upload
from .test_importers import CHAT, as_jsonl

pytestmark = pytest.mark.django_db(transaction=True)
REPO = Path(__file__).resolve().parents[2]
Status = ImportJob.Status


@pytest.fixture
def workers(settings: Settings, tmp_path: Path) -> Iterator[Callable[[], subprocess.Popen[str]]]:
    """Starts ``db_worker`` processes on the test database and the test's spool."""
    if connection.vendor != "postgresql":
        pytest.skip("task workers in other processes share the database: needs PostgreSQL")
    params = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": (
            f"postgres://{params['USER']}@{params['HOST']}:{params['PORT']}/{params['NAME']}"
        ),
        "MOTUS_IMPORT_SPOOL_DIR": str(settings.MOTUS_IMPORT_SPOOL_DIR),
        "MOTUS_IMPORT_THREADS": "0",
        "MOTUS_TASK_BACKEND": "database",
    }
    started: list[subprocess.Popen[str]] = []

    def start() -> subprocess.Popen[str]:
        with (tmp_path / f"worker-{len(started)}.log").open("w") as log:
            worker = subprocess.Popen(
                [sys.executable, "manage.py", "db_worker", "--interval", "0.1", "--no-reload",
                 "--no-startup-delay", "-v", "0"],
                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, text=True,
            )  # fmt: skip
        started.append(worker)
        return worker

    yield start
    for worker in started:
        if worker.poll() is None:
            worker.send_signal(signal.SIGINT)
    for worker in started:
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


def wait_for(what: str, ready: Callable[[], bool], patience: float = 90.0) -> None:
    deadline = time.monotonic() + patience
    while not ready():
        if time.monotonic() > deadline:
            pytest.fail(f"still waiting for {what} after {patience} s")
        time.sleep(0.05)


def finished(*pks: int) -> Callable[[], bool]:
    # One query: a job claimed between two (queued, then running) would pass both.
    return lambda: (
        not ImportJob.objects.filter(
            pk__in=pks, status__in=[Status.RUNNING, Status.QUEUED]
        ).exists()
    )


def runs(count: int, tag: str) -> bytes:
    return as_jsonl(
        *({"messages": [*CHAT, {"role": "user", "content": f"{tag} {n}"}]} for n in range(count))
    )


def test_two_workers_run_every_job_once(owner: User, workers: Callable[[], object]) -> None:
    client = logged_in(owner)
    queued = [upload(client, f"f{n}.jsonl", runs(3, f"file {n}")) for n in range(8)]
    workers()
    workers()

    wait_for("eight jobs", finished(*(job.pk for job in queued)))

    assert set(ImportJob.objects.values_list("status", flat=True)) == {Status.DONE}
    assert Session.objects.filter(owner=owner).count() == 8 * 3
    assert {len(task.worker_ids) for task in DBTaskResult.objects.all()} == {1}
    ran_by = {task.worker_ids[0] for task in DBTaskResult.objects.all()}
    assert len(ran_by) == 2  # both took a share


def test_a_worker_killed_mid_job_leaves_it_resumable_and_import_again_adds_nothing_twice(
    owner: User, workers: Callable[[], subprocess.Popen[str]]
) -> None:
    client: Client = logged_in(owner)
    total = 120
    job = upload(client, "long.jsonl", runs(total, "long"))
    first = workers()
    wait_for(
        "the first sessions",
        lambda: ImportJob.objects.filter(pk=job.pk, sessions_imported__gte=3).exists(),
    )
    job.refresh_from_db()
    assert job.status == Status.RUNNING
    assert f":{first.pid}:" in job.worker

    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    # A session killed between its rows and its completion stays incomplete, replaced below.
    committed = Session.objects.filter(owner=owner, incomplete=False).count()
    assert 3 <= committed < total

    # The job page, right after: the runner is gone.
    page = client.get(f"/import/jobs/{job.public_id}/")
    assert "Interrupted" in page.content.decode()
    workers()
    assert send(client, job, "retry").status_code == 303
    wait_for("the job imported again", finished(job.pk))

    job.refresh_from_db()
    assert job.status == Status.DONE
    assert Session.objects.filter(owner=owner).count() == total  # each run once
    report = jobs.report_of(job)
    assert len(report.skipped) >= committed  # what the killed worker committed was found
    assert len(report.imported) + len(report.skipped) == total


def test_a_database_connection_dropped_mid_import_rolls_the_session_back_and_again_completes(
    owner: User, workers: Callable[[], subprocess.Popen[str]]
) -> None:
    """Dropped inside the import's transaction, what it held is rolled back and the
    job interrupted; between two, the pool's health check hands out a new
    connection and the job goes on. Either way no session is shown half-written
    (one committed in part stays ``incomplete``) and, after import again, each is
    there once, complete."""
    client: Client = logged_in(owner)
    total, length = 12, 600
    long_runs = as_jsonl(
        *(
            {"messages": [{"role": "user", "content": f"run {n} turn {t}"} for t in range(length)]}
            for n in range(total)
        )
    )
    job = upload(client, "long.jsonl", long_runs)
    workers()
    wait_for(
        "the first sessions",
        lambda: ImportJob.objects.filter(pk=job.pk, sessions_imported__gte=2).exists(),
    )

    with connection.cursor() as cursor:  # the worker's connections drop
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    wait_for("the job to stop", finished(job.pk))

    job.refresh_from_db()
    kept = list(Session.objects.filter(owner=owner, incomplete=False))
    assert all(s.message_count == s.messages.count() == length for s in kept)  # none half-written
    if job.status == Status.DONE:
        # The drop came between two transactions: the next query had a new connection.
        assert len(kept) == total, jobs.report_of(job).problems
        return
    assert job.status == Status.INTERRUPTED
    assert "The connection to the database was lost during this import" in job.error
    assert 2 <= len(kept) < total
    assert send(client, job, "retry").status_code == 303
    wait_for("the job imported again", finished(job.pk))

    job.refresh_from_db()
    assert job.status == Status.DONE
    sessions = Session.objects.filter(owner=owner)
    assert sessions.count() == total
    assert not sessions.filter(incomplete=True).exists()  # a half-written one was replaced
    assert all(s.message_count == s.messages.count() == length for s in sessions)
