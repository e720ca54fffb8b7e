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

from .base import BaseMemory, EntryMeta, Ingested
from .clients.base import ChatClient
from .compaction.offline import offline_summary
from .config import CompactionMemoryConfig
from .errors import CompactionError
from .messages import ChatMessage
from .model_limits import compaction_threshold, get_model_limits
from .summarize import (
    CompactFn,
    Summary,
    call_compact_fn,
    continuation_message,
    summarize_with_model,
)
from .tokens import REPLY_PRIMING_TOKENS

logger = logging.getLogger("memory.compaction")

Trigger = Literal["auto", "manual"]
OnCompact = Callable[[dict[str, Any]], object]
OFFLINE_MODEL = "offline"
_CONTINUATION_OVERHEAD_TOKENS = 80  # the template around the summary
_FALLBACK_AFTER_FAILURES = 2


@dataclass(frozen=True, slots=True)
class Undo:
    """What reverting the latest compaction needs: the context before it (its
    entries and summary), how many messages it kept, and which one it was."""

    entries: list[tuple[ChatMessage, EntryMeta, int]]
    summary: str | None
    kept: int
    number: int


@dataclass(frozen=True, slots=True)
class CutPlan:
    """Indices into the context (after the continuation) to summarise and to keep."""

    summarize: list[int]
    keep: list[int]
    last_unit: str | None


