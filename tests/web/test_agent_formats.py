"""Agent and chat-app session files parse into neutral sessions (no database needed).

The real files are read from ``../shared/data/agent-sessions`` beside the checkout
(sources and licences in its ``SOURCES.md``); the counts asserted were checked by
reading the files. Malformed variants are made from them in ``tmp_path``.
"""

from __future__ import annotations

import gzip
import io
import json
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from motus_web.sessions.importers.formats import (
    MOTUS_FORMATS,
    SUPPORTED,
    FormatProblem,
    ParsedSession,
    detect,
    parse,
    parse_path,
)

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data" / "agent-sessions"
CLAUDE = DATA / "claude-code"
# Kept with the tests (fixtures/claude-code/README.md): the same file as in the shared data.
SHORT = Path(__file__).parent / "fixtures" / "claude-code" / "spotter-short.jsonl"
TOOL_HEAVY = CLAUDE / "spotter-tool_heavy.jsonl"
COMPACTED = CLAUDE / "spotter-258c7280-ae70-4798-800f-63464d01a85d.noprogress.jsonl"
SUBAGENT = CLAUDE / "spotter-agent-acompact-fffbd0.jsonl"
SIMONW = CLAUDE / "simonw-sample_session.jsonl"
CODEX_BIG = (
    DATA
    / "codex-cli/localpush-rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl"
)
CODEX_SMALL = (
    DATA
    / "codex-cli/localpush-rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl"
)
CHATGPT_EXPORT = DATA / "chatgpt-export/conversations.json"
CHATGPT_ONE = DATA / "chatgpt-export/polylogue-native-conversation-v1.json"
GEMINI = DATA / "gemini-cli/polylogue-origin-gemini-cli-session.json"

pytestmark = pytest.mark.skipif(
    not DATA.is_dir(), reason=f"the shared agent-session files are not at {DATA}"
)


def only_session(path: Path) -> ParsedSession:
    found = list(parse_path(path))
    assert [type(item) for item in found] == [ParsedSession], found
    session = found[0]
    assert isinstance(session, ParsedSession)
    return session


def problems_of(data: bytes, name: str = "upload.jsonl") -> list[FormatProblem]:
    found = list(parse(io.BytesIO(data), name))
    assert found, "a parse yields a session or a problem"
    assert all(isinstance(item, FormatProblem) for item in found), found
    return [item for item in found if isinstance(item, FormatProblem)]


def sessions_of(data: bytes, name: str = "upload.json") -> list[ParsedSession]:
    found = list(parse(io.BytesIO(data), name))
    assert all(isinstance(item, ParsedSession) for item in found), found
    return [item for item in found if isinstance(item, ParsedSession)]


def roles(session: ParsedSession | list[dict[str, Any]]) -> Counter[str]:
    messages = session.messages if isinstance(session, ParsedSession) else session
    return Counter(message["role"] for message in messages)


def call_ids(messages: list[dict[str, Any]]) -> list[str]:
    return [call["id"] for m in messages for call in m.get("tool_calls") or ()]


def result_ids(messages: list[dict[str, Any]]) -> list[str]:
    return [m["tool_call_id"] for m in messages if m["role"] == "tool"]


def assert_every_call_answered_after_it(messages: list[dict[str, Any]]) -> None:
    seen: set[str] = set()
    for message in messages:
        seen.update(call["id"] for call in message.get("tool_calls") or ())
        if message["role"] == "tool":
            assert message["tool_call_id"] in seen, message["tool_call_id"]
    assert sorted(call_ids(messages)) == sorted(result_ids(messages))


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


# -- detection ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (SHORT, "claude-code"),
        (TOOL_HEAVY, "claude-code"),
        (COMPACTED, "claude-code"),
        (SUBAGENT, "claude-code"),
        (SIMONW, "claude-code"),
        (CODEX_BIG, "codex-cli"),
        (CODEX_SMALL, "codex-cli"),
        (CHATGPT_EXPORT, "chatgpt"),
        (CHATGPT_ONE, "chatgpt"),
        (GEMINI, "gemini-cli"),
    ],
)
def test_it_detects_each_real_file_from_its_content(path: Path, expected: str) -> None:
    head = path.read_bytes()[: 64 * 1024]

    assert detect(head, "renamed.txt") == expected
    assert detect(gzip.compress(head), "renamed") == expected


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'{"type": "session_meta", "session_id": "s1", "config": {}}\n', "motus-log"),
        (b'{"type": "session_meta", "payload": {"id": "s1"}}\n', "codex-cli"),
        (b'[{"role": "user", "content": "hi"}]', "openai-chat"),
        (b'{"messages": [{"role": "user", "content": "hi"}]}\n', "openai-chat"),
        (b'{"model": "claude-sonnet-4-5", "max_tokens": 9, "messages": []}', "anthropic-messages"),
        (
            b'{"system": "Be brief.", "messages": [{"role": "user", "content": "hi"}]}',
            "anthropic-messages",
        ),
        (
            b'{"messages": [{"role": "user", "content": '
            b'[{"type": "tool_result", "tool_use_id": "t"}]}]}',
            "anthropic-messages",
        ),
        (
            b'{"id": "msg_1", "type": "message", "role": "assistant", "content": []}',
            "anthropic-messages",
        ),
        (b'[{"uuid": "c1", "name": "x", "chat_messages": []}]', "claude-ai"),
        (b'{"sessionId": "g", "messages": [{"type": "gemini", "content": "x"}]}', "gemini-cli"),
        (b'{"colour": "blue"}', None),
        (b"plain words", None),
        (b"", None),
    ],
)
def test_it_tells_the_formats_apart(data: bytes, expected: str | None) -> None:
    assert detect(data, "upload") == expected


