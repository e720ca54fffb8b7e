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
their socket told so (a ``queued`` frame with the runs ahead of it, again
every ``QUEUED_EVERY_S``), their
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
        self.issued = 0  # tickets given to runs that had to wait
        self.served = 0  # of those, the ones that got their slot (or gave up)


QUEUED_EVERY_S = 2.0  # a waiting run's socket hears its place this often


_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Slots] = weakref.WeakKeyDictionary()


def _slots() -> _Slots:
    loop = asyncio.get_running_loop()
    slots = _by_loop.get(loop)
    if slots is None:
        slots = _by_loop[loop] = _Slots(settings.MOTUS_RUN_SLOTS)
    return slots


@contextlib.asynccontextmanager
async def run_slot(on_queued: Callable[[int], Awaitable[None]]) -> AsyncIterator[None]:
    """Hold one of the process's run slots for the body. When none is free,
    ``await on_queued(ahead)`` (``ahead``: runs waiting before this one, >= 0)
    at once and every ``QUEUED_EVERY_S`` seconds while it waits (the page is
    never silent, so its stall check does not poll the store meanwhile); first
    come, first served (asyncio's semaphore wakes its waiters in order).
    Cancelling the wait takes no slot."""
    slots = _slots()
    if slots.free.locked():
        ticket = slots.issued
        slots.issued += 1

        async def tell() -> None:
            while True:
                await on_queued(max(0, ticket - slots.served))
                await asyncio.sleep(QUEUED_EVERY_S)

        telling = asyncio.create_task(tell())
        try:
            await slots.free.acquire()
        finally:
            slots.served += 1
            telling.cancel()
    else:
        await slots.free.acquire()
    try:
        yield
    finally:
        slots.free.release()
