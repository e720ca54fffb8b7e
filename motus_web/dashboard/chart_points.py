"""The rows behind the session page's token chart, read in a bounded number of queries.

A session's chart needs the shape of its context size over every message,
not every message: past ``charts.MAX_POINTS`` messages it cuts the session
into ``BUCKETS`` equal runs of seq and draws each run's highest and lowest
context size, from the stored chart blocks (``sessions.aggregates``: one
level of them, at most ``2 * BUCKETS + 1`` rows, whatever the session's
length), so the line keeps every peak and trough and always has
``2 * BUCKETS + 1`` points; the chart marks at most ``MARKERS`` of the
session's compaction events, picked by their index.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from motus_web.sessions import aggregates
from motus_web.sessions.models import CompactionEvent, ContextChange, Session

from . import charts

BUCKETS = 500  # runs of seq a long session's line is drawn from: a high and a low each
MARKERS = 100  # compaction events the chart marks; the trace lists them all

T = TypeVar("T")


def points(session: Session) -> tuple[list[tuple[int, int]], bool]:
    """``(seq, context_tokens)`` in seq order, and whether they are sampled:
    every message's when the session has at most ``charts.MAX_POINTS``;
    else, for each of ``BUCKETS`` equal runs of seq, its highest and its
    lowest size (a message's, or the size a compaction started from or left,
    at its ``through_seq``) in seq order, then the session's size now at its
    last message."""
    messages = session.messages
    if session.message_count <= charts.MAX_POINTS:
        rows = messages.order_by("seq").values_list("seq", "context_tokens")
        return list(rows[: charts.MAX_POINTS + 1]), False
    last_seq = messages.order_by("-seq").values_list("seq", flat=True).first()
    if last_seq is None:
        return [], False
    span = last_seq + 1
    # The widest blocks that still put at least one block in every bucket.
    level = 0
    while level + 1 < aggregates.LEVELS and aggregates.width(level + 1) * BUCKETS <= span:
        level += 1
    size = aggregates.width(level)
    buckets: dict[int, list[int]] = {}
    for block in aggregates.blocks_of(session, level, last_seq // size):
        bucket = block.index * size * BUCKETS // span
        found = buckets.get(bucket)
        extremes = [block.high_seq, block.high_tokens, block.low_seq, block.low_tokens]
        if found is None:
            buckets[bucket] = extremes
        else:
            aggregates.merge(found, extremes)
    out: list[tuple[int, int]] = []
    for _, (high_seq, high, low_seq, low) in sorted(buckets.items()):
        out.extend(sorted([(high_seq, high), (low_seq, low)], key=_order))
    out.append((last_seq, session.context_tokens))
    return out, True


def _order(point: tuple[int, int]) -> tuple[int, int]:
    # At one seq (a compaction's drop) the size it started from comes first.
    return point[0], -point[1]


def marked(session: Session) -> list[CompactionEvent]:
    """At most ``MARKERS`` of the events the chart marks, spread over the
    session by their index, the first and the latest included."""
    picked = spread(range(session.chart_event_count))
    found = session.compaction_events.filter(chart_ordinal__in=picked)
    return sorted(found, key=lambda event: event.position)


def cleared(session: Session) -> list[ContextChange]:
    """At most ``MARKERS`` of the session's tool-result clearings, spread like ``marked``."""
    if not session.clearing_count:
        return []
    rows = session.context_changes.filter(kind=ContextChange.Kind.TOOL_RESULTS_CLEARED)
    fields = ("position", "through_seq", "tokens_before", "tokens_after", "session_id")
    return spread(list(rows.order_by("position").only(*fields)))


def spread(items: Sequence[T], limit: int = MARKERS) -> list[T]:
    """At most ``limit`` (>= 2) of ``items``, evenly spread, the first and the last included."""
    if len(items) <= limit:
        return list(items)
    last = len(items) - 1
    return [items[round(index * last / (limit - 1))] for index in range(limit)]