def test_a_first_line_longer_than_the_head_is_still_recognised() -> None:
    line = json.dumps(
        {
            "timestamp": "t",
            "type": "session_meta",
            "payload": {"id": "s", "base_instructions": {"text": "x" * 200_000}},
        }
    ).encode()

    assert detect(line[: 64 * 1024], "rollout.jsonl") == "codex-cli"


def test_an_unrecognised_file_is_refused_with_the_list_of_formats() -> None:
    [problem] = problems_of(b'{"colour": "blue"}\n', "notes.json")

    assert problem.source == "notes.json"
    assert "Unrecognised format" in problem.message
    for description in SUPPORTED.values():
        assert description in problem.message


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ("[]".encode("utf-16"), "UTF-16"),
        (b"\x00\x01\x02binary", "binary"),
        (b"caf\xe9 au lait, not JSON", "not UTF-8"),
        (b"   \n\n", "empty"),
    ],
)
def test_an_unrecognised_file_says_why_when_it_can(data: bytes, reason: str) -> None:
    [problem] = problems_of(data)

    assert reason in problem.message


def test_motus_formats_are_left_to_the_motus_importer() -> None:
    with pytest.raises(ValueError, match="Motus importer"):
        list(parse(io.BytesIO(b'{"type": "session_meta", "session_id": "s"}\n'), "log.jsonl"))


@pytest.mark.parametrize("path", [SHORT, CODEX_SMALL, CHATGPT_EXPORT, GEMINI])
def test_gzip_bom_and_crlf_read_as_the_plain_file(path: Path) -> None:
    plain = sessions_of(path.read_bytes(), path.name)
    data = path.read_bytes()
    variants = {
        "gzip": gzip.compress(data),
        "bom": b"\xef\xbb\xbf" + data,
        "crlf": data.replace(b"\n", b"\r\n"),
        "gzip+bom": gzip.compress(b"\xef\xbb\xbf" + data),
    }
    for label, variant in variants.items():
        assert sessions_of(variant, path.name) == plain, label


# -- Claude Code ----------------------------------------------------------------


def test_claude_code_merges_the_lines_of_one_api_message() -> None:
    session = only_session(SHORT)

    assert session.source_format == "claude-code"
    assert session.source_tool == "Claude Code 2.1.38"
    assert session.original_id == "55604662-cf2a-4331-851a-ec234028f8ca"
    assert session.created_at == "2026-02-10T21:11:56.846Z"
    # 5 assistant lines share msg_01MKH1cc...: one message with its text, thinking and two calls.
    assert [m["role"] for m in session.messages] == ["user", "assistant", "tool", "tool", "user"]
    answer = session.messages[1]
    assert answer["id"] == "msg_01MKH1ccEGrZGNPvu8pYiiQa"
    assert [part["text"] for part in answer["content"]] == [
        "\n\n",
        "Let me check the project structure and try running the server to see the error.",
    ]
    assert [block["type"] for block in answer["thinking_blocks"]] == ["thinking"]
    assert "signature" in answer["thinking_blocks"][0]
    assert [c["function"]["name"] for c in answer["tool_calls"]] == ["Bash", "Glob"]
    assert json.loads(answer["tool_calls"][0]["function"]["arguments"]) == {
        "command": "mix phx.server 2>&1 | head -80",
        "timeout": 30000,
    }
    assert len(answer["claude_code"]) == 5
    assert_every_call_answered_after_it(session.messages)
    assert all(m["is_error"] is True for m in session.messages if m["role"] == "tool")
    assert session.messages[4]["content"] == "[Request interrupted by user for tool use]"
    # input 3 + cache creation 13,835 + cache read 11,515
    assert session.provider_input_tokens == {1: 25353}
    assert session.extra["skipped_lines"] == {
        "file-history-snapshot": 1,
        "progress": 3,
        "system/local_command": 2,
    }


def test_claude_code_keeps_results_that_hang_off_another_block_of_the_message() -> None:
    session = only_session(TOOL_HEAVY)

    assert roles(session) == {"user": 6, "assistant": 4, "tool": 6}
    assert_every_call_answered_after_it(session.messages)
    # The Caveat line is isMeta: counted, not imported.
    assert session.extra["meta_lines"] == 1
    assert not any("local-command-caveat" in str(m["content"]) for m in session.messages)
    assert len(session.provider_input_tokens) == 4


def test_claude_code_records_its_own_compaction() -> None:
    session = only_session(COMPACTED)

    assert roles(session) == {"assistant": 152, "tool": 186, "user": 5}
    assert_every_call_answered_after_it(session.messages)
    [compaction] = session.compactions
    # 102 API messages, 124 tool results and 3 prompts came before the boundary.
    assert compaction.at == 229
    assert compaction.trigger == "auto"
    assert compaction.tokens_before == 167094
    assert compaction.summary.startswith(
        "This session is being continued from a previous conversation"
    )
    assert compaction.replacement is None
    assert compaction.extra["boundary"]["subtype"] == "compact_boundary"
    assert not any(compaction.summary[:200] in str(m["content"]) for m in session.messages)
    assert session.messages[229]["id"] == "msg_01VSoUt6f6orEzuDGsX9SQM5"
    assert len(session.provider_input_tokens) == 152
    # The fixture's progress lines were removed: their children follow the line before.
    assert session.extra["missing_parents"] == 16


