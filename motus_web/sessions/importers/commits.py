"""The import's transactions: short, each committed, so that other writers get in.

On SQLite one transaction holds the database's write lock from its ``BEGIN
IMMEDIATE`` to its commit; an import that wrote a 49,000-message session in
one transaction (13-17 s) made logins, forks and Cancel wait past any busy
timeout. An import therefore writes in transactions that each end once they
hold ``COMMIT_MESSAGES`` messages or have been open ``COMMIT_SECONDS``
(whichever comes first), and begins the next one only at its next write, so
the lock is free while the memory replays the next batch. Several small
sessions share one transaction (200 commits for the 200 sessions of the
tau-bench demo file were most of its wall time beyond the CPU); a long session
spans several, invisible until its last (``Session.incomplete``).

On a crash, what the last commit holds stays; a session written in part is
left ``incomplete`` (never shown) and importing the file again replaces it.
"""

from __future__ import annotations

import time
from types import TracebackType

from django.db import connection, transaction

COMMIT_MESSAGES = 2_000  # messages one transaction holds at most (after the batch that passes it)
COMMIT_SECONDS = 0.1  # a transaction open this long is committed at the next batch's end


class Transactions:
    """The import's open transaction, begun by ``begin`` before a write, ended by
    ``commit_if_due`` (or ``commit``). Use as a context manager around the whole
    import: on leaving it commits what is open, except when the database itself
    failed (``DatabaseError`` subclasses): then the open transaction rolls back.

    On SQLite the import's connection runs with ``synchronous=NORMAL`` (under WAL:
    a commit survives a crash of the process, and only the last commits may be
    lost on a power failure, which importing the file again redoes); the setting
    is put back when the import ends.
    """

    def __init__(self) -> None:
        self._atomic: transaction.Atomic | None = None
        self._began = 0.0
        self._messages = 0
        self._synchronous: object = None

    def __enter__(self) -> Transactions:
        if connection.vendor == "sqlite" and not connection.in_atomic_block:
            with connection.cursor() as cursor:
                mode = cursor.execute("PRAGMA journal_mode").fetchone()[0]
                if str(mode).lower() == "wal":
                    self._synchronous = cursor.execute("PRAGMA synchronous").fetchone()[0]
                    cursor.execute("PRAGMA synchronous = NORMAL")
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        from django.db import DatabaseError

        failed = isinstance(error, DatabaseError)
        atomic, self._atomic = self._atomic, None
        try:
            if atomic is not None:
                if failed:
                    atomic.__exit__(kind, error, traceback)
                else:
                    atomic.__exit__(None, None, None)
        finally:
            if self._synchronous is not None and not failed:
                with connection.cursor() as cursor:
                    cursor.execute(f"PRAGMA synchronous = {int(str(self._synchronous))}")

    @property
    def open(self) -> bool:
        return self._atomic is not None

    def begin(self) -> None:
        """Open a transaction unless one is open: call before every write."""
        if self._atomic is None:
            atomic = transaction.atomic()
            atomic.__enter__()
            self._atomic = atomic
            self._began = time.monotonic()
            self._messages = 0

    def wrote(self, messages: int) -> None:
        """Count ``messages`` written in the open transaction."""
        self._messages += messages

    def due(self) -> bool:
        """Whether the open transaction holds enough, or has been open long enough, to end."""
        return self._atomic is not None and (
            self._messages >= COMMIT_MESSAGES or time.monotonic() - self._began >= COMMIT_SECONDS
        )

    def commit(self) -> None:
        """Commit the open transaction, if any."""
        atomic, self._atomic = self._atomic, None
        if atomic is not None:
            atomic.__exit__(None, None, None)
