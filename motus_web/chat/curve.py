"""Token curves for the replay pages: context size after each message, as SVG points.

Drawn server-side (a polyline per session in one ``<svg>``); the replay page's
script extends the replay's line as its records arrive, with the same scale,
which the ``<svg>`` carries in its data attributes.
"""

from __future__ import annotations

from dataclasses import dataclass

from motus_web.sessions.memories import threshold_of
from motus_web.sessions.models import Session

WIDTH = 720
HEIGHT = 200


@dataclass(frozen=True, slots=True)
class Curve:
    points: str  # "x,y x,y ..." for <polyline points>
    compactions: list[tuple[float, float]]  # where a compaction fired: (x, y)


@dataclass(frozen=True, slots=True)
class Curves:
    width: int
    height: int
    max_x: int  # the last message seq of the original
    max_y: int  # tokens at the top of the chart
    original: Curve
    replay: Curve | None
    threshold_y: float | None  # the replay's threshold line (or the original's)
    threshold: int | None


def _series(session: Session) -> tuple[list[tuple[int, int]], list[int]]:
    points = list(session.messages.order_by("seq").values_list("seq", "context_tokens"))
    fired = list(
        session.compaction_events.filter(kind="ok", through_seq__isnull=False).values_list(
            "through_seq", flat=True
        )
    )
    return points, [seq for seq in fired if seq is not None]


def token_curves(original: Session, replay: Session | None) -> Curves:
    """The original's curve and, when given, the replay's, on one scale."""
    first, first_fired = _series(original)
    second, second_fired = _series(replay) if replay is not None else ([], [])
    threshold = threshold_of(replay if replay is not None else original)
    max_x = max(len(first) - 1, 1)
    tops = [tokens for _, tokens in first + second] + ([threshold] if threshold else [])
    max_y = max([*tops, 1]) * 11 // 10 + 1  # headroom, so the top of a line stays in view

    def xy(index: int, tokens: int) -> tuple[float, float]:
        y = HEIGHT - min(tokens, max_y) / max_y * HEIGHT
        return round(index / max_x * WIDTH, 1), round(y, 1)

    def curve(points: list[tuple[int, int]], fired: list[int]) -> Curve:
        index_of = {seq: i for i, (seq, _) in enumerate(points)}
        coords = [xy(i, tokens) for i, (_, tokens) in enumerate(points)]
        marks = [coords[index_of[seq]] for seq in fired if seq in index_of]
        return Curve(" ".join(f"{x},{y}" for x, y in coords), marks)

    return Curves(
        width=WIDTH,
        height=HEIGHT,
        max_x=max_x,
        max_y=max_y,
        original=curve(first, first_fired),
        replay=curve(second, second_fired) if replay is not None else None,
        threshold_y=xy(0, threshold)[1] if threshold else None,
        threshold=threshold,
    )
