"""Typed log records: exact round trips, the recorder's order, reference logs restored."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memory import (
    ChatMessage,
    CompactionMemory,
    CompactionMemoryConfig,
    InMemoryLogStore,
    JSONLLogStore,
    upgrade_records,
)
from memory.log import LogRecord, record_from_dict, record_from_json, records

FIXTURES = Path(__file__).parent / "fixtures"
REFERENCE_LOGS = sorted((FIXTURES / "motus-reference").glob("*.jsonl"))


def test_every_line_of_an_old_format_log_round_trips_exactly() -> None:
    for line in (FIXTURES / "motus-old.jsonl").read_bytes().splitlines():
        record = record_from_json(line)
        assert record.to_dict() == json.loads(line)
        assert json.loads(record.to_json()) == json.loads(line)


@pytest.mark.parametrize(
    "data",
    [
        {"type": "message", "seq": None, "message": {"role": "user", "content": "x"}},
        {"type": "message", "seq": "3", "tokens": True, "message": {"role": "user"}},
        {"type": "compaction", "summary": 7, "replayed_seqs": [1, "2"], "future_field": {"a": 1}},
        {"type": "session_meta", "session_id": "s", "config": "not an object", "title": None},
        {"type": "a_record_type_from_a_newer_library", "ts": "now", "payload": [1, 2]},
        {"type": "reset", "ts": 12, "through_seq": 1.5},
    ],
)
def test_fields_that_do_not_fit_and_unknown_ones_are_kept_exactly(data: dict[str, Any]) -> None:
    assert record_from_dict(data).to_dict() == data


def test_known_fields_are_typed() -> None:
    record = record_from_dict(
        {
            "type": "message",
            "seq": 4,
            "tokens": 12,
            "message": {"role": "tool", "content": "ok", "tool_call_id": "c1"},
            "unit": "B",
        }
    )
    assert isinstance(record, records.MessageRecord)
    assert isinstance(record.message, ChatMessage)
    assert (record.seq, record.tokens, record.unit, record.extra) == (4, 12, "B", {})
    assert record.message.tool_call_ids == ("c1",)


def test_a_record_without_a_type_or_with_a_broken_message_is_refused() -> None:
    from memory import LogCorruptError

    with pytest.raises(LogCorruptError, match="no 'type'"):
        record_from_dict({"seq": 1})
    with pytest.raises(LogCorruptError, match="message record"):
        record_from_dict({"type": "message", "message": {"role": "wizard"}})


async def test_a_listener_hears_each_record_after_the_store_has_it() -> None:
    store = InMemoryLogStore()
    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="s1", token_threshold=200),
        log_store=store,
        compact_fn=lambda messages, prompt: "short summary",
    )
    heard: list[str] = []

    def listener(record: LogRecord) -> None:
        stored = [r["type"] for r in store.read("s1")]
        assert stored[-1] == record.type_name  # already stored when heard
        heard.append(record.type_name)

    memory.add_listener(listener)
    for i in range(6):
        await memory.add_message({"role": "user", "content": f"question {i} " + "word " * 40})
        await memory.add_message({"role": "assistant", "content": "answer " * 30})
    memory.revert_last_compaction("operator said so")
    assert heard == [r["type"] for r in store.read("s1")]
    assert {"session_meta", "message", "compaction", "compaction_revert"} <= set(heard)


async def test_async_listeners_are_awaited_and_a_broken_one_is_not_fatal() -> None:
    memory = CompactionMemory(config=CompactionMemoryConfig(session_id="s2"))
    heard: list[int | None] = []

    async def listener(record: LogRecord) -> None:
        if isinstance(record, records.MessageRecord):
            heard.append(record.seq)

    def broken(record: LogRecord) -> None:
        raise RuntimeError("listener bug")

    memory.add_listener(broken)
    memory.add_listener(listener)
    await memory.add_message({"role": "user", "content": "hi"})
    assert heard == [0]  # awaited before add_message returned, with no log store at all
    memory.remove_listener(broken)
    await memory.add_message({"role": "assistant", "content": "hello"})
    assert heard == [0, 1]


@pytest.mark.parametrize("log", REFERENCE_LOGS, ids=lambda p: p.stem)
def test_a_reference_log_restores_to_the_context_the_reference_held_live(log: Path) -> None:
    live = json.loads(log.with_suffix("").with_suffix(".live.json").read_text())
    restored = CompactionMemory.restore_from_log(log.stem, log_base_path=log.parent)
    assert restored.restore_problems == []
    assert [m.to_api_dict() for m in restored.get_context()] == live


@pytest.mark.parametrize("log", REFERENCE_LOGS, ids=lambda p: p.stem)
def test_an_upgraded_reference_log_restores_the_same_context(log: Path, tmp_path: Path) -> None:
    live = json.loads(log.with_suffix("").with_suffix(".live.json").read_text())
    original = [json.loads(line) for line in log.read_text().splitlines()]
    upgraded = upgrade_records(original)
    store = JSONLLogStore(tmp_path)
    for record in upgraded:
        store.append(log.stem, record)
    restored = CompactionMemory.restore_from_log(log.stem, log_store=store)
    assert [m.to_api_dict() for m in restored.get_context()] == live
    # What each original record said stands; the upgrade only adds.
    for before, after in zip(original, upgraded, strict=True):
        assert after | before == after


@pytest.mark.parametrize(
    "ns", [0, 1_764_608_400_000_000_000, 1_764_608_400_123_456_789, 1_764_608_459_999_999_999]
)
def test_now_iso_is_datetime_isoformat_of_the_moment(
    ns: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(records.time, "time_ns", lambda: ns)
    second, micro = divmod(ns // 1_000, 1_000_000)
    moment = datetime.fromtimestamp(second, UTC).replace(microsecond=micro)
    assert records.now_iso() == moment.isoformat()