def test_claude_code_without_parent_links_reads_in_file_order() -> None:
    session = only_session(SIMONW)

    assert session.title == "Test session for JSONL parsing"
    assert [m["role"] for m in session.messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "user",
        "assistant",
    ]
    assert json.loads(session.messages[1]["tool_calls"][0]["function"]["arguments"]) == {
        "file_path": "/project/hello.py",
        "content": "def hello():\n    return 'Hello, World!'\n",
    }
    assert_every_call_answered_after_it(session.messages)


def test_claude_code_subagent_transcripts_become_children(tmp_path: Path) -> None:
    session_id = "258c7280-ae70-4798-800f-63464d01a85d"
    main = tmp_path / f"{session_id}.jsonl"
    shutil.copy(COMPACTED, main)
    (tmp_path / session_id / "subagents").mkdir(parents=True)
    shutil.copy(SUBAGENT, tmp_path / session_id / "subagents" / "agent-acompact-fffbd0.jsonl")

    session = only_session(main)

    [child] = session.children
    assert child.original_id == "acompact-fffbd0"
    assert child.extra["parent_session_id"] == session.original_id == session_id
    assert child.extra["purpose"] == "compaction"
    # Two isMeta hook reminders skipped: the summariser's prompt and its answer remain.
    assert [m["role"] for m in child.messages] == ["user", "assistant"]
    assert child.messages[0]["content"].startswith("Your task is to create a detailed summary")


def cc_line(uuid: str, parent: str | None, role: str, text: str, **more: Any) -> bytes:
    line = {
        "type": role,
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": "s1",
        "version": "2.1.3",
        "message": {"role": role, "content": text},
        **more,
    }
    return json.dumps(line).encode() + b"\n"


def test_claude_code_rewinds_leave_the_abandoned_path_as_a_branch() -> None:
    data = b"".join(
        [
            cc_line("u1", None, "user", "Name a colour."),
            cc_line("a1", "u1", "assistant", "Blue."),
            cc_line("u2", "a1", "user", "Another?"),
            cc_line("a2", "u2", "assistant", "Green."),
            # The user rewinds to after a1 and asks something else.
            cc_line("u3", "a1", "user", "Name a fruit."),
            cc_line("a3", "u3", "assistant", "Pear."),
        ]
    )

    [session] = sessions_of(data, "rewound.jsonl")

    assert [m["content"] for m in session.messages] == [
        "Name a colour.",
        "Blue.",
        "Name a fruit.",
        "Pear.",
    ]
    assert [[m["content"] for m in b] for b in session.branches] == [
        ["Name a colour.", "Blue.", "Another?", "Green."]
    ]
    assert session.extra["branch_forks"] == [2]
    assert session.source_tool == "Claude Code 2.1.3"


def test_claude_code_keeps_unknown_fields() -> None:
    data = cc_line("u1", None, "user", "hi", futureField={"x": 1}) + cc_line(
        "a1", "u1", "assistant", "hello", gitBranch="feature"
    )
    data = data.replace(b'"content": "hello"}', b'"content": "hello", "container": {"id": "c9"}}')

    [session] = sessions_of(data, "s.jsonl")

    user, assistant = session.messages
    assert user["claude_code"][0]["futureField"] == {"x": 1}
    assert assistant["container"] == {"id": "c9"}
    # Session-wide fields are kept once on the session, and on a line where they change.
    assert session.extra["claude_code"]["sessionId"] == "s1"
    assert "sessionId" not in user["claude_code"][0]
    assert assistant["claude_code"][0]["gitBranch"] == "feature"


def warnings_and_session(data: bytes, name: str) -> tuple[list[FormatProblem], ParsedSession]:
    *warnings, session = list(parse(io.BytesIO(data), name))
    assert isinstance(session, ParsedSession), session
    assert all(isinstance(w, FormatProblem) and w.warning for w in warnings), warnings
    return [w for w in warnings if isinstance(w, FormatProblem)], session


def test_claude_code_torn_last_line_is_skipped_with_a_warning_naming_it() -> None:
    data = SHORT.read_bytes()
    torn = data[: data.rstrip().rfind(b"\n") + 40]

    [warning], session = warnings_and_session(torn, "short.jsonl")

    assert warning.source == "short.jsonl"
    assert warning.location == f"line {len(lines_of(SHORT))}"
    assert "torn" in warning.message
    assert session.messages == only_session(SHORT).messages  # the torn line held no message


@pytest.mark.parametrize(
    ("line", "field"),
    [
        (b'{"type": "user", "uuid": "u", "message": "hi"}\n', "message"),
        (
            b'{"type": "user", "uuid": "u", "parentUuid": 7, '
            b'"message": {"role": "user", "content": "x"}}\n',
            "parentUuid",
        ),
        (
            b'{"type": "assistant", "uuid": "u", "message": {"role": "assistant", '
            b'"content": [{"type": "tool_use", "id": "t", "name": 5, "input": {}}]}}\n',
            "message.content[0].name",
        ),
        (
            b'{"type": "assistant", "uuid": "u", '
            b'"message": {"role": "assistant", "content": [7]}}\n',
            "message.content[0]",
        ),
    ],
)
def test_claude_code_bad_fields_are_named(line: bytes, field: str) -> None:
    data = cc_line("first", None, "user", "hello") + line

    [problem] = problems_of(data, "bad.jsonl")

    assert problem.location == "line 2"
    assert problem.field == field
    assert f"line 2: field {field!r}" in str(problem)


# -- Codex ----------------------------------------------------------------------


