"""The cast of the dashboard's tests: an owner, a teammate, an outsider and staff."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from pytest_django import Settings

from memory.testing.scripted_server import ScriptedServer
from motus_web.sessions.models import Session


@pytest.fixture(autouse=True)
def static_files_without_collectstatic(settings: Settings) -> None:
    # Without collectstatic there is no manifest: name static files as they are.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


@pytest.fixture(autouse=True)
def import_jobs_run_by_the_test(settings: Settings, tmp_path: Path) -> None:
    # A test runs queued tasks itself (helpers.run_tasks), in its own transaction;
    # the ones that test the web process's threads turn them back on.
    settings.MOTUS_IMPORT_THREADS = 0
    settings.MOTUS_IMPORT_SPOOL_DIR = tmp_path / "spool"
    settings.STORAGES = {
        **settings.STORAGES,
        "motus_imports": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": tmp_path / "spool"},
        },
    }


@pytest.fixture(autouse=True)
def fresh_chat_rate_limits() -> None:
    """The chat's per-user buckets live in the process: every test starts with full ones."""
    from motus_web.chat import limits

    limits.forget_all()


@pytest.fixture
def owner(db: None) -> User:
    return User.objects.create_user("olivia", password="owner-pass-1234")


@pytest.fixture
def teammate(db: None) -> User:
    """Works next to the owner, but nothing is shared yet: sees only their own sessions."""
    return User.objects.create_user("theo", password="teammate-pass-1234")


@pytest.fixture
def outsider(db: None) -> User:
    return User.objects.create_user("oscar", password="outsider-pass-1234")


@pytest.fixture
def staff(db: None) -> User:
    return User.objects.create_user("stella", password="staff-pass-1234", is_staff=True)


@pytest.fixture
def server(settings: Settings) -> Iterator[ScriptedServer]:
    """The scripted model server, configured as the live chat's only model."""
    from .chat_helpers import scripted_model

    with ScriptedServer(api_key="test-key-123") as running:
        settings.MOTUS_CHAT_MODELS = (scripted_model(running.openai_base_url),)
        yield running


@pytest.fixture
def session(owner: User) -> Session:
    """A chat session of ``owner``."""
    from .chat_helpers import chat_session

    return chat_session(owner)
