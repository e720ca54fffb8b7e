"""``Recorder``: the one write path from a memory to its log store and listeners.

A memory builds a typed record for everything it does (a message added, a
compaction, a failed attempt, a revert...) and hands it to its recorder. The
recorder writes it to the log store, then tells every listener, in order. A
listener hears a record only after the store has it, so whatever a listener
shows (a chat stream, a dashboard) is already durable.

- A synchronous store is written at once, inside ``record()``: a write error
  raises ``LogError`` to the memory's caller.
- An ``AsyncLogStore`` (a database driven from an event loop) is written when
  the memory awaits ``flush()``, which ``add_message()`` and ``compact()`` do
  before they return; records are written in order, and a record whose write
  fails stays queued (with those after it) for the next flush. One flush runs
  at a time, and a write once started is never abandoned: a flush cancelled
  while its record is being written waits for that write's outcome (the
  store's thread commits it whatever the caller does) and only then lets the
  cancellation through, so a committed record never stays queued to be
  written a second time by the clean-up's flush.
- Synchronous listeners are called as soon as their record is written;
  asynchronous ones are awaited in ``flush()``. A listener that raises is
  logged and skipped: a broken observer never fails the memory.

The first record of a session is preceded by its ``session_meta`` (built by
the ``meta`` callable when it is needed), so a log always starts with one.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, cast

from ..errors import SessionExistsError
from ..run_to_end import run_to_end
from .records import LogRecord
from .store import AsyncLogStore, LogStore

logger = logging.getLogger("memory.log")

Listener = Callable[[LogRecord], "Awaitable[None] | None"]
"""``listener(record)``, sync or async: called once per record the memory logged."""


class Recorder:
    """Writes one session's records to ``store`` (``None``: no log) and notifies listeners."""

    def __init__(
        self,
        session_id: str,
        store: LogStore | None,
        meta: Callable[[], LogRecord],
        *,
        started: bool = False,
    ) -> None:
        self.session_id = session_id
        self.store = store
        # Checked once: isinstance() against a runtime protocol is slow on a hot path.
        self._async_store = store if isinstance(store, AsyncLogStore) else None
        # Builds the session_meta record written before the first one. The memory
        # that owns this recorder passes its own bound method: held weakly, so the
        # memory and its recorder are no reference cycle (a dropped memory is freed
        # at once, not by a later pass of the cyclic collector).
        self._meta: Callable[[], Callable[[], LogRecord] | None] = (
            weakref.WeakMethod(meta) if inspect.ismethod(meta) else lambda: meta
        )
        self.started = started  # whether the session's log already has its session_meta
        # Restored from this log: an empty one (nothing was ever written) is its own.
        self.adopted = False
        self._listeners: list[Listener] = []
        self._awaited: set[int] = set()  # id() of the coroutine-function listeners
        self._unwritten: list[LogRecord] = []  # queued for an AsyncLogStore
        self._unheard: list[LogRecord] = []  # written, waiting for async listeners
        self._flushing: asyncio.Lock | None = None  # made in the loop that flushes

    @property
    def active(self) -> bool:
        """Whether a record would go anywhere (a store or a listener)."""
        return self.store is not None or bool(self._listeners)

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)
        if inspect.iscoroutinefunction(listener):
            self._awaited.add(id(listener))

    def remove_listener(self, listener: Listener) -> None:
        self._listeners.remove(listener)
        if listener not in self._listeners:
            self._awaited.discard(id(listener))

    def record(self, record: LogRecord) -> None:
        """Write ``record`` (and the session's meta before the first one)."""
        if not self.started:
            store = self.store
            # An async store is not asked here (that would block the loop); the
            # database store refuses a second session_meta by itself.
            if (
                store is not None
                and self._async_store is None
                and not self.adopted
                and store.exists(self.session_id)
            ):
                raise SessionExistsError(self.session_id)
            self.started = True
            build = self._meta()
            assert build is not None, "the memory that records through this recorder is alive"
            self._send(build())
        self._send(record)

    def _send(self, record: LogRecord) -> None:
        if self._async_store is not None:
            self._unwritten.append(record)
            return
        if self.store is not None:
            self.store.append(self.session_id, record)
        self._heard(record)

    def _heard(self, record: LogRecord) -> None:
        waits = False
        for listener in self._listeners:
            if id(listener) in self._awaited:
                waits = True
            else:
                _call(listener, record)
        if waits:
            self._unheard.append(record)

    @property
    def idle(self) -> bool:
        """Nothing queued and no flush under way: ``flush()`` would do nothing."""
        lock = self._flushing
        return not (self._unwritten or self._unheard) and (lock is None or not lock.locked())

    async def flush(self) -> None:
        """Write what an async store has queued, then await async listeners, in
        order. Flushes from concurrent tasks (a background extraction beside a
        turn) take turns, so no record is written twice; cancelling a flush
        never leaves a record half-known: see the module docstring."""
        if self.idle:
            return  # what the lock would find
        lock = self._flushing
        if lock is None:
            lock = self._flushing = asyncio.Lock()
        async with lock:
            await self._write_queued()
            heard, self._unheard = self._unheard, []
            for record in heard:
                for listener in self._listeners:
                    if id(listener) in self._awaited:
                        try:
                            await cast("Awaitable[None]", listener(record))
                        except Exception:
                            logger.exception("log listener %r raised", listener)

    async def _write_queued(self) -> None:
        store = self._async_store
        while self._unwritten and store is not None:
            record = self._unwritten[0]
            write, cancelled = await run_to_end(store.append_async(self.session_id, record))
            error = write.exception()
            if error is None:
                self._heard(self._unwritten.pop(0))
            if cancelled:
                raise asyncio.CancelledError
            if error is not None:
                raise error


def _call(listener: Listener, record: LogRecord) -> Any:
    try:
        return listener(record)
    except Exception:
        logger.exception("log listener %r raised", listener)
        return None
