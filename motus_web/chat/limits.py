"""Rate limits of the session socket, per user across all of that user's sockets.

Two token buckets per user: ``work`` frames (``send``, ``retry``, ``replay``,
``compact``: each may start a turn) and ``any`` frame at all (``resume`` and
``stop`` too, and frames that turn out malformed), checked before a frame is
parsed or touches the database. A user with twenty sockets has the same
allowance as with one. The buckets live in the server process: run one
process per host (``make run`` does), or each process allows its own share.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from threading import Lock

WORK_BURST = 4
WORK_PER_MINUTE = 12
FRAME_BURST = 30
FRAMES_PER_MINUTE = 240


class RateLimit:
    """A token bucket: ``burst`` at once, refilled at ``per_minute``."""

    def __init__(self, per_minute: float, burst: int) -> None:
        self.rate = per_minute / 60
        self.burst = burst
        self.tokens = float(burst)
        self.at = time.monotonic()

    def allow(self) -> bool:
        self._refill()
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True

    def wait_seconds(self) -> int:
        """Whole seconds until ``allow`` would be true again (0: now)."""
        self._refill()
        return 0 if self.tokens >= 1 else math.ceil((1 - self.tokens) / self.rate)

    def _refill(self) -> None:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now


@dataclass
class UserLimits:
    work: RateLimit = field(default_factory=lambda: RateLimit(WORK_PER_MINUTE, WORK_BURST))
    frames: RateLimit = field(default_factory=lambda: RateLimit(FRAMES_PER_MINUTE, FRAME_BURST))


_limits: dict[int, UserLimits] = {}
_lock = Lock()


def limits_of(user_pk: int) -> UserLimits:
    """The buckets of one user, shared by all of their sockets in this process."""
    with _lock:
        found = _limits.get(user_pk)
        if found is None:
            found = _limits[user_pk] = UserLimits()
        return found


def forget_all() -> None:
    """Start every user afresh (tests)."""
    with _lock:
        _limits.clear()
