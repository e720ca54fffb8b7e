"""The cast of the dashboard's tests: an owner, a teammate, an outsider and staff."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from pytest_django import Settings


@pytest.fixture(autouse=True)
def static_files_without_collectstatic(settings: Settings) -> None:
    # Without collectstatic there is no manifest: name static files as they are.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


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
