"""Evidence a person can read: tool arguments and results pretty-printed, long ones folded."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from motus_web.sessions.log_store import DatabaseLogStore
from tests.test_log_store_contract import message, meta

from .helpers import logged_in

pytestmark = pytest.mark.django_db


def test_tool_call_arguments_are_pretty_printed_in_the_timeline(owner: User) -> None:
    function = {"name": "search", "arguments": '{"q":"SEA","when":{"day":"2024-05-20"}}'}
    call = {"id": "c1", "type": "function", "function": function}
    log = [
        meta("args"),
        message(0, "user", "Seattle?"),
        message(1, "assistant", None, tool_calls=[call]),
    ]
    DatabaseLogStore(owner=owner).extend("args", log)

    html = logged_in(owner).get(reverse("dashboard:session_detail", args=["args"])).content.decode()

    assert "  &quot;when&quot;: {\n    &quot;day&quot;: &quot;2024-05-20&quot;\n  }" in html


def test_a_100_kb_one_line_json_result_is_pretty_printed_and_folded_under_its_size(
    owner: User,
) -> None:
    rows = [{"flight": f"HAT{n:03d}", "seats": n % 9, "price": 100 + n} for n in range(1500)]
    result = json.dumps(rows, separators=(",", ":"))
    assert len(result) > 60_000
    assert "\n" not in result
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "search", "arguments": '{"q":"SEA"}'},
    }
    log = [
        meta("evidence"),
        message(0, "user", "Flights to Seattle?"),
        message(1, "assistant", None, tool_calls=[call]),
        message(2, "tool", result, tool_call_id="c1"),
    ]
    DatabaseLogStore(owner=owner).extend("evidence", log)
    client = logged_in(owner)

    whole = client.get(reverse("dashboard:message_detail", args=["evidence", 2])).content.decode()
    timeline = client.get(reverse("dashboard:session_detail", args=["evidence"])).content.decode()

    pretty = json.dumps(rows, indent=2)
    assert f"Result: {pretty.count(chr(10)) + 1:,} lines" in whole
    assert '<details class="evidence"><summary>' in whole
    assert "    &quot;flight&quot;: &quot;HAT042&quot;," in whole  # one field a line
    assert "&quot;q&quot;: &quot;SEA&quot;" in timeline  # the arguments, indented
    longest = max(len(line) for line in whole.split("\n"))
    assert longest < 2_000  # no page-wide line
