"""A newer copy of a conversation updates the stored session in place; a changed
past becomes a linked branch; two imports of two copies never both append."""

from __future__ import annotations

import io
import json
import threading
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection, connections
from django.test import TestCase

from motus_web.sessions.importers import ImportOptions, ImportReport, import_stream
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import Session
from motus_web.sessions.signals import records_committed


def transcript(*texts: str, session_id: str = "cc-1", agent: str | None = None) -> bytes:
    """A Claude Code transcript: user and assistant lines taking turns, chained."""
    lines: list[dict[str, Any]] = []
    for number, text in enumerate(texts):
        role = ("user", "assistant")[number % 2]
        message: dict[str, Any] = {"role": role, "content": text}
        if role == "assistant":
            message = {"id": f"msg_{number}", "model": "claude-sonnet-4-5", **message}
            message["content"] = [{"type": "text", "text": text}]
        line: dict[str, Any] = {
            "type": role,
            "uuid": f"{session_id}-{number}",
            "parentUuid": f"{session_id}-{number - 1}" if number else None,
            "sessionId": session_id,
            "version": "2.1.39",
            "timestamp": f"2026-11-0{1 + number // 8}T10:{number % 60:02d}:00.000Z",
            "message": message,
        }
        if agent is not None:
            line |= {"agentId": agent, "isSidechain": True}
        lines.append(line)
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def chatgpt(*conversations: tuple[str, list[str]]) -> bytes:
    """A ChatGPT export: each conversation a chain of user/assistant nodes."""
    exported = []
    for conversation_id, texts in conversations:
        mapping: dict[str, Any] = {"root": {"id": "root", "parent": None, "children": []}}
        parent = "root"
        for number, text in enumerate(texts):
            node = f"{conversation_id}-{number}"
            mapping[parent]["children"].append(node)
            mapping[node] = {
                "id": node,
                "parent": parent,
                "children": [],
                "message": {
                    "id": node,
                    "author": {"role": ("user", "assistant")[number % 2]},
                    "create_time": 1790000000.0 + number,
                    "content": {"content_type": "text", "parts": [text]},
                },
            }
            parent = node
        exported.append(
            {
                "conversation_id": conversation_id,
                "title": conversation_id,
                "create_time": 1790000000.0,
                "current_node": parent,
                "mapping": mapping,
            }
        )
    return json.dumps(exported).encode()


def run(data: bytes, name: str, owner: User | None) -> ImportReport:
    return import_stream(io.BytesIO(data), name, ImportOptions(owner=owner))


def kinds(report: ImportReport) -> list[str]:
    return [str(outcome) for outcome in report.outcomes]


@pytest.mark.django_db
def test_a_redownloaded_export_imports_only_its_new_conversation(owner: User) -> None:
    first = run(chatgpt(("c1", ["a", "b"]), ("c2", ["c", "d"])), "conversations.json", owner)
    assert [o.kind for o in first.outcomes] == ["new", "new"]

    data = chatgpt(("c1", ["a", "b"]), ("c2", ["c", "d"]), ("c3", ["e", "f"]))
    report = run(data, "conversations.json", owner)

    assert [o.kind for o in report.outcomes] == ["unchanged", "unchanged", "new"]
    assert len(report.imported) == 1
    assert len(report.skipped) == 2
    assert Session.objects.count() == 3


@pytest.mark.django_db
def test_a_grown_transcript_appends_its_new_messages_and_the_live_pages_hear_them(
    owner: User,
) -> None:
    run(transcript("q1", "a1", "q2", "a2"), "s.jsonl", owner)
    heard: list[dict[str, Any]] = []

    def listen(session_id: str, records: list[dict[str, Any]], **_: Any) -> None:
        heard.extend(records)

    records_committed.connect(listen)
    try:
        with TestCase.captureOnCommitCallbacks(execute=True):
            report = run(transcript("q1", "a1", "q2", "a2", "q3", "a3"), "copy.jsonl", owner)
    finally:
        records_committed.disconnect(listen)

    [session] = Session.objects.all()
    assert kinds(report) == ["session 1: updated (+2 messages)"]
    assert report.outcomes[0].public_id == session.public_id
    assert list(session.messages.values_list("seq", flat=True)) == [0, 1, 2, 3, 4, 5]
    assert [m.content for m in session.messages.order_by("seq")][4] == "q3"
    assert [r["seq"] for r in heard if r["type"] == "message"] == [4, 5]


