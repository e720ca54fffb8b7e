"""`manage.py sync_sessions`: what is new in the agents' folders, and only that."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from pytest_django import Settings

from motus_web.sessions.models import Session, SyncedFile

from .test_actions import context_of
from .test_agent_formats import SHORT
from .test_import_updates import transcript


def sync(*args: str) -> str:
    out = io.StringIO()
    call_command("sync_sessions", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.fixture
def folders(settings: Settings, tmp_path: Path) -> dict[str, Path]:
    found = {tool: tmp_path / tool for tool in ("claude-code", "codex", "gemini-cli")}
    settings.MOTUS_SYNC_FOLDERS = found
    return found


@pytest.mark.django_db
def test_a_sync_imports_new_files_then_only_what_grew(folders: dict[str, Path]) -> None:
    session = folders["claude-code"] / "-home-me-project" / "s1.jsonl"
    session.parent.mkdir(parents=True)
    session.write_bytes(transcript("q1", "a1"))

    first = sync()
    again = sync()
    session.write_bytes(transcript("q1", "a1", "q2", "a2"))
    later = time.time_ns() + 1_000_000_000  # a later mtime even on a coarse clock
    os.utime(session, ns=(later, later))
    grown = sync()

    assert f"{session}: new (+2)" in first
    assert again == (  # nothing changed: nothing read, and that is said
        "synced: 1 files seen, 0 new, 0 grown, 1 unchanged, 0 went back, 0 refused, 0 skipped\n"
    )
    assert f"{session}: updated (+2)" in grown
    [stored] = Session.objects.all()
    assert stored.message_count == 4
    assert SyncedFile.objects.get().size == session.stat().st_size


@pytest.mark.django_db
def test_a_sync_of_a_folder_given_reads_any_format_and_says_so_per_file(
    tmp_path: Path, folders: dict[str, Path]
) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "a.jsonl").write_bytes(transcript("q1", "a1", session_id="a"))
    (tmp_path / "mine" / "notes.json").write_text('"not a session"')

    out = sync("--folder", str(tmp_path / "mine"), "-v", "2")
    again = sync("--folder", str(tmp_path / "mine"), "-v", "2")

    assert f"{tmp_path / 'mine' / 'a.jsonl'}: new (+2)" in out
    assert f"{tmp_path / 'mine' / 'notes.json'}: 1 problem" in out
    assert "synced: 2 files seen, 1 new, 0 grown, 0 unchanged, 0 went back, 1 refused" in out
    # A refused file is tried again once it changes.
    assert "synced: 2 files seen, 0 new, 0 grown, 2 unchanged, 0 went back, 0 refused" in again


@pytest.mark.django_db
def test_watch_syncs_again_until_interrupted(
    folders: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    session = folders["claude-code"] / "p" / "s1.jsonl"
    session.parent.mkdir(parents=True)
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 1:
            session.write_bytes(transcript("q1", "a1"))  # written while it watches
        else:
            raise KeyboardInterrupt

    monkeypatch.setattr(time, "sleep", sleep)
    out = sync("--watch", "--interval", "0.5")

    assert sleeps == [0.5, 0.5]
    assert f"{session}: new (+2)" in out


def test_a_folder_that_is_not_there_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="not a folder"):
        sync("--folder", str(tmp_path / "nowhere"))


@pytest.mark.django_db
@pytest.mark.parametrize("cut", range(5, 15))
def test_a_file_synced_mid_turn_is_updated_in_place_once_it_grows(
    folders: dict[str, Path], cut: int
) -> None:
    """Claude Code writes one message as one line per content block: a sync
    between two of them imported a message that was not complete yet (here
    line 8 is the first tool call of a message whose second comes on line 10)."""
    lines = SHORT.read_bytes().splitlines(True)
    session = folders["claude-code"] / "p" / "s1.jsonl"
    session.parent.mkdir(parents=True)
    session.write_bytes(b"".join(lines[:cut]))
    sync()
    session.write_bytes(b"".join(lines))
    later = time.time_ns() + 1_000_000_000
    os.utime(session, ns=(later, later))

    grown = sync()

    assert f"{session}: updated (+" in grown or f"{session}: unchanged" in grown, grown
    [stored] = Session.objects.all()
    synced = context_of(stored.public_id)
    stored.delete()
    call_command("import_sessions", str(session), stdout=io.StringIO())  # the whole file, anew
    assert context_of(Session.objects.get().public_id) == synced
