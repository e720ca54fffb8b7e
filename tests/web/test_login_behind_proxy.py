"""Login throttling behind a reverse proxy, through the real server (uvicorn).

The address that django-axes locks with is ``REMOTE_ADDR``, which uvicorn
sets from ``X-Forwarded-For`` only when the connection comes from an address
in ``--forwarded-allow-ips`` (the proxy), taking the rightmost address that
is not a trusted proxy: what the proxy itself appended. Here the test client
is the proxy (it connects from 127.0.0.1) and writes the header as a proxy
would, with whatever the attacker sent in front of the true address.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
ATTACKER, VICTIM = "203.0.113.7", "198.51.100.2"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """uvicorn on a fresh SQLite file database, trusting 127.0.0.1 as its proxy."""
    folder = tmp_path_factory.mktemp("proxy")
    env = {
        key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "REDIS_URL")
    }
    env.update(
        DATABASE_URL=f"sqlite:///{folder / 'db.sqlite3'}",
        MOTUS_IMPORT_SPOOL_DIR=str(folder / "spool"),
        MOTUS_IN_MEMORY_LAYER_LOCK="off",
        AXES_FAILURE_LIMIT="5",
        STATIC_ROOT=str(folder / "static"),
    )
    manage = [sys.executable, "manage.py"]
    for command in (["migrate"], ["collectstatic", "--noinput"]):
        subprocess.run([*manage, *command, "-v", "0"], cwd=REPO, env=env, check=True, timeout=300)
    create = (
        "from django.contrib.auth.models import User; "
        "User.objects.create_user('victim', password='victim-pass-1234')"
    )
    subprocess.run([*manage, "shell", "-c", create], cwd=REPO, env=env, check=True, timeout=120)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    uvicorn = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--host", "127.0.0.1", "--port", str(port),
         "--proxy-headers", "--forwarded-allow-ips", "127.0.0.1", "--lifespan", "off",
         "motus_web.asgi:application"],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or uvicorn.poll() is not None:
                    pytest.fail("uvicorn did not start")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        uvicorn.terminate()
        uvicorn.wait(timeout=10)


def log_in(base: str, forwarded_for: str, password: str) -> int:
    """The status of one login through the proxy for a client whose
    ``X-Forwarded-For`` chain (as the proxy passes it on) is ``forwarded_for``."""
    headers = {"X-Forwarded-For": forwarded_for}
    with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
        page = client.get("/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert token is not None
        form = {"csrfmiddlewaretoken": token[1], "username": "victim", "password": password}
        return client.post("/login/", data=form).status_code


def test_a_new_forwarded_address_on_every_try_does_not_escape_the_lockout(server: str) -> None:
    # The attacker writes a new address each time; the proxy appends the true one.
    tries = [log_in(server, f"10.0.0.{n}, {ATTACKER}", "wrong") for n in range(6)]

    assert tries[:4] == [200] * 4  # the form again, with its error
    assert tries[4:] == [429, 429]  # the fifth failure locks that account at that address
    assert log_in(server, f"10.9.9.9, {ATTACKER}", "victim-pass-1234") == 429


def test_failures_from_one_address_do_not_lock_the_account_out_elsewhere(server: str) -> None:
    for n in range(6):
        log_in(server, f"10.1.0.{n}, {ATTACKER}", "wrong")

    assert log_in(server, VICTIM, "victim-pass-1234") == 302  # logged in, from home
