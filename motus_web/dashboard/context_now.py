"""What the model sees now, for a session whose restore would replay every message.

A session without event rows (no compaction, failed attempt, warning, reset,
rewind, prompt or tools change) has no checkpoint: its live context holds
every message it logged, and the library's restore replays all of them (half
a minute at 290,000 messages). The context page lists only the latest
``live_context.SHOWN_TAIL`` of them in full. So, past ``COUNTED_FROM``
messages, the library restores the log's ``session_meta`` and only the
messages from the turn unit that holds the first message listed (a unit
starts at a user message, so no tool result is parted from its call), and
the tokens the log states for the messages before, by part kind, are the
session's stored totals (``Session.part_totals``) less the tail's. The
memory's estimate of a request is the sum of those same logged counts
(``memory.state``: instructions, tool schemas, messages, priming), so the
page's figures are those of the whole restore (the tests
compare the two) as long as every message logged entered the context as it
is: when the sum differs from the context size the log states after its last
message, the page falls back to the whole restore.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.db.models import Count, Sum

from memory import LogProblem
from motus_web.sessions import aggregates, memories, rows
from motus_web.sessions.models import Message, Session

from . import live_context, steps

COUNTED_FROM = 2_000  # messages past which the earlier part of the context is counted in SQL


def request_now(session: Session) -> steps.Request:
    """The request the session's next reply would be sent (``steps.Request``),
    from the library's restore of the log, or of its latest turns with the
    earlier messages counted in the database. Raises what ``restore`` raises."""
    start = _tail_start(session)
    if start is None:
        return steps.request_of(session, memories.restore(session))
    # An assistant message that calls tools opens a B unit, and only such a one
    # (``memory.units``): the unit tells the part without reading the calls.
    # The session's stored totals by part, less those of the tail (a few hundred rows).
    tail = (
        session.messages.filter(seq__gte=start)
        .values_list("role", "unit")
        .annotate(all_tokens=Sum("tokens"), messages=Count("pk"))
        .values_list("role", "unit", "all_tokens", "messages")
    )
    before = {key: list(sums) for key, sums in session.part_totals.items()}
    for role, unit, all_tokens, messages in tail:
        aggregates.add_part(before, role, unit, -all_tokens, -messages)
    tokens: dict[str, int] = {}
    count = 0
    for role, unit, all_tokens, messages in aggregates.part_sums(before):
        kind = live_context.kind_of(role, unit == Message.Unit.B)
        tokens[kind] = tokens.get(kind, 0) + all_tokens
        count += messages
    memory = memories.restore_from(session, _Tail(session, start))
    seqs = tuple(memory.get_session_state().seqs)
    known = [seq for seq in seqs if seq is not None]
    logged = dict(session.messages.filter(seq__in=known).values_list("seq", "tokens"))
    live = live_context.of(memory, seqs, logged, tokens, count)
    if live.estimate != session.context_tokens:
        # The log's own size of the context after its last message disagrees: the
        # memory left a message out or added one (an abandoned call's placeholder
        # result). Only the whole restore says which.
        return steps.request_of(session, memories.restore(session))
    return steps.Request(memory, live, seqs)


def _tail_start(session: Session) -> int | None:
    """The seq the restored tail starts at; ``None`` when the whole log is restored."""
    if session.message_count <= COUNTED_FROM or session.memory_type != "compact":
        return None
    if session.compaction_events.exists() or session.context_changes.exists():
        return None
    listed = session.messages.order_by("-seq").values_list("seq", flat=True)
    first = listed[live_context.SHOWN_TAIL - 1 : live_context.SHOWN_TAIL].first()
    if first is None:
        return None
    unit = (
        session.messages.filter(seq__lte=first, unit=Message.Unit.A)
        .order_by("-seq")
        .values_list("seq", flat=True)
        .first()
    )
    return unit or None  # from seq 0 the tail is the whole log


class _Tail(memories.DatabaseView):
    """The session's ``session_meta`` and its messages from seq ``start`` on, read-only."""

    def __init__(self, session: Session, start: int) -> None:
        super().__init__(session.public_id)
        self.session = session
        self.start = start

    def read(
        self, session_id: str, problems: list[LogProblem] | None = None
    ) -> Iterator[dict[str, Any]]:
        if session_id != self.source_id:
            return super().read(session_id, problems)
        return self._records()

    def read_reversed(
        self, session_id: str, problems: list[LogProblem] | None = None
    ) -> Iterator[dict[str, Any]]:
        if session_id != self.source_id:
            return super().read_reversed(session_id, problems)
        return reversed(list(self._records()))

    def _records(self) -> Iterator[dict[str, Any]]:
        yield rows.meta_of(self.session)
        tail = self.session.messages.filter(seq__gte=self.start).order_by("seq")
        for row in tail:
            yield rows.record_of(row)
