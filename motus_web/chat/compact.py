""" "Compact now" from the chat: one compaction of the session, exactly once.

The run holds the session's writer lease like a turn (the consumer takes it),
restores the memory from the database and awaits
``memory.compact(instructions=...)``, publishing the same frames a compaction
inside a turn does (started, finished or failed, the stored records) between
a ``turn_started`` and a ``finished`` of kind ``compact``.

Exactly once: the frame's one-time token is spent (``once.spend``, an
``ActionToken`` row) before anything is written, so a double-submitted frame
(a double click, two tabs with one form) compacts once; the second is told it
was done. A compaction that changes nothing (nothing to fold, a failed
summary) gives its token back, so the same form may be sent again. A crash
between spending and compacting leaves the token spent and the log as it was
(the form is then refused as done; reloading the page makes a new one).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from memory import LogError
from memory.log import records
from motus_web.providers import ChatModel
from motus_web.sessions import once
from motus_web.sessions.db_threads import on_db_thread
from motus_web.sessions.models import Session

from .render import RecordPublisher, last_position
from .turns import error_frame, restore_memory

logger = logging.getLogger(__name__)

Publish = Callable[[dict[str, Any]], Awaitable[None]]
ACTION = "compact"


def _spend(token: str, session: Session, user_pk: int) -> bool:
    """Spend ``token`` for this session's compaction; ``False`` when it was spent before."""
    user = get_user_model().objects.filter(pk=user_pk).first()
    try:
        with transaction.atomic():
            once.spend(token, action=ACTION, target=session.public_id, user=user)
    except once.AlreadyDoneError:
        return False
    return True


def _give_back(token: str) -> None:
    once.give_back(token, ACTION)


class CompactRun:
    """One "Compact now" of a session."""

    def __init__(self, session: Session, model: ChatModel, publish: Publish, user_pk: int) -> None:
        self.session = session
        self.model = model
        self.publish = publish
        self.user_pk = user_pk

    def stop(self) -> None:
        """A compaction is not stopped half-way: it is one record, written whole."""

    async def run(self, token: str, instructions: str | None) -> None:
        await self.publish({"type": "turn_started", "kind": ACTION, "retry": False})
        if not await on_db_thread(_spend)(token, self.session, self.user_pk):
            await self.publish(
                {
                    "type": "error",
                    "code": "already_done",
                    "message": "this compaction was already done (the form was sent twice)",
                    "retryable": False,
                }
            )
            await self.publish({"type": "finished", "kind": ACTION, "reason": "already_done"})
            return
        client = self.model.client()
        compacted = given_back = False
        try:
            memory = await on_db_thread(restore_memory)(self.session, self.model, client)
            memory.set_model(client=client, model_name=self.model.model)
            after = await on_db_thread(last_position)(self.session)
            publisher = RecordPublisher(self.session, after, self.publish)
            await self.publish(
                {
                    "type": "compaction",
                    "phase": "started",
                    "tokens_before": memory.estimate_context_tokens(),
                    "threshold": memory.token_threshold,
                    "manual": True,  # asked for, not the threshold passed
                    "instructions": instructions or "",
                }
            )
            outcome: list[dict[str, Any]] = []
            memory.add_listener(lambda record: _note_outcome(record, outcome))
            why = memory.nothing_to_fold()
            if why is None:
                compacted = await memory.compact(instructions=instructions) is not None
                await publisher.catch_up()
            result = outcome[-1] if outcome else _failed(why or "nothing to fold", skipped=True)
            await self.publish(result)
            finished = {"type": "finished", "kind": ACTION, "reason": "compacted"}
            if not compacted:  # said in words: no turn ran, so none failed
                finished.update(reason="not_compacted", why=result["error"])
                # Before the end frame: the page may send the form again at once.
                await on_db_thread(_give_back)(token)
                given_back = True
            await self.publish(finished)
        except LogError as error:
            await self.publish(error_frame(error))
            await self.publish({"type": "finished", "kind": ACTION, "reason": "error"})
        finally:
            if not compacted and not given_back:
                await on_db_thread(_give_back)(token)
            aclose = getattr(client, "aclose", None)
            if aclose is not None:
                await aclose()


def _failed(error: str, *, skipped: bool, tokens_before: int | None = None) -> dict[str, Any]:
    """The frame of a compaction that did not happen (``skipped``: not attempted)."""
    return {
        "type": "compaction",
        "phase": "failed",
        "skipped": skipped,
        "error": error[:500],
        "tokens_before": tokens_before,
    }


def _note_outcome(record: records.LogRecord, outcome: list[dict[str, Any]]) -> None:
    """The frame of the compaction's own record, as a turn's compaction publishes it."""
    if isinstance(record, records.Compaction):
        outcome.append(
            {
                "type": "compaction",
                "phase": "finished",
                "number": record.compaction_number or 0,
                "tokens_before": record.tokens_before,
                "tokens_after": record.tokens_after,
                "messages_compacted": record.messages_compacted,
                "model": record.model,
            }
        )
    elif isinstance(record, records.CompactionFailure):
        outcome.append(
            _failed(record.error or "failed", skipped=False, tokens_before=record.tokens_before)
        )
