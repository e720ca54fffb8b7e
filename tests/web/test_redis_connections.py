"""Redis as the channel layer takes more concurrent commands than redis-py's default pool.

Each command of the layer (a socket joining its groups, a frame's
``group_send``) takes a pooled connection while it runs, and redis-py's pool
refuses past its size rather than wait: with 200 chats connecting at once on
one process, the 101st command failed with "Too many connections".
"""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest
from channels.layers import channel_layers, get_channel_layer

SOCKETS = 150  # past redis-py's default pool of 100 connections


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs Redis: set REDIS_URL")
async def test_more_sockets_joining_at_once_than_redis_py_s_default_pool_all_get_in() -> None:
    channel_layers.backends.clear()
    layer = get_channel_layer()
    assert layer is not None
    names = [await layer.new_channel() for _ in range(SOCKETS)]
    run = uuid.uuid4().hex  # groups of this run only (Redis keeps them between runs)

    await asyncio.gather(*(layer.group_add(f"{run}-{n}", name) for n, name in enumerate(names)))
    # Their messages in batches: one process's sockets share one Redis list, whose
    # capacity (100) would drop the rest of 150 sent before any is read.
    for start in range(0, SOCKETS, 50):
        batch = range(start, min(start + 50, SOCKETS))
        await asyncio.gather(
            *(layer.group_send(f"{run}-{n}", {"type": "chat.frame", "n": n}) for n in batch)
        )
        got = await asyncio.wait_for(
            asyncio.gather(*(layer.receive(names[n]) for n in batch)), timeout=30
        )
        assert [message["n"] for message in got] == list(batch)
    await layer.flush()
    channel_layers.backends.clear()


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs Redis: set REDIS_URL")
async def test_a_socket_idle_for_longer_than_a_blocking_read_still_gets_its_next_message() -> None:
    # channels-redis waits with BZPOPMIN for 5 s at a time; redis-py 8 reads with a
    # 5 s socket timeout by default, so an empty wait raced it and failed as a timeout.
    channel_layers.backends.clear()
    layer = get_channel_layer()
    assert layer is not None
    name = await layer.new_channel()
    waiting = asyncio.create_task(layer.receive(name))

    await asyncio.sleep(3 * layer.brpop_timeout + 1)
    await layer.send(name, {"type": "chat.frame", "n": 7})

    assert (await asyncio.wait_for(waiting, timeout=10))["n"] == 7
    await layer.flush()
    channel_layers.backends.clear()
