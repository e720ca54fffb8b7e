"""Sessions of other tools (Claude Code, Codex, ChatGPT, Gemini CLI, Anthropic) imported whole."""

from __future__ import annotations

import gzip
import io
import json
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from memory import ChatMessage, CompactionMemory
from motus_web.sessions.importers import ImportOptions, ImportReport, import_path, import_stream
from motus_web.sessions.importers.formats import ParsedSession, parse_path
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import CompactionEvent, ContextChange, Message, Session

from .helpers import logged_in
from .test_agent_formats import (
    CHATGPT_EXPORT,
    CODEX_SMALL,
    COMPACTED,
    DATA,
    GEMINI,
    SHORT,
    SIMONW,
    SUBAGENT,
    TOOL_HEAVY,
    lines_of,
)

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        not DATA.is_dir(), reason=f"the shared agent-session files are not at {DATA}"
    ),
]


def run(data: bytes, name: str, **options: Any) -> ImportReport:
    return import_stream(io.BytesIO(data), name, ImportOptions(**options))


def rows_of(session: Session) -> list[dict[str, Any]]:
    """Every record of the session, without its id (which an import may change)."""
    found = list(DatabaseLogStore().read(session.public_id))
    found[0] = {k: v for k, v in found[0].items() if k != "session_id"}
    return found


def only(path: Path) -> ParsedSession:
    [parsed] = list(parse_path(path))
    assert isinstance(parsed, ParsedSession)
    return parsed


def restored_context(session: Session) -> list[ChatMessage]:
    memory = CompactionMemory.restore_from_log(session.public_id, log_store=DatabaseLogStore())
    return memory.get_context()


@pytest.mark.parametrize(
    ("path", "messages", "tool_results"),
    [(SHORT, 5, 2), (TOOL_HEAVY, 16, 6), (SIMONW, 7, 2), (GEMINI, 2, 0)],
)
def test_each_handed_file_imports_with_its_counts(
    owner: User, path: Path, messages: int, tool_results: int
) -> None:
    report = import_path(path, ImportOptions(owner=owner))

    assert report.problems == []
    session = Session.objects.get()
    assert session.message_count == messages
    assert session.messages.filter(role="tool").count() == tool_results
    calls = {c["id"] for m in session.messages.exclude(tool_calls=None) for c in m.tool_calls}
    results = set(session.messages.filter(role="tool").values_list("tool_call_id", flat=True))
    assert calls == results
    assert session.source == path.name
    assert session.record_extra["source_format"] in ("claude-code", "gemini-cli")


def test_claude_codes_own_compaction_is_a_compaction_and_the_context_is_its_own(
    owner: User,
) -> None:
    parsed = only(COMPACTED)
    [tool_compaction] = parsed.compactions

    report = import_path(COMPACTED, ImportOptions(owner=owner))

    assert report.problems == []
    session = Session.objects.get()
    assert session.message_count == len(parsed.messages) == 343
    [event] = session.compaction_events.all()
    assert (event.kind, event.trigger, event.tokens_before) == ("ok", "auto", 167094)
    assert event.summary == tool_compaction.summary
    assert event.through_seq == tool_compaction.at - 1
    assert event.replayed_seqs == []
    assert event.record_extra["continuation"] == tool_compaction.summary
    context = restored_context(session)
    # What the model sees now: Claude Code's summary message, then what came after it
    # (the transcript names no system prompt, so no system message comes first).
    assert context[0].text == tool_compaction.summary
    assert len(context) == 1 + len(parsed.messages) - tool_compaction.at
    assert context[-1].to_dict() == ChatMessage.from_dict(parsed.messages[-1]).to_dict()
    provider = session.messages.exclude(provider_tokens=None)
    assert provider.count() == len(parsed.provider_input_tokens) > 0
    assert session.compaction_count == 1


def codex_without_developer_messages(compacted: dict[str, Any] | None = None) -> bytes:
    """The small Codex rollout without its developer lines, with a compaction after line 9."""
    kept = [line for line in lines_of(CODEX_SMALL) if b'"role":"developer"' not in line]
    if compacted is not None:
        line = {"timestamp": "t", "type": "compacted", "payload": compacted}
        kept.insert(9, orjson.dumps(line) + b"\n")
    return b"".join(kept)


def test_codex_compaction_keeps_the_replacement_history_it_finds_in_the_context(
    owner: User,
) -> None:
    first_user = next(
        json.loads(line)["payload"]
        for line in lines_of(CODEX_SMALL)
        if b'"role":"user"' in line and b"response_item" in line
    )
    summary = "Summary: the user wants the tests fixed."
    data = codex_without_developer_messages(
        {
            "message": summary,
            "replacement_history": [
                first_user,
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": f"Another model wrote: {summary}"}],
                },
            ],
        }
    )

    report = run(data, "rollout-x.jsonl", owner=owner)

    assert report.problems == []
    session = Session.objects.get()
    [event] = session.compaction_events.all()
    assert event.summary == summary
    assert event.record_extra["continuation"] == f"Another model wrote: {summary}"
    [kept] = event.replayed_seqs
    assert session.messages.get(seq=kept).role == "user"
    context = restored_context(session)
    assert context[1].text == f"Another model wrote: {summary}"
    assert context[2].to_dict() == session.messages.get(seq=kept).as_dict()
    assert session.record_extra["source_tool"].startswith("Codex")


