"""Database calls from async code on a bounded pool of threads, each call's connection given back.

Channels' ``database_sync_to_async`` runs every call on the process's one
thread for synchronous code (``thread_sensitive=True``): with 200 chats on one
process, every socket's reads and every turn's writes queued there behind
each other and behind any slow one (a long session's restore), seconds per
call. ``on_db_thread(fn)`` runs ``fn`` instead on one of ``MOTUS_DB_THREADS``
threads of this module's own pool, so one slow call holds one thread, never
all the database work of the process.

Each call gives its connection back when it ends (``connection.close()``:
to psycopg's pool on PostgreSQL, the file closed on SQLite), whatever it
raised: a pool thread outlives the call, and a connection it kept would be
one fewer for every other thread and process (the previous pool of this
kind, on the loop's default executor with ``close_old_connections`` only,
left its connections open and the tests' pool ran dry). A call is one unit
of work: it must not leave a transaction open, since nothing of it outlives
the call.

A synchronous call that sends to the channel layer (``async_to_sync``, as
``signals.announce`` does) runs that send on the web process's event loop,
the one every socket of the process reads its layer on, even when the
awaiting coroutine runs on another loop (a turn's, ``chat.offload``):
``web_loop`` names it.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from asgiref.sync import AsyncToSync, SyncToAsync, sync_to_async
from django.conf import settings
from django.db import close_old_connections, connections

P = ParamSpec("P")
T = TypeVar("T")

# The event loop whose channel layer a pool call's ``async_to_sync`` uses
# (unset: the awaiting coroutine's own loop).
web_loop: contextvars.ContextVar[asyncio.AbstractEventLoop] = contextvars.ContextVar("web_loop")

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(
                max_workers=settings.MOTUS_DB_THREADS, thread_name_prefix="motus-db"
            )
        return _pool


def _in_pool_thread(loop: asyncio.AbstractEventLoop, call: Callable[[], T]) -> T:
    # What asgiref's own thread handler records, so that async_to_sync in
    # ``call`` runs its coroutine on ``loop`` instead of a loop of its own.
    SyncToAsync.threadlocal.main_event_loop = loop
    SyncToAsync.threadlocal.main_event_loop_pid = os.getpid()
    close_old_connections()
    try:
        return call()
    finally:
        for connection in connections.all(initialized_only=True):
            connection.close()


def on_db_thread(fn: Callable[P, T]) -> Callable[P, Awaitable[T]]:
    """``fn`` (synchronous ORM code) to ``await`` from async code, run on the
    pool, or on the thread of a synchronous caller awaiting this coroutine
    (its connection and transaction); its exceptions are raised to the
    awaiting coroutine. Cancelling the
    await does not stop a call already running (it finishes, and its
    connection goes back)."""

    @functools.wraps(fn)
    async def call(*args: P.args, **kwargs: P.kwargs) -> T:
        loop = asyncio.get_running_loop()
        if getattr(AsyncToSync.executors, "current", None) or loop in (
            AsyncToSync.loop_thread_executors
        ):
            # A synchronous caller waits on this coroutine (``async_to_sync``, as
            # the dashboard's actions do): its thread holds the connection, and
            # maybe the open transaction, this call belongs to. On another
            # connection it would wait for that transaction's lock (SQLite) or
            # write outside it (PostgreSQL).
            return await sync_to_async(fn, thread_sensitive=True)(*args, **kwargs)
        target = web_loop.get(loop)
        context = contextvars.copy_context()
        bound = functools.partial(context.run, fn, *args, **kwargs)
        return await loop.run_in_executor(
            _executor(), functools.partial(_in_pool_thread, target, bound)
        )

    return call


def shutdown() -> None:
    """Wait for the running calls and stop the pool's threads (tests, process exit);
    the next call starts a new pool."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown(wait=True)
