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
(the summariser raises, times out, returns nothing, or would not lower the
token count) changes nothing, is recorded, and is tried again at the next
boundary; when model summarisation keeps failing and the context is about to
overflow, the offline summariser takes over. When even the floor (system
prompt + summary + kept messages) is above the threshold, one warning is
recorded and auto-compaction skips the boundaries where that stays true,
instead of compacting again at every one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ..base import BaseMemory, EntryMeta, Ingested
from ..clients.base import ChatClient
from ..config import CompactionMemoryConfig
from ..errors import CompactionError
from ..log.records import (
    Compaction,
    CompactionFailed,
    CompactionRevert,
    CompactionWarning,
    Reset,
    now_iso,
)
from ..messages import ChatMessage
from ..tokens import REPLY_PRIMING_TOKENS
from ..tokens.model_limits import compaction_threshold, get_model_limits
from . import policy
from .checkpoint import Checkpoint
from .offline import offline_summary
from .summarize import (
    CompactFn,
    Summary,
    call_compact_fn,
    continuation_message,
    summarize_with_model,
)

logger = logging.getLogger("memory.compaction")

Trigger = Literal["auto", "manual"]
OnCompact = Callable[[dict[str, Any]], object]
OFFLINE_MODEL = "offline"
Entry = tuple[ChatMessage, EntryMeta, int]


@dataclass(frozen=True, slots=True)
class Undo:
    """What reverting the latest compaction needs: the context before it (its
    entries and summary), how many messages it kept, and which one it was."""

    entries: list[Entry]
    summary: str | None
    kept: int
    number: int


