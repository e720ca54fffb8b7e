"""Real uvicorn processes on loopback, on the test's PostgreSQL database, for
tests across processes: start, log in, open a session's socket, kill."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.db import connection
from websockets.asyncio.client import ClientConnection, connect

REPO = Path(__file__).resolve().parents[2]
FRAME_TIMEOUT_S = 15


def server_env(tmp_path: Path, *, redis: bool, **extra: str) -> dict[str, str]:
    """The environment of a server on the test's database (and ``REDIS_URL``'s
    Redis with ``redis``); skips the test, saying why, when they are not there."""
    if connection.vendor != "postgresql":
        pytest.skip("servers in other processes share the test database: set DATABASE_URL")
    if redis and not os.environ.get("REDIS_URL"):
        pytest.skip("servers in other processes share a channel layer: set REDIS_URL")
    params = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": (
            f"postgres://{params['USER']}@{params['HOST']}:{params['PORT']}/{params['NAME']}"
        ),
        "MOTUS_IMPORT_THREADS": "0",
        "MOTUS_IN_MEMORY_LAYER_LOCK": str(tmp_path / "layer.lock"),
        "STATIC_ROOT": str(tmp_path / "static"),
        **extra,
    }
    if not redis:
        env.pop("REDIS_URL", None)
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
        cwd=REPO, env=env, check=True, timeout=300,
    )  # fmt: skip
    return env


def chat_model_env(base_url: str) -> dict[str, str]:
    """The environment naming the scripted server at ``base_url`` as the only chat model."""
    return {
        "MOTUS_CHAT_MODELS": "scripted",
        "MOTUS_CHAT_SCRIPTED_MODEL": "gpt-4o",
        "MOTUS_CHAT_SCRIPTED_BASE_URL": base_url,
        "MOTUS_CHAT_SCRIPTED_API_KEY": "test-key-123",
        "MOTUS_CHAT_SCRIPTED_COMPACT_MODEL": "offline",
    }


class Server:
    """One uvicorn process on a free loopback port."""

    def __init__(self, env: Mapping[str, str], log: Path) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.base = f"http://127.0.0.1:{port}"
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "uvicorn", "--host", "127.0.0.1", "--port", str(port),
                 "--ws", "websockets-sansio", "--lifespan", "off", "motus_web.asgi:application"],
                cwd=REPO, env=dict(env), stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            assert self.process.poll() is None, f"uvicorn stopped: see {log}"
            try:
                if httpx.get(f"{self.base}/healthz", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"uvicorn did not answer in 60 s: see {log}"
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL: no clean-up of any kind runs in the server."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


@contextmanager
def servers(env: Mapping[str, str], count: int, tmp_path: Path) -> Iterator[list[Server]]:
    started: list[Server] = []
    try:
        for n in range(count):
            started.append(Server(env, tmp_path / f"uvicorn-{n}.log"))
        yield started
    finally:
        for server in started:
            server.stop()


def log_in(base: str, username: str, password: str) -> str:
    """A ``Cookie`` header of a browser logged in through ``base``'s login form."""
    with httpx.Client(base_url=base, timeout=60) as client:
        page = client.get("/login/").text
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        assert token is not None
        form = {"csrfmiddlewaretoken": token[1], "username": username, "password": password}
        assert client.post("/login/", data=form).status_code == 302
        return "; ".join(f"{name}={value}" for name, value in client.cookies.items())


@contextmanager
def http_client(base: str, cookie: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base, timeout=60, headers={"Cookie": cookie}) as client:
        yield client


def socket_to(base: str, public_id: str, cookie: str) -> Any:
    """``async with socket_to(...) as ws``: the session's socket, as a browser opens it."""
    url = base.replace("http://", "ws://") + f"/ws/sessions/{public_id}/"
    return connect(url, additional_headers={"Cookie": cookie, "Origin": base}, open_timeout=30)


async def frame(ws: ClientConnection) -> dict[str, Any]:
    return dict(json.loads(await asyncio.wait_for(ws.recv(), FRAME_TIMEOUT_S)))


async def frames_until(ws: ClientConnection, stop: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while True:
        out.append(await frame(ws))
        if out[-1]["type"] == stop:
            return out


async def followed(ws: ClientConnection) -> list[dict[str, Any]]:
    """``hello``, then ``resume`` from the start: every record, then ``sync``."""
    assert (await frame(ws))["type"] == "hello"
    await ws.send(json.dumps({"type": "resume", "last_pos": -1}))
    return await frames_until(ws, "sync")
