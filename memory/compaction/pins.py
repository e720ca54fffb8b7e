"""The operator's word in the ledger: pins from instructions, corrections, unpinning.

An operator speaks to a compaction twice: in the instructions of an explicit
compaction (``compact(instructions=...)``, the dashboard's Compact now) and by
correcting a summary (``correct_summary``). What they say there outranks what
any summariser writes:

- **Pins.** Every identifier (``memory.compaction.identifiers``) and every
  quoted phrase the instructions name is pinned: a ledger entry with
  ``pinned_by="instructions"`` that stays verbatim in this summary and every
  later one, whichever summariser writes it (a user's ``compact_fn`` included),
  and never gives way to the budget, until ``unpin``. A clause that asks to
  drop something ("forget X", "no need to keep Y") pins nothing.
- **Corrections.** A corrected summary is authoritative: the ledger follows it.
  An entry whose value the corrected text no longer holds is removed (pinned
  or not: the correction is the operator's later word); every identifier in
  a line the operator wrote (a line of the corrected text that the summary
  corrected did not have) is pinned (``pinned_by="correction"``), whether or
  not the summary named it elsewhere: an operator who lists six ids means
  all six.
- **Unpinning.** An unpinned entry the conversation named stays an ordinary
  entry (its rank as found); one only the operator named leaves the ledger.

Pure functions on ``Ledger`` values; the state applies them the same way live
and on restore, and the records carry the ledger they leave.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace

from .identifiers import find_identifiers, normalise
from .ledger import PHRASE, USER_ID_RANK, Ledger, LedgerEntry

OPERATOR = "operator"
"""The ``role`` of an entry only the operator named."""
BY_INSTRUCTIONS = "instructions"
BY_CORRECTION = "correction"
PHRASE_MAX_CHARS = 200
"""A longer quotation is a passage, not a phrase to pin."""

_QUOTED = re.compile(
    r'"([^"\n]{2,200})"|\u201c([^\u201d\n]{2,200})\u201d|(?<!\w)\'([^\'\n]{2,200})\'(?!\w)'
)
_CLAUSE = re.compile(r"[^.;\n]+")
_LETTING_GO = re.compile(
    r"\b(?:drop|forget|omit|remove|discard|leave out|ignore|no need|"
    r"(?:don'?t|do not|needn'?t) (?:keep|need|mention|include))\b",
    re.IGNORECASE,
)


def pins_of(instructions: str | None, number: int) -> list[LedgerEntry]:
    """The entries ``instructions`` pin at compaction ``number``, in order of
    appearance: quoted phrases, then identifiers outside them, each once."""
    if not instructions:
        return []
    found: list[LedgerEntry] = []
    seen: set[str] = set()

    def add(kind: str, value: str) -> None:
        entry = LedgerEntry(
            kind, value, "", None, OPERATOR, USER_ID_RANK, None, BY_INSTRUCTIONS, number
        )
        if entry.key not in seen:
            seen.add(entry.key)
            found.append(entry)

    for clause in _CLAUSE.findall(instructions):
        if _LETTING_GO.search(clause):
            continue
        rest = clause
        for match in _QUOTED.finditer(clause):
            phrase = next(g for g in match.groups() if g is not None).strip()
            if phrase and len(phrase) <= PHRASE_MAX_CHARS:
                add(PHRASE, phrase)
            rest = rest.replace(match.group(), " ")
        for identifier in find_identifiers(rest):
            add(identifier.kind, identifier.value)
    return found


def pinned(ledger: Ledger, pins: Iterable[LedgerEntry]) -> Ledger:
    """``ledger`` with ``pins`` pinned: an entry of the same key is marked as
    pinned where it stands; any other pin is added at the end."""
    entries = list(ledger.entries)
    index = {entry.key: i for i, entry in enumerate(entries)}
    for pin in pins:
        at = index.get(pin.key)
        if at is None:
            index[pin.key] = len(entries)
            entries.append(pin)
        elif not entries[at].pinned:
            entries[at] = replace(entries[at], pinned_by=pin.pinned_by, pinned_at=pin.pinned_at)
    return Ledger(tuple(entries))


def keep_pins(previous: Ledger, updated: Ledger) -> Ledger:
    """``updated`` (``previous`` with what new messages named) with every pin of
    ``previous`` it lost (a user's later value superseded it) carried on: a
    pin stays until the operator unpins it."""
    return pinned(updated, (entry for entry in previous.entries if entry.pinned))


def operator_only(ledger: Ledger) -> Ledger:
    """The pinned entries of ``ledger``: what a user's ``compact_fn`` summary
    carries (the rest of the ledger is the library's summarisers' only)."""
    return Ledger(tuple(entry for entry in ledger.entries if entry.pinned))


def corrected(ledger: Ledger, original: str, correction: str, number: int) -> Ledger:
    """The ledger after an operator replaced the summary ``original`` of
    compaction ``number`` with ``correction`` (see the module)."""
    haystack = normalise(correction)
    kept = [entry for entry in ledger.entries if normalise(entry.value) in haystack]
    had = set(original.splitlines())
    written = "\n".join(line for line in correction.splitlines() if line not in had)
    added = [
        LedgerEntry(i.kind, i.value, "", None, OPERATOR, USER_ID_RANK, None, BY_CORRECTION, number)
        for i in find_identifiers(written)
    ]
    return pinned(Ledger(tuple(kept)), added)


def unpinned(ledger: Ledger, values: Sequence[str]) -> tuple[Ledger, list[str]]:
    """``ledger`` with the pins whose value is one of ``values`` unpinned (see
    the module), and the values that were not pinned."""
    wanted = set(values)
    entries: list[LedgerEntry] = []
    for entry in ledger.entries:
        if not (entry.pinned and entry.value in wanted):
            entries.append(entry)
        elif entry.role != OPERATOR:
            entries.append(replace(entry, pinned_by="", pinned_at=None))
    found = {entry.value for entry in ledger.entries if entry.pinned}
    return Ledger(tuple(entries)), [value for value in values if value not in found]
