"""A fork written to a new file that names its parent imports linked to it (issue 30):
Codex's fork rollout names the thread it copied in ``session_meta.forked_from_id``
(fixtures: tests/web/fixtures/codex-fork, see its README)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User

from motus_web.sessions.importers import ImportOptions, import_path
from motus_web.sessions.models import Session

FIXTURES = Path(__file__).parent / "fixtures" / "codex-fork"
PARENT = FIXTURES / "rollout-2025-11-20T09-00-00-019a4f00-0000-7000-8000-0000000000a1.jsonl"
FORK = FIXTURES / "rollout-2025-11-20T10-00-00-019a4f10-0000-7000-8000-0000000000b2.jsonl"


@pytest.mark.django_db
def test_a_codex_fork_imported_after_its_parent_links_to_it_as_a_fork(owner: User) -> None:
    options = ImportOptions(owner=owner)
    assert import_path(PARENT, options).problems == []
    assert import_path(FORK, options).problems == []

    parent = Session.objects.get(original_id="019a4f00-0000-7000-8000-0000000000a1")
    fork = Session.objects.get(original_id="019a4f10-0000-7000-8000-0000000000b2")
    assert fork.parent_id == parent.pk
    assert fork.lineage == Session.FORK
    assert parent.parent_id is None
    texts = [m.content for m in fork.messages.order_by("seq")]
    assert texts[-1] == "Done: blank lines are skipped and test_empty_line passes."
