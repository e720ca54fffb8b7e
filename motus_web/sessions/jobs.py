"""Import jobs: an uploaded file is kept, then imported by a task worker.

The upload view calls ``create``: the file is saved in the ``motus_imports``
storage (Django's storage API, so a worker on another machine reads it from
shared storage), then a queued ``ImportJob`` row is written and ``run_job`` is
enqueued through Django's Tasks interface (``django-tasks``: the database
backend of ``django-tasks-db`` by default, RQ by settings). The engine claims,
hands out and records the task; this module keeps what the pages show: the
row's progress, refusals, cancel and "import again". The row is claimed once
more (queued -> running, a conditional update), so a task delivered twice
runs its job once.

Progress goes to the job row when the import has just committed (between its
short transactions, ``importers.commits``); while a transaction is open (on
SQLite it holds the database's write lock) this process keeps the latest
figures in memory too and its pages show those (``with_live_progress``).

Cancelling is cooperative: ``cancel`` sets the in-process event first (so the
import stops at its next checkpoint even while the row waits for SQLite's write
lock), then the row's flag, which a runner in another process sees at its next
checkpoint. The session being written is deleted; the finished ones stay.

On a crash: a crash while the upload is saved leaves a file that no job names
(``interrupt_stale`` removes such files after a day); a crash while a job runs
leaves it ``running`` under a runner that is gone: ``interrupt_stale`` (run by
the job's page and by every task) marks it ``interrupted`` and keeps its file,
so that it can be imported again (the sessions it committed are then found
and skipped). A runner is alive only while its heartbeat is fresh and, on its
own host, its process (pid and start time, so a reused pid does not pass) exists.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from datetime import timedelta
from functools import partial
from typing import Any, BinaryIO, cast

from django.conf import settings
from django.contrib.auth.models import User
from django.core.files.storage import Storage, storages
from django.core.files.uploadedfile import UploadedFile
from django.db import InterfaceError, OperationalError, connection, transaction
from django.utils import timezone
from django_tasks import task, task_backends
from django_tasks_db import DatabaseBackend
from django_tasks_db.management.commands.db_worker import Worker

from memory import LogProblem, MotusMemoryError

from .importers import (
    ImportCancelled,
    ImportOptions,
    ImportReport,
    Outcome,
    Problem,
    Progress,
    Skipped,
    import_stream,
)
from .models import ImportJob
from .operations import (
    NotALogError,
    NothingToForkError,
    TooManyMessagesError,
    is_message_line,
    restore_from_file,
    scope_dropped,
)
from .runners import elsewhere_alive, worker_id

logger = logging.getLogger(__name__)

Status = ImportJob.Status
INTERRUPTED = (
    "The server stopped while this file was being imported. The sessions it had "
    "committed are kept; the ones it was writing are not shown. Import it again to "
    "finish: what is already there is skipped, what was half-written is written anew."
)
LOST_DATABASE = (
    "The connection to the database was lost during this import. The sessions it had "
    "committed are kept; the ones it was writing are not shown. Import it again to "
    "finish: what is already there is skipped, what was half-written is written anew."
)
NOT_QUEUED = (
    "The task queue could not be reached, so the file was not queued for import. "
    "Import it again when the queue is back."
)
RESTORE = "restore"  # ``options["kind"]`` of a job that restores a Motus log
_LOCKED_RETRY_SECONDS = 0.5
_ORPHAN_MAX_AGE = timedelta(days=1)  # how long a file no job names is kept

_lock = threading.Lock()
_wakeup = threading.Condition(_lock)
_pending = 0  # wake-ups the import threads have not yet answered
_threads: list[threading.Thread] = []
_cancels: dict[int, threading.Event] = {}  # running here: job pk -> its cancel event
_live: dict[int, dict[str, int]] = {}  # running here: job pk -> its latest progress


def spool() -> Storage:
    """Where uploads wait for their job: the ``motus_imports`` storage."""
    return storages["motus_imports"]


# -- creating and steering jobs ------------------------------------------------------


def create(
    upload: UploadedFile,
    name: str,
    owner: User,
    replay_threshold: int | None,
    *,
    kind: str = "import",
    title: str = "",
) -> ImportJob:
    """Keep ``upload`` in the spool storage, queue a job that imports it, enqueue its task.

    ``kind`` is ``"import"`` (the importers) or ``RESTORE`` (a Motus log
    restored into a new session named ``title``). Raises ``OSError`` when the
    file cannot be kept; nothing is left behind then (a crash mid-save leaves a
    file that no job names, removed after a day). When the task queue cannot
    be reached the job is failed with ``NOT_QUEUED`` and its file kept.
    """
    storage = spool()
    spool_name = f"{uuid.uuid4().hex}.upload"
    try:
        saved = storage.save(spool_name, upload)
    except BaseException:
        storage.delete(spool_name)
        raise
    try:
        job = ImportJob.objects.create(
            owner=owner,
            file_name=name,
            spool_name=saved,
            options={"replay_threshold": replay_threshold, "kind": kind, "title": title},
            bytes_total=upload.size or storage.size(saved),
        )
    except BaseException:
        storage.delete(saved)
        raise
    enqueue(job)
    return job


def enqueue(job: ImportJob) -> None:
    """Hand ``job`` (queued) to the task backend; this process's import threads
    look for it once the caller's transaction commits.

    The database backend's task row is written in the caller's transaction
    (both or neither are kept); another backend's task is sent after the
    commit, so a worker never looks for a row it cannot see yet. An
    unreachable queue (Redis down under RQ) leaves the job interrupted with
    ``NOT_QUEUED``, to be imported again.
    """
    if _database_backend():
        _enqueue(job.pk)
        transaction.on_commit(wake)
    else:
        transaction.on_commit(partial(_enqueue, job.pk))


def _enqueue(job_pk: int) -> None:
    try:
        run_job.enqueue(job_pk)
    except Exception:
        logger.exception("could not enqueue import job %s", job_pk)
        ImportJob.objects.filter(pk=job_pk, status=Status.QUEUED).update(
            status=Status.INTERRUPTED, finished_at=timezone.now(), error=NOT_QUEUED
        )


def cancel(job: ImportJob) -> None:
    """Stop ``job``: a queued or interrupted one at once (its file is deleted), a
    running one at its next checkpoint. A finished job is left as it is."""
    # The event first: on SQLite the updates below wait for the session being
    # written to commit, and the event is what makes it stop.
    with _lock:
        event = _cancels.get(job.pk)
    if event is not None:
        event.set()
    stopped = ImportJob.objects.filter(
        pk=job.pk, status__in=[Status.QUEUED, Status.INTERRUPTED]
    ).update(status=Status.CANCELLED, finished_at=timezone.now(), error="")
    if stopped:
        spool().delete(job.spool_name)
        return
    ImportJob.objects.filter(pk=job.pk, status=Status.RUNNING).update(cancel_requested=True)


def can_retry(job: ImportJob) -> bool:
    return job.status == Status.INTERRUPTED and spool().exists(job.spool_name)


def retry(job: ImportJob) -> bool:
    """Queue an interrupted job again, from the start of its kept file; whether it was."""
    if not spool().exists(job.spool_name):
        return False
    requeued = ImportJob.objects.filter(pk=job.pk, status=Status.INTERRUPTED).update(
        status=Status.QUEUED,
        error="",
        worker="",
        cancel_requested=False,
        started_at=None,
        heartbeat_at=None,
        finished_at=None,
        **_NO_PROGRESS,
    )
    if requeued:
        enqueue(job)
    return bool(requeued)


_NO_PROGRESS: dict[str, Any] = {
    "bytes_read": 0,
    "messages_read": 0,
    "sessions_imported": 0,
    "messages_imported": 0,
    "problem_count": 0,
    "report": {},
}


def with_live_progress(job: ImportJob) -> ImportJob:
    """``job`` with the progress this process holds for it, when it runs here."""
    with _lock:
        snapshot = _live.get(job.pk)
    if snapshot is not None and job.status == Status.RUNNING:
        for name, value in snapshot.items():
            setattr(job, name, max(value, getattr(job, name)))
    return job


# -- running jobs ------------------------------------------------------------------------


@task()
def run_job(job_pk: int) -> str | None:
    """The task: claim job ``job_pk`` and run it; its status at the end.

    A job that is no longer queued (cancelled, or run already by a task
    delivered before) is left as it is: ``None``.
    """
    interrupt_stale()
    job = claim(job_pk)
    if job is None:
        return None
    run(job)
    job.refresh_from_db(fields=["status"])
    return job.status


def claim(job_pk: int) -> ImportJob | None:
    """Job ``job_pk``, now running under this process; ``None`` unless it was queued."""
    # Registered first, so that from the claim on this process counts as its runner.
    with _lock:
        _cancels[job_pk] = threading.Event()
    now = timezone.now()
    taken = ImportJob.objects.filter(pk=job_pk, status=Status.QUEUED).update(
        status=Status.RUNNING, worker=worker_id(), started_at=now, heartbeat_at=now
    )
    if taken:
        return ImportJob.objects.select_related("owner").get(pk=job_pk)
    with _lock:
        _cancels.pop(job_pk, None)
    return None


def wake() -> None:
    """Have this process's import threads look for queued tasks, starting them if needed.

    Only with the database backend and ``MOTUS_IMPORT_THREADS`` > 0; otherwise
    ``manage.py db_worker`` (or RQ's worker) runs the tasks.
    """
    global _pending
    wanted = settings.MOTUS_IMPORT_THREADS
    if not wanted or not _database_backend():
        return
    with _lock:
        _threads[:] = [thread for thread in _threads if thread.is_alive()]
        while len(_threads) < wanted:
            name = f"motus-import-{len(_threads) + 1}"
            thread = threading.Thread(target=_serve, name=name, daemon=True)
            thread.start()
            _threads.append(thread)
        _pending = len(_threads)
        _wakeup.notify_all()


def _database_backend() -> bool:
    return isinstance(task_backends["default"], DatabaseBackend)


def _serve() -> None:
    """An import thread: when woken, run ready tasks with django-tasks-db's own
    worker loop (``batch``: until none is ready), then wait for the next wake-up."""
    global _pending
    while True:
        with _lock:
            while not _pending:
                _wakeup.wait()
            _pending -= 1
        try:
            Worker(
                queue_names=["default"],
                interval=0,
                batch=True,
                backend_name="default",
                startup_delay=False,
                max_tasks=None,
                worker_id=f"{threading.current_thread().name}:{worker_id()}"[-64:],
                excluded_queue_names=[],
            ).run()
        except OperationalError:
            # SQLite's write lock held past the busy timeout: look again shortly.
            logger.warning("an import thread found the database locked; it looks again")
            time.sleep(_LOCKED_RETRY_SECONDS)
            with _lock:
                _pending += 1
        except Exception:
            logger.exception("an import thread failed; it looks again at the next upload")
        finally:
            connection.close()  # an idle thread holds no database connection


def run(job: ImportJob) -> None:
    """Import the file of ``job`` (claimed: running under this process) and record the end.

    The import's own problems are the report's; anything else (the kept file is
    gone, a bug) fails the job with a message and is logged.
    """
    with _lock:
        cancelled = _cancels.setdefault(job.pk, threading.Event())
    tracker: _Tracker | None = None
    try:
        with spool().open(job.spool_name, "rb") as kept:
            stream = cast(BinaryIO, kept)  # a storage's File reads, seeks and tells
            tracker = _Tracker(job.pk, stream, cancelled)
            if job.options.get("kind") == RESTORE:
                report = _restore(job, stream, tracker)
            else:
                options = ImportOptions(
                    owner=job.owner,
                    replay_threshold=job.options.get("replay_threshold"),
                    max_messages=settings.MOTUS_UPLOAD_MAX_MESSAGES,
                    max_plain_bytes=settings.MOTUS_UPLOAD_MAX_PLAIN_BYTES,
                    checkpoint=tracker,
                )
                report = import_stream(stream, job.file_name, options)
        status = Status.CANCELLED if report.cancelled else Status.DONE
        _finish(job, status, report, tracker)
    except FileNotFoundError:
        _finish(job, Status.FAILED, None, tracker, "The uploaded file is gone from the spool.")
    except (OperationalError, InterfaceError):
        # The session being written was rolled back; its file is kept for "import again".
        logger.exception("import job %s lost the database", job.public_id)
        connection.close()  # the next query opens a new connection
        _finish(job, Status.INTERRUPTED, None, tracker, LOST_DATABASE)
    except Exception as error:
        logger.exception("import job %s failed", job.public_id)
        why = f"The import stopped on an error in Motus ({type(error).__name__}); "
        _finish(job, Status.FAILED, None, tracker, why + "the server log has the details.")
    finally:
        with _lock:
            _cancels.pop(job.pk, None)
            _live.pop(job.pk, None)


def _restore(job: ImportJob, stream: BinaryIO, tracker: _Tracker) -> ImportReport:
    """Restore the Motus log of a ``RESTORE`` job into a new session; its report."""
    title = job.options.get("title") or f"Restored from {job.file_name}"
    try:
        session, problems = restore_from_file(
            stream, job.owner, title, max_messages=settings.MOTUS_UPLOAD_MAX_MESSAGES
        )
    except (MotusMemoryError, NothingToForkError, NotALogError, TooManyMessagesError) as error:
        return ImportReport(problems=[Problem(job.file_name, "", str(error))])
    tracker.bytes_read = stream.tell()
    stream.seek(0)
    dropped = scope_dropped(stream, job.owner)
    stream.seek(0)
    tracker.messages_read = sum(1 for line in stream if is_message_line(line))
    # Lines the restore skipped refused nothing: warnings, worded as an import's.
    return ImportReport(
        imported=[session.public_id],
        warnings=[
            Problem(job.file_name, f"line {p.line}", f"skipped: {_skipped(p)}", warning=True)
            for p in problems
        ],
        messages=session.message_count,
        notes=[Problem(job.file_name, "line 1", dropped)] if dropped else [],
    )


def _skipped(problem: LogProblem) -> str:
    return f"{problem.error} (a torn last line)" if problem.torn else problem.error


class _Tracker:
    """The import's checkpoint: keeps the progress, and stops the import when asked."""

    def __init__(self, pk: int, stream: BinaryIO, cancelled: threading.Event) -> None:
        self.pk = pk
        self.stream = stream
        self.cancelled = cancelled
        self.messages_read = 0
        self.bytes_read = 0

    def __call__(self, progress: Progress) -> None:
        self.messages_read = progress.messages_read
        self.bytes_read = self.stream.tell()
        figures = {
            "bytes_read": self.bytes_read,
            "messages_read": progress.messages_read,
            "sessions_imported": len(progress.report.imported),
            "messages_imported": progress.report.messages,
            "problem_count": len(progress.report.problems),
        }
        with _lock:
            _live[self.pk] = figures
        if self.cancelled.is_set():
            raise ImportCancelled
        if progress.in_transaction:
            return  # a write now would be part of the import's uncommitted transaction
        # Also how another process's cancel is seen: the row no longer matches.
        written = ImportJob.objects.filter(
            pk=self.pk, status=Status.RUNNING, worker=worker_id(), cancel_requested=False
        ).update(heartbeat_at=timezone.now(), **figures)
        if not written:
            raise ImportCancelled


def _finish(
    job: ImportJob,
    status: str,
    report: ImportReport | None,
    tracker: _Tracker | None,
    error: str = "",
) -> None:
    now = timezone.now()
    fields: dict[str, Any] = {"status": status, "finished_at": now, "heartbeat_at": now}
    fields["error"] = error
    if report is not None and tracker is not None:
        fields.update(
            report=report_json(report),
            messages_read=tracker.messages_read,
            sessions_imported=len(report.imported),
            messages_imported=report.messages,
            problem_count=len(report.problems),
            # A job stopped at the message cap read only part of the file.
            bytes_read=tracker.bytes_read
            if report.stopped or status != Status.DONE
            else job.bytes_total,
        )
    # Only while it is still ours: a runner that took it for dead may have re-queued it.
    mine = ImportJob.objects.filter(pk=job.pk, status=Status.RUNNING, worker=worker_id())
    if mine.update(**fields) and status != Status.INTERRUPTED:
        spool().delete(job.spool_name)  # an interrupted job keeps it, to import again


def interrupt_stale() -> int:
    """Mark interrupted every running job whose runner is gone; how many were.

    Also removes uploads older than a day that no job names (a crash between
    saving the file and writing its job).
    """
    running = ImportJob.objects.filter(status=Status.RUNNING)
    interrupted = 0
    for pk, worker, heartbeat in running.values_list("pk", "worker", "heartbeat_at"):
        if not runner_alive(pk, worker, heartbeat):
            interrupted += _interrupt(pk, worker)
    _remove_orphans()
    return interrupted


def check_runner(job: ImportJob) -> ImportJob:
    """``job``, marked interrupted first if it is running under a runner that is gone
    (so a page shown right after a restart says "interrupted", not "running")."""
    if job.status == Status.RUNNING and not runner_alive(job.pk, job.worker, job.heartbeat_at):
        _interrupt(job.pk, job.worker)
        job.refresh_from_db()
    return job


def _interrupt(pk: int, worker: str) -> int:
    return ImportJob.objects.filter(pk=pk, status=Status.RUNNING, worker=worker).update(
        status=Status.INTERRUPTED, finished_at=timezone.now(), error=INTERRUPTED
    )


def runner_alive(pk: int, worker: str, heartbeat: Any) -> bool:
    """Whether the runner ``worker`` (a ``worker_id``) of running job ``pk`` is alive.

    This process: while the job runs here. Another: while its heartbeat is
    within ``MOTUS_IMPORT_STALE_SECONDS`` and, on this host, its pid names a
    process that started when the runner's did (a pid reused after a restart
    names another process).
    """
    if worker == worker_id():
        with _lock:
            return pk in _cancels
    return elsewhere_alive(worker, heartbeat)


def _remove_orphans() -> None:
    storage = spool()
    try:
        _, names = storage.listdir("")
    except FileNotFoundError:
        return
    old = timezone.now() - _ORPHAN_MAX_AGE
    named = set(ImportJob.objects.filter(spool_name__in=names).values_list("spool_name", flat=True))
    for name in names:
        if name in named:
            continue
        try:
            if storage.get_modified_time(name) < old:
                storage.delete(name)
        except FileNotFoundError:
            pass  # another runner removed it


# -- the report as the row keeps it ------------------------------------------------------


def report_json(report: ImportReport) -> dict[str, Any]:
    return {
        "imported": report.imported,
        "skipped": [[skipped.location, skipped.public_id] for skipped in report.skipped],
        "renamed": report.renamed,
        "problems": [[p.source, p.location, p.message] for p in report.problems],
        "stopped": report.stopped,
        "cancelled": report.cancelled,
        "messages": report.messages,
        "outcomes": [[o.location, o.public_id, o.kind, o.added] for o in report.outcomes],
        "warnings": [[p.source, p.location, p.message] for p in report.warnings],
        "notes": [[p.source, p.location, p.message] for p in report.notes],
    }


def report_of(job: ImportJob) -> ImportReport:
    """The ``ImportReport`` of a finished job (empty before it finishes)."""
    data = job.report or {}
    return ImportReport(
        imported=list(data.get("imported", [])),
        skipped=[Skipped(location, public_id) for location, public_id in data.get("skipped", [])],
        renamed=dict(data.get("renamed", {})),
        problems=[Problem(*problem) for problem in data.get("problems", [])],
        stopped=bool(data.get("stopped")),
        messages=int(data.get("messages", 0)),
        cancelled=bool(data.get("cancelled")),
        outcomes=[Outcome(*outcome) for outcome in data.get("outcomes", [])],
        warnings=[Problem(s, where, what, True) for s, where, what in data.get("warnings", [])],
        notes=[Problem(*note) for note in data.get("notes", [])],
    )
