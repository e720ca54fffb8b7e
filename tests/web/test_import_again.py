"""Importing the files people have again and again: every real file in the shared
data, twice, then a copy of it that grew, leaves one session per conversation
with every message once."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from motus_web.sessions.importers import ImportOptions, ImportReport, import_stream
from motus_web.sessions.models import Message, Session

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
if not DATA.is_dir():
    DATA = Path("/work/shared/data")
GROWN = ("A question asked after the first import", "Its answer, also new")


def _jsonl(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def _lines(*items: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(item).encode() + b"\n" for item in items)


def grow_claude_code(data: bytes) -> bytes:
    lines = _jsonl(data)
    last = [line for line in lines if isinstance(line.get("uuid"), str)][-1]
    common: dict[str, Any] = {
        k: last[k] for k in ("sessionId", "isSidechain", "version", "agentId") if k in last
    }
    question: dict[str, Any] = {
        **common,
        "type": "user",
        "uuid": "grown-question",
        "parentUuid": last["uuid"],
        "timestamp": "2027-01-01T00:00:00.000Z",
        "message": {"role": "user", "content": GROWN[0]},
    }
    answer: dict[str, Any] = {
        **common,
        "type": "assistant",
        "uuid": "grown-answer",
        "parentUuid": "grown-question",
        "timestamp": "2027-01-01T00:00:01.000Z",
        "message": {
            "id": "msg_grown",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": GROWN[1]}],
        },
    }
    return data.rstrip(b"\n") + b"\n" + _lines(question, answer)


def grow_codex(data: bytes) -> bytes:
    def item(role: str, kind: str, text: str) -> dict[str, Any]:
        payload = {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}
        at = "2027-01-01T00:00:00.000Z"
        return {"timestamp": at, "type": "response_item", "payload": payload}

    grown = _lines(item("user", "input_text", GROWN[0]), item("assistant", "output_text", GROWN[1]))
    return data.rstrip(b"\n") + b"\n" + grown


def grow_motus_log(data: bytes) -> bytes:
    lines = _lines(
        {"type": "message", "ts": "2027-01-01T00:00:00+00:00", "message": _chat(0)},
        {"type": "message", "ts": "2027-01-01T00:00:01+00:00", "message": _chat(1)},
    )
    return data.rstrip(b"\n") + b"\n" + lines


def _chat(number: int) -> dict[str, Any]:
    return {"role": ("user", "assistant")[number], "content": GROWN[number]}


def grow_chatgpt(data: bytes) -> bytes:
    document = json.loads(data)
    for conversation in document if isinstance(document, list) else [document]:
        parent = conversation["current_node"]
        for number, role in enumerate(("user", "assistant")):
            node_id = f"grown-{number}"
            conversation["mapping"][parent]["children"].append(node_id)
            conversation["mapping"][node_id] = {
                "id": node_id,
                "parent": parent,
                "children": [],
                "message": {
                    "id": f"{node_id}-message",
                    "author": {"role": role, "name": None, "metadata": {}},
                    "create_time": 1798761600.0 + number,
                    "content": {"content_type": "text", "parts": [GROWN[number]]},
                    "status": "finished_successfully",
                    "metadata": {},
                    "recipient": "all",
                },
            }
            parent = node_id
        conversation["current_node"] = parent
    return json.dumps(document).encode()


def grow_gemini(data: bytes) -> bytes:
    document = json.loads(data)
    document["messages"] += [
        {"id": "grown-user", "timestamp": "2027-01-01T00:00:00.000Z", "type": "user"},
        {"id": "grown-gemini", "timestamp": "2027-01-01T00:00:01.000Z", "type": "gemini"},
    ]
    document["messages"][-2]["content"] = GROWN[0]
    document["messages"][-1]["content"] = GROWN[1]
    return json.dumps(document).encode()


def grow_chat_list(data: bytes) -> bytes:
    return json.dumps([*json.loads(data), _chat(0), _chat(1)]).encode()


def grow_runs(data: bytes) -> bytes:
    runs = json.loads(data)
    for run in runs:
        run["traj"] += [_chat(0), _chat(1)]
    return json.dumps(runs).encode()


def grow_swe_agent(data: bytes) -> bytes:
    document = json.loads(data)
    document["history"] += [_chat(0), _chat(1)]
    return json.dumps(document).encode()


GROWERS = {
    "agent-sessions/claude-code": grow_claude_code,
    "agent-sessions/codex-cli": grow_codex,
    "agent-sessions/chatgpt-export": grow_chatgpt,
    "agent-sessions/gemini-cli": grow_gemini,
    "motus-logs/*.jsonl": grow_motus_log,
    "motus-logs/*.live.json": grow_chat_list,
    "tau-bench": grow_runs,
    "swe-agent": grow_swe_agent,
}


def _files() -> list[tuple[Path, Any]]:
    found = []
    for pattern, grow in GROWERS.items():
        folder, _, glob = pattern.partition("/*")
        glob = "*" + glob if glob else "*"
        for path in sorted((DATA / folder).glob(glob)):
            if path.suffix in (".json", ".jsonl", ".traj") and not (
                glob == "*.jsonl" and path.name.endswith(".live.json")
            ):
                found.append((path, grow))
    return found


FILES = _files()


def test_every_file_of_the_shared_data_is_covered() -> None:
    # locomo's conversations are not chat messages (speaker turns with QA): no importer reads them.
    data_files = {
        p
        for p in DATA.rglob("*")
        if p.suffix in (".json", ".jsonl", ".traj") and "locomo" not in p.parts
    }
    assert {path for path, _ in FILES} == data_files


def _import(data: bytes, name: str, owner: User) -> ImportReport:
    report = import_stream(io.BytesIO(data), name, ImportOptions(owner=owner))
    assert report.problems == [], [str(p) for p in report.problems]
    return report


@pytest.mark.django_db
@pytest.mark.parametrize(("path", "grow"), FILES, ids=[str(p.relative_to(DATA)) for p, _ in FILES])
def test_importing_a_file_twice_then_a_grown_copy_keeps_one_session_per_conversation(
    path: Path, grow: Any, owner: User
) -> None:
    data = path.read_bytes()
    first = _import(data, path.name, owner)
    conversations = len(first.outcomes)
    assert conversations
    assert {o.kind for o in first.outcomes} <= {"new", "branched"}
    counts = dict(Session.objects.values_list("public_id", "message_count"))

    again = _import(data, path.name, owner)
    assert [o.kind for o in again.outcomes] == ["unchanged"] * conversations
    assert again.imported == []

    grown = _import(grow(data), path.name, owner)

    assert Session.objects.filter(owner=owner).count() == conversations
    updated = {o.public_id: o.added for o in grown.outcomes if o.kind == "updated"}
    assert updated
    assert set(updated.values()) == {2}
    assert {o.kind for o in grown.outcomes} <= {"updated", "unchanged"}
    for session in Session.objects.filter(owner=owner):
        added = updated.get(session.public_id, 0)
        assert session.message_count == counts[session.public_id] + added
        seqs = list(session.messages.values_list("seq", flat=True))
        assert len(seqs) == len(set(seqs)) == session.message_count
        texts = Counter(
            m.content if isinstance(m.content, str) else json.dumps(m.content)
            for m in Message.objects.filter(session=session)
        )
        for text in GROWN:
            assert sum(n for t, n in texts.items() if text in t) == (1 if added else 0)
