"""A memory is no reference cycle: dropped, it is freed at once, not left for a later
pass of the cyclic collector (a process restoring session after session, the
dashboard say, would otherwise hold every dropped context until then)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory import BasicMemory, CompactionMemory, CompactionMemoryConfig


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def test_a_logging_memory_and_its_restore_are_freed_when_dropped(
    tmp_path: Path, collector_off: None
) -> None:
    config = CompactionMemoryConfig(log_base_path=str(tmp_path), session_id="lifetime")
    memory = CompactionMemory(config=config, model_name="gpt-4o")
    await memory.add_message({"role": "user", "content": "Where is my bag?"})
    await memory.add_message({"role": "assistant", "content": "On the next flight."})
    alive = weakref.ref(memory)
    del memory
    assert alive() is None

    restored = CompactionMemory.restore_from_log("lifetime", log_base_path=str(tmp_path))
    assert len(restored.get_context()) == 2
    alive = weakref.ref(restored)
    del restored
    assert alive() is None


async def test_a_basic_memory_is_freed_when_dropped(collector_off: None) -> None:
    memory = BasicMemory(model_name="gpt-4o")
    await memory.add_message({"role": "user", "content": "hello"})
    alive = weakref.ref(memory)
    del memory
    assert alive() is None