class CompactionBase(BaseMemory):
    """Auto-compacting memory; see the module docstring for the rules.

    ``client``/``model_name`` may be left out and filled later by
    ``set_model()`` (the agent does this). With neither a client nor a
    ``compact_fn``, summaries come from the offline extractive summariser.
    """

    def __init__(
        self,
        *,
        config: CompactionMemoryConfig | None = None,
        compact_fn: CompactFn | None = None,
        on_compact: OnCompact | None = None,
        client: ChatClient | None = None,
        model_name: str | None = None,
        compaction_timeout_s: float = 120.0,
    ) -> None:
        self.config = config or CompactionMemoryConfig()
        super().__init__(
            model_name=model_name, max_tool_result_tokens=self.config.max_tool_result_tokens
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
    def summary(self) -> str | None:
        """The summary at the head of the context, if any."""
        return self._summary

    @property
    def compaction_count(self) -> int:
        return self._compaction_count

    # -- auto-compaction -------------------------------------------------------

    async def _after_add(self, ingested: Ingested) -> None:
        if not self.config.auto_compact or not self.at_boundary:
            return
        if self.estimate_context_tokens() > self.token_threshold:
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

    def _plan_cut(self) -> CutPlan:
        start = 1 if self._summary is not None else 0
        metas = self._meta[start:]
        if not metas:
            return CutPlan([], [], None)
        last_index = metas[-1].unit_index
        first_of_last = len(metas)
        while first_of_last > 0 and metas[first_of_last - 1].unit_index == last_index:
            first_of_last -= 1
        last_unit = metas[first_of_last].unit
        if last_unit == "C" and self.at_boundary:
            keep: list[int] = []
        else:
            keep = list(range(first_of_last, len(metas)))
            if last_unit != "A":
                pinned = _newest_user(self._messages[start:], before=first_of_last)
                if pinned is not None:
                    keep.insert(0, pinned)
        kept = set(keep)
        summarize = [i for i in range(len(metas)) if i not in kept]
        return CutPlan([start + i for i in summarize], [start + i for i in keep], last_unit)

    async def _compact(self, trigger: Trigger) -> str | None:
        plan = self._plan_cut()
        if not plan.summarize:
            return None
        tokens_before = self.estimate_context_tokens()
        threshold = self.token_threshold
        kept_tokens = sum(self._tokens[i] for i in plan.keep)
        # A new summary folds the current one in, so expect it at least as large.
        summary_estimate = (
            self._tokens[0] if self._summary is not None else _CONTINUATION_OVERHEAD_TOKENS
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
        budget = self._summary_budget(threshold, tokens_before - self._tokens_total + kept_tokens)
        to_fold = [self._messages[i] for i in plan.summarize]
        started = time.monotonic()
        try:
            summary = await self._summarize(to_fold, budget)
            tokens_after = self._tokens_after(summary.text, kept_tokens)
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
            tokens_after = self._tokens_after(summary.text, kept_tokens)
            if tokens_after >= tokens_before:
                return None
        self._apply(plan, summary, trigger, tokens_before, tokens_after, started)
        if tokens_after > threshold:
            self._warn(
                "the context is still above the threshold after compaction", tokens_after, threshold
            )
        return summary.text

    def _summary_budget(self, threshold: int, beside: int) -> int:
        """Tokens the summary may take: ``summary_budget_ratio`` of the threshold
        less what stays beside it (``beside``: the system prompt and the kept
        messages; the continuation template is added here), within
        [64, ``summary_max_tokens``]."""
        template = self.estimate_message_tokens(continuation_message(""))
        fixed = beside + template
        share = int(threshold * self.config.summary_budget_ratio)
        return min(self.config.summary_max_tokens, max(64, share - fixed))

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
        """Whether a failed attempt should be retried at once with the offline
        summariser: when the context is about to overflow the model's window
        (whatever failed), or after repeated failures of model summarisation."""
        overflow_line = compaction_threshold(self._model_name, 1.0)
        if tokens_before >= overflow_line:
            return True
        uses_model = self._compact_fn is None and self._client is not None
        return uses_model and self._consecutive_failures >= _FALLBACK_AFTER_FAILURES

    def _tokens_after(self, summary: str, kept_tokens: int) -> int:
        continuation = self.estimate_message_tokens(continuation_message(summary))
        system = self.estimate_context_tokens() - self._tokens_total - REPLY_PRIMING_TOKENS
        return system + continuation + kept_tokens + REPLY_PRIMING_TOKENS

    def _apply(
        self,
        plan: CutPlan,
        summary: Summary,
        trigger: Trigger,
        tokens_before: int,
        tokens_after: int,
        started: float,
    ) -> None:
        entries = self._entries()
        replayed = [entries[i] for i in plan.keep]
        folded = [seq for i in plan.summarize if (seq := entries[i][1].seq) is not None]
        self._compaction_count += 1
        self._undo = Undo(entries, self._summary, len(replayed), self._compaction_count)
        self._set_summary(summary.text, replayed)
        self._consecutive_failures = 0
        self._floor_warned = False
        stats: dict[str, Any] = {
            "compaction_number": self._compaction_count,
            "status": "ok",
            "trigger": trigger,
            "through_seq": self._next_seq - 1,
            "summarized_seqs": [min(folded), max(folded)] if folded else None,
            "replayed_seqs": [meta.seq for _, meta, _ in replayed if meta.seq is not None],
            "messages_compacted": len(plan.summarize),
            "messages_replayed": len(replayed),
            "summary": summary.text,
            "summary_tokens": self._tokens[0],
            "tokens_before": tokens_before,
            "tokens_after": tokens_after,
            "model": summary.model,
            "chunks": summary.chunks,
            "duration_s": round(time.monotonic() - started, 4),
        }
        self._trace.add("compaction", **{k: v for k, v in stats.items() if k != "summary"})
        self._on_compaction(stats)
        logger.info(
            "compaction %d: %d messages folded, %d kept, %d -> %d tokens",
            self._compaction_count,
            len(plan.summarize),
            len(replayed),
            tokens_before,
            tokens_after,
        )
        if self._on_compact is not None:
            try:
                self._on_compact(dict(stats))
            except Exception:
                # The compaction is applied and logged; a broken observer must not
                # turn the caller's add_message() into a failure.
                logger.exception("on_compact callback raised")

    def _set_summary(
        self,
        summary: str,
        kept: list[tuple[ChatMessage, EntryMeta, int]],
        tokens: int | None = None,
    ) -> None:
        continuation = continuation_message(summary)
        if tokens is None:
            tokens = self.estimate_message_tokens(continuation)
        head = (continuation, EntryMeta(None, None, None), tokens)
        self._summary = summary
        self._replace_context([head, *kept])

    def revert_last_compaction(self, reason: str = "") -> None:
        """Undo the latest compaction: the context goes back to what it was
        before it, plus every message added since. Nothing is deleted: the
        log gets a ``compaction_revert`` record. Only the latest compaction can
        be reverted, once (the memory keeps one previous context, bounded by
        the threshold). Raises ``CompactionError`` when there is none.
        """
        number = self._revert(None)
        self._on_compaction_reverted(
            {
                "reverts": number,
                "through_seq": self._next_seq - 1,
                "reason": reason,
                "context_tokens": self.estimate_context_tokens(),
            }
        )

    def _revert(self, number: int | None) -> int:
        undo = self._undo
        if undo is None or (number is not None and number != undo.number):
            which = "the latest compaction" if number is None else f"compaction {number}"
            raise CompactionError(
                f"cannot revert {which}: it is not the latest one in this context"
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
        record = {
            "trigger": trigger,
            "through_seq": self._next_seq - 1,
            "error": error,
            "tokens_before": tokens_before,
            "model": self._compact_model_name or self._model_name,
            "duration_s": round(time.monotonic() - started, 4),
        }
        logger.warning("compaction failed (%s); the context is unchanged", error)
        self._trace.add("compaction_failed", **record)
        self._on_compaction_failed(record)

    def _warn(self, reason: str, floor: int, threshold: int) -> None:
        self._floor_warned = True
        record = {
            "through_seq": self._next_seq - 1,
            "reason": reason,
            "floor_tokens": floor,
            "threshold": threshold,
        }
        logger.warning("compaction cannot get under the threshold: %s", reason)
        self._trace.add("compaction_warning", **record)
        self._on_compaction_warning(record)

    # -- hooks for the log-writing subclass ------------------------------------

    def _on_compaction(self, stats: dict[str, Any]) -> None:
        """Called after a compaction was applied."""

    def _on_compaction_failed(self, record: dict[str, Any]) -> None:
        """Called after a failed compaction attempt."""

    def _on_compaction_warning(self, record: dict[str, Any]) -> None:
        """Called when compaction cannot bring the context under the threshold."""

    def _on_compaction_reverted(self, record: dict[str, Any]) -> None:
        """Called after the latest compaction was reverted."""

    # -- lifecycle -------------------------------------------------------------

    def reset(self) -> dict[str, int]:
        """Forget the context, the summary and the trace. Returns
        ``{"messages", "trace_events", "compactions"}``."""
        counts = self._clear_context()
        counts["compactions"] = self._compaction_count
        self._summary = None
        self._compaction_count = 0
        self._consecutive_failures = 0
        self._floor_warned = False
        self._undo = None
        return counts


def _newest_user(messages: list[ChatMessage], *, before: int) -> int | None:
    for i in range(before - 1, -1, -1):
        if messages[i].role == "user":
            return i
    return None
