"""What only a browser shows of tool-result clearings: every page that shows
one fits the width at 1280 and 390 px, and the chart marks it (issue 28, point 5).
Screenshots go to ``test-results/clearing-*.png``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from pytest_django.live_server_helper import LiveServer

from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import Session

from .test_browser import CHROMIUM, CHROMIUM_ARGS, SCREENSHOTS, assert_no_sideways_scroll, log_in
from .test_tool_result_clearing import cleared_log

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def cleared(owner: User) -> tuple[Session, int, int]:
    """A session whose old tool results were cleared, its newest clearing's
    number and a reply after the first clearing."""
    session_id, records, _ = cleared_log()
    DatabaseLogStore().extend(session_id, records)
    Session.objects.filter(public_id=session_id).update(owner=owner, title="Clearing demo")
    first = next(r for r in records if r["type"] == "tool_results_cleared")
    newest = [r for r in records if r["type"] == "tool_results_cleared"][-1]["clearing_number"]
    reply = next(
        r["seq"]
        for r in records
        if r["type"] == "message"
        and r["seq"] > first["through_seq"]
        and r["message"]["role"] == "assistant"
    )
    return Session.objects.get(public_id=session_id), newest, reply


@pytest.fixture
def browser() -> Iterator[object]:
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM}")
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=20_000)
    with sync_playwright() as playwright:
        SCREENSHOTS.mkdir(exist_ok=True)
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.mark.parametrize("width", [1280, 390])
def test_every_page_showing_a_clearing_fits_and_the_chart_marks_it(
    cleared: tuple[Session, int, int], live_server: LiveServer, browser: object, width: int
) -> None:
    from playwright.sync_api import Browser, expect

    assert isinstance(browser, Browser)
    session, newest, reply = cleared
    page = browser.new_page(viewport={"width": width, "height": 900})
    log_in(page, live_server)
    base = f"{live_server.url}/sessions/{session.public_id}"

    page.goto(f"{base}/")
    expect(page.locator(".marker-cleared").first).to_be_attached()
    expect(
        page.locator("li.event-change", has_text="Old tool results cleared").first
    ).to_be_visible()
    page.locator("details.compact-now > summary").click()
    expect(page.get_by_label("Clear old tool results first", exact=False)).to_be_visible()
    assert_no_sideways_scroll(page)
    page.screenshot(path=SCREENSHOTS / f"clearing-session-{width}.png", full_page=True)

    pages = {
        "step": f"{base}/steps/{reply}/?since=3",
        "trace": f"{base}/trace/?kind=tool_results_cleared",
        "undo": f"{base}/clearings/{newest}/undo/",
        "replay": f"{base}/replay/",
    }
    for name, url in pages.items():
        page.goto(url)
        assert_no_sideways_scroll(page)
        page.screenshot(path=SCREENSHOTS / f"clearing-{name}-{width}.png", full_page=True)
    page.goto(pages["step"])
    expect(page.get_by_text("cleared to a stub").first).to_be_visible()
    page.goto(pages["trace"])
    expect(page.get_by_role("link", name="old tool results cleared").first).to_be_visible()
