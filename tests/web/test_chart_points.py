"""The session page's chart reads a bounded number of points, whatever the session's length."""

from __future__ import annotations

import importlib
import itertools

import pytest
from django.apps import apps as django_apps
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from motus_web.dashboard import chart_points, charts
from motus_web.sessions import aggregates
from motus_web.sessions.models import ChartBlock, Session

from .helpers import make_session

pytestmark = pytest.mark.django_db


def test_a_long_sessions_line_is_each_buckets_peak_and_trough_from_the_stored_blocks(
    owner: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(charts, "MAX_POINTS", 20)
    monkeypatch.setattr(chart_points, "BUCKETS", 8)
    session = make_session(owner, turns=40, filler=60, threshold=600)
    events = list(session.compaction_events.filter(kind="ok").order_by("position"))
    assert session.message_count > 100
    assert len(events) > 8

    with CaptureQueriesContext(connection) as queries:
        points, sampled = chart_points.points(session)

    assert sampled
    assert len(queries) == 2  # the last seq, then one level of blocks
    # A peak and a trough per bucket, then the size now: the same number at any length.
    assert len(points) == 2 * 8 + 1
    assert [seq for seq, _ in points] == sorted(seq for seq, _ in points)
    # Every candidate a bucket holds: the messages' sizes and the compactions' drops.
    candidates: list[tuple[int, int, int]] = [
        (seq, tokens, tokens)
        for seq, tokens in session.messages.values_list("seq", "context_tokens")
    ]
    for e in events:
        assert e.through_seq is not None
        assert e.tokens_before is not None
        assert e.tokens_after is not None
        candidates.append((e.through_seq, e.tokens_before, e.tokens_after))
    last_seq = session.messages.order_by("-seq").values_list("seq", flat=True)[0]
    span = last_seq + 1
    level = 0
    while aggregates.width(level + 1) * 8 <= span:
        level += 1
    size = aggregates.width(level)
    for bucket in range(8):
        inside = [c for c in candidates if (c[0] // size) * size * 8 // span == bucket]
        high = max(c[1] for c in inside)
        low = min(c[2] for c in inside)
        assert sorted(t for _, t in points[2 * bucket : 2 * bucket + 2]) == [low, high]
    assert points[-1] == (last_seq, session.context_tokens)


def test_the_stored_blocks_are_what_the_rows_give_whatever_the_writes(owner: User) -> None:
    """The blocks the store keeps as records come (one at a time, in batches)
    are those the migration computes from the rows at once."""
    session = make_session(owner, turns=40, filler=60, threshold=600)
    kept = sorted(
        ChartBlock.objects.filter(session=session).values_list(
            "level", "index", "high_seq", "high_tokens", "low_seq", "low_tokens"
        )
    )
    counts = _counts(session)
    ChartBlock.objects.filter(session=session).delete()
    Session.objects.filter(pk=session.pk).update(
        event_count=0,
        chart_event_count=0,
        folded_through=None,
        longest_fold=0,
        part_totals={},
        usage_totals={},
    )
    fill = importlib.import_module("motus_web.sessions.migrations.0012_session_aggregates")
    fill.fill_aggregates(django_apps, None)

    again = sorted(
        ChartBlock.objects.filter(session=session).values_list(
            "level", "index", "high_seq", "high_tokens", "low_seq", "low_tokens"
        )
    )
    assert again == kept
    assert _counts(Session.objects.get(pk=session.pk)) == counts
    assert counts[0] == session.compaction_events.count()
    assert sum(count for *_, count in aggregates.part_sums(session.part_totals)) == (
        session.message_count
    )
    assert max(level for level, *_ in kept) == aggregates.LEVELS - 1


def _counts(session: Session) -> tuple[object, ...]:
    return (
        session.event_count,
        session.chart_event_count,
        session.revert_count,
        session.change_count,
        session.folded_through,
        session.longest_fold,
        session.part_totals,
        session.usage_totals,
    )


def test_the_chart_marks_events_spread_by_their_index(owner: User) -> None:
    session = make_session(owner, turns=40, filler=60, threshold=600)
    events = list(session.compaction_events.order_by("position"))

    marked = chart_points.marked(session)

    assert [e.position for e in marked] == [
        e.position for e in chart_points.spread(events, chart_points.MARKERS)
    ]


def test_the_markers_are_spread_over_the_events_and_keep_the_latest() -> None:
    picked = chart_points.spread(list(range(1000)), 100)

    assert len(picked) == 100
    assert picked[0] == 0
    assert picked[-1] == 999
    assert max(b - a for a, b in itertools.pairwise(picked)) <= 11
    assert chart_points.spread([1, 2, 3], 100) == [1, 2, 3]
