"""``run_to_end``: a write awaited through cancellations, but not for ever."""

from __future__ import annotations

import asyncio

import pytest

from memory.run_to_end import run_to_end


async def test_a_cancelled_caller_still_waits_for_its_write_to_end() -> None:
    done = asyncio.Event()

    async def write() -> str:
        await asyncio.sleep(0.2)
        done.set()
        return "stored"

    outcome: list[tuple[str, bool]] = []

    async def caller() -> None:
        future, cancelled = await run_to_end(write(), grace_s=5)
        outcome.append((future.result(), cancelled))

    task = asyncio.create_task(caller())
    await asyncio.sleep(0.05)
    task.cancel()
    await asyncio.sleep(0.01)
    task.cancel()  # twice: Stop, then the socket closing
    await task
    assert done.is_set()
    assert outcome == [("stored", True)]


async def test_a_write_that_never_ends_lets_the_cancellation_through_after_the_grace() -> None:
    never = asyncio.Event()
    abandoned = asyncio.Event()

    async def write() -> None:
        try:
            await never.wait()  # a lock never released, a call never answered
        except asyncio.CancelledError:
            abandoned.set()
            raise

    task = asyncio.create_task(run_to_end(write(), grace_s=0.2))
    await asyncio.sleep(0.05)
    task.cancel()
    # Without the bound this wait never ends (the teardown hang); with it, the
    # task ends cancelled shortly after the grace, and the write is abandoned.
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert task.cancelled()
    assert abandoned.is_set()


async def test_a_write_failing_with_its_own_timeout_is_the_callers_to_read() -> None:
    async def write() -> None:
        raise TimeoutError("the database did not answer")

    future, cancelled = await run_to_end(write(), grace_s=0.2)
    assert isinstance(future.exception(), TimeoutError)
    assert not cancelled
