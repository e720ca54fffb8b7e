"""The gauge and token-chart arithmetic, on plain numbers."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User

from memory import CompactionMemory, CompactionMemoryConfig
from motus_web.dashboard import charts
from motus_web.dashboard.charts import EventMark, Point

from .helpers import logged_in, make_session


def drop(key: int, seq: int, before: int, after: int, kind: str = "ok") -> EventMark:
    return EventMark(key, seq, kind, before, after if kind == "ok" else None, f"event {key}")


def test_the_gauge_draws_tokens_threshold_and_window_on_one_scale() -> None:
    gauge = charts.gauge(32_000, {"token_threshold": 96_000}, "gpt-4o")

    assert (gauge.tokens, gauge.threshold, gauge.window) == (32_000, 96_000, 128_000)
    assert gauge.tokens_pct == 25.0
    assert gauge.threshold_pct == 75.0
    assert gauge.window_pct == 100.0
    assert not gauge.over_threshold


def test_a_context_past_the_window_still_fits_the_gauge() -> None:
    gauge = charts.Gauge(tokens=200, threshold=80, window=100)

    assert gauge.tokens_pct == 100.0
    assert gauge.window_pct == 50.0
    assert gauge.over_threshold


def test_without_a_stated_threshold_it_is_the_librarys_window_times_the_safety_ratio() -> None:
    assert charts.gauge(0, {}, "gpt-4o").threshold == 96_000  # 128k x 0.75
    assert charts.gauge(0, {"safety_ratio": 0.5}, "gpt-4o").threshold == 64_000
    assert (
        charts.gauge(0, {"safety_ratio": 0.5}, "gpt-4o").threshold
        == (
            CompactionMemory(config=CompactionMemoryConfig(safety_ratio=0.5), model_name="gpt-4o")
        ).token_threshold
    )
    # A config the library refuses names no threshold: the gauge says so, not a guess.
    nonsense = charts.gauge(10, {"safety_ratio": "lots"}, "gpt-4o")
    assert nonsense.threshold is None
    assert not nonsense.over_threshold


def test_a_compaction_becomes_a_drop_of_two_kept_points() -> None:
    points = charts.series([(0, 100), (1, 900), (2, 300)], [drop(5, 1, 900, 200)])

    assert points == [
        Point(0, 100),
        Point(1, 900, True),
        Point(1, 900, True),
        Point(1, 200, True),
        Point(2, 300),
    ]


def test_a_failed_compaction_leaves_the_line_alone() -> None:
    points = charts.series([(0, 100), (1, 900)], [drop(5, 1, 900, 0, kind="failed")])

    assert [p.tokens for p in points] == [100, 900]


def test_a_long_session_is_bucketed_under_the_limit_and_keeps_every_drop() -> None:
    messages = [(seq, 10 * (seq % 1000)) for seq in range(50_000)]
    events = [drop(key, seq, 9990, 5) for key, seq in enumerate(range(999, 50_000, 1000))]

    line = charts.bucket(charts.series(messages, events), charts.MAX_POINTS)

    assert len(line) <= charts.MAX_POINTS
    for event in events:
        assert Point(event.seq, 5, True) in line
    assert max(p.tokens for p in line) == 9990  # the peaks survive bucketing
    assert [p.seq for p in line] == sorted(p.seq for p in line)


def test_thinning_a_long_session_first_draws_the_same_chart_shape() -> None:
    messages = [(seq, 10 * (seq % 1000) + seq % 7) for seq in range(50_000)]
    events = [drop(key, seq, 9996, 5) for key, seq in enumerate(range(999, 50_000, 1000))]

    thinned = charts.thin(messages, (e.seq for e in events), charts.MAX_POINTS)
    chart = charts.token_chart(messages, events, 9000)

    assert len(thinned) <= 3 * charts.MAX_POINTS
    assert [seq for seq, _ in thinned] == sorted({seq for seq, _ in thinned})
    assert {e.seq for e in events} <= {seq for seq, _ in thinned}  # every drop's message
    assert max(t for _, t in thinned) == max(t for _, t in messages)  # peaks and troughs
    assert min(t for _, t in thinned) == min(t for _, t in messages)
    assert chart.point_count <= charts.MAX_POINTS
    assert len(chart.markers) == len(events)
    drawn = [tuple(map(float, pair.split(","))) for pair in chart.points.split()]
    peak = charts.CHART_HEIGHT * (1 - 9996 / chart.y_max)
    assert min(y for _, y in drawn) == pytest.approx(peak, abs=0.1)


def test_too_many_drops_for_the_limit_still_give_at_most_the_limit() -> None:
    points = [Point(seq, seq, keep=True) for seq in range(5000)]

    assert len(charts.bucket(points, 100)) <= 100


def test_a_short_session_keeps_every_point() -> None:
    points = [Point(seq, seq) for seq in range(10)]

    assert charts.bucket(points) == points


def test_the_chart_places_the_threshold_and_marks_each_event() -> None:
    chart = charts.token_chart(
        [(0, 100), (1, 900), (2, 300)],
        [drop(4, 1, 900, 200), drop(6, 2, 300, 0, kind="failed")],
        threshold=800,
    )

    assert chart.y_max == 1000  # 900 plus room, rounded up
    assert chart.threshold_y == 48.0  # 800 of 1000 on a 240-high chart
    ok, failed = chart.markers
    assert (ok.key, ok.x, ok.y_top, ok.y_bottom) == (4, 500.0, 24.0, 192.0)
    assert (failed.kind, failed.y_top, failed.y_bottom) == ("failed", 0.0, 240.0)
    assert chart.points.split()[0] == "0000.0,216.0"  # fixed-width digits


def test_a_revert_that_states_its_size_rises_back_to_it() -> None:
    revert = EventMark(7, 1, "revert", None, 900, "revert")

    points = charts.series([(0, 100), (1, 300), (2, 950)], [drop(5, 0, 100, 50), revert])

    assert [p.tokens for p in points] == [100, 100, 50, 300, 900, 950]


def test_a_threshold_far_above_the_data_leaves_the_scale_to_the_data_and_is_named() -> None:
    chart = charts.token_chart([(0, 20), (1, 46)], [], threshold=96_000)

    assert chart.y_max == 50  # 46 plus room, not 96,000 (nor 200,000)
    assert chart.threshold_y is None
    assert chart.threshold_above == 96_000
    assert chart.points.split()[-1] == "1000.0,019.2"  # near the top, visible (fixed width)


def test_a_threshold_within_four_times_the_data_stays_on_the_chart() -> None:
    chart = charts.token_chart([(0, 20), (1, 300)], [], threshold=1000)

    assert chart.threshold_above is None
    assert chart.y_max == 2000
    assert chart.threshold_y == 120.0


@pytest.mark.django_db
def test_the_chart_legend_says_where_the_threshold_is_and_keys_differ(owner: User) -> None:
    session = make_session(owner, turns=1, threshold=96_000, title="Small")

    html = logged_in(owner).get(f"/sessions/{session.public_id}/").content.decode()

    legend = html.split('class="chart-legend')[1].split("</ul>")[0]
    assert "threshold 96,000 tokens: above this scale" in legend
    assert 'class="threshold"' not in html.split('class="token-chart"')[1].split("</svg>")[0]
    assert '<span class="swatch note"></span>revert or warning' in legend
    css = (Path(__file__).parents[2] / "static/dashboard/motus.css").read_text()
    assert "marker-revert line { stroke: var(--note)" in css


def test_the_chart_labels_its_token_axis_and_threshold_and_its_points_carry_their_figures(
    owner: User,
) -> None:
    session = make_session(owner, turns=8, filler=60, threshold=600)

    html = logged_in(owner).get(f"/sessions/{session.public_id}/").content.decode()

    chart = html[
        html.index('id="token-chart"') : html.index("</section>", html.index('id="token-chart"'))
    ]
    assert '<span class="chart-axis-title">tokens</span>' in chart
    assert chart.count('class="chart-tick"') == 3
    assert "threshold: 600 tokens" in chart
    assert "<title>Compaction threshold: 600 tokens</title>" in chart
    last = session.messages.order_by("-seq").first()
    assert last is not None
    step = f"/sessions/{session.public_id}/steps/{last.seq}/"
    assert (
        f'<a href="{step}" class="sample" data-figures="#{last.seq}: {last.context_tokens:,} tokens'
        in chart
    )
    # The same figures, for a screen reader or anyone, in a table.
    assert f'<tr><td>#{last.seq}</td><td class="num">{last.context_tokens:,}</td>' in chart
    assert chart.count('class="sample"') == session.message_count  # a short session: all
