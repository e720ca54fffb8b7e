"""The memory trace: a bounded record of what the memory did, for debugging.

Events reference messages by ``seq`` instead of copying their content, and the
trace keeps only the newest ``max_events`` events (the conversation log keeps
everything), so a long session's trace costs a bounded amount of memory.
"""

from __future__ import annotations

from collections import Counter, deque
from typing import Any

from .lazy_tokens import ContextFigure, TokenCell
from .log.records import now_iso


class Trace:
    """Newest-first bounded event buffer with running totals per event type."""

    def __init__(self, max_events: int = 1000) -> None:
        self._events: deque[dict[str, Any]] = deque(maxlen=max_events)
        self._totals: Counter[str] = Counter()

    def add(self, event_type: str, **fields: Any) -> dict[str, Any]:
        """Record an event of ``event_type`` with ``fields``; ``timestamp`` (ISO-8601
        UTC) is now unless given. Returns the event."""
        event = {"type": event_type, "timestamp": fields.pop("timestamp", None) or now_iso()}
        event.update(fields)
        self._events.append(event)
        self._totals[event_type] += 1
        return event

    def append(self, event: dict[str, Any]) -> None:
        """Record ``event``, a dict that starts with its ``type`` and ``timestamp``
        (``add`` without building the dict again: one per message)."""
        self._events.append(event)
        self._totals[event["type"]] += 1

    def clear(self) -> int:
        """Drop every event and total; returns how many events were held."""
        held = len(self._events)
        self._events.clear()
        self._totals.clear()
        return held

    def __len__(self) -> int:
        return len(self._events)

    def snapshot(self) -> dict[str, Any]:
        """``{"events": [...oldest first], "total_events", "total_compactions",
        "failed_compactions", "compaction_warnings", "anomalies", "dropped_events"}``."""
        total = sum(self._totals.values())
        return {
            "events": [_read(e) for e in self._events],
            "total_events": total,
            "total_compactions": self._totals["compaction"],
            "failed_compactions": self._totals["compaction_failed"],
            "compaction_warnings": self._totals["compaction_warning"],
            "anomalies": self._totals["anomaly"],
            "dropped_events": total - len(self._events),
        }

    def copy(self) -> Trace:
        clone = Trace(self._events.maxlen or 1000)
        clone._events.extend(_read(e) for e in self._events)
        clone._totals = Counter(self._totals)
        return clone


def _read(event: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``event`` with its deferred figures read (``memory.lazy_tokens``)."""
    return {
        key: value.get() if isinstance(value, TokenCell | ContextFigure) else value
        for key, value in event.items()
    }
