"""Turn units A/B/C and open tool-call batches, tracked by id."""

from __future__ import annotations

from memory import BasicMemory, ChatMessage
from memory.units import ABANDONED_RESULT_TEXT, TurnTracker

from .conftest import answer, calls, result, user


def classify(*messages: dict) -> list[tuple[str, int, bool]]:
    tracker = TurnTracker()
    out: list[tuple[str, int, bool]] = []
    for m in messages:
        c = tracker.classify(ChatMessage.from_dict(m))
        out.append((c.unit, c.unit_index, c.in_context))
    return out


def test_messages_are_grouped_into_units_a_b_and_c() -> None:
    assert classify(user("q"), calls("a", "b"), result("b"), result("a"), answer("done")) == [
        ("A", 0, True),
        ("B", 1, True),
        ("B", 1, True),
        ("B", 1, True),
        ("C", 2, True),
    ]


def test_a_batch_is_open_until_every_call_has_its_result() -> None:
    tracker = TurnTracker()
    tracker.classify(ChatMessage.from_dict(calls("a", "b")))
    assert not tracker.at_boundary
    tracker.classify(ChatMessage.from_dict(result("a")))
    assert not tracker.at_boundary
    tracker.classify(ChatMessage.from_dict(result("b")))
    assert tracker.at_boundary


def test_a_result_for_an_unknown_or_answered_id_is_an_anomaly_not_a_count() -> None:
    tracker = TurnTracker()
    tracker.classify(ChatMessage.from_dict(calls("a", "b")))
    unknown = tracker.classify(ChatMessage.from_dict(result("zzz")))
    tracker.classify(ChatMessage.from_dict(result("a")))
    duplicate = tracker.classify(ChatMessage.from_dict(result("a")))
    assert not unknown.in_context
    assert "unknown tool call zzz" in (unknown.anomaly or "")
    assert not duplicate.in_context
    assert "second result for tool call a" in (duplicate.anomaly or "")
    assert not tracker.at_boundary  # b is still open: the duplicate did not close it


async def test_an_interrupted_batch_gets_placeholder_results_so_the_context_stays_valid() -> None:
    memory = BasicMemory()
    for m in [user("q"), calls("a", "b"), result("a"), user("never mind")]:
        await memory.add_message(m)
    context = memory.get_context()
    assert [(m.role, m.tool_call_id) for m in context] == [
        ("user", None),
        ("assistant", None),
        ("tool", "a"),
        ("tool", "b"),
        ("user", None),
    ]
    assert context[3].content == ABANDONED_RESULT_TEXT
    trace = memory.get_memory_trace()
    assert trace["anomalies"] == 1


async def test_orphan_results_stay_out_of_the_context_but_are_traced() -> None:
    memory = BasicMemory()
    await memory.add_message(result("ghost"))
    assert memory.get_context() == []
    assert memory.get_memory_trace()["anomalies"] == 1


def test_a_tool_result_before_any_unit_opens_one_so_every_index_is_non_negative() -> None:
    assert classify(result("ghost"), user("hi")) == [("B", 0, False), ("A", 1, True)]
