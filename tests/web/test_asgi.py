"""The ASGI application and the channel layer it is configured with."""

from __future__ import annotations

import os
import uuid

import pytest
from channels.layers import get_channel_layer
from channels.testing import HttpCommunicator, WebsocketCommunicator
from django.conf import settings

from motus_web.asgi import application


async def test_http_goes_to_django() -> None:
    communicator = HttpCommunicator(application, "GET", "/", headers=[(b"host", b"localhost")])

    response = await communicator.get_response()
    await communicator.send_input({"type": "http.disconnect"})
    await communicator.wait()  # lets Django close the request body

    assert response["status"] == 302
    assert (b"Location", b"/login/?next=/") in response["headers"]


async def test_a_websocket_from_a_foreign_origin_is_refused() -> None:
    communicator = WebsocketCommunicator(
        application, "/ws/", headers=[(b"origin", b"http://evil.example")]
    )

    connected, _ = await communicator.connect(timeout=10)  # the first connect builds the app

    assert not connected
    await communicator.disconnect()


@pytest.mark.skipif(bool(os.environ.get("REDIS_URL")), reason="REDIS_URL selects the Redis layer")
def test_without_redis_url_the_layer_is_in_memory() -> None:
    assert settings.CHANNEL_LAYERS["default"]["BACKEND"] == "channels.layers.InMemoryChannelLayer"


@pytest.mark.skipif(
    not os.environ.get("REDIS_URL"), reason="set REDIS_URL to check the Redis layer"
)
async def test_the_redis_layer_delivers_a_group_message() -> None:
    layer = get_channel_layer()
    assert layer is not None
    assert type(layer).__name__ == "RedisChannelLayer"
    group = f"test-{uuid.uuid4().hex}"
    channel = await layer.new_channel()
    await layer.group_add(group, channel)

    await layer.group_send(group, {"type": "session.updated", "public_id": "abc"})

    assert await layer.receive(channel) == {"type": "session.updated", "public_id": "abc"}
    await layer.group_discard(group, channel)
    await layer.flush()
