"""Imported sessions in the browser: told apart on the list, found with a snippet,
and their gauge with the figures their file shows."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from pytest_django.live_server_helper import LiveServer

from motus_web.sessions.importers import ImportOptions, import_path, import_stream
from motus_web.sessions.models import Session

from .test_agent_formats import COMPACTED
from .test_browser import log_in, long_session, page  # noqa: F401 (fixtures)
from .test_import_updates import transcript

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SHOTS = Path("/tmp")


@pytest.fixture
def imported(owner: User) -> Session:
    if not COMPACTED.is_file():
        pytest.skip(f"the shared agent-session file {COMPACTED} is absent")
    options = ImportOptions(owner=owner)
    import_path(COMPACTED, options)
    import_stream(io.BytesIO(transcript("Why is the deploy flaky?", "A race.")), "s.jsonl", options)
    rewound = transcript("Why is the deploy flaky?", "A race in the flaky step, fixed now.")
    import_stream(io.BytesIO(rewound), "s.jsonl", options)
    return Session.objects.filter(source=COMPACTED.name, parent__isnull=True).get()


def test_imported_sessions_on_the_list_and_the_gauge_of_one(
    imported: Session,
    live_server: LiveServer,
    page: object,  # noqa: F811
) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    log_in(page, live_server)
    page.goto(f"{live_server.url}/?q=flaky")
    expect(page.locator(".snippet mark").first).to_have_text("flaky")
    expect(page.locator(".tag", has_text="branch")).to_be_visible()
    expect(page.locator(".tag", has_text="Claude Code 2.1.39").first).to_be_visible()
    page.screenshot(path=str(SHOTS / "imports-list.png"), full_page=True)

    page.goto(f"{live_server.url}/sessions/{imported.public_id}/")
    expect(page.locator("#gauge-source")).to_contain_text("compacted itself at 167,094 tokens")
    page.locator(".gauge").screenshot(path=str(SHOTS / "imports-gauge.png"))


@pytest.fixture
def updated_job(owner: User) -> str:
    from django.core.files.uploadedfile import SimpleUploadedFile

    from motus_web.sessions import jobs

    from .helpers import run_tasks

    import_stream(io.BytesIO(transcript("q1", "a1")), "s.jsonl", ImportOptions(owner=owner))
    grown = transcript("q1", "a1", "q2", "a2") + b'{"type": "user", "cut'
    job = jobs.create(SimpleUploadedFile("s.jsonl", grown), "s.jsonl", owner, None)
    run_tasks()
    return str(job.public_id)


def test_the_job_page_of_an_update_lists_it_and_the_damaged_lines(
    updated_job: str,
    live_server: LiveServer,
    page: object,  # noqa: F811
) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    log_in(page, live_server)
    page.goto(f"{live_server.url}/import/jobs/{updated_job}/")
    expect(page.locator("ul.updated")).to_contain_text("+2 messages")
    expect(page.locator(".warnings")).to_contain_text("line 5")
    page.screenshot(path=str(SHOTS / "imports-job.png"), full_page=True)
