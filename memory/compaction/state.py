"""``CompactionState``: the state of a compacting memory, and the only code that changes it.

On top of ``memory.state.ContextState`` (instructions, tools, context, open
batch, next seq) a compacting memory holds the compaction in force at the head
of its context: after a compaction the context is ``[continuation, *kept,
*messages added since]``, where the continuation carries the summary. Every
change below is applied the same way live and on restore:

- ``compact(record)``: the context becomes ``[continuation, *kept]``;
- ``revert(number)``: undo the compaction in force (any depth, one after
  another): the context goes back to what it was just before it, followed by
  every message added since (the documented choice for newer turns: they stay,
  in order; nothing is dropped or duplicated);
- ``correct_summary(record)``: the continuation carries a corrected summary,
  and the ledger follows the correction (``memory.compaction.pins``);
- ``unpin(number, values)``: the ledger stops carrying those pins;
- ``clear_tool_results(record)`` / ``restore_tool_results(number)``: old tool
  results become stubs in place (``memory.compaction.clearing``), and whole
  again; the clearings in force (``clearings``) hold the results they
  replaced. A compaction folds every stub (none is in what it keeps), so it
  ends the clearings in force; undoing it brings them back with its context;
- ``rewind(prefix, record)``: the state becomes the one a restore of the log
  up to an earlier point gives, keeping the counters that only grow (seq,
  turn unit, compaction and rewind numbers);
- ``clear_messages()`` / ``reset()``.

What undoing a compaction gives back is held in memory for the newest
``UNDO_SNAPSHOTS`` compactions in force; for deeper ones the memory reads it
from its log (the state is given a loader), so memory stays bounded by a few
contexts while a logged session can be undone to its first compaction.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Self

from ..errors import CompactionError
from ..log.records import Compaction, Rewind, ToolResultsCleared
from ..messages import ChatMessage
from ..state import ContextState, Entry, EntryMeta
from ..tokens.calibration import TokenCalibration
from . import pins
from .clearing import stub_message
from .ledger import Ledger, LedgerEntry
from .summariser.with_model import continuation_message

UNDO_SNAPSHOTS = 4
"""Compactions in force whose previous context is held in memory, newest first."""


@dataclass(slots=True)
class Clearing:
    """A tool-result clearing in force: its number and, by seq, each result it
    replaced with a stub (the message and its tokens as they were in the context)."""

    number: int
    originals: dict[int, tuple[ChatMessage, int]]


@dataclass(slots=True)
class Prior:
    """The context just before a compaction, the compaction in force then, and
    the tool-result clearings in force then."""

    entries: list[Entry]
    head: Head | None
    clearings: list[Clearing] = field(default_factory=list)


@dataclass(slots=True)
class Head:
    """The compaction in force at the head of the context.

    ``kept`` messages follow its continuation; ``prior`` is what undoing it
    gives back, when held in memory (``None``: read it from the log).
    """

    number: int
    through_seq: int | None
    summary: str
    continuation: str | None
    kept: int
    prior: Prior | None
    ledger: Ledger = field(default_factory=Ledger)

    def message(self) -> ChatMessage:
        """The continuation message: the exact text a record named, else our template."""
        if self.continuation is not None:
            return ChatMessage.user(self.continuation)
        return continuation_message(self.summary)


PriorLoader = Callable[[Head], Prior]
"""``load(head)``: the context just before the compaction ``head``, read from a log."""


class CompactionState(ContextState):
    """A ``ContextState`` with the compaction in force (see the module).

    ``compaction_number`` and ``rewind_number`` are the last numbers given
    out in the log; they only grow (a revert or a rewind does not give a
    number back), so every compaction and rewind record has its own.
    """

    def __init__(
        self,
        *,
        model_name: str | None,
        max_tool_result_tokens: int,
        calibration: TokenCalibration | None = None,
    ) -> None:
        super().__init__(
            model_name=model_name,
            max_tool_result_tokens=max_tool_result_tokens,
            calibration=calibration,
        )
        self.head: Head | None = None
        self.compaction_number = 0
        self.rewind_number = 0
        self.clearings: list[Clearing] = []
        self.clearing_number = 0

    def copy(self) -> Self:
        clone = super().copy()
        clone.head = copy.copy(self.head)
        clone.clearings = list(self.clearings)
        return clone

    @property
    def summary(self) -> str | None:
        """The summary the continuation carries, if a compaction is in force."""
        return self.head.summary if self.head is not None else None

    # -- compaction ------------------------------------------------------------

    def compact(self, record: Compaction) -> None:
        """Make the context ``[continuation, *kept]``, kept being the messages
        whose seq ``record.replayed_seqs`` lists (the log's name for the
        messages kept verbatim), in context order.

        The continuation is ``record.continuation`` verbatim when set, else
        our template around ``record.summary``. Raises ``CompactionError``
        when a kept seq is not in the context.
        """
        entries = self.entries()
        wanted = set(record.replayed_seqs or ())
        kept = [e for e in entries if e[1].seq is not None and e[1].seq in wanted]
        if len(kept) != len(wanted):
            found = {e[1].seq for e in kept}
            missing = sorted(s for s in wanted if s not in found)
            raise CompactionError(f"compaction keeps seqs {missing} not in the context")
        number = record.compaction_number or self.compaction_number + 1
        head = Head(
            number=number,
            through_seq=record.through_seq,
            summary=record.summary or "",
            continuation=record.continuation,
            kept=len(kept),
            prior=Prior(entries, self.head, list(self.clearings)),
            ledger=Ledger.from_record(record.ledger),
        )
        tokens = record.summary_tokens
        message = head.message()
        if tokens is None:
            tokens = self.message_tokens(message)
        self.head = head
        self.compaction_number = number
        self._forget_old_priors()
        self.replace([(message, EntryMeta(None, None, None), tokens), *kept])
        self._drop_folded_clearings()

    def _forget_old_priors(self) -> None:
        """Keep the previous contexts of the newest ``UNDO_SNAPSHOTS`` heads only."""
        head = self.head
        for _ in range(UNDO_SNAPSHOTS - 1):
            if head is None or head.prior is None:
                return
            head = head.prior.head
        if head is not None and head.prior is not None:
            head.prior = None

    def revert(self, number: int | None = None, load: PriorLoader | None = None) -> int:
        """Undo the compaction in force (``number``, when given, must be it);
        returns its number.

        Raises ``CompactionError`` when no compaction is in force, when
        ``number`` is not the one in force, or when its previous context is
        neither held nor loadable (``load`` is ``None``: a memory without a log).
        """
        head = self.head
        if head is None:
            raise CompactionError(
                "cannot revert: there has been no compaction in this context"
                if self.compaction_number == 0
                else "cannot revert: no compaction is in force (each one was already reverted, "
                "or the context was cleared since)"
            )
        if number is not None and number != head.number:
            raise CompactionError(
                f"cannot revert compaction {number}: compaction {head.number} is the one in force"
            )
        prior = head.prior
        if prior is None:
            if load is None:
                raise CompactionError(
                    f"cannot revert compaction {head.number}: a memory without a log holds the "
                    f"context before its {UNDO_SNAPSHOTS} newest compactions only"
                )
            prior = load(head)
        since = self.entries()[1 + head.kept :]
        self.head = prior.head
        self.replace([*prior.entries, *since])
        numbers = {c.number for c in prior.clearings}
        self.clearings = [*prior.clearings, *(c for c in self.clearings if c.number not in numbers)]
        self._drop_folded_clearings()
        return head.number

    @property
    def pins(self) -> list[LedgerEntry]:
        """The entries the operator pinned that the compaction in force carries."""
        head = self.head
        return [entry for entry in head.ledger.entries if entry.pinned] if head else []

    def correct_summary(
        self, number: int | None, summary: str, ledger: Ledger | None = None
    ) -> int:
        """The compaction in force (``number``, when given, must be it) carries
        ``summary`` from now on, and the ledger ``ledger`` (``None``: the
        ledger that follows the correction, ``pins.corrected``); returns its
        number. Raises ``CompactionError`` when none is in force, ``number``
        is another, or ``summary`` is empty."""
        head = self.head
        if head is None or (number is not None and head.number != number):
            raise CompactionError(
                f"cannot correct the summary of compaction {number}: "
                + (f"compaction {head.number} is the one in force" if head else "none is in force")
            )
        if not summary.strip():
            raise CompactionError("a corrected summary must not be empty")
        if ledger is None:
            ledger = pins.corrected(head.ledger, head.summary, summary, head.number)
        head.ledger = ledger
        head.summary = summary
        head.continuation = None
        message = head.message()
        entries = self.entries()
        self.replace([(message, entries[0][1], self.message_tokens(message)), *entries[1:]])
        return head.number

    def unpin(self, number: int | None, values: list[str]) -> int:
        """Stop carrying the pins ``values`` of the compaction in force
        (``number``, when given, must be it); the context is unchanged (the
        summary holds them now; the next compaction may let them go).
        Returns its number. Raises ``CompactionError`` when none is in force,
        ``number`` is another, or a value is not pinned."""
        head = self.head
        if head is None or (number is not None and head.number != number):
            raise CompactionError(
                "cannot unpin: "
                + (
                    f"compaction {head.number} is the one in force"
                    if head
                    else "no compaction is in force"
                )
            )
        ledger, missing = pins.unpinned(head.ledger, values)
        if missing or not values:
            raise CompactionError(f"cannot unpin {', '.join(missing) or 'nothing'}: not pinned")
        head.ledger = ledger
        return head.number

    # -- tool-result clearing ----------------------------------------------------

    def cleared_seqs(self) -> set[int]:
        """The seqs whose results are stubs in the context now."""
        return {seq for clearing in self.clearings for seq in clearing.originals}

    def clear_tool_results(self, record: ToolResultsCleared) -> int:
        """Replace each result ``record.cleared`` names (by seq) with its stub
        (``memory.compaction.clearing``); returns the clearing's number.

        The stub is the item's ``stub`` text, its tokens the item's
        ``stub_tokens`` (counted when absent). Raises ``CompactionError`` when
        an item names no seq, a seq that is not a tool result in the context,
        or one already cleared; the context is then unchanged.
        """
        index = {meta.seq: i for i, meta in enumerate(self.meta) if meta.seq is not None}
        already = self.cleared_seqs()
        changes: list[tuple[int, ChatMessage, int]] = []
        for item in record.cleared or ():
            seq, stub = item.get("seq"), item.get("stub")
            i = index.get(seq) if isinstance(seq, int) else None
            if i is None or self.messages[i].role != "tool" or not isinstance(stub, str):
                raise CompactionError(f"clearing names seq {seq!r}, not a tool result in context")
            if seq in already:
                raise CompactionError(f"clearing names seq {seq}, already cleared")
            message = stub_message(self.messages[i], stub)
            tokens = item.get("stub_tokens")
            if not isinstance(tokens, int) or isinstance(tokens, bool):
                tokens = self.message_tokens(message)
            changes.append((i, message, tokens))
        self.sync()
        originals: dict[int, tuple[ChatMessage, int]] = {}
        messages, tokens_list = list(self.messages), list(self.tokens)
        for i, message, tokens in changes:
            seq = self.meta[i].seq
            assert seq is not None
            originals[seq] = (messages[i], tokens_list[i])
            messages[i], tokens_list[i] = message, tokens
        self.replace_columns(messages, list(self.meta), tokens_list)
        number = record.clearing_number or self.clearing_number + 1
        self.clearing_number = max(self.clearing_number, number)
        self.clearings.append(Clearing(number, originals))
        return number

    def restore_tool_results(self, number: int | None = None) -> int:
        """Undo the newest tool-result clearing in force (``number``, when
        given, must be it): its results still in the context are whole again.
        Returns its number. Raises ``CompactionError`` when none is in force
        or ``number`` is another."""
        if not self.clearings:
            raise CompactionError(
                "cannot restore tool results: no clearing is in force (none was made, "
                "a compaction folded its stubs, or it was undone already)"
            )
        clearing = self.clearings[-1]
        if number is not None and number != clearing.number:
            raise CompactionError(
                f"cannot restore the tool results of clearing {number}: "
                f"clearing {clearing.number} is the newest in force"
            )
        self.sync()
        messages, tokens = list(self.messages), list(self.tokens)
        for i, meta in enumerate(self.meta):
            if meta.seq is not None and meta.seq in clearing.originals:
                messages[i], tokens[i] = clearing.originals[meta.seq]
        self.replace_columns(messages, list(self.meta), tokens)
        self.clearings.pop()
        return clearing.number

    def _drop_folded_clearings(self) -> None:
        """Keep the clearings with a stub still in the context, and of each only
        those stubs (a compaction folds them)."""
        present = {meta.seq for meta in self.meta if meta.seq is not None}
        kept: list[Clearing] = []
        for clearing in self.clearings:
            originals = {s: o for s, o in clearing.originals.items() if s in present}
            if originals:
                kept.append(Clearing(clearing.number, originals))
        self.clearings = kept

    # -- rewind ----------------------------------------------------------------

    def rewind(self, prefix: CompactionState, record: Rewind) -> None:
        """Become ``prefix`` (the state of the log up to ``record.target``),
        keeping the counters that only grow at what ``record`` says."""
        through = record.through_seq if record.through_seq is not None else self.next_seq - 1
        unit_index = record.unit_index if record.unit_index is not None else -1
        numbers = (record.compaction_number or 0, record.rewind_number or 0)
        self.set_system_prompt(prefix.system_prompt, prefix.system_role)
        self.set_tools(prefix.tool_schemas)
        self.set_memory_block(prefix.memory_block)
        self.replace(prefix.entries())
        self.head = copy.copy(prefix.head)
        self.clearings = list(prefix.clearings)
        self.clearing_number = max(
            self.clearing_number, prefix.clearing_number, record.clearing_number or 0
        )
        self.tracker = prefix.tracker.copy()
        # A new turn unit after the rewind gets a number the log has not used.
        self.tracker.unit_index = max(self.tracker.unit_index, unit_index)
        self.next_seq = max(self.next_seq, through + 1)
        self.compaction_number = max(self.compaction_number, numbers[0])
        self.rewind_number = max(self.rewind_number, numbers[1])

    # -- clearing --------------------------------------------------------------

    def clear_messages(self) -> int:
        """Empty the context; the summary goes with it, the numbering stays."""
        cleared = super().clear_messages()
        self.head = None
        self.clearings = []
        return cleared

    def reset(self) -> int:
        """Start everything again, the compaction numbering included."""
        cleared = self.clear_messages()
        self.compaction_number = 0
        self.clearing_number = 0
        return cleared
