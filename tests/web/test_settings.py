from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from motus_web.env import env_bool, env_choice, env_int, env_list, env_url, local_secret_key

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("value", "expected"), [("1", True), ("TRUE", True), ("off", False), (" ", False)]
)
def test_a_boolean_reads_the_usual_spellings(value: str, expected: bool) -> None:
    assert env_bool("DEBUG", default=False, environ={"DEBUG": value}) is expected


@pytest.mark.parametrize(
    ("reader", "value", "message"),
    [
        (lambda env: env_bool("DEBUG", False, env), "ture", "DEBUG must be one of"),
        (lambda env: env_int("DEBUG", 1, environ=env), "twenty", "must be a whole number"),
        (lambda env: env_int("DEBUG", 1, minimum=1, environ=env), "0", "must be at least 1"),
        (lambda env: env_list("DEBUG", [], env), "a,,b", "has an empty item"),
        (
            lambda env: env_url("DEBUG", frozenset({"redis"}), env),
            "localhost:6379",
            "must start with",
        ),
        (
            lambda env: env_choice("DEBUG", frozenset({"INFO"}), "INFO", env),
            "LOUD",
            "must be one of",
        ),
    ],
)
def test_nonsense_in_the_environment_is_improperly_configured(
    reader: Callable[[dict[str, str]], object], value: str, message: str
) -> None:
    with pytest.raises(ImproperlyConfigured, match=message):
        reader({"DEBUG": value})


def test_unset_variables_give_the_defaults() -> None:
    assert env_int("N", 7, environ={}) == 7
    assert env_list("HOSTS", ["localhost"], environ={}) == ["localhost"]
    assert env_list("HOSTS", [], environ={"HOSTS": "a.example, b.example"}) == [
        "a.example",
        "b.example",
    ]
    assert env_url("URL", frozenset({"redis"}), environ={}) == ""


def test_the_local_secret_key_is_generated_once_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "var" / "secret_key"

    first = local_secret_key(path)

    assert len(first) >= 50
    assert local_secret_key(path) == first
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_short_secret_key_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "secret_key"
    path.write_text("short")

    with pytest.raises(ImproperlyConfigured, match="shorter than 32"):
        local_secret_key(path)


def load_settings(**env: str) -> subprocess.CompletedProcess[str]:
    """Import the settings module in a fresh interpreter with ``env`` on top of a clean one."""
    clean = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DEBUG"}}
    code = (
        "import motus_web.settings as s; "
        "print(s.DATABASES['default']['ENGINE'], s.CHANNEL_LAYERS['default']['BACKEND'])"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_published_server_without_debug_needs_a_secret_key() -> None:
    result = load_settings(ALLOWED_HOSTS="motus.example.com", SECRET_KEY="")

    assert result.returncode == 1
    assert "SECRET_KEY is required when DEBUG is off" in result.stderr


def test_the_defaults_are_sqlite_and_the_in_memory_channel_layer() -> None:
    result = load_settings()

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "django.db.backends.sqlite3",
        "channels.layers.InMemoryChannelLayer",
    ]


def test_database_and_redis_urls_select_postgresql_and_redis() -> None:
    result = load_settings(
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/test", REDIS_URL="redis://127.0.0.1:6379/0"
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "django.db.backends.postgresql",
        "channels_redis.core.RedisChannelLayer",
    ]


def test_a_database_url_of_an_unsupported_kind_is_refused() -> None:
    result = load_settings(DATABASE_URL="mysql://localhost/motus")

    assert "DATABASE_URL must start with one of" in result.stderr


def test_a_sqlite_database_url_gets_the_same_transaction_mode_and_wal(tmp_path: Path) -> None:
    code = "import motus_web.settings as s; print(s.DATABASES['default']['OPTIONS'])"
    clean = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    for env in ({"DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3"}, {}):
        result = subprocess.run(
            [sys.executable, "-c", code],
            cwd=REPO,
            env={**clean, **env},
            capture_output=True,
            text=True,
            check=False,
        )

        assert result.returncode == 0, result.stderr
        assert "'transaction_mode': 'IMMEDIATE'" in result.stdout
        assert "PRAGMA journal_mode=WAL;" in result.stdout


def test_a_production_configuration_passes_the_deploy_check(tmp_path: Path) -> None:
    clean = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DEBUG"}}
    env = {
        **clean,
        "DEBUG": "0",
        "ALLOWED_HOSTS": "motus.example.com",
        "SECRET_KEY": "k" * 20 + "-production-key-0123456789abcdef",
        "SECURE_COOKIES": "1",
        "SECURE_SSL_REDIRECT": "1",
        "SECURE_HSTS_SECONDS": "31536000",
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": "1",
        "SECURE_HSTS_PRELOAD": "1",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout
