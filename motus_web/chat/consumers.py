"""``SessionConsumer``: one browser following (and maybe driving) one session.

Route: ``/ws/sessions/<public id>/``. The socket is for a logged-in user who
may see the session (its owner, or staff); anyone else is closed with:

- ``4401``: not logged in;
- ``4404``: no such session, or one this user may not see (one code for both,
  so session ids cannot be probed);
- ``1009``: a frame over ``frames.MAX_FRAME_BYTES``.

Everyone following a session is in its channel-layer group
(``session_group``): the log store announces stored records there
(``log.records``), and a running turn publishes its live frames there
(``chat.frame``), so every open tab sees the same stream. A browser sends
``resume`` with the last record position it has and gets, in order and once,
every record after it, then each new one as it is stored.

Only the owner or staff may ``send``, ``retry``, ``stop`` or ``replay``; one
writer per session (``lease``): a second writer is refused with a ``busy``
error. The turn runs as a task of the connection that started it, so this
consumer keeps reading frames (``stop``) meanwhile; closing that connection
stops the turn, cleanly. Sends are rate-limited per connection.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from motus_web.sessions import lease
from motus_web.sessions.models import Session
from motus_web.sessions.signals import session_group

from .frames import (
    MAX_FRAME_BYTES,
    FrameError,
    Resume,
    Retry,
    Send,
    StartReplay,
    Stop,
    parse_frame,
)
from .providers import ChatModel
from .render import record_frames
from .replay import ReplayRun, replay_of
from .turns import ChatTurn

logger = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404
CLOSE_TOO_BIG = 1009
SENDS_PER_MINUTE = 12
SEND_BURST = 4


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


def _visible_session(user: Any, public_id: str) -> Session | None:
    return Session.objects.visible_to(user).filter(public_id=public_id).first()


def configured_models() -> tuple[ChatModel, ...]:
    return tuple(settings.MOTUS_CHAT_MODELS)


def choose_model(name: str | None, session: Session) -> ChatModel | None:
    """The model named ``name``; without a name, the one the session used, else the first."""
    models = configured_models()
    if name is not None:
        return next((m for m in models if m.name == name), None)
    used = next((m for m in models if m.model == session.model_name), None)
    return used or (models[0] if models else None)


class SessionConsumer(AsyncJsonWebsocketConsumer):
    session: Session | None = None
    group: str | None = None

    async def connect(self) -> None:
        # Accept first: a close before accept loses its code (the handshake just fails).
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        public_id = self.scope["url_route"]["kwargs"]["public_id"]
        session = await database_sync_to_async(_visible_session)(user, public_id)
        if session is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.session = session
        self.can_write = bool(user.is_staff or session.owner_id == user.pk)
        self.cursor: int | None = None  # last record position this browser has
        self.writer_live = False  # a turn or replay publishes its records itself
        self.work: asyncio.Task[None] | None = None
        self.runner: ChatTurn | ReplayRun | None = None
        self.sends = RateLimit(SENDS_PER_MINUTE, SEND_BURST)
        self.group = session_group(public_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.send_json(
            {
                "type": "hello",
                "session": public_id,
                "can_send": self.can_write,
                "models": [m.name for m in configured_models()],
                "replay_of": replay_of(session),
            }
        )

    async def disconnect(self, code: int) -> None:
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)
        work = getattr(self, "work", None)
        if work is not None and not work.done():
            # The turn writes its clean-up (cancelled results, partial answer) and
            # gives the lease back before it ends.
            work.cancel()
            await asyncio.wait([work], timeout=30)

    # -- frames from the browser -------------------------------------------------------

    async def websocket_receive(self, message: dict[str, Any]) -> None:
        text = message.get("text")
        if text is None:
            await self.refuse("bad_frame", "binary frames are not accepted")
            return
        if (
            len(text) > MAX_FRAME_BYTES
            or len(text.encode("utf-8", "surrogatepass")) > MAX_FRAME_BYTES
        ):
            await self.close(code=CLOSE_TOO_BIG)
            return
        try:
            frame = parse_frame(text)
        except FrameError as error:
            await self.refuse("bad_frame", str(error))
            return
        if isinstance(frame, Resume):
            await self.catch_up(frame.last_pos)
            return
        if not self.can_write:
            await self.refuse("forbidden", "only the session's owner or staff may do that here")
            return
        if isinstance(frame, Stop):
            await self.channel_layer.group_send(self.group, {"type": "chat.stop"})
            return
        if not self.sends.allow():
            await self.refuse(
                "rate_limited",
                f"too many messages: send again in {self.sends.wait_seconds()} s "
                f"(at most {SEND_BURST} at once, then {SENDS_PER_MINUTE} a minute)",
            )
            return
        if isinstance(frame, Send | Retry):
            await self.start_turn(frame)
        elif isinstance(frame, StartReplay):
            await self.start_replay(frame.speed)

    async def refuse(self, code: str, message: str) -> None:
        """Answer a frame that did nothing: ``refused`` tells the browser that a
        message it sent was not stored, so it can offer it again."""
        await self.send_json(
            {"type": "error", "code": code, "message": message, "retryable": False, "refused": True}
        )

    # -- records ------------------------------------------------------------------------

    async def catch_up(self, last_pos: int) -> None:
        """Send every record after ``last_pos``, in order, then follow new ones."""
        assert self.session is not None
        cursor = last_pos if self.cursor is None else max(self.cursor, last_pos)
        while True:
            frames = await database_sync_to_async(record_frames)(self.session, cursor)
            for frame in frames:
                await self.send_json(frame)
                cursor = frame["pos"]
            if len(frames) < 200:
                break
        self.cursor = cursor

    async def log_records(self, event: dict[str, Any]) -> None:
        """The log store stored records of this session (``signals.announce``).

        While a writer of this chat runs, its own record frames carry them, in
        order with its live frames; other writers (an import...) are read here.
        """
        if self.cursor is not None and not self.writer_live:
            await self.catch_up(self.cursor)

    async def chat_frame(self, event: dict[str, Any]) -> None:
        """A frame a turn or replay published to the session's group."""
        frame = event["frame"]
        kind = frame["type"]
        if kind == "record":
            if self.cursor is None or frame["pos"] <= self.cursor:
                return  # not following yet, or already sent
            if frame["pos"] > self.cursor + 1:
                await self.catch_up(self.cursor)  # a gap: read it, this record included
                return
            self.cursor = frame["pos"]
        elif kind == "turn_started" or (kind == "replay" and frame["phase"] == "started"):
            self.writer_live = True
        await self.send_json(frame)
        if kind == "finished" or (kind == "replay" and frame["phase"] in ("finished", "stopped")):
            self.writer_live = False
            if self.cursor is not None:
                await self.catch_up(self.cursor)

    async def chat_stop(self, event: dict[str, Any]) -> None:
        if self.runner is not None and self.work is not None and not self.work.done():
            self.runner.stop()

    async def publish(self, frame: dict[str, Any]) -> None:
        await self.channel_layer.group_send(self.group, {"type": "chat.frame", "frame": frame})

    # -- writing ------------------------------------------------------------------------

    async def start_turn(self, frame: Send | Retry) -> None:
        assert self.session is not None
        if replay_of(self.session) is not None:
            await self.refuse("replay_only", "this session is a replay: it only replays")
            return
        model = choose_model(frame.model, self.session)
        if model is None:
            message = (
                f"no model named {frame.model!r} is configured"
                if frame.model
                else "no model is configured: set MOTUS_CHAT_MODELS (see the README)"
            )
            await self.refuse("no_model", message)
            return
        if not await self.take_lease("turn"):
            return
        turn = ChatTurn(self.session, model, self.publish)
        text = frame.text if isinstance(frame, Send) else None
        self.runner = turn
        self.work = asyncio.create_task(self.hold_lease(turn.run(text)))

    async def start_replay(self, speed: float) -> None:
        assert self.session is not None
        original = replay_of(self.session)
        if original is None:
            await self.refuse("not_a_replay", "this session is not a replay")
            return
        if not await self.take_lease("replay"):
            return
        run = ReplayRun(self.session, original, self.publish)
        self.runner = run
        self.work = asyncio.create_task(self.hold_lease(run.run(speed)))

    async def take_lease(self, kind: str) -> bool:
        assert self.session is not None
        if await database_sync_to_async(lease.acquire)(self.session.pk, self.channel_name, kind):
            return True
        await self.refuse(
            "busy",
            "another turn is running in this session (another tab or person); "
            "wait for it to finish, or stop it",
        )
        return False

    async def hold_lease(self, work: Any) -> None:
        """Run ``work`` while renewing this connection's lease; give it back after."""
        assert self.session is not None
        pk, holder = self.session.pk, self.channel_name
        renewing = asyncio.create_task(self._renew(pk, holder))
        try:
            await work
        except Exception:
            logger.exception("session %s: the turn failed", self.session.public_id)
            await self.publish({"type": "finished", "reason": "error", "steps": 0})
        finally:
            renewing.cancel()
            await database_sync_to_async(lease.release)(pk, holder)

    async def _renew(self, pk: int, holder: str) -> None:
        while True:
            await asyncio.sleep(lease.RENEW_SECONDS)
            if not await database_sync_to_async(lease.renew)(pk, holder):
                # The lease expired (this process stalled) and may be someone
                # else's now: stop rather than write beside another writer.
                logger.warning("session %s: writer lease lost, stopping", self.session)
                if self.runner is not None:
                    self.runner.stop()
                return
