"""`sync_sessions` and `import_sessions` read inside the folders named, and say what
they did: links, special files, files that went back (issue 30)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse
from pytest_django import Settings

from motus_web.sessions.models import Session

from .helpers import logged_in, run_tasks
from .test_import_jobs import job_url, upload
from .test_import_updates import transcript

SHORT = Path(__file__).parent / "fixtures" / "claude-code" / "spotter-short.jsonl"


def sync(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("sync_sessions", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def projects(settings: Settings, tmp_path: Path) -> Path:
    """~/.claude/projects, as Claude Code keeps it; the other tools' folders empty."""
    folders = {tool: tmp_path / tool for tool in ("claude-code", "codex", "gemini-cli")}
    settings.MOTUS_SYNC_FOLDERS = folders
    folders["claude-code"].mkdir()
    return folders["claude-code"]


@pytest.mark.django_db
def test_a_symlinked_project_folder_inside_the_root_is_synced_once(
    projects: Path, tmp_path: Path
) -> None:
    real = projects / "-home-me-app"
    real.mkdir()
    (real / "s1.jsonl").write_bytes(transcript("q1", "a1", session_id="s1"))
    (projects / "-home-me-app-linked").symlink_to(real)  # the same project twice
    (real / "loop").symlink_to(projects)  # a loop back to the root

    out, err = sync()

    assert Session.objects.count() == 1
    assert "synced: 1 files seen, 1 new" in out
    assert err == ""


@pytest.mark.django_db
def test_a_project_folder_linked_from_another_disk_is_synced_when_the_root_is_that_link(
    settings: Settings, tmp_path: Path
) -> None:
    disk = tmp_path / "other-disk" / "projects"
    (disk / "-home-me-app").mkdir(parents=True)
    (disk / "-home-me-app" / "s1.jsonl").write_bytes(transcript("q1", "a1", session_id="s1"))
    home = tmp_path / "home" / ".claude"
    home.mkdir(parents=True)
    (home / "projects").symlink_to(disk)
    settings.MOTUS_SYNC_FOLDERS = {"claude-code": home / "projects"}

    out, _ = sync()

    assert f"{home / 'projects' / '-home-me-app' / 's1.jsonl'}: new (+2)" in out


@pytest.mark.django_db
def test_links_out_of_the_folders_and_special_files_are_not_opened_and_are_listed(
    projects: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "secret.jsonl").write_bytes(transcript("private", "a1", session_id="x"))
    project = projects / "p"
    project.mkdir()
    (project / "stolen.jsonl").symlink_to(elsewhere / "secret.jsonl")
    (project / "passwd.jsonl").symlink_to("/etc/passwd")
    (projects / "outside").symlink_to(elsewhere)
    (project / "gone.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    os.mkfifo(project / "pipe.jsonl")  # opened, it would block the sync for ever

    out, err = sync()

    assert not Session.objects.exists()
    assert f"skipped {project / 'stolen.jsonl'}: a link to {elsewhere / 'secret.jsonl'}, " in err
    assert "outside the folders synced: not followed" in err
    assert f"skipped {project / 'passwd.jsonl'}: a link to /etc/passwd" in err
    assert f"skipped {projects / 'outside'}: a link to {elsewhere}" in err
    assert f"skipped {project / 'gone.jsonl'}: a link to" in err
    assert f"skipped {project / 'pipe.jsonl'}: not a regular file" in err
    assert "not JSON" not in out + err
    assert (
        "synced: 0 files seen, 0 new, 0 grown, 0 unchanged, 0 went back, 0 refused, 5 skipped "
        "(3 links outside the folders, 1 broken links, 1 special files)"
    ) in out


@pytest.mark.django_db
def test_import_sessions_given_a_folder_reads_inside_it_only(tmp_path: Path) -> None:
    folder = tmp_path / "exports"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "a.jsonl").write_bytes(transcript("q1", "a1", session_id="a"))
    (folder / "link.jsonl").symlink_to("/etc/passwd")
    os.mkfifo(folder / "pipe.jsonl")
    out, err = io.StringIO(), io.StringIO()

    call_command("import_sessions", str(folder), stdout=out, stderr=err)

    assert f"{folder / 'sub' / 'a.jsonl'}: 1 imported" in out.getvalue()
    assert f"skipped {folder / 'link.jsonl'}: a link to /etc/passwd" in err.getvalue()
    assert f"skipped {folder / 'pipe.jsonl'}: not a regular file" in err.getvalue()
    assert Session.objects.count() == 1


@pytest.mark.django_db
def test_a_file_cut_back_is_reported_and_adds_nothing_then_its_growth_appends(
    projects: Path,
) -> None:
    path = projects / "p" / "s1.jsonl"
    path.parent.mkdir()
    whole = SHORT.read_bytes()
    lines = whole.splitlines(keepends=True)
    path.write_bytes(whole)
    sync()

    path.write_bytes(b"".join(lines[: len(lines) // 2]))
    out, _ = sync()

    assert f"{path}: went back: {path.stat().st_size:,} bytes, {len(whole):,} at the last" in out
    assert "1 went back" in out
    assert Session.objects.count() == 1


@pytest.mark.django_db
def test_an_older_copy_of_a_claude_code_session_is_said_to_be_older_not_branched(
    tmp_path: Path,
) -> None:
    lines = SHORT.read_bytes().splitlines(keepends=True)
    older = tmp_path / "older.jsonl"
    # Cut between two lines of one reply (Claude Code writes a block a line).
    older.write_bytes(b"".join(lines[:5]))
    out = io.StringIO()

    call_command("import_sessions", str(SHORT), stdout=io.StringIO())
    call_command("import_sessions", str(older), stdout=out)

    assert "an older copy of the session already imported" in out.getvalue()
    assert Session.objects.count() == 1


@pytest.mark.django_db
def test_the_job_page_of_an_older_copy_says_it_added_nothing(owner: User) -> None:
    client = logged_in(owner)
    lines = SHORT.read_bytes().splitlines(keepends=True)
    upload(client, "s.jsonl", SHORT.read_bytes())
    run_tasks()
    job = upload(client, "s-backup.jsonl", b"".join(lines[:5]))
    run_tasks()

    html = client.get(job_url(job)).content.decode()

    assert "<h2>Older copies</h2>" in html
    assert "it is an older copy of what was imported before" in html
    assert "No sessions found" not in html
    assert "nothing was added to them, and no branch made" in html
    [session] = Session.objects.all()
    assert reverse("dashboard:session_detail", args=[session.public_id]) in html
