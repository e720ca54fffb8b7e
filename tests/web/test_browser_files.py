"""The job page of files that went back or were padded by a crash, and an imported
compaction's page, in Chromium (issue 30): screenshots in /tmp/files-*.png."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from pytest_django.live_server_helper import LiveServer

from motus_web.sessions import jobs
from motus_web.sessions.importers import ImportOptions, import_path
from motus_web.sessions.importers.formats import _io
from motus_web.sessions.models import Session

from .helpers import run_tasks
from .test_browser import log_in, long_session, page  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SHOTS = Path("/tmp")
FIXTURES = Path(__file__).parent / "fixtures"
SHORT = FIXTURES / "claude-code" / "spotter-short.jsonl"
CAP = 64 * 1024


@pytest.fixture
def jobs_of_files_gone_back(owner: User, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    monkeypatch.setattr(_io, "LINE_MAX_BYTES", CAP)
    lines = SHORT.read_bytes().splitlines(keepends=True)
    import_path(SHORT, ImportOptions(owner=owner))
    older = jobs.create(
        SimpleUploadedFile("backup.jsonl", b"".join(lines[:5])), "backup.jsonl", owner, None
    )
    padded = b"".join(lines[:-1]) + b"\0" * (4 * CAP) + lines[-1]
    crashed = jobs.create(SimpleUploadedFile("crashed.jsonl", padded), "crashed.jsonl", owner, None)
    run_tasks()
    return str(older.public_id), str(crashed.public_id)


def test_the_job_pages_of_an_older_copy_and_of_a_padded_file(
    jobs_of_files_gone_back: tuple[str, str],
    live_server: LiveServer,
    page: object,  # noqa: F811
) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    older, crashed = jobs_of_files_gone_back
    log_in(page, live_server)
    page.goto(f"{live_server.url}/import/jobs/{older}/")
    expect(page.locator("h2", has_text="Older copies")).to_be_visible()
    expect(page.locator("ul.older li")).to_have_count(1)
    page.screenshot(path=str(SHOTS / "files-job-older.png"), full_page=True)

    page.goto(f"{live_server.url}/import/jobs/{crashed}/")
    expect(page.locator(".warnings")).to_contain_text("cap of a line")
    expect(page.locator(".warnings")).to_contain_text("NUL bytes (padding left by a crash)")
    page.screenshot(path=str(SHOTS / "files-job-padded.png"), full_page=True)


@pytest.fixture
def compaction_url(owner: User) -> str:
    report = import_path(
        FIXTURES / "compactions" / "claude-code-manual-2.1.121.jsonl", ImportOptions(owner=owner)
    )
    session = Session.objects.get(public_id=report.imported[0])
    [event] = session.compaction_events.all()
    return reverse("dashboard:compaction_detail", args=[session.public_id, event.position])


def test_an_imported_compaction_names_the_tool_that_wrote_it(
    compaction_url: str,
    live_server: LiveServer,
    page: object,  # noqa: F811
) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    log_in(page, live_server)
    page.goto(f"{live_server.url}{compaction_url}")
    expect(page.locator("dd", has_text="Claude Code 2.1.121")).to_be_visible()
    page.screenshot(path=str(SHOTS / "files-compaction.png"), full_page=True)
