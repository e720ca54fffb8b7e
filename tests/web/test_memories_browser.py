"""The Memories page in a real browser: read a scope, forget a memory with its button."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from pytest_django.live_server_helper import LiveServer

from memory.background import Provenance
from motus_web.sessions.long_term_store import DjangoLongTermStore, owner_scope
from motus_web.sessions.models import Session

from .test_browser import (
    SCREENSHOTS,
    assert_no_sideways_scroll,
    log_in,
    long_session,  # noqa: F401 (a fixture the browser's needs)
)
from .test_browser import page as browser  # noqa: F401 (the browser page, as "browser")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def scope_url(owner: User, long_session: Session) -> str:  # noqa: F811 (the fixture above)
    store = DjangoLongTermStore()
    scope = owner_scope(owner.pk, "trips")
    for seq, (kind, text) in enumerate(
        [
            ("fact", "My sister Jane lives in Boston."),
            ("preference", "I always book an aisle seat, never a middle one."),
            ("event", "We flew to Oslo in May 2024 for my brother's wedding."),
        ]
    ):
        link = Provenance(long_session.public_id, seq * 2, seq * 2, "offline", "2025-05-01T10:00Z")
        store.add(scope, text=text, kind=kind, provenance=link)  # type: ignore[arg-type]
    return f"/memories/{scope.user_id}/named/trips/"


def test_the_owner_reads_a_scope_and_forgets_a_memory_with_its_button(
    live_server: LiveServer,
    browser: object,  # noqa: F811 (the fixture imported above)
    scope_url: str,
) -> None:
    from playwright.sync_api import Page, expect

    page = browser
    assert isinstance(page, Page)
    log_in(page, live_server)
    page.get_by_role("link", name="Memories").click()
    page.get_by_role("link", name="trips").click()
    expect(page.get_by_role("heading", name="Memories: trips")).to_be_visible()
    sister = page.locator("li.memory", has_text="My sister Jane lives in Boston.")
    sister.get_by_text("Where it was said").click()
    expect(sister.get_by_role("link", name="message #0")).to_be_visible()
    sister.get_by_text("Edit or forget").click()
    page.screenshot(path=str(SCREENSHOTS / "memories.png"), full_page=True)
    assert_no_sideways_scroll(page)
    sister.get_by_role("button", name="Forget").click()
    expect(page.get_by_text("forgotten; its history keeps it")).to_be_visible()
    expect(page.locator("p.memory-text", has_text="My sister Jane")).to_have_count(0)
    page.goto(f"{live_server.url}{scope_url}?status=forgotten")
    expect(page.locator("p.memory-text", has_text="My sister Jane")).to_have_count(1)
