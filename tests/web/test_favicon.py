"""``/favicon.ico``, which browsers request on every page, finds the icon."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.contrib.staticfiles import finders
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("logged_in_as", [None, "olivia"])
def test_favicon_ico_redirects_to_the_svg_icon_and_may_be_cached(
    client: Client, owner: User, logged_in_as: str | None
) -> None:
    if logged_in_as:
        client.force_login(owner)

    response = client.get("/favicon.ico")

    assert response.status_code == 301
    assert response["Location"] == "/static/dashboard/favicon.svg"
    assert "max-age=86400" in response["Cache-Control"]
    assert "no-store" not in response["Cache-Control"]
    assert finders.find("dashboard/favicon.svg")  # the file the redirect names exists