@pytest.mark.django_db
def test_a_changed_past_becomes_a_linked_branch_and_imports_once(owner: User) -> None:
    run(transcript("q1", "a1", "q2", "a2"), "s.jsonl", owner)
    rewound = transcript("q1", "a1", "q2 asked otherwise", "a2 again")

    report = run(rewound, "s.jsonl", owner)
    again = run(rewound, "s.jsonl", owner)

    assert [o.kind for o in report.outcomes] == ["branched"]
    assert [o.kind for o in again.outcomes] == ["unchanged"]
    trunk, branch = Session.objects.order_by("pk")
    assert branch.public_id == report.outcomes[0].public_id
    assert branch.parent == trunk
    assert branch.parent_seq == 1  # the last message both share
    assert trunk.message_count == branch.message_count == 4


@pytest.mark.django_db
def test_an_older_copy_of_a_stored_session_adds_nothing(owner: User) -> None:
    run(transcript("q1", "a1", "q2", "a2"), "s.jsonl", owner)
    report = run(transcript("q1", "a1"), "s.jsonl", owner)
    assert [o.kind for o in report.outcomes] == ["unchanged"]
    assert Session.objects.get().message_count == 4


@pytest.mark.django_db
def test_a_subagent_imported_on_its_own_links_to_its_session_by_the_sessions_own_id(
    owner: User,
) -> None:
    run(transcript("q1", "a1", session_id="main"), "main.jsonl", owner)
    report = run(transcript("do it", "done", session_id="main", agent="a7"), "agent.jsonl", owner)

    child = Session.objects.get(public_id=report.imported[0])
    assert child.parent is not None
    assert child.parent.original_id == "main"


@pytest.mark.django_db
def test_each_owner_has_their_own_copy(owner: User, teammate: User) -> None:
    run(transcript("q1", "a1"), "s.jsonl", owner)
    report = run(transcript("q1", "a1"), "s.jsonl", teammate)
    assert [o.kind for o in report.outcomes] == ["new"]


@pytest.mark.django_db
def test_the_command_line_says_what_happened_to_each_conversation(
    owner: User, tmp_path: Any
) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(transcript("q1", "a1"))
    call_command("import_sessions", str(path), stdout=io.StringIO())
    path.write_bytes(transcript("q1", "a1", "q2", "a2", "q3", "a3"))
    out = io.StringIO()

    call_command("import_sessions", str(path), stdout=out)

    assert "0 imported, 1 updated, 0 already there" in out.getvalue()
    assert "session 1: updated (+4 messages)" in out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_imports_of_two_grown_copies_append_once() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("concurrent writers need PostgreSQL (DATABASE_URL)")
    run(transcript("q1", "a1"), "s.jsonl", None)
    grown = transcript("q1", "a1", "q2", "a2")
    start = threading.Barrier(2)
    reports: list[ImportReport] = []

    def one(name: str) -> None:
        try:
            start.wait()
            reports.append(run(grown, name, None))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=one, args=(f"{n}.jsonl",)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(o.kind for r in reports for o in r.outcomes) == ["unchanged", "updated"]
    [session] = Session.objects.all()
    assert list(session.messages.values_list("seq", flat=True)) == [0, 1, 2, 3]


