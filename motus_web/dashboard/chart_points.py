"""The rows behind the session page's token chart, read in a bounded number of queries.

A session's chart needs the shape of its context size over every message,
not every message: past ``charts.MAX_POINTS`` messages it reads the context
size of ``BUCKETS`` messages at evenly spaced seqs (two bounded queries,
whatever the session's length) and takes the peaks and troughs between them
from the compaction rows the page has already read (their ``tokens_before``
and ``tokens_after``); the chart marks at most ``MARKERS`` of those events.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar

from motus_web.sessions.models import CompactionEvent, Session

from . import charts

BUCKETS = 600  # runs of seq a long session's line is drawn from: three points each
MARKERS = 100  # compaction events the chart marks; the trace lists them all

T = TypeVar("T")


def points(session: Session, events: Sequence[CompactionEvent]) -> list[tuple[int, int]]:
    """``(seq, context_tokens)`` in seq order: every message's when the session
    has at most ``charts.MAX_POINTS``; else the messages at ``BUCKETS`` evenly
    spaced seqs (index lookups, not a scan), and between two of them the
    highest size a compaction in ``events`` started from and the lowest it
    left, at their seqs, so the line keeps its peaks and troughs."""
    messages = session.messages
    if session.message_count <= charts.MAX_POINTS:
        rows = messages.order_by("seq").values_list("seq", "context_tokens")
        return list(rows[: charts.MAX_POINTS + 1])
    last_seq = messages.order_by("-seq").values_list("seq", flat=True).first()
    if last_seq is None:
        return []
    step = max(1, math.ceil((last_seq + 1) / BUCKETS))
    wanted = [*range(0, last_seq, step), last_seq]
    sampled = sorted(messages.filter(seq__in=wanted).values_list("seq", "context_tokens"))
    peaks: dict[int, tuple[tuple[int, int], tuple[int, int]]] = {}
    for event in events:
        before, after, seq = event.tokens_before, event.tokens_after, event.through_seq
        if event.kind != "ok" or before is None or after is None or seq is None or seq < 0:
            continue
        high, low = peaks.get(seq // step, ((seq, before), (seq, after)))
        high = max(high, (seq, before), key=_tokens)
        peaks[seq // step] = (high, min(low, (seq, after), key=_tokens))
    out: list[tuple[int, int]] = []
    for seq, tokens in sampled:
        out.append((seq, tokens))
        out.extend(sorted(peaks.pop(seq // step, ())))
    return sorted(out, key=lambda point: point[0])


def _tokens(point: tuple[int, int]) -> int:
    return point[1]


def spread(items: Sequence[T], limit: int = MARKERS) -> list[T]:
    """At most ``limit`` (>= 2) of ``items``, evenly spread, the first and the last included."""
    if len(items) <= limit:
        return list(items)
    last = len(items) - 1
    return [items[round(index * last / (limit - 1))] for index in range(limit)]
