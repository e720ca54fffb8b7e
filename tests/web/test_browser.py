"""What only a browser shows: the pages render, link up and page with htmx."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from pytest_django.live_server_helper import LiveServer

from motus_web.dashboard.models import Session

from .helpers import make_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-results"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


@pytest.fixture
def long_session(owner: User) -> Session:
    return make_session(owner, turns=15, filler=60, threshold=1500, title="Rebook Mia to Seattle")


@pytest.fixture
def page(long_session: Session) -> Iterator[object]:
    # Playwright's sync API runs an event loop in this thread, and the ORM refuses
    # to run beside one: every row this test needs exists before it starts.
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: `make test` installs it when run as root")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser.new_page(viewport={"width": 1280, "height": 900})
        browser.close()


def test_a_user_logs_in_and_reads_a_session_page_by_page(
    live_server: LiveServer, long_session: Session, page: object
) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    SCREENSHOTS.mkdir(exist_ok=True)
    page.goto(live_server.url)
    expect(page).to_have_title("Log in · Motus Memory")
    page.get_by_label("Username").fill("olivia")
    page.get_by_label("Password").fill("owner-pass-1234")
    page.get_by_role("button", name="Log in").click()

    expect(page.get_by_role("heading", name="Sessions")).to_be_visible()
    row = page.get_by_role("row").filter(has_text="Rebook Mia to Seattle")
    expect(row).to_contain_text("60")
    page.screenshot(path=SCREENSHOTS / "session-list.png", full_page=True)

    page.get_by_role("link", name="Rebook Mia to Seattle").click()
    expect(page.get_by_role("heading", name="Rebook Mia to Seattle")).to_be_visible()
    expect(page.locator("#m0")).to_contain_text("Question 0: where is booking B0?")
    expect(page.locator(".event-ok").first).to_contain_text("Compaction 1")
    page.screenshot(path=SCREENSHOTS / "session-detail.png", full_page=False)

    page.get_by_role("link", name="Next →").first.click()
    expect(page.locator("#m50")).to_be_visible()
    expect(page).to_have_url(f"{live_server.url}/sessions/{long_session.public_id}/?page=2")
    expect(page.locator("#m0")).to_have_count(0)
    page.screenshot(path=SCREENSHOTS / "session-detail-page-2.png", full_page=False)
