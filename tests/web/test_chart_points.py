"""The session page's chart reads a bounded number of points, whatever the session's length."""

from __future__ import annotations

import itertools

import pytest
from django.contrib.auth.models import User

from motus_web.dashboard import chart_points, charts

from .helpers import make_session

pytestmark = pytest.mark.django_db


def test_a_long_sessions_line_is_sampled_and_keeps_every_compactions_peak_and_trough(
    owner: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(charts, "MAX_POINTS", 20)
    monkeypatch.setattr(chart_points, "BUCKETS", 8)
    session = make_session(owner, turns=40, filler=60, threshold=600)
    events = list(session.compaction_events.order_by("position"))
    assert session.message_count > 100
    assert len(events) > 8

    points = chart_points.points(session, events)

    # At most a sampled message and a peak and a trough per bucket, in seq order.
    assert len(points) <= 3 * 9
    assert [seq for seq, _ in points] == sorted(seq for seq, _ in points)
    tokens = [count for _, count in points]
    assert max(tokens) == max(e.tokens_before for e in events if e.tokens_before is not None)
    assert min(tokens) <= min(e.tokens_after for e in events if e.tokens_after is not None)


def test_a_short_session_gives_every_message(owner: User) -> None:
    session = make_session(owner, turns=5)

    points = chart_points.points(session, [])

    assert points == list(session.messages.order_by("seq").values_list("seq", "context_tokens"))


def test_the_markers_are_spread_over_the_events_and_keep_the_latest() -> None:
    picked = chart_points.spread(list(range(1000)), 100)

    assert len(picked) == 100
    assert picked[0] == 0
    assert picked[-1] == 999
    assert max(b - a for a, b in itertools.pairwise(picked)) <= 11
    assert chart_points.spread([1, 2, 3], 100) == [1, 2, 3]