def test_codex_rollout_with_its_compaction() -> None:
    session = only_session(CODEX_BIG)

    assert session.source_format == "codex-cli"
    assert session.source_tool == "Codex Desktop 0.104.0-alpha.1"
    assert session.original_id == "019c8a59-e9dd-71f0-9ae3-4079fe9726a9"
    assert session.system_prompt == "[REDACTED_TEXT len=13131 sha=036b7e47]"
    # 255 assistant messages, plus 33 for calls that follow a tool output.
    assert roles(session) == {"tool": 365, "assistant": 288, "user": 46, "developer": 45}
    calls = Counter(c["type"] for m in session.messages for c in m.get("tool_calls") or ())
    assert calls == {"function": 316, "custom": 49}
    assert_every_call_answered_after_it(session.messages)
    custom = next(
        c for m in session.messages for c in m.get("tool_calls") or () if c["type"] == "custom"
    )
    assert custom["custom"]["name"] == "apply_patch"
    assert sum(len(m.get("reasoning_items", ())) for m in session.messages) == 219
    assert sum(len(m.get("codex_items", ())) for m in session.messages) == 7  # web_search_call
    [compaction] = session.compactions
    assert compaction.at == 508
    assert compaction.tokens_before == 209950
    assert compaction.summary == "[REDACTED_MESSAGE len=0 sha=e3b0c442]"
    assert compaction.replacement is not None
    assert roles(compaction.replacement) == {"user": 21, "assistant": 15, "developer": 3}
    assert [item["type"] for item in compaction.extra["items"]] == ["compaction"]
    assert compaction.extra["context_compacted_event"] is True
    assert session.extra["models"] == ["gpt-5.3-codex"]
    assert session.extra["events"] == {
        "task_started": 33,
        "user_message": 38,
        "token_count": 573,
        "agent_reasoning": 199,
        "agent_message": 255,
        "task_complete": 33,
        "context_compacted": 1,
    }
    assert len(session.extra["turn_settings"]) == 3  # 286 turn_context lines, 3 distinct


def test_codex_keeps_unknown_lines_and_fields() -> None:
    extra_lines = [
        {"timestamp": "t1", "type": "future_record", "payload": {"x": 1}},
        {
            "timestamp": "t2",
            "type": "response_item",
            "trace": "abc",
            "payload": {"type": "message", "role": "user", "content": "hi", "id": "m1"},
        },
    ]
    data = CODEX_SMALL.read_bytes() + b"".join(json.dumps(x).encode() + b"\n" for x in extra_lines)

    [session] = sessions_of(data, "rollout.jsonl")

    assert session.extra["other_lines"] == [{**extra_lines[0], "line": 64}]
    assert session.messages[-1] == {
        "role": "user",
        "content": "hi",
        "id": "m1",
        "timestamp": "t2",
        "trace": "abc",
    }


def test_codex_pairs_calls_and_reports_tokens_per_request() -> None:
    session = only_session(CODEX_SMALL)

    assert [m["role"] for m in session.messages[:7]] == ["developer"] * 2 + ["user"] * 2 + [
        "developer"
    ] * 2 + ["user"]
    assert [m["role"] for m in session.messages[7:]] == ["assistant", "tool"] * 5 + ["assistant"]
    for index in range(7, 17, 2):
        [call] = session.messages[index]["tool_calls"]
        assert session.messages[index + 1]["tool_call_id"] == call["id"]
        assert session.messages[index]["reasoning_content"].startswith("[REDACTED_TEXT")
    assert session.messages[7]["phase"] == "commentary"
    assert session.messages[17]["phase"] == "final_answer"
    assert session.provider_input_tokens == {
        7: 42772,
        9: 44218,
        11: 48969,
        13: 49326,
        15: 49647,
        17: 63441,
    }


def test_codex_problems_name_line_and_field() -> None:
    first, *rest = lines_of(CODEX_SMALL)

    [problem] = problems_of(b"".join(rest), "rollout.jsonl")
    assert (problem.location, problem.field) == ("line 1", "type")
    assert "session_meta" in problem.message

    meta = json.loads(first)
    del meta["payload"]["id"]
    [problem] = problems_of(json.dumps(meta).encode() + b"\n" + b"".join(rest), "rollout.jsonl")
    assert (problem.location, problem.field) == ("line 1", "payload.id")

    [warning], _ = warnings_and_session(b"".join([first, *rest])[:-25], "rollout.jsonl")
    assert warning.location == f"line {len(rest) + 1}"
    assert "torn" in warning.message


# -- ChatGPT --------------------------------------------------------------------


@pytest.mark.parametrize("path", [CHATGPT_EXPORT, CHATGPT_ONE])
def test_chatgpt_walks_the_current_branch_and_lists_the_others(path: Path) -> None:
    session = only_session(path)

    assert session.source_format == "chatgpt"
    assert session.title == "Privacy-safe ChatGPT native fixture"
    assert session.original_id == "chatgpt-fixture-conversation"
    assert session.created_at == "2026-07-16T01:15:00+00:00"
    assert (
        session.system_prompt
        == "Privacy-safe fixture profile.\n\nPreserve structured provider evidence."
    )
    user, call, result, answer = session.messages
    assert user["content"][1]["asset_pointer"] == "file-service://fixture-input-image"
    assert call["tool_calls"][0]["function"] == {
        "name": "browser.search",
        "arguments": '{"query":"fixture evidence"}',
    }
    assert call["reasoning_content"] == "Privacy-safe reasoning trace."
    assert result == {
        **result,
        "role": "tool",
        "tool_call_id": call["tool_calls"][0]["id"],
        "content": "Privacy-safe tool result.",
    }
    assert answer["content"][0]["text"].startswith("Final answer.")
    assert answer["reasoning_recap"] == "Privacy-safe reasoning summary."
    assert answer["chatgpt"]["metadata"]["model_slug"] == "gpt-5-6-pro"
    [branch] = session.branches
    assert [m["role"] for m in branch] == ["user", "assistant"]
    assert branch[1]["content"] == "Superseded answer."
    assert session.extra["branch_forks"] == [1]
    assert session.extra["default_model_slug"] == "gpt-5-6-pro"


