"""What only a browser shows: the pages render, link up and page with htmx."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from pytest_django import Settings
from pytest_django.live_server_helper import LiveServer

from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import Session
from tests.test_log_store_contract import message, meta

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
    from playwright.sync_api import expect, sync_playwright

    # A loaded CI machine (two test workers, a database, a browser) can take
    # more than Playwright's 5 s default to show a streamed turn: waits end at
    # the expected state, so a longer bound only delays a real failure.
    expect.set_options(timeout=20_000)
    with sync_playwright() as playwright:
        SCREENSHOTS.mkdir(exist_ok=True)
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser.new_page(viewport={"width": 1280, "height": 900})
        browser.close()


def log_in(page: object, live_server: LiveServer) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    page.goto(f"{live_server.url}/login/")
    page.get_by_label("Username").fill("olivia")
    page.get_by_label("Password").fill("owner-pass-1234")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Sessions")).to_be_visible()


def assert_no_sideways_scroll(page: object, selector: str = "html") -> None:
    from playwright.sync_api import Page

    assert isinstance(page, Page)
    for scroll_width, width in page.eval_on_selector_all(
        selector, "found => found.map(e => [e.scrollWidth, e.clientWidth])"
    ):
        assert scroll_width <= width, f"{page.url}: {selector} is {scroll_width}px in {width}px"


UNBROKEN = "x" * 200


@pytest.fixture
def unbroken_session(owner: User) -> Session:
    """A session whose title, tool name, call id, arguments and source are unbroken strings."""
    function = {"name": "tool_" + UNBROKEN, "arguments": '{"path": "' + UNBROKEN + '"}'}
    call = {"id": "call_" + UNBROKEN, "type": "function", "function": function}
    log = [
        {**meta("unbroken"), "title": UNBROKEN},
        message(0, "user", "Read " + UNBROKEN),
        message(1, "assistant", None, tool_calls=[call]),
        message(2, "tool", UNBROKEN * 3, tool_call_id=call["id"], name="tool_" + UNBROKEN),
    ]
    DatabaseLogStore().extend("unbroken", log)
    Session.objects.filter(public_id="unbroken").update(owner=owner, source=UNBROKEN + ".jsonl")
    return Session.objects.get(public_id="unbroken")


@pytest.mark.parametrize("width", [1280, 390])
def test_long_unbroken_strings_wrap_instead_of_widening_the_page(
    live_server: LiveServer,
    unbroken_session: Session,
    page: object,
    width: int,
    tmp_path: Path,
    settings: Settings,
) -> None:
    from playwright.sync_api import Page, expect

    settings.MOTUS_IMPORT_THREADS = 2  # the live server's process runs the import job
    assert isinstance(page, Page)
    page.set_viewport_size({"width": width, "height": 900})
    log_in(page, live_server)

    page.screenshot(path=SCREENSHOTS / f"unbroken-list-{width}.png", full_page=True)
    assert_no_sideways_scroll(page)
    if width >= 1024:  # on a phone the table scrolls in its box; on a desktop it fits
        assert_no_sideways_scroll(page, ".table-scroll")
    page.get_by_role("link", name=UNBROKEN).click()
    expect(page.locator("#m2")).to_contain_text("tool_" + UNBROKEN)
    page.screenshot(path=SCREENSHOTS / f"unbroken-detail-{width}.png", full_page=True)
    assert_no_sideways_scroll(page)

    broken = tmp_path / (UNBROKEN + ".json")
    broken.write_text("[{oops")
    page.goto(f"{live_server.url}/import/")
    page.get_by_label("File").set_input_files(broken)
    page.get_by_role("button", name="Import").click()
    # Names are shown shortened to 120 characters, keeping the start and the end;
    # the job's page polls until the import is done, then shows why it failed.
    shown = UNBROKEN[:60] + "…" + (UNBROKEN + ".json")[-59:]
    expect(page.get_by_role("alert")).to_contain_text(shown + ": line 1", timeout=30_000)
    page.screenshot(path=SCREENSHOTS / f"unbroken-import-{width}.png", full_page=True)
    assert_no_sideways_scroll(page)


def test_a_user_logs_in_and_reads_a_session_page_by_page(
    live_server: LiveServer, long_session: Session, page: object
) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
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


@pytest.mark.parametrize("width", [1280, 390])
def test_an_operator_inspects_a_session_undoes_a_compaction_and_forks_it(
    live_server: LiveServer, long_session: Session, page: object, width: int
) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    page.set_viewport_size({"width": width, "height": 900})
    shot = SCREENSHOTS / f"walk-{width}"
    log_in(page, live_server)

    page.get_by_label("Search").fill("Seattle")
    expect(page.get_by_text("1 session matches")).to_be_visible()  # htmx swapped the table
    expect(page).to_have_url(re.compile(r"/\?q=Seattle"))
    page.screenshot(path=f"{shot}-1-search.png", full_page=True)
    assert_no_sideways_scroll(page)

    page.get_by_role("link", name="Rebook Mia to Seattle").click()
    expect(page.get_by_role("heading", name="Context now")).to_be_visible()
    expect(page.locator(".token-chart .marker-ok")).to_have_count(long_session.compaction_count)
    page.screenshot(path=f"{shot}-2-detail.png", full_page=False)
    page.locator("#token-chart").screenshot(path=f"{shot}-3-chart.png")
    assert_no_sideways_scroll(page)

    page.get_by_role("link", name="What the model sees now").click()
    expect(page.locator("#context-panel #live-context")).to_be_visible()  # the htmx panel
    expect(page).to_have_url(f"{live_server.url}/sessions/{long_session.public_id}/")
    page.locator("#context-panel").screenshot(path=f"{shot}-4-context-panel.png")

    page.locator(".token-chart .marker-ok").first.click()
    expect(page.get_by_role("heading", name="Compaction 1", exact=True)).to_be_visible()
    expect(
        page.get_by_role("heading", name=re.compile(r"^Identifiers: \d+ of \d+ kept"))
    ).to_be_visible()
    page.screenshot(path=f"{shot}-5-compaction.png", full_page=False)
    assert_no_sideways_scroll(page)

    page.go_back()
    latest = long_session.compaction_count
    page.get_by_role("link", name=f"Undo compaction {latest}").click()
    expect(page.get_by_role("heading", name=f"Undo compaction {latest}?")).to_be_visible()
    page.get_by_label("Reason (kept in the log)").fill("lost the booking code")
    page.get_by_role("button", name="Undo the compaction").click()
    expect(page.get_by_text(f"Compaction {latest} undone")).to_be_visible()
    expect(page.get_by_role("link", name=f"Undo compaction {latest}")).to_have_count(0)
    page.screenshot(path=f"{shot}-6-undone.png", full_page=False)

    page.locator("#m7 > header .fork-link").click()
    expect(page.get_by_role("heading", name="Fork from message #7?")).to_be_visible()
    page.get_by_role("button", name="Create the fork").click()
    expect(page.get_by_role("heading", name="Rebook Mia to Seattle (fork at #7)")).to_be_visible()
    expect(page.get_by_text("Forked from")).to_be_visible()
    page.screenshot(path=f"{shot}-7-fork.png", full_page=True)
    assert_no_sideways_scroll(page)


@pytest.mark.parametrize("width", [1280, 390])
def test_drop_downs_look_like_the_text_fields_beside_them(
    page: object, live_server: LiveServer, long_session: Session, width: int
) -> None:
    from playwright.sync_api import Page

    assert isinstance(page, Page)
    page.set_viewport_size({"width": width, "height": 900})
    log_in(page, live_server)
    page.goto(f"{live_server.url}/sessions/{long_session.public_id}/replay/")
    style = """e => { const s = getComputedStyle(e); return [s.borderTopWidth,
        s.borderTopColor, s.borderTopLeftRadius, s.paddingLeft, s.fontSize, s.fontFamily,
        e.getBoundingClientRect().width]; }"""
    select = page.eval_on_selector("select[name=compactor]", style)
    field = page.eval_on_selector("input[name=model_name]", style)

    assert select[:6] == field[:6]
    assert select[6] == field[6]  # as wide as the fields above it
    page.screenshot(path=SCREENSHOTS / f"replay-form-{width}.png", full_page=True)
    assert_no_sideways_scroll(page)
