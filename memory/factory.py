"""``create_memory``: a memory from its ``memory_type`` name."""

from __future__ import annotations

from typing import Any

from .background import BackgroundMemory
from .base import BaseMemory
from .basic import BasicMemory
from .compaction.memory import CompactionMemory
from .errors import ConfigurationError

MEMORY_TYPES = ("basic", "compact", "background")


def create_memory(memory_type: str | None = None, **kwargs: Any) -> BaseMemory:
    """Build the memory named by ``memory_type``: ``"basic"`` (the default),
    ``"compact"`` or ``"background"`` (``memory.background.BackgroundMemory``);
    keyword arguments go to its constructor.

    Raises ``ConfigurationError`` for any other name.
    """
    if memory_type is None or memory_type == "basic":
        return BasicMemory(**kwargs)
    if memory_type == "compact":
        return CompactionMemory(**kwargs)
    if memory_type == "background":
        return BackgroundMemory(**kwargs)
    raise ConfigurationError(f"unknown memory_type {memory_type!r}; expected one of {MEMORY_TYPES}")