def node(
    key: str, parent: str | None, role: str | None, text: str = "", **message: Any
) -> tuple[str, dict[str, Any]]:
    body = None
    if role is not None:
        body = {
            "id": f"m-{key}",
            "author": {"role": role, "name": message.pop("name", None)},
            "content": {"content_type": "text", "parts": [text]},
            **message,
        }
    return key, {"id": key, "parent": parent, "children": [], "message": body}


def conversation(*nodes: tuple[str, dict[str, Any]], current: str, **more: Any) -> dict[str, Any]:
    mapping = dict(nodes)
    for key, item in mapping.items():
        if item["parent"] in mapping:
            mapping[item["parent"]]["children"].append(key)
    return {"title": "t", "create_time": 1.0, "mapping": mapping, "current_node": current, **more}


def test_chatgpt_skips_hidden_nodes_and_pairs_tools_in_order() -> None:
    export = [
        conversation(
            node("root", None, None),
            node(
                "sys", "root", "system", "", metadata={"is_visually_hidden_from_conversation": True}
            ),
            node("u", "sys", "user", "Plot it."),
            node("c1", "u", "assistant", "print(1)", recipient="python"),
            node("c2", "c1", "assistant", "print(2)", recipient="python"),
            node("r1", "c2", "tool", "1", name="python"),
            node("r2", "r1", "tool", "2", name="python"),
            node("orphan", "r2", "tool", "a file", name="myfiles_browser"),
            node("a", "orphan", "assistant", "Done."),
            current="a",
        )
    ]

    [session] = sessions_of(json.dumps(export).encode(), "conversations.json")

    assert [m["role"] for m in session.messages] == [
        "user",
        "assistant",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    first, second = session.messages[1]["tool_calls"][0], session.messages[2]["tool_calls"][0]
    assert [m["tool_call_id"] for m in session.messages if m["role"] == "tool"][:2] == [
        first["id"],
        second["id"],
    ]
    assert session.messages[5]["made_up"] is True  # a call made up for a result nobody asked for
    assert_every_call_answered_after_it(session.messages)
    assert session.extra["hidden_nodes"] == 1
    assert session.extra["made_up_calls"] == 1


def test_chatgpt_a_bad_conversation_does_not_refuse_the_others() -> None:
    good = json.loads(CHATGPT_EXPORT.read_bytes())[0]
    export = [good, {"title": "broken", "mapping": "nope"}, good]

    found = list(parse(io.BytesIO(json.dumps(export).encode()), "conversations.json"))

    assert [type(item).__name__ for item in found] == [
        "ParsedSession",
        "FormatProblem",
        "ParsedSession",
    ]
    problem = found[1]
    assert isinstance(problem, FormatProblem)
    assert (problem.location, problem.field) == ("conversation 2", "mapping")


def test_chatgpt_truncated_export_is_a_problem_at_the_conversation_it_breaks() -> None:
    good = json.loads(CHATGPT_EXPORT.read_bytes())[0]
    data = json.dumps([good, good]).encode()

    found = list(parse(io.BytesIO(data[:-200]), "conversations.json"))

    assert isinstance(found[0], ParsedSession)
    problem = found[-1]
    assert isinstance(problem, FormatProblem)
    assert problem.location == "conversation 2"
    assert "invalid JSON" in problem.message


# -- Gemini CLI -----------------------------------------------------------------


def test_gemini_cli_session() -> None:
    session = only_session(GEMINI)

    assert session.source_format == "gemini-cli"
    assert session.original_id == "origin-matrix-gemini-cli"
    assert session.title == "Origin capability matrix"
    assert session.created_at == "2026-08-01T10:00:00.000Z"
    assert session.messages == [
        {
            "role": "user",
            "content": "Prove the parser claim.",
            "id": "user-1",
            "timestamp": "2026-08-01T10:00:01.000Z",
        },
        {
            "role": "assistant",
            "content": "The production route parsed this witness.",
            "id": "assistant-1",
            "timestamp": "2026-08-01T10:00:02.000Z",
            "model": "gemini-matrix",
        },
    ]
    assert session.extra == {
        "projectHash": "origin-matrix-project",
        "lastUpdated": "2026-08-01T10:00:02.000Z",
        "kind": "chat",
    }


GEMINI_TOOLS = {
    "sessionId": "g1",
    "startTime": "2026-01-01T00:00:00Z",
    "messages": [
        {"id": "1", "type": "user", "content": [{"text": "List files."}]},
        {"id": "2", "type": "info", "content": "Switched model."},
        {
            "id": "3",
            "type": "gemini",
            "content": "",
            "thoughts": [{"subject": "Plan", "description": "Use ls.", "timestamp": "t"}],
            "tokens": {"input": 812, "output": 9, "cached": 0, "total": 821},
            "toolCalls": [
                {
                    "id": "ls-1",
                    "name": "list_directory",
                    "args": {"path": "."},
                    "result": [
                        {
                            "functionResponse": {
                                "id": "ls-1",
                                "name": "list_directory",
                                "response": {"output": "a.py"},
                            }
                        }
                    ],
                    "status": "success",
                },
                {
                    "id": "rm-1",
                    "name": "shell",
                    "args": {"command": "rm x"},
                    "result": None,
                    "status": "error",
                },
            ],
        },
        {"id": "4", "type": "gemini", "content": "One file: a.py.", "tokens": {"input": 900}},
    ],
}


def test_gemini_cli_tool_calls_thoughts_and_tokens() -> None:
    [session] = sessions_of(json.dumps(GEMINI_TOOLS).encode(), "session-1.json")

    assert [m["role"] for m in session.messages] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert session.messages[0]["content"] == "List files."
    calls = session.messages[1]["tool_calls"]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [
        {"path": "."},
        {"command": "rm x"},
    ]
    assert session.messages[1]["reasoning_content"] == "Plan\nUse ls."
    assert session.messages[2]["content"] == "a.py"
    assert session.messages[3]["is_error"] is True
    assert_every_call_answered_after_it(session.messages)
    assert session.provider_input_tokens == {1: 812, 4: 900}
    assert session.extra["notices"] == {"info": 1}


def test_gemini_cli_problems() -> None:
    data = json.dumps(GEMINI_TOOLS, indent=1).encode()
    [problem] = problems_of(data[:-40], "session-1.json")
    assert problem.location.startswith("line ")
    assert "invalid JSON" in problem.message

    bad = {
        **GEMINI_TOOLS,
        "messages": [GEMINI_TOOLS["messages"][0], {"type": "bot", "content": "x"}],
    }
    [problem] = problems_of(json.dumps(bad).encode(), "session-1.json")
    assert (problem.location, problem.field) == ("message 2", "type")


# -- Anthropic Messages and Claude.ai ---------------------------------------------

ANTHROPIC_REQUEST = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 1024,
    "system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}],
    "tools": [{"name": "weather", "input_schema": {"type": "object"}}],
    "messages": [
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Call the tool.", "signature": "sig"},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "-3 C"}],
                },
                {"type": "text", "text": "And tomorrow?"},
            ],
        },
    ],
}


