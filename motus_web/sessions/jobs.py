"""Import jobs: an uploaded file is kept, then imported outside the request.

The upload view calls ``create`` (the file is written to the spool folder,
then a queued ``ImportJob`` row) and ``wake``; a runner, the web process's own
thread or ``manage.py run_import_jobs``, claims queued jobs one at a time with
a conditional update (queued -> running), so two runners never run one job,
and imports the file with the importer every upload used before. Each session
is still committed in its own transaction.

Progress goes to the job row between sessions; while a session is being
written its transaction is open (on SQLite it holds the database's write
lock), so this process keeps the latest figures in memory too and its pages
show those (``with_live_progress``).

Cancelling is cooperative: ``cancel`` sets the job's flag (and, in the runner's
process, an event), and the import stops at its next checkpoint, after a batch
or a session. The session being written is rolled back; the committed ones
stay.

On a crash: a crash while the upload is written leaves a ``.part`` file that no
job names (``interrupt_stale`` removes it after a day); a crash while a job
runs leaves it ``running`` with a runner that is gone, and the next runner to
start marks it ``interrupted`` and keeps its file, so that it can be imported
again (the sessions it committed are then found and skipped).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any, BinaryIO

from django.conf import settings
from django.contrib.auth.models import User
from django.core.files.uploadedfile import UploadedFile
from django.db import connection
from django.utils import timezone

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

logger = logging.getLogger(__name__)

Status = ImportJob.Status
INTERRUPTED = (
    "The server stopped while this file was being imported. The sessions it had finished "
    "are kept; the one it was writing was rolled back. Import it again to finish: "
    "what is already there is skipped."
)
_PART_MAX_AGE = 24 * 3600  # seconds a half-written upload is kept before it is removed
_TOKEN = uuid.uuid4().hex[:12]  # tells this process from an earlier one with the same pid

_lock = threading.Lock()
_wakeup = threading.Event()
_thread: threading.Thread | None = None
_cancels: dict[int, threading.Event] = {}  # running here: job pk -> its cancel event
_live: dict[int, dict[str, int]] = {}  # running here: job pk -> its latest progress


def worker_id() -> str:
    """``host:pid:token``: names this process as the runner of a job."""
    return f"{socket.gethostname()}:{os.getpid()}:{_TOKEN}"


def spool_path(job: ImportJob) -> Path:
    return Path(settings.MOTUS_IMPORT_SPOOL_DIR) / job.spool_name


# -- creating and steering jobs ------------------------------------------------------


def create(upload: UploadedFile, name: str, owner: User, replay_threshold: int | None) -> ImportJob:
    """Keep ``upload`` in the spool folder and queue a job that imports it.

    The file is written under a temporary name, synced, then renamed, so a job
    never reads half a file. Raises ``OSError`` when the file cannot be
    written (nothing is left behind then).
    """
    folder = Path(settings.MOTUS_IMPORT_SPOOL_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    spool_name = f"{uuid.uuid4().hex}.upload"
    partial = folder / f".{spool_name}.part"
    size = 0
    try:
        with partial.open("xb") as out:
            for chunk in upload.chunks():
                out.write(chunk)
                size += len(chunk)
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, folder / spool_name)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    try:
        return ImportJob.objects.create(
            owner=owner,
            file_name=name,
            spool_name=spool_name,
            options={"replay_threshold": replay_threshold},
            bytes_total=size,
        )
    except BaseException:
        (folder / spool_name).unlink(missing_ok=True)
        raise


def cancel(job: ImportJob) -> None:
    """Stop ``job``: a queued or interrupted one at once (its file is deleted), a
    running one at its next checkpoint. A finished job is left as it is."""
    stopped = ImportJob.objects.filter(
        pk=job.pk, status__in=[Status.QUEUED, Status.INTERRUPTED]
    ).update(status=Status.CANCELLED, finished_at=timezone.now(), error="")
    if stopped:
        spool_path(job).unlink(missing_ok=True)
        return
    # The event first: on SQLite the update below waits for the session being
    # written to commit, and the event is what makes it stop.
    with _lock:
        event = _cancels.get(job.pk)
    if event is not None:
        event.set()
    ImportJob.objects.filter(pk=job.pk, status=Status.RUNNING).update(cancel_requested=True)


def retry(job: ImportJob) -> bool:
    """Queue an interrupted job again, from the start of its kept file; whether it was."""
    if not spool_path(job).is_file():
        return False
    return bool(
        ImportJob.objects.filter(pk=job.pk, status=Status.INTERRUPTED).update(
            status=Status.QUEUED,
            error="",
            worker="",
            cancel_requested=False,
            started_at=None,
            heartbeat_at=None,
            finished_at=None,
            **_NO_PROGRESS,
        )
    )


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


def wake() -> None:
    """Have this process's import thread look for queued jobs, starting it if needed.

    Does nothing when ``MOTUS_IMPORT_THREAD`` is off (``run_import_jobs`` runs them).
    """
    global _thread
    if not settings.MOTUS_IMPORT_THREAD:
        return
    with _lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_serve, name="motus-import-jobs", daemon=True)
            _thread.start()
    _wakeup.set()


def _serve() -> None:
    while True:
        _wakeup.wait()
        _wakeup.clear()
        try:
            run_queued()
        except Exception:
            logger.exception("the import thread failed; it looks again at the next upload")
        finally:
            connection.close()  # an idle thread holds no database connection


def run_queued() -> int:
    """Run queued jobs, oldest first, until none is left; how many ran.

    Jobs whose runner is gone are marked interrupted first.
    """
    interrupt_stale()
    ran = 0
    while (job := claim()) is not None:
        run(job)
        ran += 1
    return ran


def claim() -> ImportJob | None:
    """The oldest queued job, now running under this process; ``None`` if none is queued."""
    queued = ImportJob.objects.filter(status=Status.QUEUED).order_by("created_at", "pk")
    while (pk := queued.values_list("pk", flat=True).first()) is not None:
        now = timezone.now()
        taken = ImportJob.objects.filter(pk=pk, status=Status.QUEUED).update(
            status=Status.RUNNING, worker=worker_id(), started_at=now, heartbeat_at=now
        )
        if taken:
            return ImportJob.objects.select_related("owner").get(pk=pk)
    return None


def run(job: ImportJob) -> None:
    """Import the file of ``job`` (claimed: running under this process) and record the end.

    The import's own problems are the report's; anything else (the kept file is
    gone, a bug) fails the job with a message and is logged.
    """
    cancelled = threading.Event()
    with _lock:
        _cancels[job.pk] = cancelled
    try:
        with spool_path(job).open("rb") as stream:
            tracker = _Tracker(job.pk, stream, cancelled)
            options = ImportOptions(
                owner=job.owner,
                replay_threshold=job.options.get("replay_threshold"),
                max_messages=settings.MOTUS_UPLOAD_MAX_MESSAGES,
                max_plain_bytes=settings.MOTUS_UPLOAD_MAX_PLAIN_BYTES,
                checkpoint=tracker,
            )
            report = import_stream(stream, job.file_name, options)
        status = Status.CANCELLED if report.cancelled else Status.DONE
        _finish(job, status, report, tracker.messages_read)
    except FileNotFoundError:
        _finish(job, Status.FAILED, None, 0, "The uploaded file is gone from the server's spool.")
    except Exception as error:
        logger.exception("import job %s failed", job.public_id)
        why = f"The import stopped on an error in Motus ({type(error).__name__}); "
        _finish(job, Status.FAILED, None, 0, why + "the server log has the details.")
    finally:
        with _lock:
            _cancels.pop(job.pk, None)
            _live.pop(job.pk, None)


class _Tracker:
    """The import's checkpoint: keeps the progress, and stops the import when asked."""

    def __init__(self, pk: int, stream: BinaryIO, cancelled: threading.Event) -> None:
        self.pk = pk
        self.stream = stream
        self.cancelled = cancelled
        self.messages_read = 0

    def __call__(self, progress: Progress) -> None:
        self.messages_read = progress.messages_read
        figures = {
            "bytes_read": self.stream.tell(),
            "messages_read": progress.messages_read,
            "sessions_imported": len(progress.report.imported),
            "messages_imported": progress.report.messages,
            "problem_count": len(progress.report.problems),
        }
        with _lock:
            _live[self.pk] = figures
        if self.cancelled.is_set():
            raise ImportCancelled
        if progress.in_session:
            return  # a write now would be part of the session's transaction
        # Also how another process's cancel is seen: the row no longer matches.
        written = ImportJob.objects.filter(
            pk=self.pk, status=Status.RUNNING, worker=worker_id(), cancel_requested=False
        ).update(heartbeat_at=timezone.now(), **figures)
        if not written:
            raise ImportCancelled


