"""The ASGI application, its request-body limit and the channel layer it is configured with."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.testing import ApplicationCommunicator
from channels.layers import get_channel_layer
from channels.testing import HttpCommunicator, WebsocketCommunicator
from django.conf import settings
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect
from websockets.typing import Origin

from motus_web.asgi import application, django_asgi_app
from motus_web.body_limit import RequestBodyLimit

REPO = Path(__file__).resolve().parents[2]


def http_scope(method: str = "POST", path: str = "/import/upload/", **headers: str) -> Any:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"localhost")]
        + [(name.replace("_", "-").encode(), value.encode()) for name, value in headers.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


async def echo_body(scope: Any, receive: Any, send: Any) -> None:
    """Answers 200 with the body it read, as Django would read it: up to the last chunk."""
    body = b""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        body += message.get("body", b"")
        if not message.get("more_body", False):
            break
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})


async def test_http_goes_to_django() -> None:
    communicator = HttpCommunicator(application, "GET", "/", headers=[(b"host", b"localhost")])

    response = await communicator.get_response()
    await communicator.send_input({"type": "http.disconnect"})
    await communicator.wait()  # lets Django close the request body

    assert response["status"] == 302
    assert (b"Location", b"/login/?next=/") in response["headers"]


@pytest.mark.django_db(transaction=True)
async def test_a_websocket_from_a_foreign_origin_is_refused() -> None:
    communicator = WebsocketCommunicator(
        application, "/ws/", headers=[(b"origin", b"http://evil.example")]
    )

    connected, _ = await communicator.connect(timeout=10)  # the first connect builds the app

    assert not connected
    await communicator.disconnect()


def test_the_request_limit_is_a_little_above_the_upload_limit() -> None:
    extra = settings.MOTUS_REQUEST_MAX_BYTES - settings.MOTUS_UPLOAD_MAX_BYTES

    assert 0 < extra <= 1024 * 1024


async def test_a_body_declared_over_the_limit_is_refused_before_a_byte_is_read() -> None:
    too_long = str(settings.MOTUS_REQUEST_MAX_BYTES + 1)
    communicator = ApplicationCommunicator(application, http_scope(content_length=too_long))

    # No body is ever sent: reading it would wait until the timeout.
    start = await communicator.receive_output(timeout=10)
    body = await communicator.receive_output()
    await communicator.wait()

    assert start["status"] == 413
    assert (b"connection", b"close") in start["headers"]
    assert b"Request body too large" in body["body"]
    assert str(settings.MOTUS_REQUEST_MAX_BYTES).encode() in body["body"]


async def test_a_browser_is_told_in_a_page_what_to_do_with_a_file_too_large() -> None:
    too_long = str(settings.MOTUS_REQUEST_MAX_BYTES + 1)
    scope = http_scope(content_length=too_long, accept="text/html,application/xhtml+xml")
    communicator = ApplicationCommunicator(application, scope)

    start = await communicator.receive_output(timeout=10)
    body = (await communicator.receive_output())["body"].decode()
    await communicator.wait()

    assert start["status"] == 413
    assert (b"content-type", b"text/html; charset=utf-8") in start["headers"]
    headers = dict(start["headers"])
    assert b"default-src 'self'" in headers[b"content-security-policy"]
    assert b"frame-ancestors 'none'" in headers[b"content-security-policy"]
    assert headers[b"x-content-type-options"] == b"nosniff"
    assert headers[b"x-frame-options"] == b"DENY"
    assert headers[b"permissions-policy"].startswith(b"accelerometer=()")
    assert "That file is too large to upload" in body
    assert "import_sessions" in body
    assert 'href="/import/"' in body


async def test_a_streamed_body_is_cut_off_with_413_at_the_chunk_past_the_limit() -> None:
    limited = RequestBodyLimit(django_asgi_app, max_bytes=1000)
    communicator = ApplicationCommunicator(limited, http_scope())

    await communicator.send_input({"type": "http.request", "body": b"x" * 600, "more_body": True})
    await communicator.send_input({"type": "http.request", "body": b"x" * 600, "more_body": True})
    start = await communicator.receive_output(timeout=10)
    await communicator.receive_output()
    await communicator.wait()

    # Django saw a client that hung up: no view ran, and nothing else was read.
    assert start["status"] == 413
    assert communicator.input_queue.empty()


async def test_a_body_up_to_the_limit_reaches_the_application_whole() -> None:
    limited = RequestBodyLimit(echo_body, max_bytes=1000)
    communicator = ApplicationCommunicator(limited, http_scope(content_length="1000"))

    await communicator.send_input({"type": "http.request", "body": b"a" * 600, "more_body": True})
    await communicator.send_input({"type": "http.request", "body": b"b" * 400})
    start = await communicator.receive_output(timeout=10)
    body = await communicator.receive_output()
    await communicator.wait()

    assert start["status"] == 200
    assert body["body"] == b"a" * 600 + b"b" * 400


async def test_websockets_pass_the_body_limit_untouched() -> None:
    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["type"])

    await RequestBodyLimit(app, max_bytes=0)({"type": "websocket"}, None, None)  # type: ignore[arg-type]

    assert seen == ["websocket"]


@pytest.fixture
def uvicorn_port() -> Iterator[int]:
    """`make run`'s server, uvicorn, on a free port, with a 1,000-byte upload limit."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "MOTUS_UPLOAD_MAX_BYTES": "1000"}
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--host", "127.0.0.1", "--port", str(port),
         "--ws", "websockets-sansio", "--lifespan", "off", "motus_web.asgi:application"],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    pytest.fail("uvicorn did not start")
                time.sleep(0.1)
        yield port
    finally:
        server.terminate()
        try:  # a graceful stop waits for its sockets' channel-layer reads (seconds on Redis)
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)


def test_uvicorn_answers_413_to_a_large_upload_without_waiting_for_its_body(
    uvicorn_port: int,
) -> None:
    request = (
        b"POST /import/upload/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: multipart/form-data; boundary=x\r\n"
        b"Content-Length: 400000000\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", uvicorn_port), timeout=10) as client:
        client.sendall(request)  # and not one byte of the 400 MB announced
        response = b""
        while chunk := client.recv(65536):
            response += chunk

    assert response.startswith(b"HTTP/1.1 413 ")
    assert b"at most 65.0\xc2\xa0KB (66536 bytes) per request" in response


def test_uvicorn_hands_websockets_to_channels(uvicorn_port: int) -> None:
    url = f"ws://127.0.0.1:{uvicorn_port}/ws/"
    with pytest.raises(InvalidStatus) as refused:
        connect(url, origin=Origin("http://evil.example"), open_timeout=10)

    # AllowedHostsOriginValidator's answer: the websocket reached channels' stack.
    assert refused.value.response.status_code == 403


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
