"""What only a browser shows of the operator actions and inspection pages."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from pytest_django.live_server_helper import LiveServer

from motus_web.sessions.models import CompactionEvent, Session

from .helpers import make_session
from .test_browser import (
    SCREENSHOTS,
    assert_no_sideways_scroll,
    log_in,
    long_session,  # noqa: F401 (a fixture the browser's needs)
)
from .test_browser import page as browser  # noqa: F401 (the browser page, as "browser")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def compacted(owner: User) -> Session:
    return make_session(owner, turns=15, filler=60, threshold=1500, title="Rebook Mia to Seattle")


@pytest.fixture
def latest(compacted: Session) -> CompactionEvent:
    event = compacted.compaction_events.filter(kind="ok").order_by("position").last()
    assert event is not None
    return event


@pytest.mark.parametrize("width", [1280, 390])
def test_the_pages_of_a_reply_a_compaction_and_an_action_read_well_at_any_width(
    live_server: LiveServer,
    compacted: Session,
    latest: CompactionEvent,
    browser: object,  # noqa: F811 (the fixture imported above)
    width: int,
) -> None:
    from playwright.sync_api import Page, expect

    page = browser
    assert isinstance(page, Page)
    event = latest
    base = f"{live_server.url}/sessions/{compacted.public_id}"
    page.set_viewport_size({"width": width, "height": 900})
    log_in(page, live_server)

    shots = {
        "session": f"{base}/",
        "step": f"{base}/steps/29/",
        "compaction": f"{base}/compactions/{event.position}/?show=lost",
        "undo-confirm": f"{base}/undo/",
        "fork-confirm": f"{base}/fork/5/",
        "not-found": f"{live_server.url}/sessions/nobody/",
    }
    for name, url in shots.items():
        page.goto(url)
        expect(page.locator("main h1").first).to_be_visible()
        page.screenshot(path=SCREENSHOTS / f"actions-{name}-{width}.png", full_page=True)
        assert_no_sideways_scroll(page)

    page.goto(f"{base}/fork/5/")
    expect(page.locator("#cut-moved")).to_contain_text("the fork is cut after #6")
    page.goto(f"{base}/")
    page.screenshot(path=SCREENSHOTS / f"actions-session-top-{width}.png")
    point = page.locator("a.sample").last
    point.focus()
    expect(page.locator(".chart-figures")).to_be_visible()
    expect(page.locator(".chart-figures")).to_contain_text("tokens in context")


def test_an_undo_button_is_disabled_while_its_request_runs_and_sent_again_is_refused(
    live_server: LiveServer,
    compacted: Session,
    browser: object,  # noqa: F811 (the fixture imported above)
) -> None:
    from playwright.sync_api import Page, expect

    page = browser
    assert isinstance(page, Page)
    base = f"{live_server.url}/sessions/{compacted.public_id}"
    log_in(page, live_server)
    page.goto(f"{base}/undo/")
    posts: list[str] = []
    page.on(
        "request", lambda request: posts.append(request.url) if request.method == "POST" else None
    )

    # Two submissions at once (a double click): the script lets one through and
    # disables the button while its request runs.
    with page.expect_navigation():
        page.evaluate(
            """() => {
              const form = document.querySelector("form[data-once]");
              const button = form.querySelector("button");
              form.addEventListener("submit", () => setTimeout(
                () => sessionStorage.setItem("disabled", String(button.disabled)), 20));
              form.requestSubmit(); form.requestSubmit();
            }"""
        )
    assert page.evaluate("sessionStorage.getItem('disabled')") == "true"
    assert len(posts) == 1
    expect(page.locator(".notices")).to_contain_text("undone")
    page.go_back()  # the page is never cached: back shows what an undo would do now
    expect(page.get_by_role("heading", name="No compaction to undo")).to_be_visible()


def test_the_same_form_sent_from_two_tabs_acts_once_and_the_second_is_told(
    live_server: LiveServer,
    compacted: Session,
    browser: object,  # noqa: F811 (the fixture imported above)
) -> None:
    from playwright.sync_api import Page, expect

    page = browser
    assert isinstance(page, Page)
    log_in(page, live_server)
    page.goto(f"{live_server.url}/sessions/{compacted.public_id}/fork/9/")

    statuses = page.evaluate(
        """async () => {
          const form = document.querySelector("form[data-once]");
          const send = () => fetch(form.action, {method: "POST", body: new FormData(form)});
          const first = await send();
          const second = await send();
          document.open(); document.write(await second.text()); document.close();
          return [first.status, second.status];
        }"""
    )

    assert statuses == [200, 409]  # the first followed its 303 to the new session
    expect(page.get_by_role("heading", name="Already done")).to_be_visible()
    page.screenshot(path=SCREENSHOTS / "actions-already-done.png", full_page=True)
    page.goto(live_server.url)
    expect(page.locator("table.sessions tbody tr")).to_have_count(3)  # the long one, this, a fork


def double_submit(page: object, form: str) -> None:
    """Submit ``form`` (a selector) twice at once, as a double click does, and
    wait for the one navigation it makes."""
    from playwright.sync_api import Page

    assert isinstance(page, Page)
    with page.expect_navigation():
        page.evaluate(
            """(selector) => {
              const form = document.querySelector(selector);
              form.requestSubmit(); form.requestSubmit();
            }""",
            form,
        )


@pytest.mark.parametrize("width", [1280, 390])
def test_rewind_correct_and_compact_now_read_well_and_a_double_click_sends_once(
    live_server: LiveServer,
    compacted: Session,
    latest: CompactionEvent,
    browser: object,  # noqa: F811 (the fixture imported above)
    width: int,
) -> None:
    from playwright.sync_api import Page, expect

    page = browser
    assert isinstance(page, Page)
    base = f"{live_server.url}/sessions/{compacted.public_id}"
    page.set_viewport_size({"width": width, "height": 900})
    log_in(page, live_server)
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)

    # Correct the summary in force, on its compaction page.
    page.goto(f"{base}/compactions/{latest.position}/")
    page.locator("details.correct-summary summary").click()
    page.locator("#summary-text").fill("Mia rebooks to Seattle; bookings B0 to B14.")
    page.locator("details.correct-summary").screenshot(
        path=SCREENSHOTS / f"actions-correct-form-{width}.png"
    )
    assert_no_sideways_scroll(page)
    double_submit(page, "details.correct-summary form")
    expect(page.locator("#corrected-summary")).to_contain_text("Mia rebooks to Seattle")
    expect(page.locator("#original-summary")).to_be_visible()
    page.screenshot(path=SCREENSHOTS / f"actions-corrected-{width}.png", full_page=True)
    page.locator("section.card.after").screenshot(
        path=SCREENSHOTS / f"actions-corrected-summary-{width}.png"
    )
    assert_no_sideways_scroll(page)

    # Rewind from inside a tool round: the confirmation says where it moved.
    page.goto(f"{base}/rewind/45/")
    expect(page.locator("#cut-moved")).to_contain_text("the rewind is cut after #46")
    expect(page.locator(".result-preview")).to_contain_text("messages in the context")
    page.screenshot(path=SCREENSHOTS / f"actions-rewind-confirm-{width}.png", full_page=True)
    assert_no_sideways_scroll(page)
    double_submit(page, "form[data-once]")
    expect(page.locator(".notices")).to_contain_text("Rewind 1")
    page.goto(f"{base}/#m47")  # the first rewound message
    expect(page.locator("#m47 .inactive-badge")).to_contain_text("inactive: rewound by rewind 1")
    expect(page.locator("#m46 .inactive-badge")).to_have_count(0)
    page.locator("#m45").scroll_into_view_if_needed()
    page.screenshot(path=SCREENSHOTS / f"actions-rewound-{width}.png")
    assert_no_sideways_scroll(page)

    # Compact now, with instructions.
    page.goto(f"{base}/")
    page.locator("details.compact-now summary").click()
    page.locator("#compact-instructions").fill("keep every booking reference")
    page.screenshot(path=SCREENSHOTS / f"actions-compact-now-{width}.png")
    double_submit(page, "details.compact-now form")
    expect(page.locator("#compaction-instructions")).to_contain_text("keep every booking")
    assert_no_sideways_scroll(page)

    assert len(posts) == 3  # one per action, whatever the double clicks
    exported = page.request.get(f"{base}/export.jsonl").text()
    log = [json.loads(line) for line in exported.splitlines()]
    added = [r["type"] for r in log if r["type"] in ("summary_correction", "rewind", "compaction")]
    assert added[-3:] == ["summary_correction", "rewind", "compaction"]
    assert log[-1]["trigger"] == "manual"
