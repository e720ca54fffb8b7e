"""On SQLite, a request waits for another writer's lock instead of failing.

Python's default busy timeout is 5 s: during a long import's transaction a
login answered 500 "database is locked". Run over a file database in a fresh
interpreter (the test database is in memory, where SQLite cannot make a
writer wait): another connection holds the write lock for 7 s while a login
is sent.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import sqlite3, sys, threading, time
import django
django.setup()
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

call_command("migrate", verbosity=0)
User.objects.create_user("olivia", password="owner-pass-1234")
held = threading.Event()

def hold_the_write_lock():
    other = sqlite3.connect(sys.argv[1], isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    other.execute("UPDATE auth_user SET first_name = 'busy'")
    held.set()
    time.sleep(7)
    other.execute("COMMIT")

writer = threading.Thread(target=hold_the_write_lock)
writer.start()
held.wait()
begun = time.monotonic()
client = Client()
answer = client.post("/login/", {"username": "olivia", "password": "owner-pass-1234"})
print(answer.status_code, round(time.monotonic() - begun))
writer.join()
"""


def test_a_login_waits_out_a_writer_holding_the_lock_for_seven_seconds(tmp_path: Path) -> None:
    database = tmp_path / "db.sqlite3"
    env = {
        **{key: value for key, value in os.environ.items() if key != "DATABASE_URL"},
        "DATABASE_URL": f"sqlite:///{database}",
        "DJANGO_SETTINGS_MODULE": "motus_web.settings",
        "MOTUS_IN_MEMORY_LAYER_LOCK": "off",
        "ALLOWED_HOSTS": "testserver",
        "SECRET_KEY": "a-test-key-that-is-long-enough-for-the-settings-check",
    }
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(database)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert run.returncode == 0, run.stderr[-3000:]
    status, waited = run.stdout.split()[-2:]
    assert status == "302"  # logged in, not 500 "database is locked"
    assert int(waited) >= 5  # it did wait for the lock
