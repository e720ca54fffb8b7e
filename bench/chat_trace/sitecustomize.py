"""Counters for ``bench/load_chat.py --trace``: where a chat frame waits or is dropped.

Put on the server's ``PYTHONPATH`` (the bench does, with ``MOTUS_CHAT_TRACE``
naming a folder), Python imports it at start-up in every uvicorn worker; it
wraps the channel layers, the websocket transport and the consumer's
dispatch, and writes its counters to ``<folder>/<pid>.json`` every second.
A bench instrument only: nothing in the app imports it.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import os
import threading
import time
from typing import Any

FOLDER = os.environ.get("MOTUS_CHAT_TRACE")
counts: collections.Counter[str] = collections.Counter()
most: dict[str, float] = collections.defaultdict(float)
totals: dict[str, float] = collections.defaultdict(float)


def _note_most(name: str, value: float) -> None:
    most[name] = max(most[name], value)


def _dump() -> None:
    assert FOLDER
    path = os.path.join(FOLDER, f"{os.getpid()}.json")
    while True:
        time.sleep(1)
        data = {"counts": dict(counts), "most": dict(most), "totals": dict(totals)}
        with open(path + ".tmp", "w") as out:
            json.dump(data, out)
        os.replace(path + ".tmp", path)


def _install() -> None:
    from channels import layers

    memory: Any = layers.InMemoryChannelLayer
    memory_send = memory.send

    async def send(self: Any, channel: Any, message: Any) -> Any:
        try:
            await memory_send(self, channel, message)
        except layers.ChannelFull:
            counts[f"memory dropped {message.get('type')} (channel full)"] += 1
            raise
        _note_most("memory channel backlog", self.channels[channel].qsize())

    memory.send = send
    memory_remove = memory._remove_from_groups

    def remove(self: Any, channel: Any) -> Any:
        counts["memory channel expired out of its groups"] += 1
        memory_remove(self, channel)

    memory._remove_from_groups = remove

    try:
        from channels_redis import core
    except ImportError:
        pass
    else:
        queue: Any = core.BoundedQueue
        bounded_put = queue.put_nowait

        def put_nowait(self: Any, item: Any) -> Any:
            if self.full():
                counts[f"redis receive buffer dropped oldest (for {item.get('type')})"] += 1
            bounded_put(self, item)
            _note_most("redis receive buffer backlog", self.qsize())

        queue.put_nowait = put_nowait

        class OverCapacity(logging.Filter):
            def filter(self, record: logging.LogRecord) -> bool:
                if "over capacity" in str(record.msg):
                    dropped: Any = record.args[0]  # type: ignore[index]
                    counts["redis group_send dropped (process key over capacity)"] += dropped
                return True

        core.logger.addFilter(OverCapacity())
        core.logger.setLevel(logging.INFO)
        core.logger.propagate = False
        redis: Any = core.RedisChannelLayer
        redis_send = redis.group_send

        async def group_send(self: Any, group: Any, message: Any) -> Any:
            started = time.perf_counter()
            await redis_send(self, group, message)
            totals["redis group_send s"] += time.perf_counter() - started
            counts["redis group_send"] += 1

        redis.group_send = group_send
        receive_single = redis.receive_single

        async def single(self: Any, channel: Any) -> Any:
            out = await receive_single(self, channel)
            counts["redis messages pulled from the process key"] += 1
            return out

        redis.receive_single = single

    from uvicorn.protocols.websockets import websockets_sansio_impl as sansio

    protocol: Any = sansio.WebSocketsSansIOProtocol
    pause = protocol.pause_writing

    def pause_writing(self: Any) -> Any:
        counts["websocket write buffer over its high-water mark"] += 1
        pause(self)

    protocol.pause_writing = pause_writing
    ws_send = protocol.send

    async def sansio_send(self: Any, message: Any) -> Any:
        started = time.perf_counter()
        await ws_send(self, message)
        waited = time.perf_counter() - started
        totals["websocket send s"] += waited
        _note_most("websocket send s", waited)
        if message.get("type") == "websocket.send":
            counts["websocket frames sent"] += 1
            text = message.get("text") or ""
            if '"type": "finished"' in text:
                counts["websocket finished frames sent"] += 1
        _note_most("websocket write buffer bytes", self.transport.get_write_buffer_size())

    protocol.send = sansio_send

    from channels.consumer import AsyncConsumer

    consumer: Any = AsyncConsumer
    dispatch = consumer.dispatch
    lag_started: list[asyncio.Task[None]] = []

    async def traced_dispatch(self: Any, message: Any) -> Any:
        if not lag_started:
            lag_started.append(asyncio.get_running_loop().create_task(_lag()))
        started = time.perf_counter()
        await dispatch(self, message)
        took = time.perf_counter() - started
        kind = message.get("type", "?")
        counts[f"dispatched {kind}"] += 1
        totals[f"dispatch s {kind}"] += took
        _note_most(f"dispatch s {kind}", took)
        if kind == "chat.frame" and message["frame"].get("type") == "finished":
            counts["chat.frame finished dispatched"] += 1

    consumer.dispatch = traced_dispatch

    from asgiref import sync

    to_async: Any = sync.SyncToAsync
    call = to_async.__call__

    async def timed_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await call(self, *args, **kwargs)
        finally:
            took = time.perf_counter() - started
            counts["sync_to_async calls"] += 1
            totals["sync_to_async s"] += took
            _note_most("sync_to_async s", took)

    to_async.__call__ = timed_call


async def _lag() -> None:
    while True:
        started = time.perf_counter()
        await asyncio.sleep(0.1)
        late = time.perf_counter() - started - 0.1
        counts["loop lag samples"] += 1
        totals["loop lag s"] += late
        _note_most("loop lag s", late)


if FOLDER:
    _install()
    threading.Thread(target=_dump, daemon=True).start()
