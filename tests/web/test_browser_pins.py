"""The pins card on the session page, in a browser at desktop and phone width:
it fits without sideways scrolling, and Unpin takes the pin off the list."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from pytest_django.live_server_helper import LiveServer

from motus_web.sessions import context_edits
from motus_web.sessions.models import Session

from .helpers import make_session
from .test_browser import SCREENSHOTS, assert_no_sideways_scroll, log_in, long_session, page  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

INSTRUCTIONS = 'keep bookings B1, B4 and B6, and "window seat near the front"'


@pytest.fixture
def pinned(owner: User) -> Session:
    session = make_session(owner, turns=8, filler=20, threshold=100_000, title="Rebook Mia")
    context_edits.compact_now(session, INSTRUCTIONS, as_of=session.record_count)
    return session


@pytest.mark.parametrize("width", [1280, 390])
def test_the_pins_card_fits_and_unpin_takes_a_pin_off(
    live_server: LiveServer,
    pinned: Session,
    page: object,  # noqa: F811
    width: int,
) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    page.set_viewport_size({"width": width, "height": 900})
    log_in(page, live_server)
    page.goto(f"{live_server.url}/sessions/{pinned.public_id}/")
    card = page.locator("#pins")
    expect(card.get_by_role("heading", name="Pinned by the operator")).to_be_visible()
    expect(card.locator(".pin-value")).to_have_text(
        ["B1", "B4", "B6", "window seat near the front"]
    )
    assert_no_sideways_scroll(page)
    assert_no_sideways_scroll(page, "#pins")
    card.scroll_into_view_if_needed()
    card.screenshot(path=SCREENSHOTS / f"pins-{width}.png")
    page.screenshot(path=SCREENSHOTS / f"pins-page-{width}.png", full_page=False)

    card.get_by_role("button", name="Unpin B4").click()

    expect(page.get_by_text("B4 is no longer pinned")).to_be_visible()
    expect(page.locator("#pins .pin-value")).to_have_text(
        ["B1", "B6", "window seat near the front"]
    )
    page.locator("#pins").screenshot(path=SCREENSHOTS / f"pins-after-unpin-{width}.png")
