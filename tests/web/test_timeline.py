"""Grouping a page of messages into turn units, and what compaction folded, on unsaved rows."""

from __future__ import annotations

from typing import Any

from motus_web.dashboard import timeline
from motus_web.sessions.models import CompactionEvent, ContextChange, Message
from motus_web.sessions.operations import undoable


def msg(seq: int, role: str, unit: str, index: int, **fields: Any) -> Message:
    return Message(
        seq=seq, position=seq + 1, role=role, unit=unit, unit_index=index, tokens=10, **fields
    )


def call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}


def compaction(position: int, number: int, first: int, last: int, **fields: Any) -> CompactionEvent:
    return CompactionEvent(
        position=position,
        kind="ok",
        number=number,
        summarized_first_seq=first,
        summarized_last_seq=last,
        through_seq=fields.pop("through_seq", last),
        **fields,
    )


def test_a_b_unit_pairs_each_call_with_its_result_by_id() -> None:
    messages = [
        msg(0, "user", "A", 0, content="go"),
        msg(1, "assistant", "B", 1, tool_calls=[call("x"), call("y")]),
        msg(2, "tool", "B", 1, tool_call_id="y", content="Y"),
        msg(3, "tool", "B", 1, tool_call_id="x", content="X"),
        msg(4, "assistant", "C", 2, content="done"),
    ]

    page = timeline.group(messages, [], [], first_page=True)

    assert [(u.kind, u.index) for u in page.units] == [("A", 0), ("B", 1), ("C", 2)]
    b_unit = page.units[1]
    assert len(b_unit.entries) == 1
    results = b_unit.entries[0].results
    assert {k: e.message.seq for k, e in results.items()} == {"x": 3, "y": 2}
    assert (b_unit.message_count, b_unit.tokens, b_unit.tool_calls) == (3, 30, 2)


def test_a_result_whose_call_is_on_an_earlier_page_stands_on_its_own() -> None:
    messages = [msg(50, "tool", "B", 7, tool_call_id="x"), msg(51, "assistant", "C", 8)]

    page = timeline.group(messages, [], [], first_page=False)

    assert [e.message.seq for e in page.units[0].entries] == [50]
    assert page.units[0].entries[0].message.answered_call_ids == ("x",)


def test_messages_in_a_compactions_range_are_folded_except_those_replayed() -> None:
    event = compaction(9, 1, 0, 5, replayed_seqs=[4])
    active = timeline.folds([event])

    assert timeline.folded_by(0, active) is event
    assert timeline.folded_by(4, active) is None
    assert timeline.folded_by(6, active) is None


def test_a_reverted_compaction_folds_nothing() -> None:
    first = compaction(5, 1, 0, 2)
    second = compaction(9, 2, 3, 6)
    revert = CompactionEvent(position=10, kind="revert", reverts=2, through_seq=6)

    active = timeline.folds([first, second, revert])

    assert timeline.folded_by(1, active) is first
    assert timeline.folded_by(4, active) is None


def test_a_reset_clears_everything_before_it() -> None:
    reset = ContextChange(position=4, kind="reset", through_seq=2)

    active = timeline.folds([reset])

    assert timeline.folded_by(0, active) is reset
    assert timeline.folded_by(3, active) is None


def test_events_follow_the_message_they_came_after_and_early_ones_open_page_one() -> None:
    fork = compaction(1, 1, 0, 0, through_seq=-1, trigger="fork")
    fork.summarized_first_seq = None
    later = compaction(5, 2, 0, 1)
    messages = [msg(0, "user", "A", 0), msg(1, "assistant", "C", 1), msg(2, "user", "A", 2)]

    page = timeline.group(messages, [fork, later], [], first_page=True)

    assert page.leading == [fork]
    assert page.units[1].events == [later]
    assert timeline.group(messages, [fork], [], first_page=False).leading == []


def test_an_undo_puts_the_compaction_before_in_force_again() -> None:
    first = compaction(5, 1, 0, 2)
    second = compaction(9, 2, 3, 5)
    revert = CompactionEvent(position=10, kind="revert", reverts=2)
    failed = CompactionEvent(position=11, kind="failed")

    assert undoable([first, failed])[0] is first
    assert undoable([first, second, failed])[0] is second
    assert undoable([first, second, revert])[0] is first
    assert undoable([first, CompactionEvent(position=6, kind="revert", reverts=1)]) == (
        None,
        "Every compaction of this session was undone (1): the context holds all its "
        "messages again.",
    )
    assert undoable([])[0] is None
