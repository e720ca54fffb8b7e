"""Tool-result clearings in the database log store and on the pages (issue 28, point 5)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from memory import ChatMessage, CompactionMemory, CompactionMemoryConfig, InMemoryLogStore
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import ContextChange, Session

from .helpers import confirmation_form, logged_in

pytestmark = pytest.mark.django_db

BIG = "reservation JG7FMM: flight HAT170 from JFK to SFO, seat 12A, paid by gift_card_1 " * 12


def cleared_log(
    *, undo: bool = False, clear: bool = True
) -> tuple[str, list[dict[str, Any]], CompactionMemory]:
    """A session with four tool rounds at a 1,200-token threshold, clearing on:
    the old results are cleared before any summary is written (``clear=False``:
    clearing off, at a threshold nothing reaches)."""
    session_id = uuid.uuid4().hex
    store = InMemoryLogStore()
    memory = CompactionMemory(
        config=CompactionMemoryConfig(
            session_id=session_id,
            token_threshold=1_200 if clear else 100_000,
            compact_model_name="offline",
            clear_tool_results=clear,
            clear_keep_tool_results=1,
        ),
        log_store=store,
        model_name="gpt-4o",
    )
    memory.set_system_prompt("You are a booking assistant.")

    async def run() -> None:
        await memory.add_message(ChatMessage.user("Check my reservations."))
        for n in range(4):
            function = {"name": "get_reservation_details", "arguments": "{}"}
            call = {"id": f"call_{n}", "type": "function", "function": function}
            await memory.add_message(
                ChatMessage.from_dict({"role": "assistant", "content": None, "tool_calls": [call]})
            )
            await memory.add_message(
                ChatMessage.tool(f"{n}: {BIG}", f"call_{n}", "get_reservation_details")
            )
            await memory.add_message(ChatMessage.assistant(f"Reservation {n} is confirmed."))
        if undo:
            memory.restore_tool_results("check the originals")
        await memory.flush()

    asyncio.run(run())
    return session_id, list(store.read(session_id)), memory


def stored(owner: User, *, undo: bool = False) -> tuple[Session, list[dict[str, Any]], Any]:
    session_id, records, memory = cleared_log(undo=undo)
    assert any(r["type"] == "tool_results_cleared" for r in records)
    assert not any(r["type"] == "compaction" for r in records)  # clearing was enough
    DatabaseLogStore().extend(session_id, records)
    Session.objects.filter(public_id=session_id).update(owner=owner)
    return Session.objects.get(public_id=session_id), records, memory


def test_the_store_keeps_clearings_exactly_and_counts_them(owner: User) -> None:
    session, records, memory = stored(owner)

    assert list(DatabaseLogStore().read(session.public_id)) == records
    clearings = [r for r in records if r["type"] == "tool_results_cleared"]
    assert session.clearing_count == len(clearings)
    row = session.context_changes.filter(kind=ContextChange.Kind.TOOL_RESULTS_CLEARED).first()
    assert row is not None
    assert (row.tokens_before, row.tokens_after) == (
        clearings[0]["tokens_before"],
        clearings[0]["tokens_after"],
    )
    restored = CompactionMemory.restore_from_log(session.public_id, log_store=DatabaseLogStore())
    assert [m.to_dict() for m in restored.get_context()] == [
        m.to_dict() for m in memory.get_context()
    ]


def test_an_undone_clearing_restores_from_the_database_with_the_results_whole(
    owner: User,
) -> None:
    session, records, memory = stored(owner, undo=True)
    undone = next(r for r in records if r["type"] == "tool_results_restored")["reverts"]
    page = logged_in(owner).get(reverse("dashboard:session_detail", args=[session.public_id]))
    assert f"a stub in the context (clearing {undone})" not in page.content.decode()
    restored = CompactionMemory.restore_from_log(session.public_id, log_store=DatabaseLogStore())
    context = restored.get_context()
    assert [m.to_dict() for m in context] == [m.to_dict() for m in memory.get_context()]
    assert all(BIG in m.text for m in context if m.role == "tool")


def test_the_session_page_chart_and_trace_show_the_clearing(owner: User) -> None:
    session, records, _ = stored(owner)
    first = next(r for r in records if r["type"] == "tool_results_cleared")
    client = logged_in(owner)

    page = client.get(reverse("dashboard:session_detail", args=[session.public_id]))
    html = page.content.decode()
    assert page.status_code == 200
    assert "Old tool results cleared" in html
    assert f"{first['tokens_before']:,} &rarr; {first['tokens_after']:,} tokens" in html
    assert "<code>get_reservation_details</code> <code>call_0</code>" in html
    assert 'class="marker marker-cleared"' in html  # on the chart
    assert html.count(f"a stub in the context (clearing {first['clearing_number']})") == len(
        first["cleared"]
    )

    trace = client.get(
        reverse("dashboard:session_trace", args=[session.public_id]),
        {"kind": "tool_results_cleared"},
    ).content.decode()
    assert "old tool results cleared</a> after #" in trace
    assert "Nothing logged of this kind." not in trace


def test_the_step_view_shows_which_results_became_stubs(owner: User) -> None:
    session, records, _ = stored(owner)
    first = next(r for r in records if r["type"] == "tool_results_cleared")
    stubbed = first["cleared"][0]["seq"]
    reply = next(
        r["seq"]
        for r in records
        if r["type"] == "message"
        and r["seq"] > first["through_seq"]
        and r["message"]["role"] == "assistant"
    )
    html = (
        logged_in(owner)
        .get(reverse("dashboard:step_detail", args=[session.public_id, reply]), {"since": 3})
        .content.decode()
    )
    assert "Old tool results cleared" in html
    assert f"#{stubbed}</a> cleared to a stub" in html
    assert "[tool result cleared: get_reservation_details call call_0" in html


def test_a_stub_counts_its_own_tokens_in_what_the_model_saw(owner: User) -> None:
    session, records, _ = stored(owner)
    first = next(r for r in records if r["type"] == "tool_results_cleared")
    item = first["cleared"][0]
    reply = next(r for r in records if r["type"] == "message" and r["seq"] > first["through_seq"])
    from motus_web.dashboard import steps

    message = session.messages.get(seq=reply["seq"])
    live = steps.before(session, message).live
    part = next(p for p in live.parts if p.seq == item["seq"])
    assert part.tokens == item["stub_tokens"]  # not the whole result's, which the log states
    assert live.tokens + live.tool_tokens <= live.estimate  # the parts fit in the estimate


def test_compact_now_can_clear_old_tool_results_first_and_summarise_nothing(owner: User) -> None:
    session_id, records, _ = cleared_log(clear=False)
    DatabaseLogStore().extend(session_id, records)
    Session.objects.filter(public_id=session_id).update(owner=owner)
    session = Session.objects.get(public_id=session_id)
    client = logged_in(owner)
    page = client.get(reverse("dashboard:session_detail", args=[session_id])).content.decode()
    assert 'name="clear_first"' in page
    action, form = confirmation_form(page, reverse("dashboard:compact_now", args=[session_id]))

    response = client.post(action, {**form, "clear_first": "1", "instructions": ""})

    change = session.context_changes.get(kind=ContextChange.Kind.TOOL_RESULTS_CLEARED)
    assert response.status_code == 303
    assert response["Location"].endswith(f"#change-{change.position}")
    assert change.record_extra["trigger"] == "manual"
    assert not session.compaction_events.exists()  # far under the threshold: no summary
    restored = CompactionMemory.restore_from_log(session_id, log_store=DatabaseLogStore())
    assert restored.clearing_in_force == 1


def test_a_what_if_replay_can_clear_old_tool_results_first(owner: User) -> None:
    original, _, _ = stored(owner)
    client = logged_in(owner)
    form = client.get(f"/sessions/{original.public_id}/replay/").content.decode()
    assert 'name="clear_tool_results"' in form
    response = client.post(
        f"/sessions/{original.public_id}/replay/",
        {
            "token_threshold": 1_200,
            "safety_ratio": 0.75,
            "model_name": "gpt-4o",
            "max_tool_result_tokens": 50_000,
            "compactor": "offline",
            "clear_tool_results": "on",
            "clear_keep_tool_results": 2,
        },
    )
    assert response.status_code == 302
    replay = Session.objects.get(parent=original)
    assert replay.config["clear_tool_results"] is True
    assert replay.config["clear_keep_tool_results"] == 2


def test_the_session_page_undoes_the_newest_clearing_and_refuses_an_older_one(
    owner: User,
) -> None:
    session, records, _ = stored(owner)
    numbers = [r["clearing_number"] for r in records if r["type"] == "tool_results_cleared"]
    newest = numbers[-1]
    client = logged_in(owner)
    page = client.get(reverse("dashboard:session_detail", args=[session.public_id])).content
    confirm_url = reverse(
        "dashboard:restore_tool_results_confirm", args=[session.public_id, newest]
    )
    assert confirm_url in page.decode()

    action, form = confirmation_form(
        client.get(confirm_url).content.decode(),
        reverse("dashboard:restore_tool_results", args=[session.public_id, newest]),
    )
    answer = client.post(action, {**form, "reason": "the agent needs them"})

    assert answer.status_code == 303
    last = list(DatabaseLogStore().read(session.public_id))[-1]
    assert (last["type"], last["reverts"], last["reason"]) == (
        "tool_results_restored",
        newest,
        "the agent needs them",
    )
    if len(numbers) > 1:  # the clearing before it is the newest in force now
        session.refresh_from_db()
        older = numbers[-2]
        other = reverse("dashboard:restore_tool_results_confirm", args=[session.public_id, older])
        action, form = confirmation_form(
            client.get(other).content.decode(),
            reverse("dashboard:restore_tool_results", args=[session.public_id, older]),
        )
        assert client.post(action, form).status_code == 303


def test_undoing_a_clearing_that_is_not_in_force_is_refused_and_logs_nothing(
    owner: User,
) -> None:
    session, records, _ = stored(owner, undo=True)
    undone = next(r for r in records if r["type"] == "tool_results_restored")["reverts"]
    client = logged_in(owner)
    confirm_url = reverse(
        "dashboard:restore_tool_results_confirm", args=[session.public_id, undone]
    )
    action, form = confirmation_form(
        client.get(confirm_url).content.decode(),
        reverse("dashboard:restore_tool_results", args=[session.public_id, undone]),
    )
    before = session.record_count

    answer = client.post(action, form)

    assert answer.status_code == 409
    assert "Nothing was restored" in answer.content.decode()
    session.refresh_from_db()
    assert session.record_count == before