def test_anthropic_request_keeps_system_and_pairs_blocks() -> None:
    [session] = sessions_of(json.dumps(ANTHROPIC_REQUEST).encode(), "request.json")

    assert session.source_format == "anthropic-messages"
    assert session.source_tool == "Anthropic Messages API (claude-sonnet-4-5)"
    assert session.system_prompt == "You are terse."
    assert session.extra["system_blocks"][0]["cache_control"] == {"type": "ephemeral"}
    assert session.extra["request"]["tools"][0]["name"] == "weather"
    user, assistant, tool, follow_up = session.messages
    assert user == {"role": "user", "content": "Weather in Oslo?"}
    assert assistant["content"] == "Checking."
    assert assistant["thinking_blocks"] == [
        {"type": "thinking", "thinking": "Call the tool.", "signature": "sig"}
    ]
    assert assistant["tool_calls"] == [
        {
            "id": "toolu_1",
            "type": "function",
            "function": {"name": "weather", "arguments": '{"city":"Oslo"}'},
        }
    ]
    assert tool == {"role": "tool", "tool_call_id": "toolu_1", "content": "-3 C"}
    assert follow_up == {"role": "user", "content": "And tomorrow?"}


def test_anthropic_request_and_response_pair_carries_provider_tokens() -> None:
    response = {
        "id": "msg_9",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Colder."}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 20, "cache_read_input_tokens": 500, "output_tokens": 3},
    }
    pair = {"request": ANTHROPIC_REQUEST, "response": response, "latency_ms": 812}

    [session] = sessions_of(json.dumps(pair).encode(), "pair.json")

    assert session.original_id == "msg_9"
    assert session.messages[-1]["content"] == "Colder."
    assert session.messages[-1]["stop_reason"] == "end_turn"
    assert session.provider_input_tokens == {4: 520}
    assert session.extra["latency_ms"] == 812


def test_anthropic_bad_block_is_named() -> None:
    bad = {**ANTHROPIC_REQUEST, "messages": [{"role": "user", "content": [{"text": "no type"}]}]}

    [problem] = problems_of(json.dumps(bad).encode(), "request.json")

    assert (problem.location, problem.field) == ("message 1", "content[0]")


CLAUDE_AI_EXPORT = [
    {
        "uuid": "conv-1",
        "name": "Make a chart",
        "created_at": "2025-05-01T10:00:00Z",
        "account": {"uuid": "acc"},
        "chat_messages": [
            {
                "uuid": "m1",
                "sender": "human",
                "text": "Chart it.",
                "content": [{"type": "text", "text": "Chart it."}],
                "attachments": [{"file_name": "data.csv"}],
            },
            {
                "uuid": "m2",
                "sender": "assistant",
                "text": "",
                "content": [
                    {"type": "text", "text": "Making it."},
                    {"type": "tool_use", "name": "artifacts", "input": {"command": "create"}},
                    {
                        "type": "tool_result",
                        "name": "artifacts",
                        "content": [{"type": "text", "text": "OK"}],
                        "is_error": False,
                    },
                    {"type": "text", "text": "Here it is."},
                ],
            },
        ],
    }
]


def test_claude_ai_export_splits_server_side_tool_use() -> None:
    [session] = sessions_of(json.dumps(CLAUDE_AI_EXPORT).encode(), "conversations.json")

    assert session.source_format == "claude-ai"
    assert (session.title, session.original_id) == ("Make a chart", "conv-1")
    assert [m["role"] for m in session.messages] == ["user", "assistant", "tool", "assistant"]
    assert session.messages[0]["attachments"] == [{"file_name": "data.csv"}]
    [call] = session.messages[1]["tool_calls"]
    assert (
        session.messages[2]["tool_call_id"] == call["id"]
    )  # paired in order: the export has no ids
    assert session.messages[2]["is_error"] is False
    assert session.messages[3]["content"] == "Here it is."
    assert session.extra["account"] == {"uuid": "acc"}


