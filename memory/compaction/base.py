"""``CompactionBase``: boundary-aware compaction shared by compacting memories.

Compaction is a boundary, not a rewrite. At a clean turn boundary (no tool
call waiting for its result) the context is split in two: the messages to
fold into a summary, and the messages kept verbatim after it. What is kept
depends on the last turn unit:

- **A** (a user message): the pending request is kept, everything before it
  is summarised;
- **B** (tool calls and all their results): the unit is kept, and so is the
  newest user request it works on; the rest is summarised;
- **C** (a final answer): everything is summarised.

The new context is ``[system prompt, continuation(summary), *kept]``. There is
at most one continuation message: a new summary folds the previous one in.
Kept messages are the same objects, byte-identical. A compaction that fails
(the summariser raises, times out, returns nothing, or, when automatic, would
not lower the token count) changes nothing, is recorded, and is tried again at
the next boundary. An explicit ``compact()`` does what it is asked on any
context with something to fold, as the reference does: a summary longer than
what it folds is committed, with a ``warning`` on its compaction record and
trace event (the guard stays for automatic compaction, where a summary that
does not shrink the context would fire again at every boundary). When model
summarisation keeps failing and the context is about to overflow, the
offline summariser takes over. When even the floor (system
prompt + summary + kept messages) is above the threshold, one warning is
recorded and auto-compaction skips the boundaries where that stays true,
instead of compacting again at every one.

With the config's ``clear_tool_results`` on, a compaction starts with the
cheap step: tool results older than the newest few become one-line stubs
(``memory.compaction.clearing``, a ``tool_results_cleared`` record), and a
summary is written only when the context is still above the threshold.

The state itself (``memory.compaction.state.CompactionState``) changes only
through its own methods; this class decides when and records what it did.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ..base import BaseMemory
from ..clients.base import ChatClient
from ..config import CompactionMemoryConfig
from ..errors import CompactionError
from ..log.records import (
    Compaction,
    CompactionFailure,
    CompactionRevert,
    CompactionWarning,
    Reset,
    SummaryCorrection,
    ToolResultsCleared,
    ToolResultsRestored,
    Unpin,
    now_iso,
)
from ..messages import ChatMessage
from ..state import Ingested
from ..tokens import REPLY_PRIMING_TOKENS
from ..tokens.model_limits import compaction_threshold
from . import checkpoint, clearing, pins, policy
from .checkpoint import Checkpoint
from .ledger import LEDGER_SHARE, Ledger, LedgerEntry, compose, narrative_of
from .state import CompactionState, PriorLoader
from .summariser import (
    FunctionSummariser,
    ModelSummariser,
    OfflineSummariser,
    Summariser,
    SummaryRequest,
    named_summariser,
)
from .summariser.with_model import CompactFn, Summary, continuation_message

logger = logging.getLogger("memory.compaction")


@dataclass(frozen=True, slots=True)
class Draft:
    """A summary ready to commit: the tokens of its continuation message and of
    the context after it, and the ledger it carries (and what gave way)."""

    summary: Summary
    continuation_tokens: int
    tokens_after: int
    ledger: Ledger
    given_way: list[LedgerEntry]
    warning: str | None = None


def compaction_trace_fields(record: Compaction) -> dict[str, Any]:
    """A compaction's trace event: the record's figures, without its bulky text.

    ``ledger_entries`` (how many the ledger carries); when the ledger's budget
    was full, ``ledger_full`` (``True``), ``ledger_given_way`` (how many entries
    gave way), ``ledger_given_way_by_user`` (the values of the user's among
    them) and ``ledger_gives_way`` (``LEDGER_FULL_NOTE``: the order they go in),
    as the compaction page says it."""
    bulky = ("type", "ts", "summary", "checkpoint", "ledger", "ledger_given_way")
    fields = {k: v for k, v in record.to_dict().items() if k not in bulky}
    fields["ledger_entries"] = len(record.ledger or ())
    fields["ledger_full"] = bool(record.ledger_given_way)
    if record.ledger_given_way:
        fields["ledger_given_way"] = len(record.ledger_given_way)
        fields["ledger_given_way_by_user"] = [
            entry["value"]
            for entry in record.ledger_given_way
            if entry.get("role") == "user" and isinstance(entry.get("value"), str)
        ]
        fields["ledger_gives_way"] = LEDGER_FULL_NOTE
    return fields


LEDGER_FULL_NOTE = (
    "the ledger's budget was full; what gives way first: identifiers only tool results "
    "named, then the assistant's, then the user's names, numbers and dates, then the "
    "user's identifiers; instructions and what the user asked to remember last"
)


def clearing_trace_fields(record: ToolResultsCleared) -> dict[str, Any]:
    """A clearing's trace event: its figures and the calls it stubbed, without the stubs."""
    items = record.cleared or []
    return {
        "clearing_number": record.clearing_number,
        "trigger": record.trigger,
        "through_seq": record.through_seq,
        "keep": record.keep,
        "results_cleared": len(items),
        "cleared_seqs": [item.get("seq") for item in items],
        "tools": sorted({str(item.get("name")) for item in items if item.get("name")}),
        "tokens_freed": clearing.freed_tokens(items),
        "tokens_before": record.tokens_before,
        "tokens_after": record.tokens_after,
    }


