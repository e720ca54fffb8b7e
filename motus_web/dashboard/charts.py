"""The numbers behind the session page's context gauge and token chart.

Pure functions of plain values: the views feed them rows, the templates draw
what they return as SVG. Chart coordinates live in a fixed ``viewBox``
(``CHART_WIDTH`` x ``CHART_HEIGHT``) that the page stretches to its width, so
they are independent of the screen.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from memory import get_model_limits
from motus_web.sessions.memories import threshold_for

CHART_WIDTH = 1000
CHART_HEIGHT = 240
MAX_POINTS = 2000  # the most points one chart line holds, whatever the session's length
FAR_ABOVE = 0.25  # data under this share of the threshold: the chart scales to the data


@dataclass(frozen=True, slots=True)
class Gauge:
    """Context tokens now against the compaction threshold and the model's window.

    ``threshold`` is ``None`` for a logged config the library refuses: the
    gauge then shows the window only."""

    tokens: int
    threshold: int | None
    window: int
    source: str | None = None  # where window and threshold come from, when not the library

    @property
    def scale(self) -> int:
        # A context past the window (a misconfigured threshold) still fits the bar.
        return max(self.window, self.tokens, self.threshold or 0, 1)

    @property
    def tokens_pct(self) -> float:
        return round(100 * self.tokens / self.scale, 2)

    @property
    def threshold_pct(self) -> float | None:
        return None if self.threshold is None else round(100 * self.threshold / self.scale, 2)

    @property
    def of_threshold_pct(self) -> float:
        """Tokens as a share of the threshold, capped at 100 (for the zoomed bar)."""
        return round(min(100.0, 100 * self.tokens / max(self.threshold or self.window, 1)), 2)

    @property
    def window_pct(self) -> float:
        return round(100 * self.window / self.scale, 2)

    @property
    def over_threshold(self) -> bool:
        return self.threshold is not None and self.tokens > self.threshold


def gauge(
    tokens: int,
    config: Mapping[str, object],
    model_name: str,
    limits: Mapping[str, object] | None = None,
) -> Gauge:
    """The gauge of a context of ``tokens`` in a session with this logged config
    and model; the threshold is the session's (``memories.threshold_for``).

    ``limits`` are those an imported file shows (``memories.file_limits``): its
    window takes the place of the library's, and ``source`` says where it
    comes from.
    """
    window = get_model_limits(model_name or None).context_window
    threshold = threshold_for(config, model_name, limits)
    if not limits:
        return Gauge(tokens, threshold, window)
    shown_window = limits.get("window")
    if isinstance(shown_window, int) and shown_window > 0:
        window = shown_window
    source = limits.get("source")
    return Gauge(tokens, threshold, window, source if isinstance(source, str) else None)


@dataclass(frozen=True, slots=True)
class Point:
    seq: int
    tokens: int
    keep: bool = False  # a compaction's drop: bucketing never merges it away


DROPS = frozenset({"ok", "cleared"})  # events drawn from the size before to the size after


@dataclass(frozen=True, slots=True)
class EventMark:
    """A compaction event (or a tool-result clearing) as the chart marks it;
    ``key`` (its log position) names it in links."""

    key: int
    seq: int  # the last message it covers; -1 before any message
    kind: str  # "ok", "failed", "warning", "revert" or "cleared"
    tokens_before: int | None
    tokens_after: int | None
    label: str


@dataclass(frozen=True, slots=True)
class Marker:
    key: int
    kind: str
    label: str
    x: float
    y_top: float  # the line's upper end (tokens before, or the top for a failure)
    y_bottom: float

    # The coordinates as the template writes them: a fixed number of digits.
    @property
    def x_text(self) -> str:
        return fixed_x(self.x)

    @property
    def hit_x_text(self) -> str:
        """Where the marker's 12-wide hit area starts (at the chart's left edge at the latest)."""
        return fixed_x(self.x - 6)

    @property
    def y_top_text(self) -> str:
        return fixed_y(self.y_top)

    @property
    def y_bottom_text(self) -> str:
        return fixed_y(self.y_bottom)


@dataclass(frozen=True, slots=True)
class Sample:
    """A point of the line a person can point at: its figures on hover or focus,
    a link to the request of the reply that followed, a row of the chart's table."""

    seq: int
    tokens: int
    x: float
    y: float

    @property
    def x_text(self) -> str:
        return fixed_x(self.x)

    @property
    def y_text(self) -> str:
        return fixed_y(self.y)


