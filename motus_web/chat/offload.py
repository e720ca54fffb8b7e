"""A run (turn, replay, compaction) off the web event loop, on one of a few run loops.

The web process's event loop moves every socket's frames; a run's own work
would hold it: the agent builds and counts its whole context, a memory is
restored or compacted, records are rendered, all in Python on the thread
that runs the coroutine (a turn on a never-compacted 49,000-message session
held the loop 45 s, and every socket and request of the process with it).
``OffLoop.run`` runs the run's coroutine on one of ``MOTUS_RUN_LOOPS``
threads' event loops instead (each run on the next, in turn) and awaits its
end; the web loop goes on moving frames meanwhile, sharing the interpreter's
lock with those threads (Python hands it over every few milliseconds). A
few loops, not a thread per run: 200 turns on 200 threads, each restoring its
memory at once, took the lock from the web loop for 20 s at a time (its
keepalives unanswered, every socket closed 1011); with a few, the web loop
is one of a few threads waiting for it.

What must stay on the web loop goes back to it: the run's frames
(``bridge``: the socket's queue and the channel layer live there) and the
channel-layer sends of its database calls (``db_threads.web_loop``).
``call_soon`` runs a function on the run's loop (``stop()``: asyncio objects
are not thread-safe); cancelling the await cancels the run on its loop and
waits for its clean-up.

Measured (bench/load_chat.py, see bench/README.md): this design against
running turns on separate task-worker processes over the channel layer:
the frames of a turn would then cross the layer twice (worker to web
process, web process to socket), and the layer drops messages under
back-pressure; here a socket's own run delivers straight to it, and
``make run`` stays one process.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from django.conf import settings

from motus_web.sessions import db_threads

from .run_slots import run_slot

T = TypeVar("T")


_loops: list[asyncio.AbstractEventLoop] = []
_next = itertools.count()
_loops_lock = threading.Lock()


def _run_loop() -> asyncio.AbstractEventLoop:
    """One of ``MOTUS_RUN_LOOPS`` threads' loops, in turn (started at first use)."""
    with _loops_lock:
        if not _loops:
            for n in range(settings.MOTUS_RUN_LOOPS):
                loop = asyncio.new_event_loop()
                threading.Thread(
                    target=loop.run_forever, name=f"motus-runs-{n}", daemon=True
                ).start()
                _loops.append(loop)
        return _loops[next(_next) % len(_loops)]


class OffLoop:
    """One run on a run loop. ``run`` once; ``call_soon`` from the web loop."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self._cancelled = False  # asked before its task began

    def call_soon(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` on the run's loop (thread-safe); before the run has one
        (waiting for a run slot), here and now: nothing else touches it yet."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(fn)
        else:
            fn()

    async def run(
        self,
        work: Coroutine[Any, Any, T],
        on_queued: Callable[[int], Awaitable[None]],
    ) -> T:
        """``await work`` on a run loop, once a run slot is free (``run_slots``:
        ``on_queued(ahead)`` is awaited first if it must wait); its result or
        exception here. Cancelled while waiting, ``work`` never starts."""
        try:
            async with run_slot(on_queued):
                return await self._run(work)
        finally:
            work.close()  # (a no-op once it ran; never started, no "never awaited")

    async def _run(self, work: Coroutine[Any, Any, T]) -> T:
        web = asyncio.get_running_loop()
        self._loop = _run_loop()

        async def body() -> T:
            db_threads.web_loop.set(web)
            self._task = asyncio.current_task()
            if self._cancelled:
                work.close()
                raise asyncio.CancelledError
            return await work

        finished = asyncio.wrap_future(asyncio.run_coroutine_threadsafe(body(), self._loop))
        try:
            return await asyncio.shield(finished)
        except asyncio.CancelledError:
            self.call_soon(self._cancel)
            # Its clean-up (an interrupted turn's records) ends before this does.
            await asyncio.wait([finished])
            if not finished.cancelled():
                finished.exception()  # seen: the cancellation is what is raised
            raise

    def _cancel(self) -> None:
        if self._task is None:
            self._cancelled = True
        else:
            self._task.cancel()


def bridge(
    web: asyncio.AbstractEventLoop,
    publish: Callable[[dict[str, Any]], Coroutine[Any, Any, None]],
) -> Callable[[dict[str, Any]], Awaitable[None]]:
    """``publish`` (a coroutine function of the web loop) to await from a run's
    loop: each frame is published on ``web``, in order, before the call returns."""

    async def on_web(frame: dict[str, Any]) -> None:
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(publish(frame), web))

    return on_web
