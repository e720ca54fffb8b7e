"""What every test shares."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

# Test processes run side by side (pytest -n), each with its own in-memory channel
# layer: the one-web-process guard of motus_web/asgi.py is for servers.
os.environ["MOTUS_IN_MEMORY_LAYER_LOCK"] = "off"


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """pytest-django's test database, and before it is dropped on PostgreSQL, the
    other sessions still connected to it ended.

    Idle pooled connections are usually left (the pool closes them as the
    database is dropped), but once a session that had not gone yet when the
    last test ended (a server or worker process a test started, a thread's
    connection: which one was not found) made ``DROP DATABASE`` fail with
    "being accessed by other users", an error of the whole run."""
    yield
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
