"""A page of a session's timeline as the session page shows it.

Messages are grouped into their turn units (A: a user message, B: tool calls
and their results, C: a final answer); a B unit pairs each call with its
result by id. Events logged between messages sit where they happened. Each
message knows whether it is still in the live context, and if not, which
compaction (or reset) folded it; a tool result, whether a clearing left
only its stub there. Pure functions of rows already loaded: the
view decides the queries.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from motus_web.sessions import history
from motus_web.sessions.models import CompactionEvent, ContextChange, Message


@dataclass(frozen=True, slots=True)
class Fold:
    """Messages ``first``..``last`` left the live context at ``event``."""

    first: int
    last: int
    event: CompactionEvent | ContextChange
    kept: frozenset[int] = frozenset()  # seqs in the range replayed verbatim

    def covers(self, seq: int) -> bool:
        return self.first <= seq <= self.last and seq not in self.kept


def folds(events: Sequence[CompactionEvent | ContextChange]) -> list[Fold]:
    """What each event still in force took out of the context, in log order
    (``events`` in log order).

    A reverted compaction folds nothing any more; a reset empties everything
    before it; a rewind puts back the folds in force at its target and takes
    out the messages from there up to itself (``history.walk``).
    """

    def apply(active: tuple[Fold, ...], event: CompactionEvent | ContextChange) -> tuple[Fold, ...]:
        if isinstance(event, ContextChange):
            if event.kind == ContextChange.Kind.RESET and event.through_seq is not None:
                return (*active, Fold(0, event.through_seq, event))
        elif event.kind == CompactionEvent.Kind.OK and event.summarized_first_seq is not None:
            kept = frozenset(s for s in event.replayed_seqs or () if isinstance(s, int))
            last = event.summarized_last_seq
            return (*active, Fold(event.summarized_first_seq, last or 0, event, kept))
        elif event.kind == CompactionEvent.Kind.REVERT:
            for index in range(len(active) - 1, -1, -1):
                undone = active[index].event
                if isinstance(undone, CompactionEvent) and undone.number == event.reverts:
                    return active[:index] + active[index + 1 :]
        return active

    def rewound(active: tuple[Fold, ...], rewind: ContextChange, first: int) -> tuple[Fold, ...]:
        last = rewind.through_seq if rewind.through_seq is not None else -1
        return (*active, Fold(first, last, rewind)) if first <= last else active

    none: tuple[Fold, ...] = ()
    active = history.walk(sorted(events, key=lambda row: row.position), none, apply, rewound)
    return list(active)


def folded_by(seq: int, active: Sequence[Fold]) -> CompactionEvent | ContextChange | None:
    """The first event in force that took message ``seq`` out of the context."""
    return next((fold.event for fold in active if fold.covers(seq)), None)


def stubbed(events: Iterable[CompactionEvent | ContextChange]) -> dict[int, ContextChange]:
    """Seq -> the tool-result clearing whose stub stands for that result, for
    the clearings no ``tool_results_restored`` undid (``events`` in any
    order). A result a compaction folded since is the fold's to show."""
    out: dict[int, ContextChange] = {}
    for event in sorted(events, key=lambda row: row.position):
        if not isinstance(event, ContextChange):
            continue
        extra = event.record_extra
        if event.kind == ContextChange.Kind.TOOL_RESULTS_CLEARED:
            items = extra.get("cleared")
            for item in items if isinstance(items, list) else []:
                if isinstance(item, dict) and isinstance(item.get("seq"), int):
                    out[item["seq"]] = event
        elif event.kind == ContextChange.Kind.TOOL_RESULTS_RESTORED:
            undone = extra.get("reverts")
            out = {s: c for s, c in out.items() if c.record_extra.get("clearing_number") != undone}
    return out


@dataclass(slots=True)
class Entry:
    """One message with what the page shows beside it."""

    message: Message
    folded_by: CompactionEvent | ContextChange | None = None
    stubbed_by: ContextChange | None = None  # the clearing whose stub is in the context
    results: dict[str, Entry] = field(default_factory=dict)  # call id -> its result, same page


@dataclass(slots=True)
class Unit:
    """A turn unit's messages on this page (a unit may start on the page before)."""

    kind: str  # "A", "B" or "C"
    index: int
    entries: list[Entry] = field(default_factory=list)
    events: list[CompactionEvent | ContextChange] = field(default_factory=list)  # after it

    @property
    def message_count(self) -> int:
        return len(self.entries) + sum(len(entry.results) for entry in self.entries)

    @property
    def tokens(self) -> int:
        return sum(
            entry.message.tokens + sum(r.message.tokens for r in entry.results.values())
            for entry in self.entries
        )

    @property
    def tool_calls(self) -> int:
        return sum(len(_calls(entry.message)) for entry in self.entries)


def _calls(message: Message) -> list[dict[str, Any]]:
    calls = message.tool_calls
    return [call for call in calls if isinstance(call, dict)] if isinstance(calls, list) else []


def call_ids(message: Message) -> list[str]:
    return [call["id"] for call in _calls(message) if isinstance(call.get("id"), str)]


@dataclass(slots=True)
class Page:
    """The timeline of one page: events before its first message, then units."""

    leading: list[CompactionEvent | ContextChange]
    units: list[Unit]


def group(
    messages: Sequence[Message],
    events: Iterable[CompactionEvent | ContextChange],
    active: Sequence[Fold],
    *,
    first_page: bool,
) -> Page:
    """Group ``messages`` (one page, in seq order) into units, with ``events``
    placed after the message they follow (``through_seq``).

    Events before the page's first message are shown only on page 1 (those
    from before any message, ``through_seq`` -1, included).
    """
    if not messages:
        return Page([], [])
    events = list(events)  # read twice
    low, high = messages[0].seq, messages[-1].seq
    leading: list[CompactionEvent | ContextChange] = []
    after: dict[int, list[CompactionEvent | ContextChange]] = {}
    for event in sorted(events, key=lambda row: row.position):
        seq = event.through_seq
        if seq is None or seq > high:
            continue
        if seq < low:
            if first_page:
                leading.append(event)
        else:
            after.setdefault(seq, []).append(event)
    units: list[Unit] = []
    open_calls: dict[str, Entry] = {}
    stubs = stubbed(events)
    for message in messages:
        fold = folded_by(message.seq, active)
        entry = Entry(message, fold, stubs.get(message.seq) if fold is None else None)
        caller = _caller(message, open_calls)
        if caller is not None and units and units[-1].kind == message.unit:
            for call_id in message.answered_call_ids:
                caller.results.setdefault(call_id, entry)
        else:
            if not units or (units[-1].kind, units[-1].index) != (message.unit, message.unit_index):
                units.append(Unit(message.unit, message.unit_index))
            units[-1].entries.append(entry)
            open_calls.update(dict.fromkeys(call_ids(message), entry))
        units[-1].events.extend(after.get(message.seq, []))
    return Page(leading, units)


def _caller(message: Message, open_calls: dict[str, Entry]) -> Entry | None:
    """The entry on this page whose call ``message`` answers, if every id it answers is one."""
    if message.role != Message.Role.TOOL:
        return None
    answered = message.answered_call_ids
    callers = {id(open_calls[c]): open_calls[c] for c in answered if c in open_calls}
    if not answered or len(callers) != 1 or any(c not in open_calls for c in answered):
        return None
    caller = next(iter(callers.values()))
    if any(c in caller.results for c in answered):
        return None  # a second result for the same call shows on its own
    return caller
