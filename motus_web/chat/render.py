"""What the socket sends about stored records: the dashboard's own partials.

A browser that follows a session gets each stored record once, in log order,
as a ``record`` frame: its log ``pos`` (the cursor a reconnecting browser
sends back as ``last_pos``), the HTML the session page renders for it, and
the context gauge after it. Synchronous ORM: call through ``db_threads.on_db_thread``.
"""

from __future__ import annotations

import heapq
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from django.template.loader import render_to_string

from motus_web.sessions.db_threads import on_db_thread
from motus_web.sessions.models import CompactionEvent, ContextChange, Message, Session
from motus_web.ui.rendering import encodable

Publish = Callable[[dict[str, Any]], Awaitable[None]]
BATCH = 200  # records per catch-up query; a long session comes in several


def record_frames(session: Session, after_pos: int, limit: int = BATCH) -> list[dict[str, Any]]:
    """``record`` frames of the session's records after ``after_pos``, in log order
    (at most ``limit``; ask again from the last ``pos`` for more)."""
    messages = session.messages.filter(position__gt=after_pos).order_by("position")[:limit]
    events = session.compaction_events.filter(position__gt=after_pos).order_by("position")[:limit]
    changes = session.context_changes.filter(position__gt=after_pos).order_by("position")[:limit]
    rows: Iterable[Message | CompactionEvent | ContextChange] = heapq.merge(
        messages, events, changes, key=lambda row: row.position
    )
    frames: list[dict[str, Any]] = []
    for row in rows:
        if len(frames) == limit:
            break
        frames.append(_frame(session, row))
    return frames


def _frame(session: Session, row: Message | CompactionEvent | ContextChange) -> dict[str, Any]:
    frame: dict[str, Any] = {"type": "record", "pos": row.position}
    if isinstance(row, Message):
        context = {"session": session, "message": row}
        frame |= {
            "kind": "message",
            "seq": row.seq,
            "role": row.role,
            "context_tokens": row.context_tokens,
            "html": encodable(render_to_string("dashboard/_message.html", context)),
        }
    elif isinstance(row, CompactionEvent):
        frame |= {
            "kind": "compaction",
            "event": row.kind,
            "context_tokens": row.tokens_after,
            "html": encodable(render_to_string("dashboard/_compaction_event.html", {"event": row})),
        }
    else:
        frame |= {
            "kind": "change",
            "event": row.kind,
            "html": encodable(render_to_string("dashboard/_context_change.html", {"change": row})),
        }
    return frame


def last_position(session: Session) -> int:
    """The position of the session's latest stored record (``-1``: none)."""
    count = Session.objects.filter(pk=session.pk).values_list("record_count", flat=True).first()
    return (count or 0) - 1


class RecordPublisher:
    """Publishes the session's records stored since the last ones it published, in order.

    A turn calls ``catch_up`` when the agent's stream says a record was stored
    (a message added, a compaction done or failed), in the stream's own order:
    so a record never overtakes the text deltas that came before it. The agent
    may already have stored more by then; ``through_seq`` stops at the message
    the event is about (and the compaction records that follow it).
    """

    def __init__(self, session: Session, after_pos: int, publish: Publish) -> None:
        self.session = session
        self.published = after_pos
        self.publish = publish

    async def catch_up(self, through_seq: int | None = None) -> None:
        frames = await on_db_thread(record_frames)(self.session, self.published)
        for frame in frames:
            later = frame["kind"] == "message" and through_seq is not None
            if later and frame["seq"] > through_seq:
                return  # its own event is still on its way
            await self.publish(frame)
            self.published = frame["pos"]
