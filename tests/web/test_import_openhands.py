"""OpenHands event streams (``output.jsonl``) import as sessions."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from motus_web.sessions.importers import ImportOptions, import_stream
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import Session

STREAM = Path(__file__).parent / "fixtures" / "openhands" / "output.jsonl"


@pytest.mark.django_db
def test_an_event_stream_imports_its_messages_calls_results_and_compaction(owner: User) -> None:
    report = import_stream(io.BytesIO(STREAM.read_bytes()), "output.jsonl", ImportOptions(owner))

    assert report.problems == []
    session = Session.objects.get(public_id=report.imported[0])
    assert session.system_prompt == "You are OpenHands agent, a helpful AI assistant."
    assert session.model_name == "claude-sonnet-4-5-20250929"
    messages = list(session.messages.order_by("seq"))
    assert [m.role for m in messages] == ["user", "assistant", "tool", "tool", "assistant"]
    assert [c["id"] for c in messages[1].tool_calls] == ["toolu_1", "toolu_2"]  # one response
    assert [m.tool_call_id for m in messages[2:4]] == ["toolu_1", "toolu_2"]
    assert messages[3].content == "from setuptools import setup"
    assert [m.provider_tokens for m in messages] == [None, 5120, None, None, 6250]
    [compaction] = session.compaction_events.all()
    assert compaction.summary == "The agent listed the files and read setup.py."
    meta = next(DatabaseLogStore().read(session.public_id))
    assert [t["function"]["name"] for t in meta["tools"]] == ["execute_bash", "finish"]
    extra = session.record_extra["source_extra"]
    assert extra["llm_metrics"]["accumulated_cost"] == 0.031
    assert extra["skipped_events"] == {"agent_state_changed": 1}


@pytest.mark.django_db
def test_evaluation_records_import_one_session_each_by_instance_id() -> None:
    events = [json.loads(line) for line in STREAM.read_text().splitlines()]
    records = [
        {"instance_id": f"repo__repo-{n}", "history": events, "metrics": {"accumulated_cost": n}}
        for n in (1, 2)
    ]
    data = b"".join(json.dumps(r).encode() + b"\n" for r in records)

    report = import_stream(io.BytesIO(data), "output.jsonl", ImportOptions())
    again = import_stream(io.BytesIO(data), "output.jsonl", ImportOptions())

    assert report.problems == []
    assert [o.kind for o in report.outcomes] == ["new", "new"]
    assert [o.kind for o in again.outcomes] == ["unchanged", "unchanged"]
    assert sorted(Session.objects.values_list("original_id", flat=True)) == [
        "repo__repo-1",
        "repo__repo-2",
    ]
