from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from django.contrib.auth.models import User

from memory import CompactionMemory
from motus_web.sessions.importers import (
    Format,
    ImportOptions,
    ImportReport,
    import_path,
    import_stream,
)
from motus_web.sessions.importers.detect import detect_format
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import CompactionEvent, Message, Session

from .helpers import make_session
from .test_agent_formats import SHORT

pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parents[2]
TAU_BENCH = REPO / "demo_data/tau-bench/gpt-4o-airline.json"
SWE_AGENT = REPO / "demo_data/swe-agent/marshmallow-code__marshmallow-1867.traj"
OLD_MOTUS_LOG = REPO / "tests/memory/fixtures/motus-old.jsonl"

CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": "You help with bookings."},
    {"role": "user", "content": "Cancel booking B7."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "cancel", "arguments": '{"id": "B7"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "name": "cancel", "content": "cancelled"},
    {"role": "assistant", "content": "Booking B7 is cancelled.", "confidence": 0.9},
]


def run(data: bytes, name: str = "upload.json", **options: Any) -> ImportReport:
    return import_stream(io.BytesIO(data), name, ImportOptions(**options))


def as_json(document: object) -> bytes:
    return json.dumps(document, indent=2).encode()


def as_jsonl(*lines: object) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


# -- formats ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (as_json(CHAT), Format.JSON),
        (json.dumps(CHAT).encode(), Format.JSON),  # one line, still one document
        (as_jsonl({"messages": CHAT}, {"messages": CHAT}), Format.MESSAGES_JSONL),
        (as_jsonl({"type": "session_meta", "session_id": "x"}), Format.MOTUS_LOG),
        (b"\n\n" + as_jsonl({"type": "message", "message": CHAT[1]}), Format.MOTUS_LOG),
        (b"not json at all", Format.JSON),
    ],
)
def test_it_detects_the_format_from_the_content(data: bytes, expected: Format) -> None:
    stream = io.BytesIO(data)

    assert detect_format(stream) is expected
    assert stream.tell() == 0


def test_a_list_of_messages_becomes_one_session_with_its_system_prompt(owner: User) -> None:
    report = run(as_json(CHAT), "bookings.json", owner=owner)

    assert report.problems == []
    session = Session.objects.get(public_id=report.imported[0])
    assert session.owner == owner
    assert session.title == "bookings"
    assert session.system_prompt == "You help with bookings."
    assert [m.role for m in session.messages.order_by("seq")] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    calling = session.messages.get(seq=1)
    assert calling.content is None
    assert calling.tool_calls == CHAT[2]["tool_calls"]
    assert session.messages.get(seq=3).extra == {"confidence": 0.9}


def test_an_object_with_messages_keeps_its_title() -> None:
    report = run(as_json({"title": "Cancellation", "messages": CHAT}))

    assert Session.objects.get(public_id=report.imported[0]).title == "Cancellation"


def test_jsonl_with_one_conversation_per_line_makes_a_session_per_line() -> None:
    report = run(as_jsonl({"messages": CHAT}, {"messages": CHAT[1:2]}), "chats.jsonl")

    assert report.problems == []
    assert sorted(Session.objects.values_list("title", "message_count")) == [
        ("chats · #1", 4),
        ("chats · #2", 1),
    ]


def test_the_tau_bench_runs_import_with_task_and_trial_in_their_titles() -> None:
    report = import_path(TAU_BENCH, ImportOptions(replay_threshold=3000, model_name="gpt-4o"))

    assert report.problems == []
    assert len(report.imported) == Session.objects.count() == 200
    first = Session.objects.get(title="gpt-4o-airline · task 0 · trial 0")
    assert first.system_prompt.startswith("# Airline Agent Policy")
    assert first.messages.filter(role="assistant", content__isnull=True).exists()
    assert CompactionEvent.objects.filter(kind="ok").count() > 100
    assert Message.objects.count() == 5308 - 200  # every message but the system prompts


def test_the_swe_agent_trajectory_keeps_its_real_world_variants() -> None:
    report = import_path(SWE_AGENT, ImportOptions())

    assert report.problems == []
    session = Session.objects.get()
    assert session.title == "marshmallow-code__marshmallow-1867"
    assert session.message_count == 27
    result = session.messages.filter(role="tool").order_by("seq").first()
    assert result is not None
    assert result.extra["tool_call_ids"] == ["call_9diWc1DYm4RLmPfHgIaP2wd"]
    assert result.extra["message_type"] == "observation"
    assert session.messages.get(seq=1).extra["thought"].startswith("Let's list out")


