"""On a 390 px phone every table fits its card: nothing is clipped at the card's edge."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from pytest_django.live_server_helper import LiveServer

from motus_web.chat.replay import ReplayRun, ReplaySettings, create_replay
from motus_web.sessions.models import Session

from .helpers import make_session
from .test_browser import SCREENSHOTS, log_in, long_session, page  # noqa: F401 (fixtures)
from .test_memories_page import remembered

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Each card's content and each table against the box it sits in: [what, content, box] px.
WIDTHS = """() => [
  ...[...document.querySelectorAll('.card')].map(e => ['card', e.scrollWidth, e.clientWidth]),
  ...[...document.querySelectorAll('table')].map(e => {
    const box = e.parentElement;
    return ['table ' + e.className, e.scrollWidth, box.clientWidth];
  }),
]"""


async def _publish(frame: dict[str, Any]) -> None:
    return None


@pytest.fixture
def replayed(owner: User) -> tuple[Session, Session]:
    original = make_session(owner, turns=6, filler=60, threshold=600, title="Rebook Mia")
    settings = ReplaySettings(
        token_threshold=50_000,
        safety_ratio=0.75,
        max_tool_result_tokens=50_000,
        model_name="gpt-4o",
    )
    replay = create_replay(original, settings, owner)
    async_to_sync(ReplayRun(replay, original.public_id, _publish).run)(0)
    remembered(owner)
    return original, replay


def test_tables_fit_their_cards_on_a_phone(
    live_server: LiveServer,
    replayed: tuple[Session, Session],
    page: object,  # noqa: F811
) -> None:
    from playwright.sync_api import FloatRect, Page

    assert isinstance(page, Page)
    original, replay = replayed
    page.set_viewport_size({"width": 390, "height": 900})
    log_in(page, live_server)
    urls = {
        "session": f"/sessions/{original.public_id}/",
        "memories": "/memories/",
        "comparison": f"/sessions/{replay.public_id}/comparison/",
    }
    too_wide = {}
    for name, url in urls.items():
        page.goto(live_server.url + url)
        for details in page.locator("details.chart-table").all():
            details.locator("summary").click()  # "The figures as a table"
        for number, table in enumerate(page.locator(".card table").all()):
            top = page.evaluate(
                "e => e.getBoundingClientRect().top + scrollY", table.element_handle()
            )
            clip: FloatRect = {"x": 0, "y": max(0, top - 60), "width": 390, "height": 360}
            page.screenshot(
                path=SCREENSHOTS / f"narrow-{name}-{number}.png", clip=clip, full_page=True
            )
        too_wide[url] = [w for w in page.evaluate(WIDTHS) if w[1] > w[2]]
    assert not any(too_wide.values()), too_wide