def _finish(
    job: ImportJob, status: str, report: ImportReport | None, messages_read: int, error: str = ""
) -> None:
    now = timezone.now()
    fields: dict[str, Any] = {"status": status, "finished_at": now, "heartbeat_at": now}
    fields["error"] = error
    if report is not None:
        fields.update(
            report=report_json(report),
            messages_read=messages_read,
            sessions_imported=len(report.imported),
            messages_imported=report.messages,
            problem_count=len(report.problems),
        )
        if status == Status.DONE:
            fields["bytes_read"] = job.bytes_total
    # Only while it is still ours: a runner that took it for dead may have re-queued it.
    mine = ImportJob.objects.filter(pk=job.pk, status=Status.RUNNING, worker=worker_id())
    if mine.update(**fields):
        spool_path(job).unlink(missing_ok=True)


def interrupt_stale() -> int:
    """Mark interrupted every running job whose runner is gone; how many were.

    A runner on this host is gone when its process is (by pid, or by token
    when the pid is this process's own); one on another host when it has
    written nothing for ``MOTUS_IMPORT_STALE_SECONDS``. Also removes
    half-written uploads older than a day.
    """
    stale_before = timezone.now() - timedelta(seconds=settings.MOTUS_IMPORT_STALE_SECONDS)
    running = ImportJob.objects.filter(status=Status.RUNNING)
    interrupted = 0
    for pk, worker, heartbeat in running.values_list("pk", "worker", "heartbeat_at"):
        if _runner_alive(worker, heartbeat is not None and heartbeat >= stale_before):
            continue
        interrupted += ImportJob.objects.filter(pk=pk, status=Status.RUNNING, worker=worker).update(
            status=Status.INTERRUPTED, finished_at=timezone.now(), error=INTERRUPTED
        )
    _remove_half_written()
    return interrupted


def _runner_alive(worker: str, recent: bool) -> bool:
    if worker == worker_id():
        return True
    parts = worker.rsplit(":", 2)
    if len(parts) != 3 or parts[0] != socket.gethostname() or not parts[1].isdigit():
        return recent
    pid = int(parts[1])
    if pid == os.getpid():
        return False  # an earlier process with this pid (a restarted container)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_half_written() -> None:
    folder = Path(settings.MOTUS_IMPORT_SPOOL_DIR)
    if not folder.is_dir():
        return
    old = time.time() - _PART_MAX_AGE
    for partial in folder.glob(".*.part"):
        try:
            if partial.stat().st_mtime < old:
                partial.unlink()
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
    )
