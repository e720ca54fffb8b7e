"""The event rows the session page reads, in a number of queries and rows that
does not grow with the page's place or, for a log that only compacted, with the
session's length.

A log without reverts and without context changes (no reset, rewind, prompt
change or summary correction) keeps every compaction in force, in log order:
``timeline.folds`` of it is one fold per compaction, and the messages of a
page are folded by the compactions whose ranges meet the page. So the page
reads every compaction's few number columns (for the chart, the count and the
latest size reading), and in full only the compactions it shows or that fold
one of its messages. Any other log is walked whole (``history``), as a
restore would replay it: reverts and rewinds change what is in force.
"""

from __future__ import annotations

from dataclasses import dataclass

from motus_web.sessions import operations
from motus_web.sessions.models import CompactionEvent, ContextChange, Message, Session

from . import timeline

Event = CompactionEvent | ContextChange
# What the chart, the counts and the size reading read of every compaction row.
NARROW = (
    "session_id",
    "position",
    "kind",
    "number",
    "trigger",
    "through_seq",
    "summarized_first_seq",
    "summarized_last_seq",
    "tokens_before",
    "tokens_after",
)


@dataclass(frozen=True, slots=True)
class PageEvents:
    shown: list[Event]  # in log order, in full: those the timeline places and those listed
    active: list[timeline.Fold]  # in force, at least those that fold a message of the page
    compactions: list[CompactionEvent]  # every compaction row, in log order (maybe narrow)
    listed: list[CompactionEvent]  # the latest ``listed`` compaction rows, in full
    undoable: CompactionEvent | None
    undone: int  # reverts logged
    in_context_from: int  # the first seq after which nothing is folded


def of(session: Session, messages: list[Message], *, first_page: bool, listed: int) -> PageEvents:
    """The events of ``session`` for the page of ``messages`` (seq order)."""
    reverts = session.compaction_events.filter(kind=CompactionEvent.Kind.REVERT)
    if reverts.exists() or session.context_changes.exists():
        return _walked(operations.events_of(session), listed)
    compactions = list(session.compaction_events.only(*NARROW).order_by("position"))
    low = -1 if first_page or not messages else messages[0].seq
    high = messages[-1].seq if messages else -1
    ok = [e for e in compactions if e.kind == CompactionEvent.Kind.OK]
    folding = [e for e in ok if e.summarized_first_seq is not None]
    wanted = {e.pk for e in compactions[-listed:]} | {e.pk for e in ok[-1:]}
    wanted |= {
        e.pk for e in compactions if e.through_seq is not None and low <= e.through_seq <= high
    }
    wanted |= {
        e.pk
        for e in folding
        if messages
        and e.summarized_first_seq <= high  # type: ignore[operator]
        and (e.summarized_last_seq or 0) >= messages[0].seq
    }
    full = {e.pk: e for e in session.compaction_events.filter(pk__in=wanted)}
    shown: list[Event] = sorted(full.values(), key=lambda row: row.position)
    folding_keys = {e.pk for e in folding}
    folds = timeline.folds([e for e in shown if e.pk in folding_keys])
    latest = [full[e.pk] for e in ok[-1:]]
    return PageEvents(
        shown=shown,
        active=folds,
        compactions=compactions,
        listed=[full[e.pk] for e in compactions[-listed:]],
        undoable=operations.undoable(latest)[0],
        undone=0,
        in_context_from=max(((e.summarized_last_seq or 0) for e in folding), default=-1) + 1,
    )


def _walked(events: list[Event], listed: int) -> PageEvents:
    active = timeline.folds(events)
    compactions = [e for e in events if isinstance(e, CompactionEvent)]
    return PageEvents(
        shown=events,
        active=active,
        compactions=compactions,
        listed=compactions[-listed:],
        undoable=operations.undoable(events)[0],
        undone=sum(1 for e in compactions if e.kind == CompactionEvent.Kind.REVERT),
        in_context_from=max((fold.last for fold in active), default=-1) + 1,
    )
