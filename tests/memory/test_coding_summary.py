"""A coding agent's session summarised: what was asked, done and found, not fragments of code."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memory import ChatMessage
from memory.compaction.code import is_body, reads_as_code, without_bodies
from memory.compaction.ledger import LEDGER_HEADING, Ledger
from memory.compaction.offline import offline_summary
from memory.tokens import TokenCounter

from .conftest import answer, result, user

COUNTER = TokenCounter.for_model("gpt-4o")
APP = "/home/dev/shop/assets/js/app.js"
SOURCE = "\n".join(
    [
        "const pushSelection = (el) => {",
        "  const messageEls = document.querySelectorAll('.message');",
        "  messageEls.forEach((m) => { m.style.borderLeft = ''; });",
        "  if (window.getSelection().isCollapsed) { return; }",
        "};",
        "export default pushSelection;",
    ]
)
# Claude Code's Read shows a file behind a line-number gutter.
LISTING = "\n".join(f"{n:>6}→{line}" for n, line in enumerate(SOURCE.splitlines(), 1))
CODE_NAMES = (
    "querySelectorAll",
    "messageEls",
    "pushSelection",
    "borderLeft",
    "isCollapsed",
    "querySelector",  # from an edit of one line
)


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ],
    }


def session() -> list[ChatMessage]:
    turns = [
        user("Fix the selection highlight in app.js so it clears when the selection collapses."),
        call("c1", "Read", file_path=APP),
        result("c1", LISTING, name="Read"),
        answer("The handler never clears the border when the selection collapses."),
        call("c2", "Edit", file_path=APP, old_string=SOURCE, new_string=SOURCE + "\n// fixed"),
        call("c4", "Edit", file_path=APP, old_string="const el = document.querySelector(sel);"),
        result("c4", f"The file {APP} has been updated.", name="Edit"),
        result("c2", f"The file {APP} has been updated.", name="Edit"),
        call("c3", "Bash", command="npm test -- selection", description="Run the tests"),
        result("c3", "PASS test/selection.test.js\nTests: 12 passed, 12 total", name="Bash"),
        answer("All 12 selection tests pass."),
    ]
    return [ChatMessage.from_dict(m) for m in turns]


@pytest.mark.parametrize(
    ("text", "code"),
    [
        (LISTING, True),
        (SOURCE, True),
        (f"The file {APP} has been updated. Here is a snippet:\n{LISTING}", True),
        ('{"reservation_id": "HATHAT", "flights": [{"flight_number": "HAT136"}]}', False),
        ("PASS test/selection.test.js\nTests: 12 passed, 12 total\nTime: 1.2 s", False),
        ("I went hiking.\nIt rained.\nWe still loved it.", False),
    ],
)
def test_what_reads_as_code(text: str, code: bool) -> None:
    assert reads_as_code(text) is code


@pytest.mark.parametrize(
    ("value", "body"),
    [
        ("const el = document.querySelector(sel);", True),
        ("x = render(rows)", True),
        ("def f():\\n    return 1\\n", True),
        ("OBUT9V", False),
        ("(13 - 11) + (13 - 13)", False),
        ("for 2 adults", False),
        ("git status", False),
    ],
)
def test_what_is_a_body_of_code_in_a_calls_arguments(value: str, body: bool) -> None:
    assert is_body(f'"new_string": "{value}"') is body


def test_a_body_cut_short_still_gives_only_its_paths() -> None:
    cut = '{"file_path": "src/a.py", "content": "import os\\nos.remove(\\"/tmp/x.txt\\")\\nx = 1'
    assert without_bodies(cut) == '{"file_path": "src/a.py", "content": /tmp/x.txt'


def test_the_ledger_carries_the_paths_of_code_but_not_its_names() -> None:
    messages = session()
    ledger = Ledger().updated(list(enumerate(messages)))
    values = {entry.value for entry in ledger.entries}

    assert APP in values
    assert "test/selection.test.js" in values  # a test run's output is not code
    assert not values & set(CODE_NAMES)


def test_a_coding_summary_quotes_the_request_the_run_and_the_answers_not_code() -> None:
    messages = session()
    budget = 160
    summary = offline_summary(messages, budget_tokens=budget, counter=COUNTER)

    assert COUNTER.count(summary) <= budget
    assert "Fix the selection highlight in app.js" in summary
    assert "12 passed" in summary
    assert "All 12 selection tests pass." in summary
    assert "The handler never clears the border" in summary
    assert not [name for name in CODE_NAMES if name in summary], summary
    assert LEDGER_HEADING not in summary  # the narrative alone
