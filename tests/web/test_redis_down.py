"""Redis unreachable: pages and imports keep working; the health check says so."""

from __future__ import annotations

import socket
import time

import pytest
from channels.layers import channel_layers
from django.contrib.auth.models import User
from django.urls import reverse
from pytest_django import Settings

from motus_web.sessions.models import Session

from .helpers import import_upload, logged_in
from .test_importers import CHAT, as_jsonl

pytestmark = pytest.mark.django_db


@pytest.fixture
def redis_down(settings: Settings) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens once the probe is closed
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [f"redis://127.0.0.1:{port}/0"]},
        }
    }
    channel_layers.backends.clear()


def test_with_redis_down_an_import_is_stored_and_pages_answer(
    owner: User, redis_down: None
) -> None:
    client = logged_in(owner)
    started = time.monotonic()

    page = import_upload(client, "runs.jsonl", as_jsonl({"messages": CHAT}, {"messages": CHAT}))

    assert "Imported 2 sessions from runs.jsonl." in page.content.decode()
    assert time.monotonic() - started < 30  # each announcement fails fast, none hangs
    [first, _] = Session.objects.order_by("pk")
    assert first.message_count == first.messages.count() > 0
    assert client.get(reverse("dashboard:session_list")).status_code == 200
    detail = client.get(reverse("dashboard:session_detail", args=[first.public_id]))
    assert detail.status_code == 200
    health = client.get("/healthz")
    assert health.status_code == 503
    assert health.json() == {"database": "ok", "channel_layer": "unreachable"}
