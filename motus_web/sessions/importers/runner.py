"""Turn chat messages into log records by running them through a memory.

The memory, not the importer, decides tokens, turn units, truncation and
compaction, so an imported session is exactly what a live one would have
logged. It runs against an ``InMemoryLogStore`` under its own event loop; the
caller copies the records into the database afterwards, in sync code,
because the ORM must not be called inside a running event loop.
"""

from __future__ import annotations

import asyncio
from typing import Any

from memory import ChatMessage, CompactionMemory, CompactionMemoryConfig, InMemoryLogStore
from memory.messages import InstructionRole


def log_records(
    session_id: str,
    messages: list[ChatMessage],
    *,
    system_prompt: str,
    system_role: InstructionRole = "system",
    model_name: str | None,
    threshold: int | None,
) -> list[dict[str, Any]]:
    """The records a memory logs for ``messages``.

    ``system_role`` is the role of the instructions (``"system"`` or
    ``"developer"``), kept in the log. ``threshold`` turns auto-compaction
    on at that many tokens (with the offline summariser: no model is
    called); ``None`` leaves it off.
    Raises ``MotusMemoryError`` subclasses for messages the memory refuses.
    """
    store = InMemoryLogStore()
    config = CompactionMemoryConfig(
        session_id=session_id, token_threshold=threshold, auto_compact=threshold is not None
    )
    memory = CompactionMemory(config=config, log_store=store, model_name=model_name)
    memory.set_system_prompt(system_prompt, role=system_role)

    async def feed() -> None:
        for message in messages:
            await memory.add_message(message)

    asyncio.run(feed())
    return list(store.read(session_id))