Trigger = Literal["auto", "manual"]
OnCompact = Callable[[dict[str, Any]], object]
LEDGER_SLACK_TOKENS = 32  # unused ledger room worth a second offline pass


class CompactionBase(BaseMemory):
    """Auto-compacting memory; see the module docstring for the rules.

    ``client``/``model_name`` may be left out and filled later by
    ``set_model()`` (the agent does this). The summariser is, in order: the
    ``compact_fn`` given, a model through ``client`` (``compact_model_name``,
    else the agent's model), else the offline extractive summariser
    (``memory.compaction.summariser``).
    """

    memory_type = "compact"
    _state: CompactionState

    def __init__(
        self,
        *,
        config: CompactionMemoryConfig | None = None,
        compact_fn: CompactFn | None = None,
        on_compact: OnCompact | None = None,
        client: ChatClient | None = None,
        model_name: str | None = None,
        compaction_timeout_s: float = 120.0,
        enable_memory_tools: bool = True,
    ) -> None:
        self.config = config or CompactionMemoryConfig()
        super().__init__(
            model_name=model_name,
            max_tool_result_tokens=self.config.max_tool_result_tokens,
            enable_memory_tools=enable_memory_tools,
        )
        self._client = client
        self._compact_fn = compact_fn
        self._on_compact = on_compact
        self._compact_model_name = self.config.compact_model_name
        self._compaction_timeout_s = compaction_timeout_s
        # The compact_fn's adapter, kept: reading its signature every
        # compaction would cost more than a stub's whole compaction.
        self._function_summariser: FunctionSummariser | None = None
        self._consecutive_failures = 0
        self._floor_warned = False

    def _new_state(self, model_name: str | None, max_tool_result_tokens: int) -> CompactionState:
        return CompactionState(model_name=model_name, max_tool_result_tokens=max_tool_result_tokens)

    # -- model -----------------------------------------------------------------

    def set_model(self, *, client: ChatClient | None = None, model_name: str | None = None) -> None:
        """Fill the client and model names that were not given at construction."""
        super().set_model(model_name=model_name)
        if self._client is None:
            self._client = client
        if self._compact_model_name is None:
            self._compact_model_name = self.model_name

    @property
    def summariser(self) -> Summariser:
        """Who writes the next summary (see the class docstring)."""
        timeout = self._compaction_timeout_s
        if self._compact_fn is not None:
            adapter = self._function_summariser
            fn = self._compact_fn
            if adapter is None or adapter.fn is not fn or adapter.timeout_s != timeout:
                adapter = self._function_summariser = FunctionSummariser(fn, timeout_s=timeout)
            return adapter
        model = self._compact_model_name or self.model_name
        named = named_summariser(model)  # "offline": no model writes summaries
        if named is not None:
            return named
        if self._client is not None and model is not None:
            return ModelSummariser(self._client, model, timeout_s=timeout)
        return OfflineSummariser()

    @property
    def token_threshold(self) -> int:
        """Estimated context tokens above which auto-compaction fires
        (``CompactionMemoryConfig.threshold_for`` the memory's model)."""
        return self.config.threshold_for(self.model_name)

    @property
    def threshold_estimate(self) -> int:
        """``token_threshold`` in the library's estimate: divided by the model's
        calibration factor (``calibration``), so that ``estimate_context_tokens()
        > threshold_estimate`` says the provider would count more than
        ``token_threshold``. Equal to ``token_threshold`` until the provider
        has reported usage for the model."""
        threshold = self.token_threshold
        if self.model_name is None:
            return threshold
        factor = self.calibration.factor(self.model_name)
        return threshold if factor == 1.0 else int(threshold / factor)

    @property
    def summary(self) -> str | None:
        """The summary at the head of the context, if any."""
        return self._state.summary

    @property
    def compaction_count(self) -> int:
        """The number of the newest compaction of the session (reverts and
        rewinds do not give numbers back)."""
        return self._state.compaction_number

    @property
    def compaction_in_force(self) -> int | None:
        """The number of the compaction whose summary heads the context, if any:
        the one ``revert_last_compaction`` undoes."""
        head = self._state.head
        return head.number if head is not None else None

    # -- auto-compaction -------------------------------------------------------

    def compaction_due(self) -> int | None:
        """The threshold (in the estimate's tokens) the context is over when an
        automatic compaction is due now: auto-compaction on, a clean boundary,
        and the estimate past ``threshold_estimate``; else ``None``."""
        if not self.config.auto_compact or not self.at_boundary:
            return None
        threshold = self.threshold_estimate
        return threshold if self.estimate_context_tokens() > threshold else None

    async def _after_add(self, ingested: Ingested) -> None:
        if self.compaction_due() is not None:
            await self._compact("auto")
        if (ingested.seq + 1) % checkpoint.CHECKPOINT_EVERY == 0 and self._recorder.active:
            record = checkpoint.periodic(self._state)
            if record is not None:
                self._recorder.record(record)

    async def compact(
        self,
        *,
        instructions: str | None = None,
        clear_tool_results: bool | None = None,
        **kwargs: Any,
    ) -> str | None:
        """Compact now, at any point (an open tool batch is kept whole).

        ``instructions`` (like Claude Code's ``/compact <instructions>``) say
        what the summary must keep; every summariser is given them, and the
        compaction record keeps them. ``clear_tool_results`` (``None``: the
        config's) clears old tool results first and summarises only when the
        context is still above the threshold. Returns the new summary, or
        ``None`` when there was nothing to fold (``nothing_to_fold()`` says
        why), clearing was enough, or the attempt failed (the failure is in
        the trace and the log). A summary that leaves the context no smaller
        is not a failure here: the compaction is made and its record and
        trace event carry a ``warning``.
        """
        summary = await self._compact(
            "manual", instructions=instructions or None, clear=clear_tool_results
        )
        await self.flush()
        return summary

    def nothing_to_fold(self) -> str | None:
        """Why ``compact()`` now would fold nothing, in words (``"nothing to
        fold: ..."``); ``None`` when there is something to fold."""
        state = self._state
        state.sync()
        if self._plan_cut().summarize:
            return None
        start = 1 if state.head is not None else 0
        if len(state.messages) <= start:
            held = "the summary only" if start else "no message yet"
            return f"nothing to fold: the context holds {held}"
        return (
            "nothing to fold: the context holds only the latest turn, which stays verbatim "
            "(the pending request, or a tool batch with the request it works on)"
        )

    # -- the compaction itself -------------------------------------------------

    def _plan_cut(self) -> policy.CutPlan:
        state = self._state
        return policy.plan_cut(
            [(meta.unit, meta.unit_index) for meta in state.meta],
            [message.role for message in state.messages],
            start=1 if state.head is not None else 0,
            at_boundary=self.at_boundary,
        )

    async def _compact(
        self, trigger: Trigger, instructions: str | None = None, clear: bool | None = None
    ) -> str | None:
        state = self._state
        state.sync()
        threshold = self.threshold_estimate
        if self.config.clear_tool_results if clear is None else clear:
            cleared = self._clear(trigger, self.config.clear_keep_tool_results)
            if cleared is not None and self.estimate_context_tokens() <= threshold:
                return None
        plan = self._plan_cut()
        if not plan.summarize:
            return None
        tokens_before = self.estimate_context_tokens()
        kept_tokens = sum(state.tokens[i] for i in plan.keep)
        beside = tokens_before - state.tokens_total + kept_tokens
        template_tokens = self.estimate_message_tokens(continuation_message(""))
        budget = policy.summary_budget(
            threshold=threshold,
            ratio=self.config.summary_budget_ratio,
            beside=beside,
            template_tokens=template_tokens,
            summary_max_tokens=self.config.summary_max_tokens,
        )
        # A new summary folds the current one in, so expect it about as large,
        # but never more than the budget it will be given.
        current = state.tokens[0] if state.head is not None else policy.CONTINUATION_OVERHEAD_TOKENS
        floor = beside + min(current, budget + template_tokens)
        if floor > threshold and trigger == "auto":
            if not self._floor_warned:
                self._warn(
                    f"the summary and the kept messages alone need about {floor} tokens",
                    floor,
                    threshold,
                )
            return None
        request = SummaryRequest(
            messages=[state.messages[i] for i in plan.summarize],
            previous_summary=state.summary,
            previous_message=state.messages[0] if state.head is not None else None,
            budget_tokens=budget,
            counter=self.token_counter,
            system_prompt=state.system_prompt,
            instructions=instructions,
        )
        started = time.monotonic()
        summariser = self.summariser
        folded = [(state.meta[i].seq, state.messages[i]) for i in plan.summarize]
        try:
            draft = await self._draft(
                summariser, request, folded, kept_tokens, tokens_before, trigger
            )
        except CompactionError as exc:
            self._record_failure(trigger, str(exc), tokens_before, started, summariser.name)
            if not self._should_fall_back(tokens_before, summariser):
                return None
            fallback = OfflineSummariser()
            try:
                draft = await self._draft(
                    fallback, request, folded, kept_tokens, tokens_before, trigger
                )
            except CompactionError as again:
                self._record_failure(trigger, str(again), tokens_before, started, fallback.name)
                return None
        self._commit_compaction(plan, draft, trigger, tokens_before, started, request)
        if draft.tokens_after > threshold:
            self._warn(
                "the context is still above the threshold after compaction",
                draft.tokens_after,
                threshold,
            )
        return draft.summary.text

    async def _draft(
        self,
        summariser: Summariser,
        request: SummaryRequest,
        folded: list[tuple[int | None, ChatMessage]],
        kept_tokens: int,
        tokens_before: int,
        trigger: Trigger,
    ) -> Draft:
        """The summary ``summariser`` writes, with the ledger carried on when
        it is one of the library's (``memory.compaction.ledger``), and with the
        operator's pins whoever writes it (``memory.compaction.pins``: those of
        the compaction in force, and those ``request.instructions`` name).
        Raises ``CompactionError`` when it fails, or when an automatic
        compaction would not lower ``tokens_before`` (a manual one gets a warning)."""
        head = self._state.head
        previous = head.ledger if head is not None else Ledger()
        new_pins = pins.pins_of(request.instructions, self._state.compaction_number + 1)
        ledger, given_way = Ledger(), list[LedgerEntry]()
        if summariser.carries_ledger:
            updated = pins.keep_pins(previous, previous.updated(folded, request.instructions))
            share = int(request.budget_tokens * LEDGER_SHARE)
            ledger, given_way = pins.pinned(updated, new_pins).fit(share, request.counter)
            ledger_tokens = request.counter.count_lines(ledger.render()) if ledger.entries else 0
            request = dataclasses.replace(
                request,
                budget_tokens=max(policy.MIN_SUMMARY_BUDGET, request.budget_tokens - ledger_tokens),
                previous_summary=narrative_of(request.previous_summary, previous),
            )
        else:
            ledger = pins.pinned(pins.operator_only(previous), new_pins)
        summary = await summariser.summarise(request)
        if ledger.entries:
            summary = await self._with_ledger(summariser, request, summary, ledger)
        if given_way:
            ledger, given_way = ledger.keeping_present(given_way, summary.text)
        message = continuation_message(summary.text)
        continuation = self.estimate_message_tokens(
            message, content_tokens=request.counter.count_lines(message.text)
        )
        tokens_after = self._tokens_after(continuation, kept_tokens)
        warning = None
        if tokens_after >= tokens_before:
            not_smaller = (
                "the summary would not make the context smaller "
                f"({tokens_before:,} -> {tokens_after:,} tokens)"
            )
            if trigger == "auto":
                raise CompactionError(not_smaller)
            warning = f"compacted as asked, but {not_smaller}"
            logger.warning("manual compaction: %s", warning)
        return Draft(summary, continuation, tokens_after, ledger, given_way, warning)

    async def _with_ledger(
        self, summariser: Summariser, request: SummaryRequest, summary: Summary, ledger: Ledger
    ) -> Summary:
        """``summary`` followed by the ledger's block. The block lists only what
        the narrative lacks, so its room may be partly unused: a summariser
        without a model (cheap) writes again into that room, and the longer
        narrative is taken when the whole still fits the budget."""
        counter = request.counter
        text = compose(summary.text, ledger)
        if not summariser.carries_ledger:  # a user's function: its text, then the pins
            return dataclasses.replace(summary, text=text)
        # Lines the summariser counted already: ``count_lines`` counts only the new ones.
        budget = request.budget_tokens + counter.count_lines(ledger.render())
        room = budget - counter.count_lines(text)
        if summariser.uses_model or room < LEDGER_SLACK_TOKENS:
            return dataclasses.replace(summary, text=text)
        wider = dataclasses.replace(request, budget_tokens=request.budget_tokens + room)
        again = await summariser.summarise(wider)
        longer = compose(again.text, ledger)
        if counter.count_lines(longer) <= budget:
            return dataclasses.replace(again, text=longer)
        return dataclasses.replace(summary, text=text)

    def _should_fall_back(self, tokens_before: int, summariser: Summariser) -> bool:
        return policy.should_fall_back(
            tokens_before=tokens_before,
            overflow_line=compaction_threshold(self.model_name, 1.0),
            uses_model=summariser.uses_model,
            consecutive_failures=self._consecutive_failures,
        )

    def _tokens_after(self, continuation_tokens: int, kept_tokens: int) -> int:
        state = self._state
        fixed = self.estimate_context_tokens() - state.tokens_total - REPLY_PRIMING_TOKENS
        return fixed + continuation_tokens + kept_tokens + REPLY_PRIMING_TOKENS

    def _commit_compaction(
        self,
        plan: policy.CutPlan,
        draft: Draft,
        trigger: Trigger,
        tokens_before: int,
        started: float,
        request: SummaryRequest,
    ) -> None:
        state = self._state
        summary = draft.summary
        folded = [seq for i in plan.summarize if (seq := state.meta[i].seq) is not None]
        kept = [seq for i in plan.keep if (seq := state.meta[i].seq) is not None]
        record = Compaction(
            ts=now_iso(),
            compaction_number=state.compaction_number + 1,
            status="ok",
            trigger=trigger,
            through_seq=state.next_seq - 1,
            summarized_seqs=[min(folded), max(folded)] if folded else None,
            replayed_seqs=kept,
            messages_compacted=len(plan.summarize),
            messages_replayed=len(kept),
            summary=summary.text,
            summary_tokens=draft.continuation_tokens,
            tokens_before=tokens_before,
            tokens_after=draft.tokens_after,
            model=summary.model,
            chunks=summary.chunks,
            duration_s=round(time.monotonic() - started, 4),
            checkpoint=Checkpoint.capture(state).to_dict(),
            instructions=request.instructions,
            usage=summary.usage_record(),
            ledger=draft.ledger.to_record() or None,
            ledger_given_way=[entry.to_dict() for entry in draft.given_way] or None,
            warning=draft.warning,
        )
        self._apply_compaction(record)
        self._consecutive_failures = 0
        self._recorder.record(record)
        logger.info(
            "compaction %d: %d messages folded, %d kept, %d -> %d tokens",
            state.compaction_number,
            len(plan.summarize),
            len(kept),
            tokens_before,
            draft.tokens_after,
        )
        if self._on_compact is not None:
            stats = {k: v for k, v in record.to_dict().items() if k not in ("type", "ts")}
            try:
                self._on_compact(stats)
            except Exception:
                # The compaction is applied and logged; a broken observer must not
                # turn the caller's add_message() into a failure.
                logger.exception("on_compact callback raised")

    def _apply_compaction(self, record: Compaction) -> None:
        """Apply ``record`` to the state and trace it (live and for an imported
        tool's own compaction)."""
        self._state.compact(record)
        self._floor_warned = False
        self._trace_compaction(record)

    def _trace_compaction(self, record: Compaction) -> None:
        self._trace.add("compaction", **compaction_trace_fields(record))

    # -- tool-result clearing --------------------------------------------------

    def clear_tool_results(self, *, keep: int | None = None) -> ToolResultsCleared | None:
        """Replace tool results older than the newest ``keep`` (``None``: the
        config's ``clear_keep_tool_results``) with one-line stubs now, whatever
        the context's size (``memory.compaction.clearing`` says which are
        never cleared; the config's ``clear_at_least_tokens`` and
        ``clear_exclude_tools`` apply). Logged as a ``tool_results_cleared``
        record; ``restore_tool_results()`` undoes it. Returns the record, or
        ``None`` when there was nothing to clear. Raises ``ValueError`` for a
        negative ``keep``.
        """
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 0):
            raise ValueError(f"keep must be an integer >= 0, got {keep!r}")
        self._state.sync()
        return self._clear("manual", self.config.clear_keep_tool_results if keep is None else keep)

    def _clear(self, trigger: Trigger, keep: int) -> ToolResultsCleared | None:
        """Clear, record and trace; ``None`` when nothing (or too little) would be freed."""
        state = self._state
        items = clearing.plan_clearing(
            state.messages,
            state.meta,
            state.tokens,
            keep=keep,
            protected=set(self._plan_cut().keep),
            cleared_seqs=state.cleared_seqs(),
            exclude_tools=self.config.clear_exclude_tools,
            count=self.estimate_message_tokens,
        )
        freed = clearing.freed_tokens(items)
        if not items or freed < max(1, self.config.clear_at_least_tokens):
            return None
        tokens_before = self.estimate_context_tokens()
        record = ToolResultsCleared(
            ts=now_iso(),
            clearing_number=state.clearing_number + 1,
            trigger=trigger,
            through_seq=state.next_seq - 1,
            keep=keep,
            cleared=items,
        )
        state.clear_tool_results(record)
        self._floor_warned = False
        record = dataclasses.replace(
            record, tokens_before=tokens_before, tokens_after=self.estimate_context_tokens()
        )
        self._trace.add("tool_results_cleared", **clearing_trace_fields(record))
        self._recorder.record(record)
        logger.info(
            "tool-result clearing %d: %d results stubbed, %d -> %d tokens",
            record.clearing_number,
            len(items),
            tokens_before,
            record.tokens_after,
        )
        return record

    @property
    def cleared_seqs(self) -> frozenset[int]:
        """The log seqs of the tool results that are stubs in the context now
        (their message records hold them whole)."""
        return frozenset(self._state.cleared_seqs())

    @property
    def clearing_in_force(self) -> int | None:
        """The number of the newest tool-result clearing whose stubs are still
        in the context: the one ``restore_tool_results`` undoes."""
        clearings = self._state.clearings
        return clearings[-1].number if clearings else None

    def restore_tool_results(self, reason: str = "", *, number: int | None = None) -> int:
        """Undo the newest tool-result clearing in force: the results it
        stubbed that are still in the context are whole again (those a later
        compaction folded come back when that compaction is undone first).
        ``number``, when given, must be that clearing. Logged as a
        ``tool_results_restored`` record. Returns the number undone. Raises
        ``CompactionError`` when no clearing is in force or ``number`` is another.
        """
        undone = self._state.restore_tool_results(number)
        return self._record_undo(ToolResultsRestored, "tool_results_restored", undone, reason)

    # -- undo and correct ------------------------------------------------------

    def revert_last_compaction(self, reason: str = "", *, number: int | None = None) -> int:
        """Undo the compaction in force: the context goes back to what it was
        just before it, plus every message added since. Call it again to undo
        the one before (any depth: a memory with a log reads what it needs
        from the log; one without holds the newest four). ``number``, when
        given, must be the compaction in force (an operator confirms what they
        saw). Nothing is deleted: the log gets a ``compaction_revert`` record.
        Returns the number undone. Raises ``CompactionError`` when there is
        nothing to undo or ``number`` is not in force.
        """
        undone = self._state.revert(number, self._prior_loader())
        return self._record_undo(CompactionRevert, "compaction_revert", undone, reason)

    def _record_undo(
        self,
        record: type[CompactionRevert] | type[ToolResultsRestored],
        event: str,
        undone: int,
        reason: str,
    ) -> int:
        """Trace and log an undo the state has made (of compaction or clearing
        ``undone``); returns ``undone``."""
        self._floor_warned = False
        self._trace.add(event, reverts=undone)
        self._recorder.record(
            record(
                ts=now_iso(),
                reverts=undone,
                through_seq=self._state.next_seq - 1,
                reason=reason,
                context_tokens=self.estimate_context_tokens(),
            )
        )
        return undone

    def correct_summary(self, summary: str, *, reason: str = "", number: int | None = None) -> None:
        """Replace the summary of the compaction in force with ``summary`` (an
        operator's correction, before the session continues). The compaction
        record keeps the original; a ``summary_correction`` record is logged,
        and the context and every restore use the corrected text. The
        correction is authoritative: the ledger follows it and later
        compactions fold the corrected text (``memory.compaction.pins``: what
        it removed is no longer carried, identifiers it added are pinned).
        Raises ``CompactionError`` when no compaction is in force, ``number``
        is not it, or ``summary`` is empty.
        """
        state = self._state
        corrected = state.correct_summary(number, summary)
        self._trace.add("summary_correction", compaction_number=corrected)
        ledger = state.head.ledger if state.head is not None else Ledger()
        self._recorder.record(
            SummaryCorrection(
                ts=now_iso(),
                compaction_number=corrected,
                summary=summary,
                reason=reason,
                through_seq=state.next_seq - 1,
                context_tokens=self.estimate_context_tokens(),
                ledger=ledger.to_record(),
            )
        )

    @property
    def pins(self) -> list[LedgerEntry]:
        """What the operator pinned that the compaction in force carries (every
        later compaction keeps these verbatim until ``unpin``): entries with
        ``value``, ``kind``, ``pinned_by`` (``"instructions"`` or
        ``"correction"``) and ``pinned_at`` (the compaction's number)."""
        return self._state.pins

    def unpin(self, values: list[str], *, reason: str = "", number: int | None = None) -> None:
        """Let later compactions drop the pinned ``values`` (the context does not
        change). Logs an ``unpin`` record; a restore keeps the pins that
        remain. Raises ``CompactionError`` when no compaction is in force,
        ``number`` is not it, or a value is not pinned.
        """
        state = self._state
        unpinned = state.unpin(number, list(values))
        self._trace.add("unpin", compaction_number=unpinned, values=list(values))
        ledger = state.head.ledger if state.head is not None else Ledger()
        self._recorder.record(
            Unpin(
                ts=now_iso(),
                compaction_number=unpinned,
                values=list(values),
                ledger=ledger.to_record(),
                reason=reason,
                through_seq=state.next_seq - 1,
                context_tokens=self.estimate_context_tokens(),
            )
        )

    def _prior_loader(self) -> PriorLoader | None:
        """How to read the context before a compaction whose snapshot the
        state no longer holds (``None``: no log to read it from)."""
        return None

    # -- failures and warnings -------------------------------------------------

    def _record_failure(
        self, trigger: Trigger, error: str, tokens_before: int, started: float, summariser: str
    ) -> None:
        self._consecutive_failures += 1
        record = CompactionFailure(
            ts=now_iso(),
            trigger=trigger,
            through_seq=self.next_seq - 1,
            error=error,
            tokens_before=tokens_before,
            model=summariser,
            duration_s=round(time.monotonic() - started, 4),
        )
        logger.warning("compaction failed (%s); the context is unchanged", error)
        self._trace_event(record)
        self._recorder.record(record)

    def _warn(self, reason: str, floor: int, threshold: int) -> None:
        self._floor_warned = True
        record = CompactionWarning(
            ts=now_iso(),
            through_seq=self.next_seq - 1,
            reason=reason,
            floor_tokens=floor,
            threshold=threshold,
        )
        logger.warning("compaction cannot get under the threshold: %s", reason)
        self._trace_event(record)
        self._recorder.record(record)

    def _trace_event(self, record: CompactionFailure | CompactionWarning) -> None:
        """The trace event of a record that leaves the context as it was."""
        fields = {k: v for k, v in record.to_dict().items() if k not in ("type", "ts")}
        self._trace.add(record.type, **fields)

    # -- lifecycle -------------------------------------------------------------

    def reset(self) -> dict[str, int]:
        """Forget the context, the summary and the trace (the log keeps
        everything, and records the reset so that a restore starts from the
        same empty context). Returns ``{"messages", "trace_events", "compactions"}``."""
        compactions = self.compaction_count
        counts = self._clear_context()
        counts["compactions"] = compactions
        self._consecutive_failures = 0
        self._floor_warned = False
        if self._recorder.active:
            self._recorder.record(
                Reset(
                    ts=now_iso(),
                    through_seq=self.next_seq - 1,
                    context_tokens=self.estimate_context_tokens(),
                )
            )
        return counts

    def clear_messages(self) -> int:
        self._consecutive_failures = 0
        self._floor_warned = False
        return super().clear_messages()