# -- bounded memory ---------------------------------------------------------------


class ReadSpy(io.RawIOBase):
    """A file that records the largest read asked of it."""

    def __init__(self, data: bytes) -> None:
        self.data = io.BytesIO(data)
        self.largest = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        return self.data.seek(offset, whence)

    def tell(self) -> int:
        return self.data.tell()

    def readinto(self, buffer: Any) -> int:
        self.largest = max(self.largest, len(buffer))
        chunk = self.data.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)


@pytest.mark.parametrize("path", [COMPACTED, CODEX_BIG])
def test_line_formats_are_read_in_small_pieces(path: Path) -> None:
    spy = ReadSpy(path.read_bytes())

    found = list(parse(io.BufferedReader(spy), path.name))

    assert isinstance(found[0], ParsedSession)
    assert spy.largest <= 64 * 1024 < path.stat().st_size


def test_chatgpt_export_is_read_in_small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    from motus_web.sessions.importers.formats import _json

    monkeypatch.setattr(_json, "READ_BYTES", 64 * 1024)  # 8 MB in use: a smaller file here
    conversation = json.loads(CHATGPT_EXPORT.read_bytes())[0]
    data = json.dumps([conversation] * 200).encode()  # about 1 MB
    spy = ReadSpy(data)

    found = list(parse(io.BufferedReader(spy), "conversations.json"))

    assert len(found) == 200
    assert spy.largest <= 64 * 1024 < len(data)


# -- odd but real content -----------------------------------------------------------


def test_an_escaped_lone_surrogate_does_not_refuse_the_session() -> None:
    # A model cut an emoji in half: the file holds the escape of its first half only.
    data = cc_line("u1", None, "user", "Is the mug in stock?") + cc_line(
        "a1", "u1", "assistant", "PLACEHOLDER"
    ).replace(b"PLACEHOLDER", b"Yes \\ud83d")

    [session] = sessions_of(data, "s.jsonl")

    assert session.messages[1]["content"] == "Yes \ud83d"


def test_a_huge_bad_value_is_not_echoed_whole() -> None:
    data = cc_line("u1", None, "user", "hi") + (
        b'{"type": "assistant", "uuid": "a", "message": {"role": "'
        + b"x" * 5000
        + b'", "content": []}}\n'
    )

    [problem] = problems_of(data, "s.jsonl")

    assert problem.field == "message.role"
    assert len(str(problem)) < 200


def claude_ai_message(uuid: str, parent: str, sender: str, text: str) -> dict[str, Any]:
    return {
        "uuid": uuid,
        "parent_message_uuid": parent,
        "sender": sender,
        "text": text,
        "content": [],
    }


def test_claude_ai_retries_are_branches() -> None:
    root = "00000000-0000-4000-8000-000000000000"
    conversation = {
        "uuid": "conv-2",
        "name": "Retry",
        "chat_messages": [
            claude_ai_message("m1", root, "human", "A haiku?"),
            claude_ai_message("m2", "m1", "assistant", "First try."),
            claude_ai_message("m3", "m1", "assistant", "Second try."),
        ],
    }

    [session] = sessions_of(json.dumps([conversation]).encode(), "conversations.json")

    assert [m["content"] for m in session.messages] == ["A haiku?", "Second try."]
    assert [[m["content"] for m in b] for b in session.branches] == [["A haiku?", "First try."]]
    assert session.extra["branch_forks"] == [1]


def test_claude_ai_problems_name_the_conversation_and_field() -> None:
    bad = {**CLAUDE_AI_EXPORT[0], "chat_messages": [{"sender": "robot", "text": "x"}]}
    export = [bad, *CLAUDE_AI_EXPORT]

    found = list(parse(io.BytesIO(json.dumps(export).encode()), "conversations.json"))

    assert [type(item).__name__ for item in found] == ["FormatProblem", "ParsedSession"]
    problem = found[0]
    assert isinstance(problem, FormatProblem)
    assert (problem.location, problem.field) == ("conversation 1", "chat_messages[0].sender")

    [problem] = problems_of(json.dumps(CLAUDE_AI_EXPORT).encode()[:-30], "conversations.json")
    assert problem.location == "conversation 1"
    assert "invalid JSON" in problem.message


def test_a_file_of_garbage_lines_gets_a_few_warnings_and_a_count() -> None:
    data = cc_line("u1", None, "user", "hi") + b"{not json\n" * 500

    found, session = warnings_and_session(data, "s.jsonl")

    assert len(found) == 21
    assert found[0].location == "line 2"
    assert found[-1].message == "and 480 more damaged lines skipped"
    assert [m["content"] for m in session.messages] == ["hi"]


def test_a_file_of_nothing_but_damaged_lines_is_refused_and_says_why() -> None:
    cut = cc_line("u1", None, "user", "hi")[:90] + b"\n"  # a Claude Code line, cut short
    [*_, problem] = problems_of(cut + b"\x00" * 64 + b"\n", "s.jsonl")
    assert not problem.warning
    assert "no line could be read but damaged ones" in problem.message


def test_claude_code_sidechains_in_the_session_file_become_children() -> None:
    # Older Claude Code wrote a Task subagent's lines into the session file itself.
    data = b"".join(
        [
            cc_line("u1", None, "user", "Research it."),
            cc_line("s1", None, "user", "Sub-task prompt.", isSidechain=True),
            cc_line("s2", "s1", "assistant", "Sub-task answer.", isSidechain=True),
            cc_line("a1", "u1", "assistant", "Done."),
        ]
    )

    [session] = sessions_of(data, "s.jsonl")

    assert [m["content"] for m in session.messages] == ["Research it.", "Done."]
    [child] = session.children
    assert [m["content"] for m in child.messages] == ["Sub-task prompt.", "Sub-task answer."]
    assert child.original_id == "s1/sidechain-1"
    assert child.extra["parent_session_id"] == "s1"
    assert session.branches == []


