"""``SessionConsumer``: one browser following (and maybe driving) one session.

Route: ``/ws/sessions/<public id>/``. The socket is for a logged-in user who
may see the session (its owner, or staff); it is closed with a documented code:

- ``4401``: not logged in, or no longer (logged out, deactivated, a new
  password, the browser session deleted): checked at the handshake, again
  before every frame (``access.check``), pushed at once on revocation, and
  read again before a broadcast reaches the socket: at each new run it hears
  and at most ``ACCESS_FRESH_S`` after the last check (a login ended where no
  signal reaches this process, say by ``manage.py changepassword`` beside a
  server on the in-memory layer, hears no new turn and at most a second more
  of a running one);
- ``4404``: no such session, one this user may not see (one code for both, so
  session ids cannot be probed), the session deleted, or a path with no socket;
- ``1009``: a frame over ``frames.MAX_FRAME_BYTES`` (uvicorn's ``--ws-max-size``
  is set to the same, so a bigger one is refused before it is read);
- ``1013``: the channel layer kept failing (``try again later``): nothing is
  lost, the page reconnects and its ``resume`` fetches what it missed.

Everyone following a session is in its channel-layer group
(``session_group``): the log store announces stored records there
(``log.records``), and a running turn publishes its live frames there
(``chat.frame``) for every socket but its own, which gets them straight from
the run, never dropped (``publishing``). A channel layer drops group messages
silently when a reader falls behind, so no viewer's state rests on a group
message arriving: each socket keeps a cursor and re-syncs from the store
(``cursor``).

Only the owner or staff may ``send``, ``retry``, ``stop``, ``replay`` or
``compact``; one writer per session (``lease``, one lease per run, so a second
``send`` on the same socket is refused like one from another tab). The run is
a task of the connection that started it, so this consumer keeps reading
frames (``stop``) meanwhile; closing that connection stops it, cleanly.
Frames are rate-limited per user across all of their sockets (``limits``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from channels.consumer import get_handler_name
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer
from channels.utils import await_many_dispatch
from django.conf import settings
from django.db import IntegrityError

from motus_web.providers import ChatModel
from motus_web.sessions import lease, once
from motus_web.sessions.access import may_write
from motus_web.sessions.db_threads import on_db_thread
from motus_web.sessions.models import Session
from motus_web.sessions.signals import session_group

from . import access, limits, run_lease
from .compact import CompactRun
from .cursor import FINISHING_WAIT_S, RecordCursor
from .frames import (
    MAX_FRAME_BYTES,
    Compact,
    FrameError,
    Resume,
    Retry,
    Send,
    StartReplay,
    Stop,
    parse_frame,
)
from .offload import OffLoop, bridge
from .publishing import RunPublisher
from .render import last_position, record_frames
from .replay import ReplayRun, replay_of
from .turns import ChatTurn

logger = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404
CLOSE_TOO_BIG = 1009
CLOSE_TRY_AGAIN = 1013
GROUP_RENEW_PART = 0.25  # of the layer's group_expiry: a socket joins its groups again this often
STALL_S = 5.0  # while a run is live and silent, its lease is read this often
CHECK_S = 10.0  # an idle socket compares the store's last record with its own this often
ACCESS_FRESH_S = 1.0  # a broadcast reads the login again when its last check is older
LAYER_ATTEMPTS = 3  # a channel-layer call is tried this often before giving up
LAYER_ERRORS: tuple[type[BaseException], ...] = (TimeoutError, ConnectionError, OSError)
try:  # channels_redis raises redis' own errors (not subclasses of the built-in ones)
    from redis.exceptions import RedisError

    LAYER_ERRORS += (RedisError,)
except ImportError:  # pragma: no cover - redis comes with channels_redis
    pass

LAYER_DOWN_MESSAGE = (
    "Live updates are unavailable: the server cannot reach its channel layer (Redis). "
    "Everything already stored is kept and the pages still work; this chat reconnects "
    "and catches up once it is back."
)
T = TypeVar("T")
Runner = ChatTurn | ReplayRun | CompactRun


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


class LayerUnavailable(Exception):
    """The channel layer failed ``LAYER_ATTEMPTS`` times in a row."""


async def retried(call: Callable[[], Awaitable[T]]) -> T:
    """``await call()``, again after a channel-layer timeout or lost connection."""
    for attempt in range(LAYER_ATTEMPTS):
        try:
            return await call()
        except LAYER_ERRORS as error:
            logger.warning("channel layer failed (%s), attempt %d", error, attempt + 1)
            await asyncio.sleep(0.1 * 2**attempt)
    raise LayerUnavailable


class SessionConsumer(RecordCursor):
    session: Session | None = None
    groups_joined: tuple[str, ...] = ()
    work: asyncio.Task[None] | None = None
    off_loop: OffLoop | None = None  # the thread and loop ``work`` runs its run on
    own_run_ended = False  # this socket has sent the end of its latest run (``work``)
    stall: asyncio.Task[None] | None = None
    group_renewal: asyncio.Task[None] | None = None
    closing = False
    checked_at = 0.0  # time.monotonic() of the last access check

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Channels' dispatch loop, with channel-layer failures retried and then
        answered by closing ``1013`` (the page reconnects) instead of a dead socket."""
        self.scope = scope
        self.channel_layer = get_channel_layer(self.channel_layer_alias)
        self.base_send = send
        # The frames of this socket's own run: unbounded, so none is ever dropped.
        self.own_frames: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        try:
            self.channel_name = await retried(self.channel_layer.new_channel)
            self.channel_receive = functools.partial(
                retried, functools.partial(self.channel_layer.receive, self.channel_name)
            )
            await await_many_dispatch(
                [receive, self.channel_receive, self.own_frames.get], self.dispatch
            )
        except StopConsumer:
            pass
        except LayerUnavailable:
            await self.give_up(CLOSE_TRY_AGAIN, LAYER_DOWN_MESSAGE)

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Channels' dispatch, less its ``close_old_connections`` before every message.

        That call is a hop to the process's one thread for synchronous code
        (every socket's, the turns' database writes too): with it, each live
        frame of each socket queued behind that work (1.2 s a call on average
        with 200 chats on one worker), the frames seconds late and, on Redis,
        dropped once the process's list was full. Every database call here
        goes through ``db_threads.on_db_thread``, which gives its connection
        back after each call."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"no handler for message type {message['type']}")
        await handler(message)

    async def give_up(self, code: int, message: str) -> None:
        """Say ``message`` in the chat, close with ``code`` and clean up as a
        disconnect would (the run of this connection stops, its records kept)."""
        try:
            await self.send_json(
                {"type": "error", "code": "live_unavailable", "message": message, "retryable": True}
            )
            await self.close(code=code)
        except Exception:  # the socket may be gone already
            logger.info("could not close the socket with %d", code)
        await self.leave()

    async def connect(self) -> None:
        # Accept first: a close before accept loses its code (the handshake just fails).
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        public_id = self.scope["url_route"]["kwargs"]["public_id"]
        session = await on_db_thread(_visible_session)(user, public_id)
        if session is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.session = session
        self.user = user
        self.user_pk: int = user.pk
        self.session_key: str | None = getattr(self.scope.get("session"), "session_key", None)
        self.can_write = may_write(user, session.owner_id)
        self.limits = limits.limits_of(user.pk)
        self.cursor: int | None = None  # last record position this browser has
        self.answered_end: int | None = None  # the log end the last catch-up read
        self.announced = True  # records may have been stored since that catch-up
        self.runner: Runner | None = None
        self.live_run: str | None = None  # the run whose frames this socket follows
        self.live_sn = 0
        groups = [session_group(public_id), access.user_group(user.pk)]
        if self.session_key:
            groups.append(access.browser_group(self.session_key))
        for group in groups:
            await retried(functools.partial(self.channel_layer.group_add, group, self.channel_name))
        self.groups_joined = tuple(groups)
        self.group_renewal = asyncio.create_task(self.renew_groups())
        await self.send_json(
            {
                "type": "hello",
                "session": public_id,
                "can_send": self.can_write,
                "models": [m.name for m in configured_models()],
                "replay_of": replay_of(session),
                # "Compact now"'s one-time token, issued to this user (``once``).
                "compact_token": once.new_token(user) if self.can_write else None,
            }
        )

    async def disconnect(self, code: int) -> None:
        await self.leave()

    async def leave(self) -> None:
        """Leave every group now (no later broadcast reaches this socket), then stop
        this connection's run, which writes its clean-up and gives its lease back."""
        await self.leave_groups()
        await self.stop_work()

    async def leave_groups(self) -> None:
        self.closing = True
        groups, self.groups_joined = self.groups_joined, ()
        for group in groups:
            try:
                await retried(
                    functools.partial(self.channel_layer.group_discard, group, self.channel_name)
                )
            except LayerUnavailable:  # the entry expires by itself (channels' group_expiry)
                logger.warning("could not leave group %s", group)
        if self.stall is not None:
            self.stall.cancel()
        if self.group_renewal is not None:
            self.group_renewal.cancel()

    async def renew_groups(self) -> None:
        """While the socket is open: join its groups again every ``GROUP_RENEW_PART``
        of the layer's ``group_expiry`` (a layer forgets a membership that old,
        channels-redis after a day by default, and the open socket would hear
        nothing more), and every ``CHECK_S`` seconds with no run live, compare
        the store's last record with what this socket sent: a record whose
        announcement was lost (back-pressure, a layer or worker restart, a
        lapsed membership) is sent from the store then."""
        expiry = float(getattr(self.channel_layer, "group_expiry", 86400))
        renew_every = expiry * GROUP_RENEW_PART
        renewed = time.monotonic()
        while not self.closing:
            await asyncio.sleep(min(CHECK_S, renew_every))
            if time.monotonic() - renewed >= renew_every:
                renewed = time.monotonic()
                for group in self.groups_joined:
                    try:
                        await retried(
                            functools.partial(
                                self.channel_layer.group_add, group, self.channel_name
                            )
                        )
                    except LayerUnavailable:  # tried again at the next renewal
                        logger.warning("could not renew group %s", group)
            if self.cursor is None or self.live_run is not None or self.session is None:
                continue
            if await on_db_thread(last_position)(self.session) > self.cursor:
                try:
                    await self.resync()
                except OSError:  # the browser went away meanwhile: its disconnect cleans up
                    return

    async def stop_work(self) -> None:
        work = self.work
        if work is not None and not work.done():
            work.cancel()
            await asyncio.wait([work], timeout=30)

    async def shut(self, code: int) -> None:
        """Close for good, at once: out of the groups, the close frame, then the
        run (if any) is stopped."""
        if self.closing:
            return
        await self.leave_groups()
        await self.close(code=code)
        await self.stop_work()

    async def send_json(self, content: Any, close: bool = False) -> None:
        if not self.closing or close:
            await super().send_json(content, close)

    # -- frames from the browser -------------------------------------------------------

    async def websocket_receive(self, message: dict[str, Any]) -> None:
        if self.closing or self.session is None:
            return
        text = message.get("text")
        if text is not None and (
            len(text) > MAX_FRAME_BYTES
            or len(text.encode("utf-8", "surrogatepass")) > MAX_FRAME_BYTES
        ):
            await self.shut(CLOSE_TOO_BIG)
            return
        if not self.limits.frames.allow():
            await self.refuse(
                "rate_limited",
                f"too many frames: wait {self.limits.frames.wait_seconds()} s "
                f"(at most {limits.FRAME_BURST} at once, then {limits.FRAMES_PER_MINUTE} a minute)",
            )
            return
        if not await self.still_allowed():
            return
        if text is None:
            await self.refuse("bad_frame", "binary frames are not accepted")
            return
        try:
            frame = parse_frame(text)
        except FrameError as error:
            await self.refuse("bad_frame", str(error))
            return
        if isinstance(frame, Resume):
            await self.resume(frame.last_pos)
            return
        if not self.can_write:
            await self.refuse("forbidden", "only the session's owner or staff may do that here")
            return
        if isinstance(frame, Stop):
            if self.work is not None and not self.work.done():
                await self.chat_stop({})  # this socket's own run: not through the layer
            else:
                await self.group_send({"type": "chat.stop"})
            return
        if not self.limits.work.allow():
            await self.refuse(
                "rate_limited",
                f"too many messages: send again in {self.limits.work.wait_seconds()} s "
                f"(at most {limits.WORK_BURST} at once, then {limits.WORK_PER_MINUTE} a minute)",
            )
            return
        if self.work is not None and not self.work.done() and self.own_run_ended:
            # This socket has shown its run's end (its next send is allowed):
            # the run is giving its lease back, which takes a moment.
            await asyncio.wait([self.work], timeout=FINISHING_WAIT_S)
        if self.work is not None and not self.work.done():
            await self.refuse_busy()
        elif isinstance(frame, Send | Retry):
            await self.start_turn(frame)
        elif isinstance(frame, StartReplay):
            await self.start_replay(frame.speed)
        elif isinstance(frame, Compact):
            await self.start_compact(frame)

    async def still_allowed(self) -> bool:
        """The per-frame check of ``access``: closes the socket and says ``False``
        when its login or the session is gone; refreshes ``can_write``."""
        assert self.session is not None
        found = await on_db_thread(access.check)(self.session_key, self.user_pk, self.session.pk)
        self.checked_at = time.monotonic()
        if isinstance(found, access.Access):
            self.can_write = found.can_write
            return True
        await self.shut(CLOSE_UNAUTHENTICATED if found == access.NOT_LOGGED_IN else CLOSE_NOT_FOUND)
        return False

    async def may_hear(self, run: str | None) -> bool:
        """Before a broadcast reaches this socket: the login is checked again at
        a run this socket has not heard yet and whenever the last check is older
        than ``ACCESS_FRESH_S`` (the revocation signals reach only the sockets of
        processes that share the channel layer with the one that made the change)."""
        if self.closing:
            return False
        stale = time.monotonic() - self.checked_at > ACCESS_FRESH_S
        if stale or (run is not None and run != self.live_run):
            return await self.still_allowed()
        return True

    async def refuse(self, code: str, message: str) -> None:
        """Answer a frame that did nothing: ``refused`` tells the browser that a
        message it sent was not stored, so it can offer it again."""
        await self.send_json(
            {"type": "error", "code": code, "message": message, "retryable": False, "refused": True}
        )

    async def refuse_busy(self) -> None:
        await self.refuse(
            "busy",
            "another turn is running in this session (this tab, another tab or person); "
            "wait for it to finish, or stop it",
        )

    # -- revocation (access.py's receivers) ------------------------------------------

    async def auth_revoked(self, event: dict[str, Any]) -> None:
        """This browser session logged out or was deleted."""
        await self.shut(CLOSE_UNAUTHENTICATED)

    async def auth_check(self, event: dict[str, Any]) -> None:
        """This user changed (deactivated, new password, staff flag): check again."""
        if not self.closing and self.session is not None:
            await self.still_allowed()

    async def session_deleted(self, event: dict[str, Any]) -> None:
        await self.shut(CLOSE_NOT_FOUND)

    # -- records ------------------------------------------------------------------------

    async def catch_up(self) -> None:
        """Send every record after the cursor, in order."""
        assert self.session is not None
        cursor = -1 if self.cursor is None else self.cursor
        while True:
            frames = await on_db_thread(record_frames)(self.session, cursor)
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
        self.announced = True
        if self.cursor is not None and self.live_run is None and await self.may_hear(None):
            await self.catch_up()
            self.announced = False

    async def chat_own_frame(self, event: dict[str, Any]) -> None:
        """A frame of this socket's own run (``own_frames``): none is ever lost,
        so no stall check watches it."""
        await self.follow_frame(event, own=True)

    async def chat_frame(self, event: dict[str, Any]) -> None:
        """A frame a run of another socket published to the session's group."""
        if event.get("origin") != self.channel_name and await self.may_hear(event["run"]):
            await self.follow_frame(event, own=False)  # (this socket's run has its own)

    def watch(self, run: str) -> None:
        if self.stall is None or self.stall.done():
            self.stall = asyncio.create_task(self.watch_stall(run))

    async def watch_stall(self, run: str) -> None:
        """While ``run`` is live, read its lease every ``STALL_S`` seconds; once it is
        gone without its end having arrived, re-sync from the store."""
        assert self.session is not None
        while not self.closing and self.live_run is not None:
            await asyncio.sleep(STALL_S)
            if self.live_run is None:
                return
            if await on_db_thread(lease.holder_kind)(self.session.pk) is None:
                self.live_run = None
                if self.cursor is not None:
                    try:
                        await self.resync()
                    except OSError:  # the browser went away meanwhile (uvicorn's
                        return  # ClientDisconnected): its disconnect cleans up
                return

    async def chat_stop(self, event: dict[str, Any]) -> None:
        if self.work is not None and not self.work.done():
            self.stop_runner()

    def stop_runner(self) -> None:
        """Ask this socket's run to stop, on the run's own loop."""
        if self.runner is not None and self.off_loop is not None:
            self.off_loop.call_soon(self.runner.stop)

    async def group_send(self, message: dict[str, Any]) -> None:
        assert self.session is not None
        group = session_group(self.session.public_id)
        await retried(functools.partial(self.channel_layer.group_send, group, message))

    def publisher(self) -> RunPublisher:
        """The publisher of one run: to this socket directly, to the group for the rest."""
        return RunPublisher(self.own_frames.put_nowait, self.send_to_group)

    async def send_to_group(self, message: dict[str, Any]) -> None:
        try:
            await self.group_send({**message, "origin": self.channel_name})
        except LayerUnavailable:
            # The run goes on storing its records; followers re-sync from the store.
            logger.warning("a frame of run %s could not be published", message["run"])

    # -- writing ------------------------------------------------------------------------

    async def start_turn(self, frame: Send | Retry) -> None:
        assert self.session is not None
        if replay_of(self.session) is not None:
            await self.refuse("replay_only", "this session is a replay: it only replays")
            return
        model = await self.model_for(frame.model)
        if model is None:
            return
        holder = await self.take_lease("turn")
        if holder is None:
            return
        publisher = self.publisher()
        turn = ChatTurn(self.session, model, self.bridged(publisher))
        text = frame.text if isinstance(frame, Send) else None
        self.start_run(turn, holder, turn.run(text), publisher)

    async def start_compact(self, frame: Compact) -> None:
        assert self.session is not None
        if replay_of(self.session) is not None:
            await self.refuse("replay_only", "this session is a replay: it only replays")
            return
        if not once.issued(frame.token, self.user):
            await self.refuse(
                "bad_token",
                "this form has no one-time token issued to you; reload the page to compact",
            )
            return
        model = await self.model_for(None)
        if model is None:
            return
        holder = await self.take_lease("compact")
        if holder is None:
            return
        publisher = self.publisher()
        run = CompactRun(self.session, model, self.bridged(publisher), self.user_pk)
        self.start_run(run, holder, run.run(frame.token, frame.instructions), publisher)

    async def model_for(self, name: str | None) -> ChatModel | None:
        assert self.session is not None
        model = choose_model(name, self.session)
        if model is None:
            message = (
                f"no model named {name!r} is configured"
                if name
                else "no model is configured: set MOTUS_CHAT_MODELS (see the README)"
            )
            await self.refuse("no_model", message)
        return model

    async def start_replay(self, speed: float) -> None:
        assert self.session is not None
        original = replay_of(self.session)
        if original is None:
            await self.refuse("not_a_replay", "this session is not a replay")
            return
        holder = await self.take_lease("replay")
        if holder is None:
            return
        publisher = self.publisher()
        replay = ReplayRun(self.session, original, self.bridged(publisher))
        self.start_run(replay, holder, replay.run(speed), publisher)

    def bridged(self, publisher: RunPublisher) -> Callable[[dict[str, Any]], Awaitable[None]]:
        """The run's ``publish``, from its own loop to this (the web) loop's publisher."""
        return bridge(asyncio.get_running_loop(), publisher.publish)

    def start_run(
        self, runner: Runner, holder: str, work: Coroutine[Any, Any, None], publisher: RunPublisher
    ) -> None:
        """Run ``work`` (``runner``'s) off this loop (``offload``), holding the lease."""
        self.runner = runner
        self.off_loop = OffLoop()
        self.own_run_ended = False
        self.work = asyncio.create_task(
            self.hold_lease(holder, self.off_loop.run(work, self.say_queued), publisher)
        )

    async def say_queued(self, ahead: int) -> None:
        """This socket's run waits for a run slot (``run_slots``) behind ``ahead`` others."""
        await self.own_frames.put({"type": "chat.queued", "ahead": ahead})

    async def chat_queued(self, event: dict[str, Any]) -> None:
        await self.send_json({"type": "queued", "ahead": event["ahead"]})

    async def take_lease(self, kind: str) -> str | None:
        """The session's lease for one run (``run_lease.take``), or ``None``
        (refused, or the session deleted meanwhile: then the socket is closed)."""
        assert self.session is not None
        try:
            holder = await run_lease.take(self.session.pk, self.channel_name, kind)
        except IntegrityError:  # the session row went away between the check and now
            await self.shut(CLOSE_NOT_FOUND)
            return None
        if holder is None:
            await self.refuse_busy()
        return holder

    async def hold_lease(self, holder: str, work: Awaitable[None], publisher: RunPublisher) -> None:
        assert self.session is not None
        await run_lease.hold(self.session, holder, work, publisher, self.stop_runner)


class NoSuchSocket(AsyncWebsocketConsumer):
    """Any other websocket path: accepted, then closed ``4404`` (not a 500)."""

    async def connect(self) -> None:
        await self.accept()
        await self.close(code=CLOSE_NOT_FOUND)
