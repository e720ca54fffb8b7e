"""Two ASGI servers (uvicorn processes) sharing PostgreSQL, Redis and the uploads'
storage, with a task worker in a third process: a file uploaded through one is
imported by the worker, and the other shows the job and its sessions."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from django.contrib.auth.models import User
from django.db import connection
from pytest_django import Settings

from .test_importers import CHAT, as_jsonl
from .test_workers_across_processes import REPO, wait_for, workers  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def two_servers(settings: Settings, tmp_path: Path) -> Iterator[tuple[str, str]]:
    if connection.vendor != "postgresql" or not os.environ.get("REDIS_URL"):
        pytest.skip("two servers share PostgreSQL and Redis: set DATABASE_URL and REDIS_URL")
    params = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": (
            f"postgres://{params['USER']}@{params['HOST']}:{params['PORT']}/{params['NAME']}"
        ),
        "MOTUS_IMPORT_SPOOL_DIR": str(settings.MOTUS_IMPORT_SPOOL_DIR),
        "MOTUS_IMPORT_THREADS": "0",
        "STATIC_ROOT": str(tmp_path / "static"),
    }
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
        cwd=REPO, env=env, check=True, timeout=300,
    )  # fmt: skip
    servers: list[subprocess.Popen[bytes]] = []
    bases: list[str] = []
    try:
        for _ in range(2):
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
            command = [sys.executable, "-m", "uvicorn", "--host", "127.0.0.1", "--port",
                       str(port), "--lifespan", "off", "motus_web.asgi:application"]  # fmt: skip
            quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
            servers.append(subprocess.Popen(command, cwd=REPO, env=env, **quiet))  # type: ignore[call-overload]
            bases.append(f"http://127.0.0.1:{port}")
        for base, server in zip(bases, servers, strict=True):

            def up(base: str = base, server: subprocess.Popen[bytes] = server) -> bool:
                assert server.poll() is None, "uvicorn stopped"
                try:
                    return httpx.get(f"{base}/healthz", timeout=5).status_code == 200
                except httpx.HTTPError:
                    return False

            wait_for("uvicorn", up, patience=60)
        yield bases[0], bases[1]
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=30)


def test_an_upload_to_one_server_is_imported_by_the_worker_and_seen_on_the_other(
    owner: User,
    two_servers: tuple[str, str],
    workers: Callable[[], object],  # noqa: F811
) -> None:
    first, second = two_servers
    with httpx.Client(timeout=60) as client:
        login = client.get(f"{first}/login/").text
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login)
        assert token is not None
        form = {
            "csrfmiddlewaretoken": token[1],
            "username": "olivia",
            "password": "owner-pass-1234",
        }
        assert client.post(f"{first}/login/", data=form).status_code == 302
        page = client.get(f"{first}/import/").text
        fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page))
        fields["threshold"] = "3000"
        data = as_jsonl(*({"messages": CHAT} for _ in range(3)))

        answer = client.post(
            f"{first}/import/upload/", data=fields, files={"file": ("r.jsonl", data)}
        )

        assert answer.status_code == 303
        job_url = second + answer.headers["location"]  # the other server's page of the job
        assert "Queued" in client.get(job_url).text
        workers()
        wait_for("the job", lambda: "Imported 3 sessions from r.jsonl." in client.get(job_url).text)
        html = client.get(job_url).text
        sessions = re.findall(r'href="(/sessions/[^/"]+/)"', html)
        assert len(sessions) == 3
        assert all(client.get(second + url).status_code == 200 for url in sessions)
