"""A socket's cursor: the records its browser has, and the runs it follows.

``cursor`` is the last record position this socket sent its browser. A
channel layer drops group messages silently when a reader falls behind (over
its per-channel capacity; on Redis all the sockets of a process share one
such list), so no viewer's state rests on a group message arriving:

- every frame a writer publishes carries ``run`` (one turn, replay or
  compaction) and ``sn``, its number in that run from 1; a consumer that sees
  a gap (or joins a run half-way) re-syncs from the store: the records it
  lacks, then a ``sync`` frame with whether a writer still runs (its lease);
- a run whose end never arrives is noticed by the stall check, which reads
  the lease every ``consumers.STALL_S`` seconds while a run is live and re-syncs once
  it is gone;
- a numbered record frame this socket already sent (a catch-up read it first)
  goes on as ``{"type": "seen", "run", "sn"}``, so the page's numbering stays
  whole and it can check for gaps too;
- ``resume`` (the browser's ``last_pos``) answers the records after it and a
  ``sync`` frame, and reads the store at most once per new record position.

See ``consumers`` for the socket as a whole.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from channels.generic.websocket import AsyncJsonWebsocketConsumer

from motus_web.sessions import lease, once
from motus_web.sessions.db_threads import on_db_thread
from motus_web.sessions.models import Session

from .render import last_position

FINISHING_WAIT_S = 5.0  # a run's end frame, and a send after it, wait this long for it to end
UNKNOWN_RUN = "?"


class RecordCursor(AsyncJsonWebsocketConsumer):
    """The cursor's part of ``SessionConsumer`` (which sets these attributes)."""

    session: Session | None
    user: Any
    cursor: int | None  # last record position this browser has
    announced: bool  # records may have been stored since the last catch-up
    live_run: str | None  # the run whose frames this socket follows
    live_sn: int
    work: asyncio.Task[None] | None  # this socket's own run
    own_run_ended: bool
    stall: asyncio.Task[None] | None
    closing: bool
    # Send every record after the cursor, in order (the consumer's: it reads the store).
    catch_up: Callable[[], Awaitable[None]]
    # Start the stall check of a run whose frames this socket follows (the consumer's).
    watch: Callable[[str], None]

    async def resume(self, last_pos: int) -> None:
        """Answer ``resume``: the records after ``last_pos``, then a ``sync`` frame.

        The store is read only when a record may have been stored since the
        last answer, or the browser asks from another position than it has."""
        if last_pos == self.cursor and not self.announced:
            await self.send_sync(running=self.live_run is not None)
            return
        self.cursor = last_pos
        await self.resync()

    async def past_end(self, last_pos: int, end: int) -> None:
        await self.send_json(
            {
                "type": "error",
                "code": "bad_position",
                "message": f"this session has records up to #{end} only, not #{last_pos}",
                "retryable": False,
            }
        )
        await self.send_sync(running=self.live_run is not None, end=end)

    async def resync(self) -> None:
        """The records this browser lacks, from the store, then the state of the
        session's writer (from its lease): what the group's frames may have lost."""
        assert self.session is not None
        cursor = -1 if self.cursor is None else self.cursor
        end = await on_db_thread(last_position)(self.session)
        if cursor > end:
            await self.past_end(cursor, end)
            self.cursor = end
            return
        self.announced = False
        await self.catch_up()
        kind = await on_db_thread(lease.holder_kind)(self.session.pk)
        # This socket's own run's end is on its way (in ``own_frames``, never
        # lost) even when its lease is back already: it still runs, for the page.
        own_pending = self.work is not None and not self.own_run_ended
        if kind is None and not own_pending:
            self.live_run = None
        elif self.live_run is None and not own_pending:
            self.live_run = UNKNOWN_RUN  # a writer runs whose frames this socket has not seen
            self.watch(UNKNOWN_RUN)
        await self.send_sync(running=kind is not None or own_pending)

    async def send_sync(self, *, running: bool, end: int | None = None) -> None:
        last = self.cursor if end is None else end
        await self.send_json({"type": "sync", "last_pos": last, "running": running})

    async def follow_frame(self, event: dict[str, Any], *, own: bool) -> None:
        run, sn = event["run"], event["sn"]
        frame = {**event["frame"], "run": run, "sn": sn}
        expected = self.live_sn + 1 if run == self.live_run else 1
        self.live_run, self.live_sn = run, sn
        kind = frame["type"]
        ends = kind == "finished" or (
            kind == "replay" and frame["phase"] in ("finished", "stopped", "failed")
        )
        if ends:
            self.live_run = None
            self.own_run_ended = own
        elif not own:
            self.watch(run)
        if self.cursor is None:
            if kind != "record":  # not following the records yet: its resume reads them
                await self.send_json(frame)
            return
        if sn != expected and not own:  # (its own run's frames are never lost)
            await self.resync()  # frames of this run were dropped, or this socket joined late
        elif kind == "record" and frame["pos"] > self.cursor + 1:
            await self.catch_up()  # a record announced but not seen: read it from the store
        if kind == "record":
            if frame["pos"] <= self.cursor:
                # Sent already (by a catch-up): only its number goes on, so the
                # page's numbering stays whole.
                frame = {"type": "seen", "run": run, "sn": sn}
            self.cursor = max(self.cursor, frame.get("pos", self.cursor))
        if ends and own and frame.get("kind") == "compact":
            frame["next_token"] = once.new_token(self.user)  # the spent one is done with
        if ends and own and self.work is not None:
            # The run gives its lease back right after its end: the browser,
            # told the turn is over, may send at once (a bounded wait: a run
            # with background work after its end holds the lease longer).
            await asyncio.wait([self.work], timeout=FINISHING_WAIT_S)
        await self.send_json(frame)
        if ends and not own:  # (its own run sent every record it stored, in order)
            await self.catch_up()