SAMPLES = 60  # points of a chart that carry their figures, whatever the session's length


@dataclass(frozen=True, slots=True)
class TokenChart:
    points: str  # the polyline's "x,y x,y ..."
    point_count: int
    markers: tuple[Marker, ...]
    threshold_y: float | None
    y_max: int  # tokens at the top of the chart
    last_seq: int
    threshold_above: int | None = None  # a threshold far above the data, left off the scale
    threshold: int | None = None
    samples: tuple[Sample, ...] = ()
    events_total: int = 0  # compaction events of the session; ``markers`` may show fewer
    width: int = CHART_WIDTH
    height: int = CHART_HEIGHT

    @property
    def threshold_y_text(self) -> str:
        return fixed_y(self.threshold_y or 0.0)

    @property
    def y_ticks(self) -> tuple[int, int, int]:
        """The token axis' labels, top to bottom."""
        return self.y_max, self.y_max // 2, 0


def series(messages: Sequence[tuple[int, int]], events: Sequence[EventMark]) -> list[Point]:
    """Context size after each message, with each compaction's (and clearing's)
    drop as two kept points.

    ``messages`` are ``(seq, context_tokens)`` in seq order. A revert with a
    stated size (its ``tokens_after``) rises back to it.
    """
    drops: dict[int, list[EventMark]] = {}
    for event in events:
        drop = event.kind in DROPS and event.tokens_before is not None
        # A revert that states the size it leaves: the context grows back to it.
        rise = event.kind == "revert"
        if (drop or rise) and event.tokens_after is not None:
            drops.setdefault(event.seq, []).append(event)
    out: list[Point] = [
        Point(-1, event.tokens_after or 0, True) for event in drops.pop(-1, [])[-1:]
    ]
    for seq, tokens in messages:
        out.append(Point(seq, tokens, seq in drops))
        for event in drops.pop(seq, []):
            if event.tokens_before is not None:
                out.append(Point(seq, event.tokens_before, True))
            out.append(Point(seq, event.tokens_after or 0, True))
    return out


def bucket(points: Sequence[Point], limit: int = MAX_POINTS) -> list[Point]:
    """At most ``limit`` points (``limit`` >= 4) that keep the line's shape.

    Runs of ordinary points are cut into equal buckets, each giving its lowest
    and highest point in order; kept points (compaction drops) stay as they
    are when there is room for them, so every drop stays visible.
    """
    if len(points) <= limit:
        return list(points)
    kept = sum(point.keep for point in points)
    # Each kept point may also close a bucket early: budget for both.
    room = limit - 3 * kept - 2
    if room < 2:
        points = [Point(p.seq, p.tokens) for p in points]
        kept, room = 0, limit - 2
    size = max(1, math.ceil(2 * (len(points) - kept) / room))
    out: list[Point] = []
    run: list[Point] = []

    def close() -> None:
        if run:
            low = min(range(len(run)), key=lambda i: run[i].tokens)
            high = max(range(len(run)), key=lambda i: run[i].tokens)
            out.extend(run[i] for i in sorted({low, high}))
            run.clear()

    for point in points:
        if point.keep:
            close()
            out.append(point)
            continue
        run.append(point)
        if len(run) >= size:
            close()
    close()
    return out


def thin(
    messages: Sequence[tuple[int, int]], keep: Iterable[int], limit: int
) -> Sequence[tuple[int, int]]:
    """``messages`` (``(seq, tokens)`` in seq order) cut to about ``2 * limit``
    before ``series`` builds a point of each: every run of equal length
    gives its lowest and highest message, in order, and the messages whose
    seq is in ``keep`` (where an event drops the line) all stay.

    The same shape ``bucket`` keeps, reached over plain tuples: a
    50,000-message session's chart costs a few milliseconds, not a point
    object per message.
    """
    if len(messages) <= 2 * limit:
        return messages
    seqs = [seq for seq, _ in messages]
    tokens = [count for _, count in messages]
    kept = sorted({i for seq in keep if (i := bisect.bisect_left(seqs, seq)) < len(seqs)})
    size = math.ceil(len(messages) / limit)
    picked: list[int] = []
    for start in range(0, len(messages), size):
        stop = min(start + size, len(messages))
        window = range(start, stop)
        marks = kept[bisect.bisect_left(kept, start) : bisect.bisect_left(kept, stop)]
        lowest = min(window, key=tokens.__getitem__)
        highest = max(window, key=tokens.__getitem__)
        picked.extend(sorted({lowest, highest, *marks}))
    return [messages[i] for i in picked]


