"""The headers a careful Django site sends, and login rate limiting."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from .helpers import logged_in, make_session

pytestmark = pytest.mark.django_db


def test_pages_send_csp_without_inline_scripts_and_the_other_headers(owner: User) -> None:
    session = make_session(owner)
    client = logged_in(owner)

    for page in (
        reverse("dashboard:session_list"),
        reverse("dashboard:session_detail", args=[session.public_id]),
        reverse("login"),
    ):
        response = (client if page != reverse("login") else Client()).get(page)
        policy = response["Content-Security-Policy"]
        assert "script-src 'self'" in policy, page
        assert "unsafe-inline" not in policy, page
        assert "frame-ancestors 'none'" in policy, page
        assert response["X-Frame-Options"] == "DENY"
        assert response["X-Content-Type-Options"] == "nosniff"
        assert response["Referrer-Policy"] == "same-origin"


def test_no_page_carries_an_inline_script_or_style(owner: User) -> None:
    session = make_session(owner, turns=6, filler=60, threshold=600)
    client = logged_in(owner)
    event = session.compaction_events.filter(kind="ok").first()
    assert event is not None

    for page in (
        reverse("dashboard:session_list"),
        reverse("dashboard:session_detail", args=[session.public_id]),
        reverse("dashboard:session_context", args=[session.public_id]),
        reverse("dashboard:compaction_detail", args=[session.public_id, event.position]),
        reverse("dashboard:session_trace", args=[session.public_id]),
    ):
        html = client.get(page).content.decode()
        for script in html.split("<script")[1:]:
            assert script.lstrip().startswith("src="), page
        assert " style=" not in html, page
        assert "<style" not in html, page


def test_private_pages_are_not_cached(owner: User) -> None:
    session = make_session(owner)
    client = logged_in(owner)

    for page in (
        reverse("dashboard:session_list"),
        reverse("dashboard:session_detail", args=[session.public_id]),
        reverse("dashboard:export_jsonl", args=[session.public_id]),
    ):
        assert "no-store" in client.get(page)["Cache-Control"], page


def test_logins_are_locked_after_repeated_failures_for_that_account_and_address(
    owner: User,
) -> None:
    client = Client()
    for _ in range(5):
        client.post(reverse("login"), {"username": "olivia", "password": "wrong"})

    locked = client.post(reverse("login"), {"username": "olivia", "password": "owner-pass-1234"})

    assert locked.status_code == 429
    assert "Try again in 15 minutes" in locked.content.decode()
    other_address = Client(REMOTE_ADDR="10.1.2.3")
    ok = other_address.post(reverse("login"), {"username": "olivia", "password": "owner-pass-1234"})
    assert ok.status_code == 302