def test_a_codex_rollout_with_developer_instructions_imports(owner: User) -> None:
    report = import_path(CODEX_SMALL, ImportOptions(owner=owner))

    assert report.problems == []
    (public_id,) = report.imported
    session = Session.objects.get(public_id=public_id)
    # The leading developer message is the session's instructions, kept with its role.
    assert session.system_prompt.startswith("[REDACTED_TEXT len=6684")
    assert session.record_extra["system_role"] == "developer"
    assert list(session.messages.values_list("role", flat=True)[:4]) == [
        "user",
        "user",
        "user",
        "assistant",
    ]


def test_chatgpt_branches_become_sessions_linked_to_the_conversation(owner: User) -> None:
    parsed = only(CHATGPT_EXPORT)

    report = import_path(CHATGPT_EXPORT, ImportOptions(owner=owner))

    assert report.problems == []
    main = Session.objects.get(parent=None)
    [branch] = Session.objects.exclude(parent=None)
    assert branch.parent == main
    shared = parsed.extra["branch_forks"][0]
    assert branch.parent_seq == shared - 1
    assert branch.message_count == len(parsed.branches[0])
    assert main.system_prompt == parsed.system_prompt
    assert branch.owner == owner
    assert "branch 1" in branch.title


def test_subagents_become_sessions_linked_to_their_parent(owner: User, tmp_path: Path) -> None:
    session_id = "258c7280-ae70-4798-800f-63464d01a85d"
    main = tmp_path / f"{session_id}.jsonl"
    shutil.copy(COMPACTED, main)
    (tmp_path / session_id / "subagents").mkdir(parents=True)
    shutil.copy(SUBAGENT, tmp_path / session_id / "subagents" / "agent-acompact-fffbd0.jsonl")

    report = import_path(main, ImportOptions(owner=owner))

    assert report.problems == []
    parent = Session.objects.get(parent=None)
    [child] = Session.objects.exclude(parent=None)
    assert child.parent == parent
    assert child.original_id == "acompact-fffbd0"
    assert child.message_count == 2


@pytest.mark.parametrize("path", [COMPACTED, CHATGPT_EXPORT, SIMONW, GEMINI])
def test_importing_again_adds_nothing_and_an_export_imports_to_the_same_rows(
    owner: User, teammate: User, path: Path
) -> None:
    import_path(path, ImportOptions(owner=owner))
    count = Session.objects.count()

    again = import_path(path, ImportOptions(owner=owner))

    assert again.imported == []
    assert len(again.skipped) >= 1
    assert Session.objects.count() == count
    for session in Session.objects.filter(owner=owner):
        export = b"".join(
            orjson.dumps(r) + b"\n" for r in DatabaseLogStore().read(session.public_id)
        )
        report = run(export, f"{session.public_id}.jsonl", owner=teammate)
        assert report.problems == []
        [copy_id] = report.imported
        copy = Session.objects.get(public_id=copy_id)
        for theirs, ours in zip(rows_of(copy), rows_of(session), strict=True):
            assert {k: v for k, v in theirs.items() if theirs.get(k) != ours.get(k)} == {}
            assert theirs == ours


def test_every_page_of_an_imported_agent_session_answers(owner: User) -> None:
    import_path(COMPACTED, ImportOptions(owner=owner))
    session = Session.objects.get()
    client = logged_in(owner)

    detail = client.get(reverse("dashboard:session_detail", args=[session.public_id]))

    assert detail.status_code == 200
    assert f"{COMPACTED.name} (Claude Code 2.1.39, claude-code)" in detail.content.decode()
    for page in range(1, session.message_count // 50 + 2):
        url = reverse("dashboard:session_detail", args=[session.public_id])
        assert client.get(url, {"page": page}).status_code == 200
    for seq in (0, 228, 342):
        url = reverse("dashboard:message_detail", args=[session.public_id, seq])
        assert client.get(url).status_code == 200


def test_a_gzip_compressed_agent_file_imports_as_the_plain_one(owner: User) -> None:
    report = run(gzip.compress(SHORT.read_bytes()), "session.jsonl.gz", owner=owner)

    assert report.problems == []
    assert Session.objects.get().message_count == 5


def test_a_mid_transcript_system_message_is_a_system_prompt_change(owner: User) -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "system", "content": "Be verbose."},
        {"role": "user", "content": "and now?"},
    ]

    report = run(json.dumps(messages).encode(), "chat.json", owner=owner)

    assert report.problems == []
    session = Session.objects.get()
    assert session.system_prompt == "Be brief."
    assert session.message_count == 3
    [change] = ContextChange.objects.filter(session=session)
    assert (change.kind, change.system_prompt, change.through_seq) == (
        "system_prompt",
        "Be verbose.",
        1,
    )
    assert restored_context(session)[0].text == "Be verbose."


def test_compaction_rows_are_counted_like_live_ones(owner: User) -> None:
    import_path(COMPACTED, ImportOptions(owner=owner))

    assert CompactionEvent.objects.filter(kind="ok").count() == 1
    assert Message.objects.count() == 343
