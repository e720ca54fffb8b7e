"""The health endpoint a load balancer polls, and headers every answer carries."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import OperationalError
from django.test import Client

from motus_web import health

pytestmark = pytest.mark.django_db


def test_health_is_ok_when_the_database_and_the_channel_layer_answer(client: Client) -> None:
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"database": "ok", "channel_layer": "ok"}
    assert "no-cache" in response["Cache-Control"]
    assert "Set-Cookie" not in response


def test_health_says_which_part_is_unreachable_and_never_the_error(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "could not connect to postgres://admin:hunter2@db.internal"

    def refuse(*args: object) -> None:
        raise OperationalError(secret)

    monkeypatch.setattr(health.connection, "cursor", refuse)
    response = client.get("/healthz")

    assert response.status_code == 503
    assert response.json() == {"database": "unreachable", "channel_layer": "ok"}
    assert b"hunter2" not in response.content


def test_health_is_503_when_the_channel_layer_does_not_answer(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def silent(layer: object) -> bool:
        raise ConnectionRefusedError("redis://:secret@cache:6379")

    monkeypatch.setattr(health, "_round_trip", silent)
    response = client.get("/healthz")

    assert response.status_code == 503
    assert response.json() == {"database": "ok", "channel_layer": "unreachable"}
    assert b"secret" not in response.content


@pytest.mark.parametrize(
    "path", ["/login/", "/healthz", "/static/dashboard/chart.js", "/no-such-page/"]
)
def test_every_answer_sends_a_permissions_policy(client: Client, path: str) -> None:
    response = client.get(path)
    response.close()  # a static file (served by WhiteNoise once collected) is an open file

    assert response["Permissions-Policy"].startswith("accelerometer=(), camera=()")


def test_check_deploy_is_clean_under_the_documented_production_settings() -> None:
    """The README's production environment (HTTPS behind a proxy, PostgreSQL, Redis, RQ)."""
    environ = {
        **os.environ,
        "DEBUG": "0",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "motus.example.com",
        "CSRF_TRUSTED_ORIGINS": "https://motus.example.com",
        "SECURE_COOKIES": "1",
        "SECURE_SSL_REDIRECT": "1",
        "SECURE_HSTS_SECONDS": "31536000",
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": "1",
        "SECURE_HSTS_PRELOAD": "1",
        "SECURE_PROXY_SSL_HEADER": "1",
        "DATABASE_URL": "postgres://motus@db.internal:5432/motus",  # checked, not reached
        "REDIS_URL": "redis://cache.internal:6379/0",
        "MOTUS_TASK_BACKEND": "rq",
    }
    check = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=Path(__file__).resolve().parents[2],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert check.returncode == 0, check.stdout + check.stderr
    assert "System check identified no issues" in check.stdout


def test_postgresql_unreachable_at_start_is_one_clear_error_not_a_trace() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]  # nothing listens once the probe is closed
    environ = {
        **os.environ,
        "DATABASE_URL": f"postgres://motus@127.0.0.1:{closed_port}/motus",
        "MOTUS_DB_POOL_SIZE": "0",
    }
    migrate = subprocess.run(
        [sys.executable, "manage.py", "migrate"],
        cwd=Path(__file__).resolve().parents[2],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert migrate.returncode == 1
    assert "Traceback" not in migrate.stderr
    assert (
        f"Cannot reach the PostgreSQL database that DATABASE_URL names "
        f"(127.0.0.1:{closed_port}/motus): connection failed"
    ) in migrate.stderr
    assert "Connection refused" in migrate.stderr
    assert "Start PostgreSQL, or fix DATABASE_URL." in migrate.stderr
