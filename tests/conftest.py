"""What every test shares: the test databases' connection settings."""

from __future__ import annotations

import os
from typing import Any

import pytest

# Test processes run side by side (pytest -n), each with its own in-memory channel
# layer: the one-web-process guard of motus_web/asgi.py is for servers.
os.environ["MOTUS_IN_MEMORY_LAYER_LOCK"] = "off"


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: Any) -> None:
    """No persistent connections in tests (pytest-django's hook for DATABASES).

    The server keeps one PostgreSQL connection per thread for a minute
    (``conn_max_age``); a test's websocket and worker threads would then still
    hold theirs when the test database is dropped, and the drop fails.
    """
    from django.conf import settings
    from django.db import connections

    settings.DATABASES["default"]["CONN_MAX_AGE"] = 0
    connections["default"].settings_dict["CONN_MAX_AGE"] = 0
