"""A run's writer lease: taken before the run, renewed while it works, given back after.

One writer per session (``sessions.lease``): a socket takes the session's
lease for one run under a holder name of its own (so that its next send is
refused as another tab's would be), renews it every ``lease.RENEW_SECONDS``
while the run works, and gives it back when the run ends, however it ends.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable

from motus_web.sessions import lease
from motus_web.sessions.db_threads import on_db_thread
from motus_web.sessions.models import Session

from .publishing import RunPublisher

logger = logging.getLogger(__name__)

RELEASE_WAIT_S = 10.0  # a run's end waits this long to give its lease back


async def take(session_pk: int, channel_name: str, kind: str) -> str | None:
    """The holder name of a new lease of ``kind`` ("turn", "replay", "compact")
    on the session, or ``None`` when another writer holds it. Raises
    ``IntegrityError`` when the session row is gone."""
    holder = f"{channel_name}:{uuid.uuid4().hex}"[:255]
    taken = await on_db_thread(lease.acquire)(session_pk, holder, kind)
    return holder if taken else None


async def hold(
    session: Session,
    holder: str,
    work: Awaitable[None],
    publisher: RunPublisher,
    on_lost: Callable[[], None],
) -> None:
    """Await ``work`` while renewing ``holder``'s lease, flush ``publisher``, give
    the lease back. A failed run publishes a ``finished`` frame with reason
    ``error`` (and is logged); ``on_lost()`` is called if the lease expired
    meanwhile (it may be another writer's now: the run must stop)."""
    pk = session.pk
    renewing = asyncio.create_task(_renew(session, holder, on_lost))
    try:
        await work
        await publisher.flush()
    except Exception:
        logger.exception("session %s: the turn failed", session.public_id)
        await publisher.publish({"type": "finished", "reason": "error", "steps": 0})
    finally:
        publisher.close()
        renewing.cancel()
        # Never cancelled (this task's cancellation, the socket closing right
        # after the end frame, would drop the call before it ran: the lease
        # then held for its 60 s and the next send refused), but waited for
        # boundedly: behind a write that never ends (the process's one sync
        # thread stuck) it would keep this task, and the socket's close, for
        # ever; a lease not given back expires by itself.
        release = asyncio.ensure_future(on_db_thread(lease.release)(pk, holder))
        done, _ = await asyncio.wait([release], timeout=RELEASE_WAIT_S)
        if done:
            release.result()  # a failure to give it back is raised, as any
        else:
            logger.warning("session %s: lease not given back yet", session)


async def _renew(session: Session, holder: str, on_lost: Callable[[], None]) -> None:
    while True:
        await asyncio.sleep(lease.RENEW_SECONDS)
        if not await on_db_thread(lease.renew)(session.pk, holder):
            # The lease expired (this process stalled) and may be someone
            # else's now: stop rather than write beside another writer.
            logger.warning("session %s: writer lease lost, stopping", session)
            on_lost()
            return