def token_chart(
    messages: Sequence[tuple[int, int]],
    events: Sequence[EventMark],
    threshold: int | None,
    limit: int = MAX_POINTS,
    *,
    sampled: bool = False,
) -> TokenChart:
    """The chart of a whole session: its line (bucketed to ``limit`` points),
    the threshold line and a marker for every event in ``events``.
    ``sampled``: ``messages`` are already the line's points, the events'
    drops among them (``chart_points.points``), drawn as they are.

    The scale reaches the threshold, unless the highest point is under
    ``FAR_ABOVE`` of it: then it fits the data and ``threshold_above`` names
    the threshold the chart does not draw.

    Coordinates are written with a fixed number of digits (``_x``, ``_y``),
    so a chart of a given number of points and markers has the same length
    whatever its figures."""
    if sampled:
        line = [Point(seq, tokens) for seq, tokens in messages]
    else:
        line = bucket(series(thin(messages, (e.seq for e in events), limit), events), limit)
    last_seq = max([messages[-1][0] if messages else 0, *(event.seq for event in events), 1])
    highest = max([*(p.tokens for p in line), *(e.tokens_before or 0 for e in events), 1])
    # A threshold far above the data would flatten the line against the bottom:
    # scale to the data then, and say where the threshold is instead of drawing it.
    above = threshold if threshold and highest < threshold * FAR_ABOVE else None
    y_max = _nice_ceiling(max(highest, 0 if above else threshold or 0) * 1.05)

    def x(seq: int) -> float:
        return round(CHART_WIDTH * max(seq, 0) / last_seq, 1)

    def y(tokens: int) -> float:
        return round(CHART_HEIGHT * (1 - tokens / y_max), 1)

    markers = []
    for event in events:
        top = y(event.tokens_before) if event.tokens_before is not None else 0.0
        bottom = y(event.tokens_after) if event.tokens_after is not None else float(CHART_HEIGHT)
        if event.kind not in DROPS:
            top, bottom = 0.0, float(CHART_HEIGHT)
        markers.append(Marker(event.key, event.kind, event.label, x(event.seq), top, bottom))
    step = max(1, math.ceil(len(messages) / SAMPLES))
    picked = [*messages[::step], *messages[-1:]] if messages else []
    samples = tuple(Sample(seq, tokens, x(seq), y(tokens)) for seq, tokens in dict(picked).items())
    return TokenChart(
        points=" ".join(f"{fixed_x(x(p.seq))},{fixed_y(y(p.tokens))}" for p in line),
        point_count=len(line),
        markers=tuple(markers),
        threshold_y=y(threshold) if threshold and not above else None,
        y_max=y_max,
        last_seq=last_seq,
        threshold_above=above,
        threshold=threshold,
        samples=samples,
    )


def _fixed(value: float, top: int) -> str:
    """``value`` (0 to ``top``) to one decimal, zero-padded to the width of
    ``top``: "0042.5" in a chart 1000 wide. SVG reads the leading zeros as
    any number's."""
    clamped = min(max(value, 0.0), float(top))
    return f"{clamped:0{len(str(top)) + 2}.1f}"


def fixed_x(value: float) -> str:
    """An x coordinate as the chart writes it (``_fixed``)."""
    return _fixed(value, CHART_WIDTH)


def fixed_y(value: float) -> str:
    """A y coordinate as the chart writes it (``_fixed``)."""
    return _fixed(value, CHART_HEIGHT)


def _nice_ceiling(value: float) -> int:
    """The next round number at or above ``value`` (1, 2 or 5 times a power of ten)."""
    if value <= 1:
        return 1
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * power >= value:
            return int(step * power)
    return int(10 * power)


@dataclass(frozen=True, slots=True)
class ProviderReading:
    """What the provider counted for the latest request it reported, beside
    the memory's estimate of that same request.

    ``seq`` is the reply the request produced. ``since`` names what changed
    the context after it (a compaction, an undo, a reset): the provider's
    count of the context as it is now is then unknown until the next reply.
    """

    seq: int
    estimate: int  # the memory's estimate of the request that produced reply ``seq``
    provider: int
    since: str = ""

    @property
    def ratio(self) -> float:
        return self.provider / self.estimate if self.estimate else 0.0
