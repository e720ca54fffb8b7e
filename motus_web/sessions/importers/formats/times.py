"""When a parsed message was written, as its file says (for "last activity")."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any


def message_time(message: dict[str, Any]) -> datetime | None:
    """The time a parsed message carries, aware (UTC when the file names no zone).

    Where each format keeps it: ``timestamp`` (Codex, Gemini CLI), the last line
    of ``claude_code``, ``chatgpt.create_time`` (seconds since the epoch),
    ``openhands.timestamp``. ``None`` when the message has none that parses.
    """
    candidates: list[object] = [message.get("timestamp")]
    lines = message.get("claude_code")
    if isinstance(lines, list) and lines and isinstance(lines[-1], dict):
        candidates.append(lines[-1].get("timestamp"))
    for key in ("chatgpt", "openhands"):
        nested = message.get(key)
        if isinstance(nested, dict):
            candidates += [nested.get("create_time"), nested.get("timestamp")]
    for value in candidates:
        if (parsed := _parse(value)) is not None:
            return parsed
    return None


def last_activity(messages: Iterable[object]) -> datetime | None:
    """The latest time any of ``messages`` carries, or ``None`` (non-objects carry none)."""
    times = [t for m in messages if isinstance(m, dict) and (t := message_time(m)) is not None]
    return max(times) if times else None


def _parse(value: object) -> datetime | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            return datetime.fromtimestamp(value, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
