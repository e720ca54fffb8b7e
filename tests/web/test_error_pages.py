"""403, 404 and 405 are the product's own pages: styled, with a way back."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from .helpers import logged_in, make_session

pytestmark = pytest.mark.django_db


def assert_own_page(html: str) -> None:
    assert 'class="topbar"' in html  # the site's frame and its style sheet
    assert "dashboard/motus.css" in html
    assert f'href="{reverse("dashboard:session_list")}"' in html  # a way back
    assert 'name="viewport"' in html  # readable at phone width


def test_an_unknown_address_and_a_foreign_session_get_the_same_styled_404(
    owner: User, outsider: User
) -> None:
    session = make_session(owner)
    client = logged_in(outsider)

    for path in ("/no/such/page/", reverse("dashboard:session_detail", args=[session.public_id])):
        response = client.get(path)
        assert response.status_code == 404
        html = response.content.decode()
        assert "<h1>Not found</h1>" in html
        assert_own_page(html)


def test_a_form_without_its_csrf_token_gets_a_styled_403_that_says_why(owner: User) -> None:
    session = make_session(owner)
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)

    response = client.post(reverse("dashboard:delete_session", args=[session.public_id]))

    assert response.status_code == 403
    html = response.content.decode()
    assert "<h1>Not allowed</h1>" in html
    assert "did not carry this site's security token" in html
    assert_own_page(html)


def test_an_action_address_opened_with_get_gets_a_styled_405_back_to_its_session(
    owner: User,
) -> None:
    session = make_session(owner)
    client = logged_in(owner)
    before = session.compaction_events.count()

    for name in ("compact_now", "undo_compaction", "delete_session"):
        response = client.get(reverse(f"dashboard:{name}", args=[session.public_id]))
        assert response.status_code == 405
        assert "POST" in response["Allow"]
        html = response.content.decode()
        assert "<h1>Not a page to open</h1>" in html
        assert "Nothing was done" in html
        assert f'href="{reverse("dashboard:session_detail", args=[session.public_id])}"' in html
        assert 'class="topbar"' in html
        assert "dashboard/motus.css" in html
    assert client.head(reverse("dashboard:compact_now", args=[session.public_id])).content == b""
    assert session.compaction_events.count() == before
    # A page that only shows, sent a POST, gets the page too, with the way to the list.
    posted = client.post(reverse("dashboard:session_list"))
    assert posted.status_code == 405
    assert_own_page(posted.content.decode())
