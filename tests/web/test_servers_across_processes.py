"""Two ASGI servers (uvicorn processes) sharing PostgreSQL, Redis and the uploads'
storage, with a task worker in a third process: a file uploaded through one is
imported by the worker, and the other shows the job and its sessions."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from django.contrib.auth.models import User
from pytest_django import Settings

from .live_servers import server_env, servers
from .test_importers import CHAT, as_jsonl
from .test_workers_across_processes import wait_for, workers  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def two_servers(settings: Settings, tmp_path: Path) -> Iterator[tuple[str, str]]:
    spool = str(settings.MOTUS_IMPORT_SPOOL_DIR)
    env = server_env(tmp_path, redis=True, MOTUS_IMPORT_SPOOL_DIR=spool)
    with servers(env, 2, tmp_path) as both:
        yield both[0].base, both[1].base


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
