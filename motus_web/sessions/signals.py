"""Announcements of committed log records: the one door every writer goes through.

``DatabaseLogStore`` sends ``records_committed`` once the transaction that
stored records has committed (``transaction.on_commit``), so a receiver never
sees a record that a rollback took back. With a channel layer configured it
also tells the session's group (``session_group``), where the live chat and
open dashboard pages listen; the group message names the records' positions,
and a listener reads the rows it needs.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.dispatch import Signal

logger = logging.getLogger(__name__)

records_committed = Signal()
"""Sent with ``session_id`` (public id) and ``records`` (the committed record
dicts, in log order) after each transaction that appended to a session."""

_GROUP_MAX = 99  # channels refuses group names of 100 characters or more


def session_group(public_id: str) -> str:
    """The channel-layer group of a session (ids are letters, digits, '-', '_', '.')."""
    name = f"session.{public_id}"
    if len(name) <= _GROUP_MAX:
        return name
    return "session.h" + hashlib.sha256(public_id.encode()).hexdigest()


def announce(session_id: str, records: list[dict[str, Any]], *, group: bool = True) -> None:
    """Tell receivers and (with ``group``) the session's group about ``records``,
    just committed. ``group=False`` for a session no page could show before
    this commit (a new import): its group has no one to tell, and each send from
    sync code costs a thread (``async_to_sync``).

    A failure here is logged, never raised: the records are stored whatever a
    listener does with the news.
    """
    records_committed.send(sender=announce, session_id=session_id, records=records)
    layer = get_channel_layer() if group else None
    if layer is None:
        return
    notice = {
        "type": "log.records",
        "session_id": session_id,
        "count": len(records),
        "types": sorted({str(record.get("type")) for record in records}),
    }
    try:
        async_to_sync(layer.group_send)(session_group(session_id), notice)
    except Exception:
        logger.exception("could not tell the group of session %r about new records", session_id)
