"""``pooled``: a synchronous ORM call to ``await`` off the process's one sync thread."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from channels.db import database_sync_to_async

T = TypeVar("T")


def pooled(call: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    """``call``, a read, to ``await`` on a thread of the event loop's pool,
    closing old connections around it as ``database_sync_to_async`` does.
    Writes stay on the sync thread, in the order they were asked for (a
    run's lease given back before the next run's is taken).

    Not on the process's one thread for synchronous code, where every turn's
    record writes queue: under load (200 chats on one worker) a socket's
    reads waited there seconds each, its dispatch with them, and a socket that
    did not take the browser's next frame for 20 s lost its keepalive (uvicorn
    stops reading until the app takes it) and was closed 1011; a turn's
    record frames were read while the model's stream waited."""
    return database_sync_to_async(call, thread_sensitive=False)
