"""A run (turn, replay, compaction) on a thread of its own, with an event loop of its own.

The web process's event loop moves every socket's frames; a run's own work
would hold it: the agent builds and counts its whole context, a memory is
restored or compacted, records are rendered, all in Python on the thread
that runs the coroutine (a turn on a never-compacted 49,000-message session
held the loop 45 s, and every socket and request of the process with it).
``OffLoop.run`` runs the run's coroutine on a new thread's loop instead and
awaits its end; the web loop goes on moving frames meanwhile (sharing the
interpreter's lock with the run's thread, which Python hands over every few
milliseconds). One thread per run: the session's lease allows one run per
session, and the rate limits bound how fast a user starts them.

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
import functools
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from motus_web.sessions import db_threads

T = TypeVar("T")


class OffLoop:
    """One run's thread and loop. ``run`` once; ``call_soon`` from the web loop."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self._pending: list[Callable[[], None]] = []  # calls made before the loop started
        self._lock = threading.Lock()

    def call_soon(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` on the run's loop (thread-safe; before the run starts it
        waits for the start, after its end it is dropped)."""
        with self._lock:
            if self._loop is None:
                self._pending.append(fn)
            elif not self._loop.is_closed():
                self._loop.call_soon_threadsafe(fn)

    async def run(self, work: Coroutine[Any, Any, T]) -> T:
        """``await work`` on a thread of its own; its result or exception here."""
        web = asyncio.get_running_loop()
        finished: asyncio.Future[T] = web.create_future()

        def settle(outcome: Callable[[], object]) -> None:
            if not finished.done():
                outcome()

        async def body() -> T:
            db_threads.web_loop.set(web)
            self._task = asyncio.current_task()
            with self._lock:
                self._loop = asyncio.get_running_loop()
                pending, self._pending = self._pending, []
            for fn in pending:
                fn()
            return await work

        def thread() -> None:
            loop = asyncio.new_event_loop()
            try:
                result = loop.run_until_complete(body())
            except asyncio.CancelledError:
                web.call_soon_threadsafe(settle, finished.cancel)
            except BaseException as error:  # handed over whole
                web.call_soon_threadsafe(settle, functools.partial(finished.set_exception, error))
            else:
                web.call_soon_threadsafe(settle, functools.partial(finished.set_result, result))
            finally:
                with self._lock:
                    loop.run_until_complete(loop.shutdown_asyncgens())
                    loop.close()

        threading.Thread(target=thread, name="motus-run", daemon=True).start()
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
        if self._task is not None:
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
