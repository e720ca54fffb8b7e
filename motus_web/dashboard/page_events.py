"""The event rows the session page reads, in a number of queries and rows that
does not grow with the page's place or, for a log that only compacted, with the
session's length.

A log without context changes (no reset, rewind, prompt change or summary
correction: the session's stored counts say so) keeps every compaction in
force that no revert names (``operations.undone_numbers``), in log order:
``timeline.folds`` of it is one fold per compaction in force, and the
messages of a page are folded by those whose ranges meet the page. So the
page reads, by index, only the compactions it lists, those logged among its
messages and those in force that fold one of them (a fold starts at most
``Session.longest_fold`` seqs before the page); the chart, the counts and
the latest size reading come from the session's stored aggregates. Any
other log is walked whole (``history``), as a restore would replay it:
rewinds and resets change what is in force.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

from motus_web.sessions import operations
from motus_web.sessions.models import CompactionEvent, ContextChange, Message, Session

from . import timeline

Event = CompactionEvent | ContextChange


@dataclass(frozen=True, slots=True)
class PageEvents:
    shown: list[Event]  # in log order, in full: those the timeline places and those listed
    active: list[timeline.Fold]  # in force, at least those that fold a message of the page
    listed: list[CompactionEvent]  # the latest ``listed`` compaction rows, in full
    undoable: CompactionEvent | None
    undone: int  # reverts logged
    in_context_from: int  # the first seq after which nothing is folded
    walked: bool  # every event row was read (``shown`` holds them all)


def of(session: Session, messages: list[Message], *, first_page: bool, listed: int) -> PageEvents:
    """The events of ``session`` for the page of ``messages`` (seq order)."""
    undone = operations.undone_numbers(session)
    if undone is None:
        return _walked(operations.events_of(session), listed)
    events = session.compaction_events
    newest = list(events.order_by("-position")[:listed])[::-1]
    found: dict[int, CompactionEvent] = {e.pk: e for e in newest}
    in_force = events.filter(kind=CompactionEvent.Kind.OK).exclude(number__in=undone)
    latest = in_force.order_by("-position").first()
    if latest is not None:
        found[latest.pk] = latest
    folding: list[CompactionEvent] = []
    if messages:
        low, high = messages[0].seq, messages[-1].seq
        placed = events.filter(through_seq__gte=-1 if first_page else low, through_seq__lte=high)
        found |= {e.pk: e for e in placed}
        folding = list(
            in_force.filter(
                summarized_first_seq__gte=low - session.longest_fold,
                summarized_first_seq__lte=high,
                summarized_last_seq__gte=low,
            )
        )
        found |= {e.pk: e for e in folding}
    shown: list[Event] = sorted(found.values(), key=lambda row: row.position)
    return PageEvents(
        shown=shown,
        active=timeline.folds(sorted(folding, key=lambda row: row.position)),
        listed=newest,
        undoable=operations.undoable([latest] if latest is not None else [])[0],
        undone=session.revert_count,
        in_context_from=_folded_through(session, in_force, undone) + 1,
        walked=False,
    )


def _folded_through(session: Session, in_force: QuerySet[CompactionEvent], undone: set[int]) -> int:
    """The highest seq a compaction in force folded; -1: none. Stored for a
    log that never undid; else the highest fold not undone, by index."""
    if not undone:
        return session.folded_through if session.folded_through is not None else -1
    found = (
        in_force.filter(summarized_first_seq__isnull=False, summarized_last_seq__isnull=False)
        .order_by("-summarized_last_seq")
        .values_list("summarized_last_seq", flat=True)
        .first()
    )
    return found if found is not None else -1


def _walked(events: list[Event], listed: int) -> PageEvents:
    active = timeline.folds(events)
    compactions = [e for e in events if isinstance(e, CompactionEvent)]
    return PageEvents(
        shown=events,
        active=active,
        listed=compactions[-listed:],
        undoable=operations.undoable(events)[0],
        undone=sum(1 for e in compactions if e.kind == CompactionEvent.Kind.REVERT),
        in_context_from=max((fold.last for fold in active), default=-1) + 1,
        walked=True,
    )
