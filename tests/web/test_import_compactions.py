"""Every compaction shape the tools write becomes a compaction event, and what the
model sees now is the tool's own context after it (fixtures/compactions/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User

from motus_web.sessions.importers import ImportOptions, import_path
from motus_web.sessions.memories import restore
from motus_web.sessions.models import Session

FIXTURES = Path(__file__).parent / "fixtures" / "compactions"
SUMMARY = "it was made in parse.py"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("name", "trigger", "tokens_before", "tool"),
    [
        ("claude-code-auto-2.1.38.jsonl", "auto", 167_094, "Claude Code 2.1.38"),
        ("claude-code-manual-2.1.121.jsonl", "manual", 48_211, "Claude Code 2.1.121"),
        ("codex-compacted-0.104.jsonl", None, None, "Codex"),
        ("codex-compacted-0.46.jsonl", None, None, "Codex"),
    ],
)
def test_a_tools_compaction_is_an_event_and_folds_what_came_before(
    owner: User, name: str, trigger: str | None, tokens_before: int | None, tool: str
) -> None:
    report = import_path(FIXTURES / name, ImportOptions(owner=owner))

    assert report.problems == []
    session = Session.objects.get(public_id=report.imported[0])
    [event] = session.compaction_events.all()
    assert SUMMARY in event.summary
    assert event.model is not None
    assert event.model.startswith(tool)  # the tool that wrote it is "Summarised by"
    if trigger is not None:  # Codex's file names none
        assert event.trigger == trigger
    if tokens_before is not None:  # Codex's file names none: the memory's estimate
        assert event.tokens_before == tokens_before
    context = restore(session).get_context()
    texts = [m.text for m in context]
    assert any(SUMMARY in t for t in texts)
    assert "Fixed in parse.py." not in " ".join(texts)  # folded into the summary
    assert any("Added test_parse.py." in t for t in texts)