def test_an_old_motus_log_is_upgraded_on_the_way_in() -> None:
    report = import_path(OLD_MOTUS_LOG, ImportOptions())

    assert report.problems == []
    session = Session.objects.get(public_id="motus-old")
    assert list(session.messages.values_list("seq", flat=True)) == list(
        range(session.message_count)
    )
    compaction = session.compaction_events.get()
    assert compaction.number == 1
    assert compaction.through_seq == 3
    assert session.compaction_count == 1


def test_replay_compacts_a_transcript_at_the_threshold() -> None:
    long_chat = [CHAT[0]] + [
        {"role": role, "content": f"{role} turn {i}: " + "words " * 150}
        for i in range(12)
        for role in ("user", "assistant")
    ]

    run(as_json(long_chat), replay_threshold=800)

    session = Session.objects.get()
    assert session.compaction_count >= 2
    assert session.context_tokens < session.total_tokens


# -- problems -----------------------------------------------------------------


def test_bad_json_in_a_jsonl_file_is_reported_at_its_line_and_the_rest_imports() -> None:
    data = as_jsonl({"messages": CHAT}) + b'{"messages": [\n' + as_jsonl({"messages": CHAT})

    report = run(data, "chats.jsonl")

    assert [str(p) for p in report.problems] == [
        "chats.jsonl: line 2: invalid JSON: unexpected end of data"
    ]
    assert len(report.imported) == 2


def test_a_line_cut_mid_string_in_a_motus_log_is_skipped_with_a_warning() -> None:
    lines = OLD_MOTUS_LOG.read_bytes().splitlines(keepends=True)
    whole = sum(1 for line in lines if b'"type": "message"' in line)
    lines[3] = b'{"type": "message", "message": {"role": "user", "content": "cut\n'

    report = run(b"".join(lines), "motus-old.jsonl")

    assert report.problems == []
    [warning] = report.warnings
    assert warning.location == "line 4"
    assert warning.message.startswith("skipped: ")
    [session] = Session.objects.all()
    assert session.message_count == whole - 1


def test_nul_padding_left_by_a_crash_is_skipped_and_the_line_after_it_kept() -> None:
    lines = OLD_MOTUS_LOG.read_bytes().splitlines(keepends=True)
    whole = sum(1 for line in lines if b'"type": "message"' in line)
    lines[3] = b"\x00" * 4096 + lines[3]

    report = run(b"".join(lines), "motus-old.jsonl")

    assert report.problems == []
    assert [(w.location, w.message) for w in report.warnings] == [
        ("line 4", "4,096 NUL bytes (padding left by a crash) skipped")
    ]
    assert Session.objects.get().message_count == whole


def test_a_message_the_memory_cannot_read_is_reported_with_its_record() -> None:
    runs = [{"traj": CHAT}, {"traj": [CHAT[1], {"role": "robot", "content": "beep"}]}]

    report = run(as_json(runs), "runs.json")

    assert [str(p) for p in report.problems] == [
        "runs.json: record 2, message 2: unknown message role 'robot'"
    ]
    assert len(report.imported) == 1


def test_a_json_syntax_error_names_its_line() -> None:
    report = run(b'[\n  {"role": "user",\n  "content": }\n]', "broken.json")

    assert [p.location for p in report.problems] == ["line 3 column 14"]
    assert not Session.objects.exists()


def test_json_that_holds_no_messages_is_explained() -> None:
    report = run(as_json({"answer": 42}), "other.json")

    assert "Unrecognised format. Supported formats: Claude Code" in str(report.problems[0])
    assert "OpenAI chat messages" in str(report.problems[0])


def test_a_transcript_with_only_a_system_prompt_is_refused() -> None:
    report = run(as_json([CHAT[0]]))

    assert report.problems[0].message == "no messages besides a system prompt"


def test_a_transcript_with_nul_characters_imports_and_exports_them(owner: User) -> None:
    chat = [{"role": "user", "content": "binary\x00output"}, CHAT[4]]

    report = run(as_json(chat), "nul.json", owner=owner)

    assert report.problems == []
    session = Session.objects.get(public_id=report.imported[0])
    assert session.messages.get(seq=0).content == "binary\x00output"
    first = list(DatabaseLogStore().read(session.public_id))[1]
    assert first["message"]["content"] == "binary\x00output"


