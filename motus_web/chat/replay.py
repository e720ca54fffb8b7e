"""What-if replay: a stored session's messages streamed through a fresh memory.

``create_replay`` makes a new session linked to the original (its parent),
with the compaction settings chosen; ``ReplayRun`` then adds the original's
messages to a ``CompactionMemory`` logging into that session, in order, at a
chosen speed, so a browser watching it sees each message stored and every
compaction fire as it would have with those settings. It uses the offline
summariser (no model, no network) unless the replay names a configured chat
model as its compactor. A replay stopped half-way continues from where it stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings as django_settings
from django.contrib.auth.models import AbstractBaseUser

from memory import OFFLINE_SUMMARISER as OFFLINE
from memory import (
    ChatClient,
    ChatMessage,
    CompactionMemory,
    CompactionMemoryConfig,
    MotusMemoryError,
)
from motus_web.providers import ChatModel
from motus_web.sessions.db_threads import on_db_thread
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.memories import restore_view
from motus_web.sessions.models import Session
from motus_web.sessions.operations import create_session

from .render import RecordPublisher, last_position
from .turns import error_frame

REPLAY_OF = Session.REPLAY_OF  # the session_meta field naming the original
COMPACTOR = "replay_compactor"  # ... and the chat model that summarises ("offline": none)
Publish = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ReplaySettings:
    """The memory settings a replay tries; see ``CompactionMemoryConfig``."""

    token_threshold: int | None
    safety_ratio: float
    max_tool_result_tokens: int
    model_name: str
    compactor: str = OFFLINE  # or the name of a configured chat model
    clear_tool_results: bool = False
    clear_keep_tool_results: int = 3


def create_replay(original: Session, settings: ReplaySettings, owner: AbstractBaseUser) -> Session:
    """A new, empty session that will replay ``original`` with ``settings``,
    counting the tool schemas the original sent (``original_tools``; none when
    it had none), never the chat's own.

    Raises ``ConfigurationError`` for settings the memory refuses."""
    config = CompactionMemoryConfig(
        token_threshold=settings.token_threshold,
        safety_ratio=settings.safety_ratio,
        max_tool_result_tokens=settings.max_tool_result_tokens,
        compact_model_name=None if settings.compactor == OFFLINE else settings.model_name,
        clear_tool_results=settings.clear_tool_results,
        clear_keep_tool_results=settings.clear_keep_tool_results,
    )
    return create_session(
        owner,
        config,
        title=f"Replay of {original}",
        model_name=settings.model_name,
        system_prompt=original.system_prompt,
        parent_session_id=original.public_id,
        extra={REPLAY_OF: original.public_id, COMPACTOR: settings.compactor},
        tools=original_tools(original),
    )


def original_tools(original: Session) -> list[dict[str, Any]]:
    """The tool schemas ``original`` sent: those in force at the end of its log
    (its ``session_meta``'s, or the latest ``tools`` record's)."""
    return restore_view(original).tool_schemas


def replay_of(session: Session) -> str | None:
    """The public id of the session ``session`` replays, if it is a replay."""
    return session.replay_of


def compactor_model(session: Session) -> ChatModel | None:
    """The configured chat model that writes the replay's summaries, if any."""
    name = (session.record_extra or {}).get(COMPACTOR, OFFLINE)
    return next((m for m in django_settings.MOTUS_CHAT_MODELS if m.name == name), None)


def _prepare(
    session: Session, original_id: str, client: ChatClient | None, model: ChatModel | None
) -> tuple[CompactionMemory, list[ChatMessage]]:
    memory = CompactionMemory.restore_from_log(
        session.public_id,
        log_store=DatabaseLogStore(),
        client=client,
        config=_config(session, model),
    )
    original = Session.objects.get(public_id=original_id)
    rows = original.messages.order_by("seq")[memory.next_seq :]
    return memory, [ChatMessage.from_dict(row.as_dict()) for row in rows]


def _config(session: Session, model: ChatModel | None) -> CompactionMemoryConfig:
    stored = {k: v for k, v in (session.config or {}).items() if k != "log_base_path"}
    stored["session_id"] = session.public_id
    # The replay's model names the window and tokenizer; the compactor model writes.
    stored["compact_model_name"] = (model.compact_model or model.model) if model else None
    return CompactionMemoryConfig.from_dict(stored)


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
        """Add the messages not yet replayed, ``speed`` per second (0: at once).

        A failure (the store, the compactor's model) is published as an
        ``error`` frame and a ``failed`` phase; what was replayed stays."""
        model = compactor_model(self.session)
        client = model.client() if model is not None else None
        try:
            await self._run(speed, client, model)
        except MotusMemoryError as error:
            await self.publish(error_frame(error))
            await self.publish({"type": "replay", "phase": "failed", "done": 0, "total": 0})
        finally:
            aclose = getattr(client, "aclose", None)
            if aclose is not None:
                await aclose()

    async def _run(self, speed: float, client: ChatClient | None, model: ChatModel | None) -> None:
        memory, pending = await on_db_thread(_prepare)(
            self.session, self.original_id, client, model
        )
        after = await on_db_thread(last_position)(self.session)
        publisher = RecordPublisher(self.session, after, self.publish)
        total = memory.next_seq + len(pending)
        await self.publish(
            {"type": "replay", "phase": "started", "done": memory.next_seq, "total": total}
        )
        for message in pending:
            if self._stopped.is_set():
                break
            adding = asyncio.ensure_future(memory.add_message(message))
            try:
                await asyncio.shield(adding)
            except asyncio.CancelledError:
                # A record half written would be written twice by the next run.
                await asyncio.wait([adding])
                raise
            await publisher.catch_up()
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
