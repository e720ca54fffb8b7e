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

    memory = layers.InMemoryChannelLayer
    memory_send = memory.send

    async def send(self, channel, message):  # type: ignore[no-untyped-def]
        try:
            await memory_send(self, channel, message)
        except layers.ChannelFull:
            counts[f"memory dropped {message.get('type')} (channel full)"] += 1
            raise
        _note_most("memory channel backlog", self.channels[channel].qsize())

    memory.send = send
    memory_remove = memory._remove_from_groups

    def remove(self, channel):  # type: ignore[no-untyped-def]
        counts["memory channel expired out of its groups"] += 1
        memory_remove(self, channel)

    memory._remove_from_groups = remove

    try:
        from channels_redis import core
    except ImportError:
        pass
    else:
        bounded_put = core.BoundedQueue.put_nowait

        def put_nowait(self, item):  # type: ignore[no-untyped-def]
            if self.full():
                counts[f"redis receive buffer dropped oldest (for {item.get('type')})"] += 1
            bounded_put(self, item)
            _note_most("redis receive buffer backlog", self.qsize())

        core.BoundedQueue.put_nowait = put_nowait

        class OverCapacity(logging.Filter):
            def filter(self, record: logging.LogRecord) -> bool:
                if "over capacity" in str(record.msg):
                    counts["redis group_send dropped (process key over capacity)"] += record.args[0]  # type: ignore[index]
                return True

        core.logger.addFilter(OverCapacity())
        core.logger.setLevel(logging.INFO)
        core.logger.propagate = False
        redis_send = core.RedisChannelLayer.group_send

        async def group_send(self, group, message):  # type: ignore[no-untyped-def]
            started = time.perf_counter()
            await redis_send(self, group, message)
            totals["redis group_send s"] += time.perf_counter() - started
            counts["redis group_send"] += 1

        core.RedisChannelLayer.group_send = group_send
        receive_single = core.RedisChannelLayer.receive_single

        async def single(self, channel):  # type: ignore[no-untyped-def]
            out = await receive_single(self, channel)
            counts["redis messages pulled from the process key"] += 1
            return out

        core.RedisChannelLayer.receive_single = single

    from uvicorn.protocols.websockets import websockets_sansio_impl as sansio

    protocol = sansio.WebSocketsSansIOProtocol
    pause = protocol.pause_writing

    def pause_writing(self):  # type: ignore[no-untyped-def]
        counts["websocket write buffer over its high-water mark"] += 1
        pause(self)

    protocol.pause_writing = pause_writing
    ws_send = protocol.send

    async def sansio_send(self, message):  # type: ignore[no-untyped-def]
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

    dispatch = AsyncConsumer.dispatch
    lag_started = []

    async def traced_dispatch(self, message):  # type: ignore[no-untyped-def]
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

    AsyncConsumer.dispatch = traced_dispatch

    from asgiref import sync

    call = sync.SyncToAsync.__call__

    async def timed_call(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        started = time.perf_counter()
        try:
            return await call(self, *args, **kwargs)
        finally:
            took = time.perf_counter() - started
            counts["sync_to_async calls"] += 1
            totals["sync_to_async s"] += took
            _note_most("sync_to_async s", took)

    sync.SyncToAsync.__call__ = timed_call


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
