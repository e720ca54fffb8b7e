"""Import jobs on the RQ backend (MOTUS_TASK_BACKEND=rq): enqueued to Redis, run by an RQ worker."""

from __future__ import annotations

import os
from collections.abc import Iterator

import django_rq
import pytest
from django.contrib.auth.models import User
from django_tasks_rq import Job
from pytest_django import Settings
from rq import Queue, SimpleWorker

from motus_web.sessions.models import ImportJob, Session

from .helpers import logged_in, run_tasks
from .test_import_jobs import THREE_RUNS, upload

REDIS_URL = os.environ.get("REDIS_URL", "")
pytestmark = [
    pytest.mark.skipif(not REDIS_URL, reason="the RQ backend needs Redis (REDIS_URL)"),
    pytest.mark.django_db(transaction=True),  # RQ's task is sent when the upload commits
]


@pytest.fixture
def rq_backend(settings: Settings) -> Iterator[Queue]:
    """The RQ backend on REDIS_URL, as MOTUS_TASK_BACKEND=rq configures it; its empty queue."""
    settings.RQ_QUEUES = {"default": {"URL": REDIS_URL}}
    settings.TASKS = {"default": {"BACKEND": "django_tasks_rq.RQBackend", "QUEUES": ["default"]}}
    queue = django_rq.get_queue("default", job_class=Job)
    queue.empty()
    yield queue
    queue.empty()


def test_an_upload_is_queued_in_redis_and_run_by_an_rq_worker(
    owner: User, rq_backend: Queue
) -> None:
    job = upload(logged_in(owner), data=THREE_RUNS)

    assert job.status == ImportJob.Status.QUEUED
    assert rq_backend.count == 1
    assert run_tasks() == 0  # nothing for the database backend's worker
    SimpleWorker([rq_backend], connection=rq_backend.connection, job_class=Job).work(burst=True)

    job.refresh_from_db()
    assert (job.status, job.sessions_imported) == (ImportJob.Status.DONE, 3)
    assert Session.objects.filter(owner=owner).count() == 3
    assert rq_backend.count == 0
