"""The operator's pins in force, read from a session's event rows.

A pin (``memory.compaction.pins``) lives in the ledger of the compaction in
force; a ``summary_correction`` or ``unpin`` record of that compaction carries
the ledger it leaves. So the pins in force are the pinned entries of the
newest ledger among those rows, walked the way the library applies the
records (``history``: an undo puts the compaction before back in force, with
its own ledger; a reset clears it; a rewind takes what was in force at its
target). A log without context changes needs only the compaction in force.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import history, operations
from .models import CompactionEvent, ContextChange, Session

UNPIN = "unpin"
_LEDGER_CHANGES = (history.SUMMARY_CORRECTION, UNPIN)


@dataclass(frozen=True, slots=True)
class Pin:
    """One pinned value: its ``kind`` (an identifier kind or ``"phrase"``),
    ``by`` (``"instructions"`` or ``"correction"``) and ``at`` (the number of
    the compaction whose instructions or correction pinned it)."""

    value: str
    kind: str
    by: str
    at: int | None


@dataclass(frozen=True, slots=True)
class Pins:
    """The pins in force and the compaction whose ledger carries them."""

    compaction: CompactionEvent | None
    pins: list[Pin]


Stack = tuple[tuple[CompactionEvent, Any], ...]


def in_force(session: Session, events: Sequence[CompactionEvent | ContextChange] | None) -> Pins:
    """The pins in force after the session's log. ``events``: every event row
    in log order when the caller read them already (``None``: read what is
    needed)."""
    if events is None and not session.change_count:
        head = operations.in_force(session)
        if head is None:
            return Pins(None, [])
        return Pins(head, _pins_of(head.record_extra.get("ledger")))
    rows = list(events) if events is not None else operations.events_of(session)
    empty: Stack = ()
    stack = history.walk(rows, empty, _apply, lambda state, rewind, first: state)
    if not stack:
        return Pins(None, [])
    head, ledger = stack[-1]
    return Pins(head, _pins_of(ledger))


def _apply(stack: Stack, event: CompactionEvent | ContextChange) -> Stack:
    if isinstance(event, CompactionEvent):
        if event.kind == CompactionEvent.Kind.OK:
            return (*stack, (event, event.record_extra.get("ledger")))
        if event.kind == CompactionEvent.Kind.REVERT and stack:
            return stack[:-1]
        return stack
    if event.kind == ContextChange.Kind.RESET:
        return ()
    extra = event.record_extra
    if (
        event.kind in _LEDGER_CHANGES
        and stack
        and extra.get("compaction_number") == stack[-1][0].number
        and isinstance(extra.get("ledger"), list)
    ):
        return (*stack[:-1], (stack[-1][0], extra["ledger"]))
    return stack


def _pins_of(ledger: object) -> list[Pin]:
    if not isinstance(ledger, list):
        return []
    return [
        Pin(str(entry["value"]), str(entry.get("kind", "")), str(entry["pinned_by"]), _int(entry))
        for entry in ledger
        if isinstance(entry, Mapping) and entry.get("pinned_by") and entry.get("value")
    ]


def _int(entry: Mapping[str, Any]) -> int | None:
    at = entry.get("pinned_at")
    return at if isinstance(at, int) and not isinstance(at, bool) else None
