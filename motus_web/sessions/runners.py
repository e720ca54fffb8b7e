"""Which process runs a piece of work, and whether it still does.

An import job's row and a session an import is still writing (``incomplete``)
name their runner with ``worker_id``; another process asks ``elsewhere_alive``
whether that runner is gone (then the job is interrupted, the session replaced).
"""

from __future__ import annotations

import os
import socket
import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

_TOKEN = uuid.uuid4().hex[:12]  # tells this process from an earlier one with the same pid


def process_start(pid: int) -> str:
    """When process ``pid`` started, in clock ticks since boot (``/proc/<pid>/stat``
    field 22, proc(5)); ``""`` when it does not exist or there is no ``/proc``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except OSError:
        return ""
    return fields[19].decode()  # fields after "(comm) " start at field 3


def worker_id() -> str:
    """``host:pid:start:token``: names this process as the runner of a job."""
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{process_start(pid)}:{_TOKEN}"


def elsewhere_alive(worker: str, heartbeat: datetime | None) -> bool:
    """Whether runner ``worker`` (a ``worker_id`` of another process) is alive: while
    ``heartbeat`` is within ``MOTUS_IMPORT_STALE_SECONDS`` and, on this host, its pid
    names a process that started when the runner's did (a pid reused after a
    restart names another process). A ``worker_id`` of this process is not alive:
    it is an earlier process's that had this pid."""
    stale_before = timezone.now() - timedelta(seconds=settings.MOTUS_IMPORT_STALE_SECONDS)
    if heartbeat is None or heartbeat < stale_before:
        return False
    host, _, rest = worker.partition(":")
    if host != socket.gethostname():
        return True
    pid, _, rest = rest.partition(":")
    started, _, _ = rest.partition(":")
    if not pid.isdigit() or int(pid) == os.getpid():
        return False  # an earlier process with this pid (a restarted container)
    return bool(started) and process_start(int(pid)) == started