# -- fuzz -------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)


def small_samples() -> list[tuple[str, bytes]]:
    files = [SHORT, TOOL_HEAVY, SIMONW, CODEX_SMALL, CHATGPT_EXPORT, GEMINI]
    documents = {
        "request.json": ANTHROPIC_REQUEST,
        "conversations.json": CLAUDE_AI_EXPORT,
        "session-1.json": GEMINI_TOOLS,
    }
    return [(path.name, path.read_bytes()) for path in files] + [
        (name, json.dumps(document).encode()) for name, document in documents.items()
    ]


def places(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    children = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, child in children:
        yield from places(child, (*path, key))


def replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    parent = value
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = new
    return value


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_no_mutation_of_a_valid_file_makes_a_parser_raise(data: st.DataObject) -> None:
    name, raw = data.draw(st.sampled_from(small_samples()))
    if name.endswith(".jsonl"):
        lines = raw.splitlines(keepends=True)
        index = data.draw(st.integers(0, len(lines) - 1))
        record = json.loads(lines[index])
        path = data.draw(st.sampled_from(list(places(record))))
        lines[index] = json.dumps(replaced(record, path, data.draw(JSON_VALUES))).encode() + b"\n"
        mutated = b"".join(lines)
    else:
        document = json.loads(raw)
        path = data.draw(st.sampled_from(list(places(document))))
        mutated = json.dumps(replaced(document, path, data.draw(JSON_VALUES))).encode()
    mutated = (
        mutated[: data.draw(st.integers(0, len(mutated)))] if data.draw(st.booleans()) else mutated
    )

    if detect(mutated[: 64 * 1024], name) in MOTUS_FORMATS:
        return  # mutated into a Motus format: the Motus importer reads those

    found = list(parse(io.BytesIO(mutated), name))

    assert found
    for item in found:
        assert isinstance(item, ParsedSession | FormatProblem)
        if isinstance(item, FormatProblem):
            assert item.source == name
            assert len(str(item)) < 1000
        else:
            assert all(
                m["role"] in ("system", "developer", "user", "assistant", "tool")
                for m in item.messages
            )


HOSTILE: list[Any] = [None, [], {}, 7, "x", [{}]]


def one_line_of_each_kind(lines: list[bytes]) -> list[int]:
    """Indexes of the first line of each (type, payload type, content shape) in a JSONL file."""
    seen: dict[str, int] = {}
    for index, line in enumerate(lines):
        record = json.loads(line)
        payload = record.get("payload") if isinstance(record.get("payload"), dict) else {}
        content = (record.get("message") or {}).get("content")
        shape = [b.get("type") for b in content] if isinstance(content, list) else type(content)
        seen.setdefault(f"{record.get('type')}/{payload.get('type')}/{shape}", index)
    return sorted(seen.values())


def assert_parses_or_refuses(data: bytes, name: str) -> None:
    if detect(data[: 64 * 1024], name) in MOTUS_FORMATS:
        return
    found = list(parse(io.BytesIO(data), name))
    assert found
    assert all(isinstance(item, ParsedSession | FormatProblem) for item in found)


def test_every_field_of_every_format_survives_hostile_values() -> None:
    for name, raw in small_samples():
        if name.endswith(".jsonl"):
            lines = raw.splitlines(keepends=True)
            for index in one_line_of_each_kind(lines):
                record = json.loads(lines[index])
                for path in places(record):
                    for value in HOSTILE:
                        changed = replaced(json.loads(lines[index]), path, value)
                        line = json.dumps(changed).encode() + b"\n"
                        assert_parses_or_refuses(
                            b"".join([*lines[:index], line, *lines[index + 1 :]]), name
                        )
        else:
            for path in places(json.loads(raw)):
                for value in HOSTILE:
                    assert_parses_or_refuses(
                        json.dumps(replaced(json.loads(raw), path, value)).encode(), name
                    )


def test_a_gzip_file_cut_before_any_text_is_a_problem() -> None:
    data = gzip.compress(CODEX_SMALL.read_bytes())[:10]

    found = list(parse(io.BytesIO(data), "rollout.jsonl.gz"))

    assert not any(isinstance(item, ParsedSession) for item in found)
    assert any(isinstance(item, FormatProblem) and not item.warning for item in found)
    assert "the gzip stream breaks after 0 bytes" in str(found[-1])


@pytest.mark.parametrize("cut", [2000, -10])
def test_a_gzip_file_cut_short_gives_what_it_holds_and_warns_of_the_cut(cut: int) -> None:
    plain = CODEX_SMALL.read_bytes()
    data = gzip.compress(plain)[:cut]

    found = list(parse(io.BytesIO(data), "rollout.jsonl.gz"))

    [session] = [item for item in found if isinstance(item, ParsedSession)]
    whole = next(i for i in parse(io.BytesIO(plain), "r.jsonl") if isinstance(i, ParsedSession))
    assert session.messages == whole.messages[: len(session.messages)]
    assert session.messages
    problems = [item for item in found if isinstance(item, FormatProblem)]
    assert all(problem.warning for problem in problems)
    assert "the gzip stream breaks after" in str(problems[-1])
    assert "the rest of the file is lost" in str(problems[-1])
    if cut > 0:
        assert len(session.messages) < len(whole.messages)
