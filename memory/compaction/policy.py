"""The compaction rules as pure functions: where to cut, what it must cost, when to fall back.

Nothing here touches a memory: each function takes the figures it needs and
returns a decision, so the rules can be read and tested on their own.

Where to cut (``plan_cut``), by the last turn unit of the context:

- **A** (a user message): the pending request is kept, everything before it
  is summarised;
- **B** (tool calls and their results): the unit is kept, and so is the
  newest user request it works on; the rest is summarised;
- **C** (a final answer, at a boundary): everything is summarised.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..units import Unit

CONTINUATION_OVERHEAD_TOKENS = 80
"""Tokens of the continuation template around a summary (estimate before the first one)."""

FALLBACK_AFTER_FAILURES = 2
"""Consecutive failed model summaries after which the offline summariser takes over."""

MIN_SUMMARY_BUDGET = 64


@dataclass(frozen=True, slots=True)
class CutPlan:
    """Indices into the context to summarise and to keep verbatim, in context order."""

    summarize: list[int]
    keep: list[int]
    last_unit: Unit | None


def plan_cut(
    units: Sequence[tuple[Unit | None, int | None]],
    roles: Sequence[str],
    *,
    start: int,
    at_boundary: bool,
) -> CutPlan:
    """Split the context at the last turn unit.

    ``units[i]`` is the ``(unit, unit_index)`` of context message ``i`` and
    ``roles[i]`` its role; messages before ``start`` (the continuation) are
    neither summarised nor kept. Returns empty lists when there is nothing
    after ``start``.
    """
    count = len(units)
    if count <= start:
        return CutPlan([], [], None)
    last_index = units[-1][1]
    first_of_last = count
    while first_of_last > start and units[first_of_last - 1][1] == last_index:
        first_of_last -= 1
    last_unit = units[first_of_last][0]
    keep: list[int] = []
    if not (last_unit == "C" and at_boundary):
        keep = list(range(first_of_last, count))
        if last_unit != "A":
            pinned = newest_user(roles, start=start, before=first_of_last)
            if pinned is not None:
                keep.insert(0, pinned)
    kept = set(keep)
    summarize = [i for i in range(start, count) if i not in kept]
    return CutPlan(summarize, keep, last_unit)


def newest_user(roles: Sequence[str], *, start: int, before: int) -> int | None:
    """The index of the last user message in ``roles[start:before]``, if any."""
    for i in range(before - 1, start - 1, -1):
        if roles[i] == "user":
            return i
    return None


def summary_budget(
    *, threshold: int, ratio: float, beside: int, template_tokens: int, summary_max_tokens: int
) -> int:
    """Tokens a new summary may take: ``ratio`` of the threshold (the config's
    ``summary_budget_ratio``) less what stays beside it (``beside``: system
    prompt and kept messages; ``template_tokens``: the continuation message
    around the summary), within ``[MIN_SUMMARY_BUDGET, summary_max_tokens]``."""
    share = int(threshold * ratio)
    return min(summary_max_tokens, max(MIN_SUMMARY_BUDGET, share - beside - template_tokens))


def should_fall_back(
    *, tokens_before: int, overflow_line: int, uses_model: bool, consecutive_failures: int
) -> bool:
    """Whether a failed attempt is retried at once with the offline summariser:
    when the context is about to overflow the model's window (whatever failed),
    or after ``FALLBACK_AFTER_FAILURES`` failures of model summarisation in a row."""
    if tokens_before >= overflow_line:
        return True
    return uses_model and consecutive_failures >= FALLBACK_AFTER_FAILURES
