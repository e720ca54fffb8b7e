"""``RunPublisher``: where one run's frames go, the socket that runs it and the rest.

A run (turn, replay or compaction) is a task of the socket that started it.
That socket gets every frame of the run straight from it, through its own
unbounded in-process queue (``deliver``), whole and in order: a channel layer
never stands between a browser and its own turn, so it can never lose the
turn's end or its text, however far behind the layer falls. Every other
socket following the session (another tab, staff, a viewer on another
worker) gets the frames through the session's channel-layer group
(``send_to_group``), which drops messages when a reader falls behind: there
a run of text deltas is coalesced into one frame per ``GROUP_DELTA_S``
seconds (or more, while a group send is slow), so a loaded layer carries a
fraction of the messages, and the rest is the consumers' gap and stall
checks' to mend from the store.

Each stream is numbered on its own (``sn`` from 1, same ``run``): a socket
reads only one of them per run (the group's message says which socket it
came from, ``origin``, and that socket skips it).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from .turns import DeltaBatcher

GROUP_DELTA_S = 0.25  # a viewer's text arrives in pieces this far apart at least


class RunPublisher:
    """``publish(frame)`` for one run: to ``deliver`` (the running socket's own
    queue, a plain function that must not block) at once, and to
    ``send_to_group`` (a coroutine that never raises for a layer failure)
    with deltas coalesced. Call ``close()`` when the run ends."""

    def __init__(
        self,
        deliver: Callable[[dict[str, Any]], None],
        send_to_group: Callable[[dict[str, Any]], Awaitable[None]],
        group_interval: float = GROUP_DELTA_S,
    ) -> None:
        self.run = uuid.uuid4().hex
        self._deliver = deliver
        self._send_to_group = send_to_group
        self._own_sn = 0
        self._group_sn = 0
        self._group = DeltaBatcher(self._group_frame, group_interval)

    async def publish(self, frame: dict[str, Any]) -> None:
        self._own_sn += 1
        self._deliver(
            {"type": "chat.own_frame", "frame": dict(frame), "run": self.run, "sn": self._own_sn}
        )
        await self._group.publish(dict(frame))

    async def _group_frame(self, frame: dict[str, Any]) -> None:
        self._group_sn += 1
        await self._send_to_group(
            {"type": "chat.frame", "frame": frame, "run": self.run, "sn": self._group_sn}
        )

    async def flush(self) -> None:
        """Send the group the text still coalescing (a run that ended on a delta)."""
        await self._group.flush()

    def close(self) -> None:
        self._group.close()