@pytest.mark.django_db
def test_a_transcript_with_a_crash_s_nul_block_and_a_cut_line_imports_the_rest(
    owner: User,
) -> None:
    lines = transcript("q1", "a1", "q2", "a2").splitlines(keepends=True)
    # A crash mid-write: the second line cut mid-string, then NULs where data never
    # reached the disk, then what Claude Code wrote after it restarted.
    damaged = lines[0] + lines[1][:50] + b"\x00" * 2048 + lines[2] + lines[3]

    report = run(damaged, "s.jsonl", owner)

    assert report.problems == []
    assert [w.location for w in report.warnings] == ["line 2", "line 2", ""]
    assert "2,048 NUL bytes" in report.warnings[0].message
    assert "invalid JSON" in report.warnings[1].message
    assert "joined to the line written before it" in report.warnings[2].message
    session = Session.objects.get()
    assert session.message_count == 3  # a1 was on the cut line
    assert [m.content for m in session.messages.order_by("seq")][:2] == ["q1", "q2"]


@pytest.mark.django_db
def test_an_imported_session_is_titled_by_its_first_request_and_dated_by_its_last_message(
    owner: User,
) -> None:
    run(
        transcript("<command-name>/clear</command-name>", "ok", "  Why does\nthe build fail?  "),
        "s.jsonl",
        owner,
    )

    session = Session.objects.get()
    assert session.title == "Why does the build fail?"
    assert session.updated_at.isoformat() == "2026-11-01T10:02:00+00:00"


@pytest.mark.django_db
def test_branches_subagents_forks_restores_and_replays_each_have_their_own_tag(
    owner: User,
) -> None:
    from django.urls import reverse

    from motus_web.sessions.operations import restore_from_file

    from .helpers import logged_in, make_session

    run(transcript("q1", "a1", "q2", "a2"), "s.jsonl", owner)
    branch = run(transcript("q1", "a1", "q2 again", "a2 again"), "s.jsonl", owner).imported[0]
    child = run(transcript("go", "done", session_id="cc-1", agent="a1"), "a.jsonl", owner).imported[
        0
    ]
    original = make_session(owner, title="Original")
    fork = make_session(owner, title="Fork", parent=original)  # linked before lineage existed
    replay = make_session(owner, title="Replay")
    Session.objects.filter(pk=replay.pk).update(
        record_extra={Session.REPLAY_OF: original.public_id}
    )
    exported = b"".join(
        json.dumps(r).encode() + b"\n" for r in DatabaseLogStore().read(original.public_id)
    )
    restored, _ = restore_from_file(io.BytesIO(exported), owner, "Restored")

    tags = {s.public_id: s.lineage for s in Session.objects.all()}
    assert tags[branch] == "branch"
    assert tags[child] == "subagent"
    assert tags[fork.public_id] == "fork"
    assert tags[replay.public_id] == "replay"
    assert tags[restored.public_id] == "restore"
    assert tags[original.public_id] is None
    page = logged_in(owner).get(reverse("dashboard:session_list")).content.decode()
    for kind in ("branch", "subagent", "fork", "replay", "restore"):
        assert f'<span class="tag">{kind}</span>' in page
    assert '<span class="tag">Claude Code 2.1.39</span>' in page  # the source as a tag


@pytest.mark.django_db
def test_a_search_result_shows_the_matching_snippet(owner: User) -> None:
    from django.urls import reverse

    from .helpers import logged_in

    words = " ".join(f"word{n}" for n in range(100))
    run(
        transcript("Start here.", f"{words} the flaky <b>timeout</b> again {words}"),
        "s.jsonl",
        owner,
    )

    page = logged_in(owner).get(reverse("dashboard:session_list"), {"q": "FLAKY"})

    html = page.content.decode()
    assert "<mark>flaky</mark> &lt;b&gt;timeout&lt;/b&gt; again" in html
    assert "word99 the " in html  # what comes just before the match
    shown = html.split('<div class="snippet muted">')[1].split("</div>")[0]
    assert "word50 " not in shown  # only a window of the message around the match
