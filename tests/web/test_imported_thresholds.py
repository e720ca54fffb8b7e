"""An imported agent session has one compaction threshold, within the window the
agent ran with, on every page that shows it and in the memory that acts on it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from motus_web.chat.turns import restore_memory
from motus_web.providers import ChatModel
from motus_web.sessions import memories
from motus_web.sessions.importers import ImportOptions, import_path
from motus_web.sessions.memories import file_limits
from motus_web.sessions.models import Message, Session
from motus_web.sessions.operations import writing

from .helpers import logged_in
from .test_agent_formats import CODEX_BIG, COMPACTED, DATA

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        not DATA.is_dir(), reason=f"the shared agent-session files are not at {DATA}"
    ),
]

# Where each page states the threshold (the figure in group 1, commas allowed).
SHOWN = {
    "list": r"<title>[^<]* of the threshold \(([\d,]+) tokens\)</title>",
    "gauge": r"Compacts at</dt><dd>([\d,]+)</dd>",
    "chart": r"threshold:? ([\d,]+) tokens",
    "context": r"Compaction runs at ([\d,]+)\.",
    "step": r"Compaction threshold</dt><dd>([\d,]+) \(",
    "undo": r"of the compaction threshold \(([\d,]+)\)",
    "fork": r"of the compaction threshold \(([\d,]+)\)",
    "rewind": r"of the compaction threshold \(([\d,]+)\)",
    "chat": r'data-threshold="(\d+)"',
}


def pages(session: Session) -> dict[str, str]:
    sid = session.public_id
    last_reply = Message.objects.filter(session=session, role="assistant").latest("seq").seq
    last = session.message_count - 1
    return {
        "list": reverse("dashboard:session_list"),
        "gauge": reverse("dashboard:session_detail", args=[sid]),
        "chart": reverse("dashboard:session_detail", args=[sid]),
        "context": reverse("dashboard:session_context", args=[sid]),
        "step": reverse("dashboard:step_detail", args=[sid, last_reply]),
        "undo": reverse("dashboard:undo_confirm", args=[sid]),
        "fork": reverse("dashboard:fork_confirm", args=[sid, last]),
        "rewind": reverse("dashboard:rewind_confirm", args=[sid, last - 1]),
        "chat": reverse("chat:chat", args=[sid]),
    }


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        # Claude Code's own trigger: its 200,000-token window less its autocompact buffer.
        (COMPACTED, 167_000),
        # The library's ratio (0.75) of the 258,400-token window the rollout names.
        (CODEX_BIG, 193_800),
    ],
)
def test_every_page_and_the_acting_memory_use_one_threshold_within_the_files_window(
    owner: User, path: Path, expected: int
) -> None:
    import_path(path, ImportOptions(owner=owner))
    session = Session.objects.get(parent__isnull=True)
    limits = file_limits(session.record_extra)
    assert limits is not None
    window = limits["window"]
    assert isinstance(window, int)

    threshold = memories.threshold_of(session)

    assert threshold == expected
    assert threshold < window
    client = logged_in(owner)
    for name, url in pages(session).items():
        response = client.get(url)
        assert response.status_code == 200, name
        shown = re.findall(SHOWN[name], response.content.decode())
        assert shown, f"the {name} page states no threshold"
        assert {int(figure.replace(",", "")) for figure in shown} == {threshold}, name
    # The memory an action or a chat turn restores compacts at that threshold too.
    assert memories.restore(session).token_threshold == threshold
    assert memories.restore_view(session).token_threshold == threshold
    with writing(session, "test", as_of=session.record_count) as memory:
        assert memory.token_threshold == threshold
    model = ChatModel(name="same", provider="openai", model=session.model_name, api_key="k")
    assert restore_memory(session, model, model.client()).token_threshold == threshold


def test_a_threshold_of_the_sessions_own_is_kept_under_the_files_and_lowered_above_it() -> None:
    claude_code = {"window": 200_000, "threshold": 167_000}
    codex = {"window": 258_400, "threshold": None}

    opus = "claude-opus-4-6"  # a 1,000,000-token window in the library's table
    assert memories.threshold_for({"token_threshold": 3_000}, opus, claude_code) == 3_000
    assert memories.threshold_for({"token_threshold": 500_000}, opus, claude_code) == 167_000
    assert memories.threshold_for({"safety_ratio": 0.5}, "gpt-5.3-codex", codex) == 129_200
    assert memories.threshold_for({}, "gpt-5.3-codex", None) == 272_000  # the library's own
