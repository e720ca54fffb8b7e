"""Refuse a second web process on the in-memory channel layer.

Channels' ``InMemoryChannelLayer`` lives in one process: with two uvicorn
workers and no ``REDIS_URL``, a viewer connected to one worker sees nothing
of a turn streamed by the other (5 of 9 followers of a session saw nothing in
a probe). Every ASGI process that uses it takes an exclusive ``flock`` on one
file in ``var/`` for its lifetime; a second process on the same machine
cannot, and stops at start with a message naming the fix. (Processes on other
machines cannot be seen this way; they need a shared database, and the
deployment guide (docs/deployment.md) sets ``REDIS_URL`` with it.)
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

from django.core.exceptions import ImproperlyConfigured

_held: list[IO[bytes]] = []  # the lock file, open for the process's lifetime

SEVERAL_WORKERS = (
    "Another web process on this machine already uses the in-memory channel layer "
    "(lock {path}, held by pid {holder}). Live chat and streaming need one channel "
    "layer shared by every process: set REDIS_URL, or run a single worker."
)


def claim(path: Path) -> None:
    """Hold the lock at ``path`` until this process ends.

    Raises ``ImproperlyConfigured`` (with ``SEVERAL_WORKERS``) when another
    process holds it. Claiming again in the same process does nothing.
    """
    if _held:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.open("a+b")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().decode(errors="replace").strip() or "unknown"
        lock.close()
        raise ImproperlyConfigured(SEVERAL_WORKERS.format(path=path, holder=holder)) from None
    lock.truncate(0)
    lock.write(str(os.getpid()).encode())
    lock.flush()
    _held.append(lock)