def test_a_log_with_token_counts_past_32_bits_imports(owner: User) -> None:
    data = exported(make_session(owner)).splitlines()
    second = orjson.loads(data[1])
    data[1] = orjson.dumps({**second, "tokens": 10**15})

    report = run(
        b"\n".join(data),
        "big.jsonl",
        owner=owner,
    )

    assert report.problems == []
    session = Session.objects.get(public_id=report.imported[0])
    assert session.messages.get(seq=0).tokens == 10**15


def test_a_count_past_64_bits_is_refused_with_its_file_and_line(owner: User) -> None:
    data = exported(make_session(owner)).splitlines()
    third = orjson.loads(data[2])
    data[2] = json.dumps({**third, "tokens": 2**63}).encode()

    report = run(b"\n".join(data), "huge.jsonl", owner=owner)

    assert [str(problem) for problem in report.problems] == [
        "huge.jsonl: line 3: message record's 'tokens' is 9223372036854775808, "
        "past the largest integer the database stores (9223372036854775807)"
    ]
    assert Session.objects.count() == 1


# -- dedup --------------------------------------------------------------------


def test_importing_the_same_file_again_adds_nothing(owner: User) -> None:
    data = as_jsonl({"messages": CHAT}, {"messages": CHAT[1:2]})
    first = run(data, owner=owner)

    again = run(data, owner=owner)

    assert len(first.imported) == 2
    assert again.imported == []
    assert [str(skipped) for skipped in again.skipped] == ["line 1", "line 2"]
    assert Session.objects.count() == 2


def test_another_owner_gets_their_own_copy(owner: User, teammate: User) -> None:
    run(as_json(CHAT), owner=owner)

    report = run(as_json(CHAT), owner=teammate)

    assert len(report.imported) == 1
    assert Session.objects.filter(owner=teammate).count() == 1


def test_a_motus_log_is_recognised_by_its_session_id() -> None:
    import_path(OLD_MOTUS_LOG, ImportOptions())

    report = import_path(OLD_MOTUS_LOG, ImportOptions())

    assert [str(skipped) for skipped in report.skipped] == ["session motus-old"]
    assert report.skipped[0].public_id == "motus-old"
    assert Session.objects.count() == 1


# -- session ids of Motus logs ------------------------------------------------


def exported(session: Session, **changes: Any) -> bytes:
    """The session as export_session writes it; ``changes`` go into its session_meta."""
    found = list(DatabaseLogStore().read(session.public_id))
    found[0] = {**found[0], **changes}
    return b"".join(orjson.dumps(record) + b"\n" for record in found)


def test_a_log_whose_id_another_owner_has_gets_a_new_id_and_keeps_the_original(
    owner: User, teammate: User
) -> None:
    theirs = make_session(owner, title="Olivia's")

    report = run(exported(theirs), "olivia.jsonl", owner=teammate)

    assert report.skipped == []
    assert len(report.imported) == 1
    copy = Session.objects.get(public_id=report.imported[0])
    assert copy.public_id != theirs.public_id
    assert (copy.owner, copy.original_id, copy.title) == (teammate, theirs.public_id, "Olivia's")
    assert report.renamed == {theirs.public_id: copy.public_id}
    assert copy.message_count == theirs.message_count
    theirs.refresh_from_db()
    assert theirs.owner == owner
    assert theirs.original_id == ""


def test_a_renamed_log_imported_again_by_the_same_owner_adds_nothing(
    owner: User, teammate: User
) -> None:
    data = exported(make_session(owner))
    first = run(data, "olivia.jsonl", owner=teammate)

    again = run(data, "renamed-copy.jsonl", owner=teammate)
    data_reformatted = data.replace(b"\n", b"\n\n")  # another file, the same log
    third = run(data_reformatted, "again.jsonl", owner=teammate)

    assert again.imported == third.imported == []
    assert [s.public_id for s in again.skipped + third.skipped] == first.imported * 2
    assert Session.objects.filter(owner=teammate).count() == 1


def test_an_export_imported_back_by_its_owner_is_already_there(owner: User) -> None:
    session = make_session(owner)

    report = run(exported(session), "export.jsonl", owner=owner)

    assert report.imported == []
    assert [(str(s), s.public_id) for s in report.skipped] == [
        (f"session {session.public_id}", session.public_id)
    ]
    assert Session.objects.count() == 1


