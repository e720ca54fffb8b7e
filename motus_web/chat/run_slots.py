"""How many runs (turns, replays, compactions) a web process lets work at once.

A run restores its session's memory, counts its context and renders its
records: Python work that holds the interpreter's lock, on the process's
run loops and database threads (``offload``, ``sessions.db_threads``). With
200 turns begun at once on one process, 200 restores queued on the four
database threads and took the lock in turn with the web loop: the loop
answered no keepalive ping for 20 s (every socket closed 1011), and every
socket's own reads and the leases' releases waited behind the restores
("lease not given back yet"). So at most ``MOTUS_RUN_SLOTS`` runs of a
process work at once; the next ones wait their turn in order of arrival,
their socket told so (a ``queued`` frame with the runs ahead of it), their
lease held meanwhile (no other tab writes in between), and a stop or a
closed socket ends the wait with nothing started.

One set of slots per event loop (the web loop of a server; a test's own loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable

from django.conf import settings


class _Slots:
    def __init__(self, size: int) -> None:
        self.free = asyncio.Semaphore(size)
        self.waiting = 0  # runs waiting for a slot


_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Slots] = weakref.WeakKeyDictionary()


def _slots() -> _Slots:
    loop = asyncio.get_running_loop()
    slots = _by_loop.get(loop)
    if slots is None:
        slots = _by_loop[loop] = _Slots(settings.MOTUS_RUN_SLOTS)
    return slots


@contextlib.asynccontextmanager
async def run_slot(on_queued: Callable[[int], Awaitable[None]]) -> AsyncIterator[None]:
    """Hold one of the process's run slots for the body; when none is free,
    ``await on_queued(ahead)`` first (``ahead``: runs waiting before this
    one, >= 0), then wait for one (first come, first served: asyncio's
    semaphore wakes its waiters in order). Cancelling the wait takes no slot."""
    slots = _slots()
    if slots.free.locked():
        await on_queued(slots.waiting)
    slots.waiting += 1
    try:
        await slots.free.acquire()
    finally:
        slots.waiting -= 1
    try:
        yield
    finally:
        slots.free.release()
