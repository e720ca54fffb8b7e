"""``GET /healthz``: whether this process reaches its database and channel layer.

For a load balancer's health check: 200 when both answer, 503 when one does
not. The answer names each part and says ``ok`` or ``unreachable``, never the
error (which could name hosts, users or passwords); the log has it. No login,
no cookies, never cached.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from asgiref.sync import async_to_sync
from channels.layers import BaseChannelLayer, get_channel_layer
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

logger = logging.getLogger(__name__)

_PROBE_SECONDS = 2.0  # the longest a channel layer round trip may take


@never_cache
@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    """``{"database": "ok" | "unreachable", "channel_layer": ...}``; 200 or 503."""
    parts = {"database": _database(), "channel_layer": _channel_layer()}
    healthy = all(parts.values())
    answer = {name: "ok" if fine else "unreachable" for name, fine in parts.items()}
    return JsonResponse(answer, status=200 if healthy else 503)


def _database() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception:
        logger.exception("health check: the database is unreachable")
        return False
    return True


def _channel_layer() -> bool:
    """A message sent to a fresh channel of the layer comes back."""
    try:
        layer = get_channel_layer()
        if layer is None:
            return False
        return bool(async_to_sync(_round_trip)(layer))
    except Exception:
        logger.exception("health check: the channel layer is unreachable")
        return False


async def _round_trip(layer: BaseChannelLayer) -> bool:
    channel = await layer.new_channel("healthz.")
    nonce = uuid.uuid4().hex
    await layer.send(channel, {"type": "healthz", "nonce": nonce})
    message = await asyncio.wait_for(layer.receive(channel), _PROBE_SECONDS)
    return bool(message.get("nonce") == nonce)