class CompactionBase(BaseMemory):
    """Auto-compacting memory; see the module docstring for the rules.

    ``client``/``model_name`` may be left out and filled later by
    ``set_model()`` (the agent does this). With neither a client nor a
    ``compact_fn``, summaries come from the offline extractive summariser.
    """

    memory_type = "compact"

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
        self._summary: str | None = None
        self._compaction_count = 0
        self._consecutive_failures = 0
        self._floor_warned = False
        self._undo: Undo | None = None

    # -- model -----------------------------------------------------------------

    def set_model(self, *, client: ChatClient | None = None, model_name: str | None = None) -> None:
        """Fill the client and model names that were not given at construction."""
        super().set_model(model_name=model_name)
        if self._client is None:
            self._client = client
        if self._compact_model_name is None:
            self._compact_model_name = self._model_name

    @property
    def token_threshold(self) -> int:
        """Estimated context tokens above which auto-compaction fires."""
        if self.config.token_threshold is not None:
            return self.config.token_threshold
        return compaction_threshold(self._model_name, self.config.safety_ratio)

    @property
    def threshold_estimate(self) -> int:
        """``token_threshold`` in the library's estimate: divided by the model's
        calibration factor (``calibration``), so that ``estimate_context_tokens()
        > threshold_estimate`` says the provider would count more than
        ``token_threshold``. Equal to ``token_threshold`` until the provider
        has reported usage for the model."""
        threshold = self.token_threshold
        if self._model_name is None:
            return threshold
        factor = self.calibration.factor(self._model_name)
        return threshold if factor == 1.0 else int(threshold / factor)

    @property
    def summary(self) -> str | None:
        """The summary at the head of the context, if any."""
        return self._summary

    @property
    def compaction_count(self) -> int:
        return self._compaction_count

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

    async def compact(self, **kwargs: Any) -> str | None:
        """Compact now, at any point (an open tool batch is kept whole).

        Returns the new summary, or ``None`` when there was nothing to fold or
        the attempt failed (the failure is in the trace and the log).
        """
        summary = await self._compact("manual")
        await self.flush()
        return summary

    # -- the compaction itself -------------------------------------------------

    def _plan_cut(self) -> policy.CutPlan:
        return policy.plan_cut(
            [(meta.unit, meta.unit_index) for meta in self._meta],
            [message.role for message in self._messages],
            start=1 if self._summary is not None else 0,
            at_boundary=self.at_boundary,
        )

    async def _compact(self, trigger: Trigger) -> str | None:
        self._check_in_sync()
        plan = self._plan_cut()
        if not plan.summarize:
            return None
        tokens_before = self.estimate_context_tokens()
        threshold = self.threshold_estimate
        kept_tokens = sum(self._tokens[i] for i in plan.keep)
        # A new summary folds the current one in, so expect it at least as large.
        summary_estimate = (
            self._tokens[0] if self._summary is not None else policy.CONTINUATION_OVERHEAD_TOKENS
        )
        floor = tokens_before - self._tokens_total + kept_tokens + summary_estimate
        if floor >= threshold and trigger == "auto":
            if not self._floor_warned:
                self._warn(
                    f"the summary and the kept messages alone need about {floor} tokens",
                    floor,
                    threshold,
                )
            return None
        budget = policy.summary_budget(
            threshold=threshold,
            ratio=self.config.summary_budget_ratio,
            beside=floor - summary_estimate,
            template_tokens=self.estimate_message_tokens(continuation_message("")),
            summary_max_tokens=self.config.summary_max_tokens,
        )
        to_fold = [self._messages[i] for i in plan.summarize]
        started = time.monotonic()
        try:
            summary = await self._summarize(to_fold, budget)
            continuation = self.estimate_message_tokens(continuation_message(summary.text))
            tokens_after = self._tokens_after(continuation, kept_tokens)
            if tokens_after >= tokens_before:
                raise CompactionError(
                    "the summary would not lower the token count "
                    f"({tokens_before} -> {tokens_after})"
                )
        except CompactionError as exc:
            self._record_failure(trigger, str(exc), tokens_before, started)
            if not self._should_fall_back(tokens_before):
                return None
            summary = Summary(self._offline(to_fold, budget), OFFLINE_MODEL)
            continuation = self.estimate_message_tokens(continuation_message(summary.text))
            tokens_after = self._tokens_after(continuation, kept_tokens)
            if tokens_after >= tokens_before:
                return None
        counts = (tokens_before, continuation, tokens_after)
        self._commit_compaction(plan, summary, trigger, counts, started)
        if tokens_after > threshold:
            self._warn(
                "the context is still above the threshold after compaction", tokens_after, threshold
            )
        return summary.text

    async def _summarize(self, messages: list[ChatMessage], budget: int) -> Summary:
        model = self._compact_model_name or self._model_name
        if self._compact_fn is not None:
            head = [self._messages[0]] if self._summary is not None else []
            try:
                text = await call_compact_fn(
                    self._compact_fn,
                    head + messages,
                    self._system_prompt,
                    timeout_s=self._compaction_timeout_s,
                )
            except CompactionError:
                raise
            # A user callback may raise anything: record it and keep the context.
            except Exception as exc:
                raise CompactionError(f"compact_fn raised {type(exc).__name__}: {exc}") from exc
            return Summary(text, "compact_fn")
        if self._client is not None and model is not None:
            limits = get_model_limits(model)
            return await summarize_with_model(
                self._client,
                model=model,
                messages=messages,
                previous_summary=self._summary,
                counter=self.token_counter,
                context_window=limits.context_window,
                max_output_tokens=min(budget, limits.max_output_tokens),
                timeout_s=self._compaction_timeout_s,
            )
        return Summary(self._offline(messages, budget), OFFLINE_MODEL)

    def _offline(self, messages: list[ChatMessage], budget: int) -> str:
        return offline_summary(
            messages,
            budget_tokens=budget,
            counter=self.token_counter,
            previous_summary=self._summary,
        )

    def _should_fall_back(self, tokens_before: int) -> bool:
        return policy.should_fall_back(
            tokens_before=tokens_before,
            overflow_line=compaction_threshold(self._model_name, 1.0),
            uses_model=self._compact_fn is None and self._client is not None,
            consecutive_failures=self._consecutive_failures,
        )

    def _tokens_after(self, continuation_tokens: int, kept_tokens: int) -> int:
        system = self.estimate_context_tokens() - self._tokens_total - REPLY_PRIMING_TOKENS
        return system + continuation_tokens + kept_tokens + REPLY_PRIMING_TOKENS

    def _commit_compaction(
        self,
        plan: policy.CutPlan,
        summary: Summary,
        trigger: Trigger,
        counts: tuple[int, int, int],
        started: float,
    ) -> None:
        """``counts``: tokens before, of the continuation message, and after."""
        tokens_before, continuation_tokens, tokens_after = counts
        folded = [seq for i in plan.summarize if (seq := self._meta[i].seq) is not None]
        replayed = [seq for i in plan.keep if (seq := self._meta[i].seq) is not None]
        record = Compaction(
            ts=now_iso(),
            compaction_number=self._compaction_count + 1,
            status="ok",
            trigger=trigger,
            through_seq=self._next_seq - 1,
            summarized_seqs=[min(folded), max(folded)] if folded else None,
            replayed_seqs=replayed,
            messages_compacted=len(plan.summarize),
            messages_replayed=len(replayed),
            summary=summary.text,
            summary_tokens=continuation_tokens,
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            model=summary.model,
            chunks=summary.chunks,
            duration_s=round(time.monotonic() - started, 4),
            checkpoint=Checkpoint.capture(self).to_dict(),
            # How many identifiers the model left out and the compactor appended.
            extra=(
                {"identifiers_appended": summary.identifiers_appended}
                if summary.identifiers_appended
                else {}
            ),
        )
        self._apply_compaction(record)
        self._consecutive_failures = 0
        self._recorder.record(record)
        logger.info(
            "compaction %d: %d messages folded, %d kept, %d -> %d tokens",
            self._compaction_count,
            len(plan.summarize),
            len(replayed),
            tokens_before,
            tokens_after,
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
        """Make the context ``[continuation, *kept]``, kept being the messages
        whose seq ``record.replayed_seqs`` lists, in context order.

        The one place a compaction changes the context, live and on restore.
        The continuation is ``record.continuation`` verbatim when set, else our
        template around the summary. Raises ``CompactionError`` when a
        replayed seq is not in the context.
        """
        summary = record.summary or ""
        entries = self._entries()
        wanted = set(record.replayed_seqs or ())
        kept = [e for e in entries if e[1].seq is not None and e[1].seq in wanted]
        if len(kept) != len(wanted):
            found = {e[1].seq for e in kept}
            missing = sorted(s for s in wanted if s not in found)
            raise CompactionError(f"compaction replays seqs {missing} not in the context")
        number = record.compaction_number or self._compaction_count + 1
        self._undo = Undo(entries, self._summary, len(kept), number)
        if record.continuation is not None:
            message = ChatMessage.user(record.continuation)
        else:
            message = continuation_message(summary)
        tokens = record.summary_tokens
        if tokens is None:
            tokens = self.estimate_message_tokens(message)
        self._summary = summary
        self._replace_context([(message, EntryMeta(None, None, None), tokens), *kept])
        self._compaction_count = number
        self._floor_warned = False
        self._trace.add(
            "compaction",
            **{k: v for k, v in record.to_dict().items() if k not in ("type", "ts", "summary")},
        )

    def revert_last_compaction(self, reason: str = "") -> None:
        """Undo the latest compaction: the context goes back to what it was
        before it, plus every message added since. Nothing is deleted: the
        log gets a ``compaction_revert`` record. Only the latest compaction can
        be reverted, once (the memory keeps one previous context, bounded by
        the threshold). Raises ``CompactionError`` when there is none.
        """
        number = self._apply_revert(None)
        self._recorder.record(
            CompactionRevert(
                ts=now_iso(),
                reverts=number,
                through_seq=self._next_seq - 1,
                reason=reason,
                context_tokens=self.estimate_context_tokens(),
            )
        )

    def _apply_revert(self, number: int | None) -> int:
        undo = self._undo
        if undo is None and number is None:
            raise CompactionError(
                "cannot revert: there has been no compaction in this context"
                if self._compaction_count == 0
                else "cannot revert: the latest compaction was already reverted, or the context "
                "was cleared or forked since (only the latest compaction can be reverted, once)"
            )
        if undo is None or (number is not None and number != undo.number):
            raise CompactionError(
                f"cannot revert compaction {number}: it is not the latest one in this context"
            )
        since = self._entries()[1 + undo.kept :]
        self._summary = undo.summary
        self._replace_context([*undo.entries, *since])
        self._undo = None
        self._floor_warned = False
        self._trace.add("compaction_revert", reverts=undo.number)
        return undo.number

    def _record_failure(
        self, trigger: Trigger, error: str, tokens_before: int, started: float
    ) -> None:
        self._consecutive_failures += 1
        record = CompactionFailed(
            ts=now_iso(),
            trigger=trigger,
            through_seq=self._next_seq - 1,
            error=error,
            tokens_before=tokens_before,
            model=self._compact_model_name or self._model_name,
            duration_s=round(time.monotonic() - started, 4),
        )
        logger.warning("compaction failed (%s); the context is unchanged", error)
        self._trace_event(record)
        self._recorder.record(record)

    def _warn(self, reason: str, floor: int, threshold: int) -> None:
        self._floor_warned = True
        record = CompactionWarning(
            ts=now_iso(),
            through_seq=self._next_seq - 1,
            reason=reason,
            floor_tokens=floor,
            threshold=threshold,
        )
        logger.warning("compaction cannot get under the threshold: %s", reason)
        self._trace_event(record)
        self._recorder.record(record)

    def _trace_event(self, record: CompactionFailed | CompactionWarning) -> None:
        """The trace event of a record that leaves the context as it was."""
        fields = {k: v for k, v in record.to_dict().items() if k not in ("type", "ts")}
        self._trace.add(record.type, **fields)

    # -- lifecycle -------------------------------------------------------------

    def reset(self) -> dict[str, int]:
        """Forget the context, the summary and the trace (the log keeps
        everything, and records the reset so that a restore starts from the
        same empty context). Returns ``{"messages", "trace_events", "compactions"}``."""
        counts = self._apply_reset()
        if self._recorder.active:
            self._recorder.record(
                Reset(
                    ts=now_iso(),
                    through_seq=self._next_seq - 1,
                    context_tokens=self.estimate_context_tokens(),
                )
            )
        return counts

    def _apply_clear_messages(self) -> int:
        cleared = super()._apply_clear_messages()
        self._summary = None
        self._undo = None
        self._consecutive_failures = 0
        self._floor_warned = False
        return cleared

    def _apply_reset(self) -> dict[str, int]:
        counts = self._clear_context()
        counts["compactions"] = self._compaction_count
        self._summary = None
        self._compaction_count = 0
        self._consecutive_failures = 0
        self._floor_warned = False
        self._undo = None
        return counts
