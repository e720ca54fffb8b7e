"""The workbench in a real browser, wide and on a phone: add a memory, split one, and
read on the step page what the model was reminded of and why."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
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
from .test_memory_workbench import recalled_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def workbench(owner: User) -> tuple[str, str]:
    """The scope page and the step page of a reply that carried recalled memories
    (every row made before the browser's event loop starts)."""
    scope = owner_scope(owner.pk, "trips")
    link = Provenance("s1", 2, 2, "offline", "2025-05-01T10:00:00+00:00")
    DjangoLongTermStore().add(
        scope,
        text="My sister Jane lives in Boston and I always book an aisle seat.",
        kind="fact",
        provenance=link,
    )
    session = recalled_session(owner)
    reply = session.messages.filter(role="assistant").order_by("-seq").first()
    assert isinstance(session, Session)
    assert reply is not None
    step = reverse("dashboard:step_detail", args=[session.public_id, reply.seq])
    return f"/memories/{scope.user_id}/named/trips/", step


@pytest.mark.parametrize("width", [1280, 390])
def test_the_owner_adds_and_splits_and_reads_why_each_memory_was_placed(
    workbench: tuple[str, str],  # first: its rows are made before the browser's loop starts
    live_server: LiveServer,
    browser: object,  # noqa: F811 (the fixture imported above)
    width: int,
) -> None:
    from playwright.sync_api import Page, expect

    page = browser
    assert isinstance(page, Page)
    page.set_viewport_size({"width": width, "height": 900})
    scope_url, step_url = workbench
    log_in(page, live_server)
    page.goto(f"{live_server.url}{scope_url}")
    add = page.locator("#add-memory")
    add.get_by_text("Add a memory by hand").click()
    add.get_by_label("Statement").fill("I am vegetarian.")
    add.get_by_label("Kind").select_option("preference")
    add.get_by_role("button", name="Add", exact=True).click()
    expect(page.get_by_text("added.")).to_be_visible()
    expect(page.locator("p.memory-text", has_text="I am vegetarian.")).to_have_count(1)

    both = page.locator("li.memory", has_text="Jane lives in Boston and I always")
    both.get_by_text("Split into several").click()
    both.get_by_label("One statement a line").fill(
        "My sister Jane lives in Boston.\nI always book an aisle seat."
    )
    page.screenshot(path=str(SCREENSHOTS / f"memories-workbench-{width}.png"), full_page=True)
    assert_no_sideways_scroll(page)
    both.get_by_role("button", name="Split").click()
    expect(page.locator("li.success", has_text="split into")).to_be_visible()
    expect(page.locator("p.memory-text", has_text="I always book an aisle seat.")).to_have_count(1)
    expect(page.locator("p.memory-text", has_text="My sister Jane lives in Boston.")).to_have_count(
        1
    )
    page.screenshot(path=str(SCREENSHOTS / f"memories-split-{width}.png"), full_page=True)
    assert_no_sideways_scroll(page)

    page.goto(f"{live_server.url}{step_url}")
    placed = page.locator("#recalled")
    expect(placed.get_by_role("heading", name="Memories placed: 2")).to_be_visible()
    expect(placed.get_by_role("columnheader", name="recency")).to_be_visible()
    expect(placed.locator("tbody tr").first).to_contain_text("My sister Jane lives in Boston.")
    placed.scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / f"step-recalled-{width}.png"), full_page=True)
    assert_no_sideways_scroll(page)
