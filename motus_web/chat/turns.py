"""One chat turn: the session's memory restored from the database, an agent, its events.

The memory is a ``CompactionMemory`` restored from the ``DatabaseLogStore`` at
the start of every turn, so a turn continues exactly the stored context
whichever process runs it, and after a restart. Every message it adds is
stored (and announced to the session's group) before the agent goes on, so
the browser's durable view comes from the records; the stream events only
add what is not stored: text as it arrives, tool progress, compaction
progress, usage, errors and the end of the turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from typing import Any

from memory import (
    AgentEvent,
    AnswerDelta,
    BackgroundMemory,
    ChatClient,
    CompactionFailed,
    CompactionFinished,
    CompactionMemory,
    CompactionMemoryConfig,
    CompactionStarted,
    LogError,
    MessageAdded,
    ProviderError,
    ReActAgent,
    ThinkingDelta,
    ToolCallRequested,
    ToolResultReady,
    TurnError,
    TurnFinished,
    TurnStarted,
    UsageReported,
)
from motus_web.providers import ChatModel
from motus_web.sessions.db_threads import on_db_thread
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.memories import restore_from
from motus_web.sessions.models import Session
from motus_web.ui.wording import grouped

from .render import RecordPublisher, last_position
from .tools import CHAT_TOOLS

logger = logging.getLogger(__name__)

Publish = Callable[[dict[str, Any]], Awaitable[None]]
PREVIEW_CHARS = 2000  # of tool arguments and results in a live frame; the record has all


def restore_memory(session: Session, model: ChatModel, client: ChatClient) -> CompactionMemory:
    """The session's memory as stored, talking to ``model`` (synchronous ORM): a
    ``BackgroundMemory`` over the dashboard's long-term store for a session
    made with "remember across chats", else a ``CompactionMemory``."""
    stored = {k: v for k, v in (session.config or {}).items() if k != "log_base_path"}
    config = CompactionMemoryConfig.from_dict(
        {
            **stored,
            "session_id": session.public_id,
            "compact_model_name": model.compact_model or model.model,
        }
    )
    return restore_from(
        session, DatabaseLogStore(), config=config, client=client, model_name=model.model
    )


class ChatTurn:
    """A running turn of one session, which ``stop()`` interrupts cleanly."""

    def __init__(self, session: Session, model: ChatModel, publish: Publish) -> None:
        self.session = session
        self.model = model
        self.publish = publish
        self.agent: ReActAgent | None = None
        self.stop_requested = False

    def stop(self) -> None:
        """Interrupt the turn: the partial answer is kept and marked, calls get results."""
        self.stop_requested = True
        if self.agent is not None:
            self.agent.interrupt()

    async def run(self, text: str | None) -> None:
        """Add ``text`` (``None``: retry from the stored context) and run the agent,
        publishing each event's frame. Never raises for a failed turn: the
        failure is published as an ``error`` frame."""
        client = self.model.client()
        deltas = DeltaBatcher(self.publish, DELTA_BATCH_S)
        try:
            memory = await on_db_thread(restore_memory)(self.session, self.model, client)
            after = await on_db_thread(last_position)(self.session)
            publisher = RecordPublisher(self.session, after, deltas.publish)
            self.agent = ReActAgent(
                client=client,
                model_name=self.model.model,
                memory=memory,
                tools=list(CHAT_TOOLS),
            )
            if self.stop_requested:
                await self.publish({"type": "finished", "reason": "interrupted", "steps": 0})
                return
            async with aclosing(self.agent.stream(text)) as events:
                seen = -1  # the newest message seq the stream has announced
                async for event in events:
                    if isinstance(event, TurnFinished):
                        await publisher.catch_up()  # what else the turn stored, before its end
                    frame = event_frame(event, self.session)
                    if frame is not None:
                        await deltas.publish(frame)
                    if isinstance(event, MessageAdded):
                        seen = max(seen, event.seq)
                    if isinstance(event, STORED):
                        await publisher.catch_up(through_seq=seen)
            await deltas.flush()
            if isinstance(memory, BackgroundMemory):
                # The reply is out; the extraction it queued runs on in this
                # process's event loop. Wait for it here (the model client it
                # may use closes below) and show what it wrote.
                await memory.drain()
                await memory.flush()
                await publisher.catch_up()
        except LogError as error:
            await self.publish(error_frame(error))
            await self.publish({"type": "finished", "reason": "error", "steps": 0})
        finally:
            deltas.close()
            aclose = getattr(client, "aclose", None)
            if aclose is not None:
                await aclose()


DELTA_BATCH_S = 0.05

# Agent events that follow a record the store now has.
STORED = MessageAdded | CompactionFinished | CompactionFailed


class DeltaBatcher:
    """Joins a run of text deltas into one frame per ``interval`` seconds.

    A model streams a token at a time; one group message per token would fill a
    channel layer's per-channel capacity (100 by default) faster than a
    browser's consumer drains it, and the layer drops what does not fit. A
    timer flushes the pending text ``interval`` after its first delta, so text
    streamed just before a pause never waits for the next event. Frames go
    out one at a time, in the order they were given (the timer's flush and the
    turn's next frame never overtake each other). Call ``flush()`` at the end.
    """

    def __init__(self, publish: Publish, interval: float = 0.05) -> None:
        self._publish = publish
        self.interval = interval
        self._pending: dict[str, Any] | None = None
        self._timer: asyncio.Task[None] | None = None
        self._sending = asyncio.Lock()

    async def publish(self, frame: dict[str, Any]) -> None:
        pending = self._pending
        if (
            pending is not None
            and frame["type"] == pending["type"] == "delta"
            and frame["step"] == pending["step"]
        ):
            pending["text"] += frame["text"]
            return
        await self.flush()
        if frame["type"] == "delta":
            self._pending = dict(frame)
            self._timer = asyncio.create_task(self._flush_later())
            return
        async with self._sending:
            await self._publish(frame)

    def close(self) -> None:
        """Drop the timer (the turn ended without ``flush``: its text is in its records)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def _flush_later(self) -> None:
        await asyncio.sleep(self.interval)
        self._timer = None  # this task must not cancel itself in flush()
        await self.flush()

    async def flush(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        async with self._sending:
            if self._pending is not None:
                pending, self._pending = self._pending, None
                await self._publish(pending)


def error_frame(error: Exception) -> dict[str, Any]:
    """What a browser may learn of a failure: the provider's or the store's
    message (never a key: the SDKs do not echo it), or a generic text."""
    if isinstance(error, ProviderError):
        kind = type(error).__name__
        return {"type": "error", "code": kind, "message": str(error)[:500], "retryable": True}
    if isinstance(error, LogError):
        return {"type": "error", "code": "LogError", "message": str(error)[:500], "retryable": True}
    logger.error("chat turn failed", exc_info=error)
    return {
        "type": "error",
        "code": "internal",
        "message": f"the turn failed ({type(error).__name__}); the server log has the details",
        "retryable": True,
    }


def event_frame(event: AgentEvent, session: Session) -> dict[str, Any] | None:
    """The frame of an agent event; ``None`` for what the stored records already show."""
    if isinstance(event, TurnStarted):
        return {"type": "turn_started", "retry": event.user_message is None}
    if isinstance(event, AnswerDelta):
        return {"type": "delta", "text": event.text, "step": event.step}
    if isinstance(event, ThinkingDelta):
        return {"type": "thinking", "text": event.text, "step": event.step}
    if isinstance(event, ToolCallRequested):
        return {
            "type": "tool_call",
            "call_id": event.call_id,
            "name": event.name,
            "arguments": event.arguments[:PREVIEW_CHARS],
        }
    if isinstance(event, ToolResultReady):
        return {
            "type": "tool_result",
            "call_id": event.call_id,
            "name": event.name,
            "content": event.content[:PREVIEW_CHARS],
            "is_error": event.is_error,
            "duration_s": round(event.duration_s, 3),
        }
    if isinstance(event, CompactionStarted):
        return {
            "type": "compaction",
            "phase": "started",
            "tokens_before": event.tokens_before,
            "threshold": event.threshold,
        }
    if isinstance(event, CompactionFinished):
        return {
            "type": "compaction",
            "phase": "finished",
            "number": event.number,
            "tokens_before": event.tokens_before,
            "tokens_after": event.tokens_after,
            "messages_compacted": event.messages_compacted,
            "model": event.model,
        }
    if isinstance(event, CompactionFailed):
        return {
            "type": "compaction",
            "phase": "failed",
            "error": grouped(event.error[:500]),
            "skipped": event.skipped,
            "tokens_before": event.tokens_before,
        }
    if isinstance(event, UsageReported):
        usage = event.usage
        return {
            "type": "usage",
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cached_input_tokens": usage.cached_input_tokens,
            "model": event.model,
        }
    if isinstance(event, TurnError):
        return error_frame(event.error)
    if isinstance(event, TurnFinished):
        # The answer's text too: a socket that missed deltas still ends with it.
        return {
            "type": "finished",
            "reason": event.reason,
            "steps": event.steps,
            "text": event.text,
        }
    return None  # MessageAdded: the record frame carries it, stored
