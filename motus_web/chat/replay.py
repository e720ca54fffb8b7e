"""What-if replay: a stored session's messages streamed through a fresh memory.

``create_replay`` makes a new session linked to the original (its parent),
with the compaction settings chosen; ``ReplayRun`` then adds the original's
messages to a ``CompactionMemory`` logging into that session, in order, at a
chosen speed, so a browser watching it sees each message stored and every
compaction fire as it would have with those settings. It uses the offline
summariser: no model, no network. A replay stopped half-way continues from
where it stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from django.contrib.auth.models import AbstractBaseUser

from memory import ChatMessage, CompactionMemory, CompactionMemoryConfig
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import Session

from .render import RecordPublisher, last_position
from .sessions import create_session

REPLAY_OF = "replay_of"  # the session_meta field naming the original
Publish = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ReplaySettings:
    """The memory settings a replay tries; see ``CompactionMemoryConfig``."""

    token_threshold: int | None
    safety_ratio: float
    max_tool_result_tokens: int
    model_name: str


def create_replay(original: Session, settings: ReplaySettings, owner: AbstractBaseUser) -> Session:
    """A new, empty session that will replay ``original`` with ``settings``.

    Raises ``ConfigurationError`` for settings the memory refuses."""
    config = CompactionMemoryConfig(
        token_threshold=settings.token_threshold,
        safety_ratio=settings.safety_ratio,
        max_tool_result_tokens=settings.max_tool_result_tokens,
    )
    return create_session(
        owner,
        config,
        title=f"Replay of {original}",
        model_name=settings.model_name,
        system_prompt=original.system_prompt,
        parent_session_id=original.public_id,
        extra={REPLAY_OF: original.public_id},
    )


def replay_of(session: Session) -> str | None:
    """The public id of the session ``session`` replays, if it is a replay."""
    value = (session.record_extra or {}).get(REPLAY_OF)
    return value if isinstance(value, str) else None


def _prepare(session: Session, original_id: str) -> tuple[CompactionMemory, list[ChatMessage]]:
    memory = CompactionMemory.restore_from_log(session.public_id, log_store=DatabaseLogStore())
    original = Session.objects.get(public_id=original_id)
    rows = original.messages.order_by("seq")[memory.next_seq :]
    return memory, [ChatMessage.from_dict(row.as_dict()) for row in rows]


class ReplayRun:
    """Streams the rest of the original into the replay session; ``stop()`` pauses it."""

    def __init__(self, session: Session, original_id: str, publish: Publish) -> None:
        self.session = session
        self.original_id = original_id
        self.publish = publish
        self._stopped = asyncio.Event()

    def stop(self) -> None:
        self._stopped.set()

    async def run(self, speed: float) -> None:
        """Add the messages not yet replayed, ``speed`` per second (0: at once)."""
        memory, pending = await database_sync_to_async(_prepare)(self.session, self.original_id)
        after = await database_sync_to_async(last_position)(self.session)
        memory.add_listener(RecordPublisher(self.session, after, self.publish).on_record)
        total = memory.next_seq + len(pending)
        await self.publish(
            {"type": "replay", "phase": "started", "done": memory.next_seq, "total": total}
        )
        for message in pending:
            if self._stopped.is_set():
                break
            await memory.add_message(message)
            await self.publish(
                {"type": "replay", "phase": "progress", "done": memory.next_seq, "total": total}
            )
            if speed > 0:
                with contextlib.suppress(TimeoutError):  # the pause between messages
                    await asyncio.wait_for(self._stopped.wait(), timeout=1 / speed)
        phase = "finished" if memory.next_seq >= total else "stopped"
        await self.publish(
            {"type": "replay", "phase": phase, "done": memory.next_seq, "total": total}
        )
