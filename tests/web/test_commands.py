from __future__ import annotations

import io
from pathlib import Path

import orjson
import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from memory import CompactionMemory, JSONLLogStore
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import Session

from .helpers import make_session
from .test_importers import OLD_MOTUS_LOG, SWE_AGENT

pytestmark = pytest.mark.django_db


def test_import_sessions_gives_the_sessions_to_the_named_owner(owner: User) -> None:
    out = io.StringIO()

    call_command("import_sessions", str(SWE_AGENT), "--owner", "olivia", stdout=out)

    assert "1 imported, 0 updated, 0 already there, 0 problems" in out.getvalue()
    assert Session.objects.get().owner == owner


def test_import_sessions_refuses_an_unknown_owner() -> None:
    with pytest.raises(CommandError, match="no user named 'nobody'"):
        call_command("import_sessions", str(SWE_AGENT), "--owner", "nobody")


def test_import_sessions_fails_when_a_file_has_problems(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('[{"role": "user", "content": "hi"},]')
    err = io.StringIO()

    with pytest.raises(CommandError, match=r"^1 problem; the session it concerns was not"):
        call_command("import_sessions", str(broken), stderr=err, stdout=io.StringIO())

    assert f"{broken}: line 1 column 35: invalid JSON" in err.getvalue()


def test_import_sessions_with_replay_records_compaction_events(tmp_path: Path) -> None:
    call_command(
        "import_sessions", str(SWE_AGENT), "--replay", "--threshold", "3000", stdout=io.StringIO()
    )

    session = Session.objects.get()
    assert session.compaction_count > 0
    assert (
        session.compaction_events.filter(kind="ok", trigger="auto").count()
        == session.compaction_count
    )


def test_an_exported_session_is_a_log_the_library_restores(tmp_path: Path, owner: User) -> None:
    session = make_session(owner, turns=6, filler=60, threshold=600)
    store = DatabaseLogStore()
    path = tmp_path / f"{session.public_id}.jsonl"

    call_command("export_session", session.public_id, "-o", str(path))

    exported = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    assert exported == list(store.read(session.public_id))
    from_file = CompactionMemory.restore_from_log(
        session.public_id, log_store=JSONLLogStore(tmp_path)
    )
    from_db = CompactionMemory.restore_from_log(session.public_id, log_store=store)
    assert from_file.get_context() == from_db.get_context()


def test_importing_an_export_gives_back_the_same_messages_events_and_context(
    tmp_path: Path, owner: User
) -> None:
    session = make_session(owner, turns=6, filler=60, threshold=600)
    store = DatabaseLogStore()
    before = list(store.read(session.public_id))
    context = CompactionMemory.restore_from_log(session.public_id, log_store=store).get_context()
    path = tmp_path / "export.jsonl"
    call_command("export_session", session.public_id, "-o", str(path))
    session.delete()  # the test's own clean slate: the dashboard never deletes

    call_command("import_sessions", str(path), "--owner", "olivia", stdout=io.StringIO())

    assert list(store.read(session.public_id)) == before
    again = CompactionMemory.restore_from_log(session.public_id, log_store=store)
    assert again.get_context() == context
    assert Session.objects.get().owner == owner


def test_a_session_exported_and_imported_back_by_its_owner_is_already_there(
    tmp_path: Path, owner: User
) -> None:
    session = make_session(owner)
    path = tmp_path / "export.jsonl"
    call_command("export_session", session.public_id, "-o", str(path))
    out = io.StringIO()

    call_command("import_sessions", str(path), "--owner", "olivia", stdout=out)

    assert f"{path}: 0 imported, 0 updated, 1 already there, 0 problems" in out.getvalue()
    assert Session.objects.count() == 1


def test_a_log_whose_id_another_user_has_imports_under_a_new_id(
    tmp_path: Path, owner: User, teammate: User
) -> None:
    session = make_session(owner)
    path = tmp_path / "export.jsonl"
    call_command("export_session", session.public_id, "-o", str(path))
    out = io.StringIO()

    call_command("import_sessions", str(path), "--owner", "theo", stdout=out)

    copy = Session.objects.get(owner=teammate)
    assert f"{path}: 1 imported, 0 updated, 0 already there, 0 problems" in out.getvalue()
    assert f"session {session.public_id} imported as {copy.public_id}" in out.getvalue()
    assert copy.original_id == session.public_id


def test_export_session_writes_to_stdout_by_default() -> None:
    call_command("import_sessions", str(OLD_MOTUS_LOG), stdout=io.StringIO())
    out = io.StringIO()

    call_command("export_session", "motus-old", stdout=out)

    first = orjson.loads(out.getvalue().splitlines()[0])
    assert (first["type"], first["session_id"]) == ("session_meta", "motus-old")


def test_export_session_names_a_missing_session() -> None:
    with pytest.raises(CommandError, match="no conversation log for session 'nope'"):
        call_command("export_session", "nope")


def test_import_sessions_counts_in_words_that_agree(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("[")
    out = io.StringIO()

    with pytest.raises(CommandError):
        call_command("import_sessions", str(broken), stdout=out, stderr=io.StringIO())

    assert out.getvalue() == f"{broken}: 0 imported, 0 updated, 0 already there, 1 problem\n"


@pytest.mark.parametrize("threshold", ["1", "99", "10000001", "99999999999999999999"])
def test_import_sessions_refuses_a_threshold_the_import_page_refuses(threshold: str) -> None:
    with pytest.raises(CommandError) as refused:
        call_command("import_sessions", str(SWE_AGENT), "--replay", "--threshold", threshold)

    assert str(refused.value).startswith(
        "--threshold: The token threshold must be between 100 and 10,000,000 tokens, not "
    )
    assert "under 100 a replay would compact at every message" in str(refused.value)
    assert not Session.objects.exists()


def test_export_session_to_a_folder_that_is_not_there_says_so(owner: User) -> None:
    session = make_session(owner)

    with pytest.raises(CommandError, match=r"^cannot write /nonexistent/x: No such file"):
        call_command("export_session", session.public_id, "-o", "/nonexistent/x")


class ClosedPipe(io.StringIO):
    """stdout whose reader has gone, as in `export_session ID | head -1`."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_export_session_stops_quietly_when_its_reader_goes_away(owner: User) -> None:
    session = make_session(owner)

    call_command("export_session", session.public_id, stdout=ClosedPipe())  # no BrokenPipeError


def test_ensure_local_admin_creates_the_account_once(
    tmp_path: Path, settings: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("django.conf.settings.VAR_DIR", tmp_path)
    monkeypatch.delenv("MOTUS_ADMIN_PASSWORD", raising=False)
    out = io.StringIO()

    call_command("ensure_local_admin", stdout=out)
    call_command("ensure_local_admin", stdout=out)

    password = (tmp_path / "admin_password").read_text().strip()
    admin = User.objects.get(username="admin")
    assert admin.is_superuser
    assert admin.check_password(password)
    assert out.getvalue().count(password) == 1
    assert f"password from {tmp_path / 'admin_password'}" in out.getvalue()


def test_ensure_local_admin_takes_the_password_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("django.conf.settings.VAR_DIR", tmp_path)
    monkeypatch.setenv("MOTUS_ADMIN_PASSWORD", "from-the-env-123")

    call_command("ensure_local_admin", stdout=io.StringIO())

    assert User.objects.get(username="admin").check_password("from-the-env-123")
    assert not (tmp_path / "admin_password").exists()


def test_import_sessions_checks_every_path_before_it_imports_any(tmp_path: Path) -> None:
    with pytest.raises(CommandError) as refused:
        call_command("import_sessions", str(SWE_AGENT), str(tmp_path), str(tmp_path / "typo.json"))

    message = str(refused.value)
    assert str(tmp_path) + ":" not in message  # a folder is read: its files are imported
    assert f"{tmp_path / 'typo.json'}: no such file" in message
    assert not Session.objects.exists()  # the good first file was not imported either


def test_ensure_local_admin_says_last_where_to_go_and_the_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("django.conf.settings.VAR_DIR", tmp_path)
    monkeypatch.delenv("MOTUS_ADMIN_PASSWORD", raising=False)
    quiet, closing = io.StringIO(), io.StringIO()

    call_command("ensure_local_admin", verbosity=0, stdout=quiet)
    call_command("ensure_local_admin", verbosity=0, url="http://127.0.0.1:8000/", stdout=closing)

    password = (tmp_path / "admin_password").read_text().strip()
    assert quiet.getvalue() == ""
    assert closing.getvalue().splitlines() == [
        "Motus Memory is at http://127.0.0.1:8000/",
        f"Log in as 'admin' with password {password} (kept in {tmp_path / 'admin_password'})",
    ]


def test_import_sessions_at_verbosity_0_says_one_line_per_file(tmp_path: Path) -> None:
    out = io.StringIO()
    call_command("import_sessions", str(SWE_AGENT), verbosity=0, stdout=out)
    assert out.getvalue().splitlines() == [
        f"{SWE_AGENT}: 1 imported, 0 updated, 0 already there, 0 problems"
    ]
