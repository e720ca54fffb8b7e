"""Appending whole lines to JSONL logs through descriptors kept open.

Opening and closing a log for every line cost more than writing it (two
system calls and a path lookup, about 5 µs of a 15-20 µs append). The
process keeps the descriptors of the last ``MAX_OPEN`` logs it appended to,
shared by every ``JSONLLogStore`` (so two memories writing one session in
one process share one descriptor and one lock), and before each line checks
with a ``stat`` of the path that it still names the file the descriptor
has: a log moved aside or deleted is reopened (created again) at its path,
as a fresh open per line would, so a line never goes to a moved log.

Each append holds the process's lock (threads) and an exclusive ``flock``
on the file (other processes) while it looks at the file's end and writes;
``flock`` locks belong to an open file description, so the descriptors are
never shared with a forked child: the child forgets them and opens its own.
The file ends mid-line only if another writer was cut short by a crash; the
size this process left after its last line tells, without a read, that it
does not (see ``append_line``).
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
from collections import OrderedDict
from pathlib import Path

MAX_OPEN = 64  # descriptors kept open at most; the least recently used is closed


class _Open:
    """One kept descriptor: the file it is open on, and the file's size after
    this process's last line (``-1``: unknown)."""

    __slots__ = ("end", "fd", "ident")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        status = os.fstat(fd)
        self.ident = (status.st_dev, status.st_ino)
        self.end = -1


_open: OrderedDict[str, _Open] = OrderedDict()
_lock = threading.Lock()


def _forget_after_fork() -> None:
    # The child's copies of the descriptors share the parent's open file
    # descriptions, so a flock would not exclude the parent: close them.
    global _lock
    for kept in _open.values():
        os.close(kept.fd)
    _open.clear()
    _lock = threading.Lock()  # another thread may have held it at the fork


os.register_at_fork(after_in_child=_forget_after_fork)


def append_line(path: Path, line: bytes, *, fsync: bool) -> None:
    """Append ``line`` (ending in a newline) to the file at ``path`` whole, or
    not at all, creating the file and its folder when missing.

    A crash mid-write can leave at most a torn last line, which the next
    append ends with a newline first, so its own line starts on a fresh one.
    A disk that fills mid-write (a short write or ``ENOSPC`` after part of
    the line) has the part cut off again (``ftruncate`` to the size before),
    so no half line stays, and ``OSError`` is raised. With ``fsync`` the line
    is forced to disk before this returns. Raises ``OSError`` when the file
    cannot be opened or written; its descriptor is then closed.
    """
    key = os.fspath(path)
    with _lock:
        try:
            while not _append_once(key, line, fsync):
                _close(key)  # moved aside or deleted: the path's file from now on
        except OSError:
            _close(key)
            raise


def _append_once(key: str, line: bytes, fsync: bool) -> bool:
    """Append ``line`` through the kept descriptor of ``key`` (opened if
    there is none); ``False`` when the path no longer names its file."""
    kept = _open.get(key)
    if kept is None:
        kept = _opened(key)
    else:
        _open.move_to_end(key)
    fd = kept.fd
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        # Under the lock the path's size is the file's end, when the path
        # still names this descriptor's file.
        size = _size_if_same(key, kept)
        if size is None:
            return False
        if size != kept.end and size > 0 and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line
        _write_whole(fd, line, size)
        kept.end = size + len(line)
        if fsync:
            os.fsync(fd)
        return True
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def _size_if_same(key: str, kept: _Open) -> int | None:
    """The size of the file at ``key`` if it is the one ``kept`` is open on."""
    try:
        status = os.stat(key)
    except FileNotFoundError:
        return None
    return status.st_size if (status.st_dev, status.st_ino) == kept.ident else None


def _opened(key: str) -> _Open:
    """A new kept descriptor of the file at ``key`` (the least recently used
    one closed when ``MAX_OPEN`` are open)."""
    kept = _open[key] = _Open(_open_for_append(key))
    if len(_open) > MAX_OPEN:
        _close(next(iter(_open)))
    return kept


def _close(key: str) -> None:
    kept = _open.pop(key, None)
    if kept is not None:
        os.close(kept.fd)


def _open_for_append(key: str) -> int:
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
    try:
        return os.open(key, flags, 0o644)
    except FileNotFoundError:  # the first record of the first session
        Path(key).parent.mkdir(parents=True, exist_ok=True)
        return os.open(key, flags, 0o644)


def _write_whole(fd: int, line: bytes, size: int) -> None:
    """Write ``line`` at the end of ``fd`` (locked, ``size`` bytes long) whole,
    or cut what was written off again and raise ``OSError``."""
    try:
        written = os.write(fd, line)
        if written != len(line):
            raise OSError(errno.ENOSPC, f"short write: {written} of {len(line)} bytes")
    except OSError:
        os.ftruncate(fd, size)
        raise