def test_an_older_export_of_a_session_that_went_on_is_already_there(owner: User) -> None:
    session = make_session(owner, turns=2)
    found = list(DatabaseLogStore().read(session.public_id))
    older = b"".join(orjson.dumps(record) + b"\n" for record in found[:4])

    report = run(older, "older.jsonl", owner=owner)

    assert [s.public_id for s in report.skipped] == [session.public_id]
    assert Session.objects.count() == 1


def test_a_different_log_under_an_id_the_owner_has_becomes_a_new_session(owner: User) -> None:
    session = make_session(owner, title="First")

    report = run(exported(session, title="Edited"), "edited.jsonl", owner=owner)

    copy = Session.objects.get(public_id=report.imported[0])
    assert (copy.title, copy.original_id) == ("Edited", session.public_id)
    assert Session.objects.count() == 2


def test_a_log_without_an_owner_does_not_take_an_owned_sessions_place(owner: User) -> None:
    session = make_session(owner)

    report = run(exported(session), "export.jsonl")

    copy = Session.objects.get(public_id=report.imported[0])
    assert (copy.owner, copy.original_id) == (None, session.public_id)


def test_a_fork_links_to_the_owners_copy_of_its_parent(owner: User, teammate: User) -> None:
    parent = make_session(owner, title="Parent")
    child = make_session(owner, title="Child", parent=parent)

    no_parent = run(exported(child), "child.jsonl", owner=teammate)
    parent_copy = run(exported(parent), "parent.jsonl", owner=teammate)
    with_parent = run(exported(child, title="Child again"), "child2.jsonl", owner=teammate)

    orphan = Session.objects.get(public_id=no_parent.imported[0])
    assert orphan.parent is None  # Olivia's session is not the teammate's to link to
    assert next(DatabaseLogStore().read(orphan.public_id))["parent_session_id"] == parent.public_id
    linked = Session.objects.get(public_id=with_parent.imported[0])
    assert linked.parent is not None
    assert linked.parent.public_id == parent_copy.imported[0]
    assert next(DatabaseLogStore().read(linked.public_id))["parent_session_id"] == parent.public_id


REFERENCE_LOGS = sorted(
    (Path(__file__).parent.parent / "memory" / "fixtures" / "motus-reference").glob("*.jsonl")
)


@pytest.mark.parametrize("log", REFERENCE_LOGS, ids=lambda p: p.stem)
def test_an_imported_reference_log_restores_what_the_reference_held_live(log: Path) -> None:
    report = import_path(log, ImportOptions())
    assert report.problems == []
    (public_id,) = report.imported
    restored = CompactionMemory.restore_from_log(public_id, log_store=DatabaseLogStore())
    live = json.loads(log.with_suffix("").with_suffix(".live.json").read_text())
    assert [m.to_api_dict() for m in restored.get_context()] == live


# -- damaged files: what can be read is imported, the damage is a warning -----------


def test_a_gzip_file_cut_short_imports_what_it_holds_and_warns_of_the_cut(owner: User) -> None:
    lines = OLD_MOTUS_LOG.read_bytes().splitlines(keepends=True)
    data = gzip.compress(b"".join(lines))
    cut = data[: len(data) - 12]  # the end-of-stream marker and the last bytes are lost

    report = run(cut, "motus-old.jsonl.gz", owner=owner)

    assert report.problems == []
    assert "the gzip stream breaks after" in str(report.warnings[-1])
    assert Session.objects.get().message_count > 0


def test_a_line_with_a_few_nul_bytes_is_a_damaged_line_not_a_binary_file(owner: User) -> None:
    lines = OLD_MOTUS_LOG.read_bytes().splitlines(keepends=True)
    whole = sum(1 for line in lines if b'"type": "message"' in line)
    damaged = [*lines[:3], b"GARBAGE \x00\x00 {not json\n", *lines[3:]]
    claude = SHORT.read_bytes().splitlines(keepends=True)
    claude_damaged = [*claude[:2], b"GARBAGE \x00\x00 {not json\n", *claude[2:]]

    log = run(b"".join(damaged), "motus-old.jsonl", owner=owner)
    transcript = run(b"".join(claude_damaged), "s.jsonl", owner=owner)

    assert log.problems == transcript.problems == []
    assert [(w.location, w.message) for w in log.warnings + transcript.warnings] == [
        ("line 4", "a damaged line (2 NUL bytes in it) skipped"),
        ("line 3", "a damaged line (2 NUL bytes in it) skipped"),
    ]
    assert Session.objects.get(public_id="motus-old").message_count == whole
    assert Session.objects.count() == 2
