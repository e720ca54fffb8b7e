"""What is in force after a session's events, rewinds included, read from its rows.

The library decides what a log means; the pages that list a long session's
events (which compaction an undo reverts, which messages are no longer in
the live context) read the few event rows instead of restoring the log.
This module walks those rows the way the library's restore applies the
records, for a rewind too: a ``rewind`` record makes the state what it was
at its target point (``memory.log.prefix.LogPoint``), and the messages from
that point up to the rewind are no longer in force. The rule that places a
point among the events: every event record's ``through_seq`` is the last
seq given out when it was logged, and seqs only grow, so the events before
message ``S`` are exactly those with ``through_seq < S``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from memory import LogPoint

from .models import CompactionEvent, ContextChange

Event = CompactionEvent | ContextChange
State = TypeVar("State")
REWIND = "rewind"
SUMMARY_CORRECTION = "summary_correction"


def is_rewind(event: Event) -> bool:
    return isinstance(event, ContextChange) and event.kind == REWIND


def rewind_number(event: ContextChange) -> int | None:
    number = event.record_extra.get("rewind_number")
    return number if isinstance(number, int) and not isinstance(number, bool) else None


def rewind_target(event: ContextChange) -> LogPoint | None:
    """The point a rewind row went back to; ``None`` when its record names none."""
    try:
        return LogPoint.from_dict(event.record_extra.get("target"))
    except ValueError:
        return None


def walk(
    events: Sequence[Event],
    initial: State,
    apply: Callable[[State, Event], State],
    rewound: Callable[[State, ContextChange, int], State],
) -> State:
    """The state after ``events`` (log order): ``apply`` gives the state after
    each event but a rewind; a rewind takes the state at its target point and
    ``rewound(state, rewind, first)`` adds that messages ``first`` up to the
    rewind's ``through_seq`` are no longer in force. A rewind whose target is
    not among the events before it (a record this walk cannot place) leaves
    the state as it was."""
    states = [initial]  # states[k]: the state after events[:k]
    for index, event in enumerate(events):
        state = states[-1]
        if isinstance(event, ContextChange) and is_rewind(event):
            found = _prefix(events[:index], rewind_target(event))
            if found is not None:
                length, first = found
                state = rewound(states[length], event, first)
        else:
            state = apply(state, event)
        states.append(state)
    return states[-1]


def _prefix(before: Sequence[Event], point: LogPoint | None) -> tuple[int, int] | None:
    """How many of ``before`` lie before ``point``, and the first seq after it."""
    if point is None:
        return None
    if point.kind in ("after_message", "before_message"):
        length = sum(1 for e in before if _through(e) < point.key)
        return length, point.key + (1 if point.kind == "after_message" else 0)
    for index in range(len(before) - 1, -1, -1):
        event = before[index]
        if _is_point(event, point):
            return index, _through(event) + 1
    return None


def _is_point(event: Event, point: LogPoint) -> bool:
    if point.kind == "before_rewind":
        return (
            isinstance(event, ContextChange)
            and is_rewind(event)
            and (rewind_number(event) == point.key)
        )
    return (
        isinstance(event, CompactionEvent)
        and event.kind == CompactionEvent.Kind.OK
        and event.number == point.key
        and (point.through_seq is None or event.through_seq == point.through_seq)
    )


def _through(event: Event) -> int:
    return event.through_seq if event.through_seq is not None else -1


def compactions_in_force(events: Sequence[Event]) -> tuple[CompactionEvent, ...]:
    """The compactions in force after ``events``, oldest first, as the
    library replays them: a compaction is put in force, an undo takes the
    latest back, a reset clears them, a rewind makes them what they were at
    its target."""

    def apply(state: tuple[CompactionEvent, ...], event: Event) -> tuple[CompactionEvent, ...]:
        if isinstance(event, ContextChange):
            return () if event.kind == ContextChange.Kind.RESET else state
        if event.kind == CompactionEvent.Kind.OK:
            return (*state, event)
        if event.kind == CompactionEvent.Kind.REVERT and state:
            return state[:-1]
        return state

    none: tuple[CompactionEvent, ...] = ()
    return walk(events, none, apply, lambda state, _rewind, _first: state)
