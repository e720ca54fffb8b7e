"""Restore from checkpoints (issue 13): the same memory as a full replay, from the log's end.

Hypothesis drives a ``CompactionMemory`` through conversations with
compactions (auto and manual, some failing), reverts, resets, cleared
messages, system-prompt changes and provider usage, then restores the log
both ways: from its latest checkpoints (the default) and by replaying every
record (``full_replay=True``). Both must equal the live memory in everything
a continuation depends on, torn last lines included.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory import ChatMessage, CompactionMemory, CompactionMemoryConfig, Usage
from memory.compaction import checkpoint
from memory.errors import CompactionError
from memory.log import InMemoryLogStore, JSONLLogStore, LogStore, jsonl
from memory.log.logged_message import LoggedMessage
from memory.log.prefix import LogPoint, PointNotFoundError

from .conftest import answer, calls, result, user
from .test_invariants import conversations

MODEL = "gpt-4o"


def state(memory: CompactionMemory) -> dict[str, Any]:
    """Everything a continuation of ``memory`` depends on."""
    out = memory.get_session_state().to_dict()
    out.pop("log_base_path")
    out["config"].pop("log_base_path", None)  # the live memory was given a store, not a folder
    out["calibration"] = memory.calibration.to_dict()
    out["context_tokens"] = memory.estimate_context_tokens()
    out["context"] = [m.to_dict() for m in memory.get_context()]
    return out


async def undo_outcome(memory: CompactionMemory) -> list[dict[str, Any] | str]:
    """What undoing the compactions in force one after another gives, down to
    the first (each undo may read what came before from the log)."""
    outcomes: list[dict[str, Any] | str] = []
    while True:
        try:
            memory.revert_last_compaction("check")
        except CompactionError as error:
            return [*outcomes, f"refused: {error}"]
        await memory.flush()
        outcomes.append(state(memory))


def rewind_target(memory: CompactionMemory, choice: int) -> LogPoint:
    """One of the points a rewind may target now, picked by ``choice``."""
    points = [LogPoint("after_message", seq) for seq in range(memory.next_seq)]
    points += [LogPoint("before_compaction", n) for n in range(1, memory.compaction_count + 1)]
    points += [LogPoint("before_rewind", n) for n in range(1, memory.rewind_count + 1)]
    return points[choice % len(points)]


async def drive(
    store: LogStore, session_id: str, steps: Sequence[tuple[str, Any]], threshold: int
) -> CompactionMemory:
    failing = {"on": False}

    async def summarise(messages: list[ChatMessage], system_prompt: str) -> str:
        if failing["on"]:
            raise RuntimeError("the summariser is down")
        return f"Summary of {len(messages)} messages; first: {messages[0].text[:30]!r}"

    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id=session_id, token_threshold=threshold),
        log_store=store,
        model_name=MODEL,
        compact_fn=summarise,
    )
    memory.set_system_prompt("You are a careful agent.")
    for kind, value in steps:
        if kind == "message":
            message = ChatMessage.coerce(value)
            usage = None
            if message.role == "assistant" and value.get("content") == "usage":
                usage = Usage(input_tokens=int(memory.estimate_context_tokens() * 1.3))
            await memory.add_message(message, usage=usage)
        elif kind == "compact":
            await memory.compact()
        elif kind == "revert":
            with contextlib.suppress(CompactionError):
                memory.revert_last_compaction("test")
        elif kind == "fail":
            failing["on"] = value
        elif kind == "prompt":
            memory.set_system_prompt(value, role="developer" if len(value) % 2 else "system")
        elif kind == "clear":
            memory.clear_messages()
        elif kind == "reset":
            memory.reset()
        elif kind == "rewind" and memory.next_seq:
            target = rewind_target(memory, value)
            try:
                memory.rewind(target, reason="test")
            except (CompactionError, PointNotFoundError):
                pass  # inside a tool round, or a compaction number a reset reused
            else:
                await memory.flush()
                # The rewound context is the log's own state at the target.
                assert memory.get_context() == memory.state_at(target).get_context()
        elif kind == "correct":
            with contextlib.suppress(CompactionError):
                memory.correct_summary(f"Corrected: {value}")
        await memory.flush()
    return memory


@st.composite
def sessions(draw: st.DrawFn) -> list[tuple[str, Any]]:
    steps: list[tuple[str, Any]] = []
    for message in draw(conversations()):
        steps.append(("message", message))
        operation = draw(
            st.sampled_from(
                ["none"] * 12
                + ["compact", "revert", "fail", "prompt", "clear", "rewind", "correct"]
            )
        )
        if operation == "fail":
            steps.append(("fail", draw(st.booleans())))
        elif operation == "rewind":
            steps.append(("rewind", draw(st.integers(0, 10_000))))
        elif operation == "correct":
            steps.append(("correct", draw(st.sampled_from(["order #1001 is in Lyon", "HAT083"]))))
        elif operation == "prompt":
            steps.append(("prompt", draw(st.sampled_from(["Be brief.", "Be thorough now."]))))
        elif operation != "none":
            steps.append((operation, None))
        if draw(st.integers(0, 60)) == 0:
            steps.append(("reset", None))
    return steps


async def both_restores(
    store: LogStore, session_id: str
) -> tuple[CompactionMemory, CompactionMemory]:
    fast = CompactionMemory.restore_from_log(session_id, log_store=store, compact_fn=None)
    full = CompactionMemory.restore_from_log(session_id, log_store=store, full_replay=True)
    return fast, full


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    steps=sessions(),
    threshold=st.sampled_from([250, 600]),
    torn=st.booleans(),
    every=st.sampled_from([2, 3, 1_000]),
)
def test_a_restore_from_checkpoints_equals_a_full_replay_and_the_live_memory(
    tmp_path_factory: pytest.TempPathFactory,
    steps: list[tuple[str, Any]],
    threshold: int,
    torn: bool,
    every: int,
) -> None:
    """``every``: the periodic checkpoints' interval (in messages); 2 and 3 put
    one between most operations."""
    folder = tmp_path_factory.mktemp("logs")
    store = JSONLLogStore(folder)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(checkpoint, "CHECKPOINT_EVERY", every)
        live = asyncio.run(drive(store, "s", steps, threshold))
    if torn:  # a crash mid-write: half of one more record
        with (folder / "s.jsonl").open("ab") as log:
            log.write(b'{"type": "message", "seq": 99999, "mess')
    fast, full = asyncio.run(both_restores(store, "s"))
    assert state(fast) == state(full) == state(live)
    assert [str(p) for p in fast.restore_problems] == [str(p) for p in full.restore_problems]
    assert bool(fast.restore_problems) == torn
    # Undoing the compactions in force, one after another, works (or is
    # refused) the same way.
    assert asyncio.run(undo_outcome(fast)) == asyncio.run(undo_outcome(full))


async def long_session(
    store: LogStore, session_id: str, turns: int, threshold: int = 900
) -> CompactionMemory:
    steps: list[tuple[str, Any]] = []
    for turn in range(turns):
        steps += [
            ("message", user(f"Question {turn}: where is order #{1000 + turn}?")),
            ("message", calls(f"call_{turn}")),
            ("message", result(f"call_{turn}", f"order #{1000 + turn} is in Lyon " * 20)),
            ("message", answer(f"It is in Lyon (turn {turn}).")),
        ]
        if turn == 0:
            steps.append(("prompt", "Be brief."))
    return await drive(store, session_id, steps, threshold=threshold)


def _restored_event(memory: CompactionMemory) -> dict[str, Any]:
    return next(e for e in memory.get_memory_trace()["events"] if e["type"] == "restored")


async def test_a_restore_reads_only_the_end_of_the_log(tmp_path: Path) -> None:
    """Garbage in the first half of a long log changes nothing for a restore
    from checkpoints (it never reads there); a full replay reports it."""
    store = JSONLLogStore(tmp_path)
    live = await long_session(store, "long", turns=60)
    assert live.compaction_count >= 6
    path = tmp_path / "long.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[3] = b"#" * (len(lines[3]) - 1) + b"\n"  # an early message, now unreadable
    path.write_bytes(b"".join(lines))

    fast = CompactionMemory.restore_from_log("long", log_store=store)
    assert state(fast) == state(live)
    assert fast.restore_problems == []
    assert _restored_event(fast)["from_compaction"] == live.compaction_count
    full = CompactionMemory.restore_from_log("long", log_store=store, full_replay=True)
    # The unreadable line, and the message seq missing after it.
    assert {p.line for p in full.restore_problems} == {4}
    assert state(full) == state(live)


async def test_a_restore_starts_at_the_newest_compaction_in_force_and_undo_reads_back_further(
    tmp_path: Path,
) -> None:
    store = JSONLLogStore(tmp_path)
    live = await long_session(store, "undo", turns=30)
    before_undo = state(live)
    live.revert_last_compaction("bad summary")
    restored = CompactionMemory.restore_from_log("undo", log_store=store)
    assert state(restored) == state(live) != before_undo
    # The reverted compaction cannot be a starting point: the one before it is.
    assert _restored_event(restored)["from_compaction"] == live.compaction_count - 1
    # And that one can be undone too: what came before it is read from the log.
    assert restored.revert_last_compaction() == live.compaction_count - 1
    assert live.revert_last_compaction() == live.compaction_count - 1
    assert state(restored) == state(live)


async def test_a_log_written_before_checkpoints_is_replayed_whole(tmp_path: Path) -> None:
    store = JSONLLogStore(tmp_path)
    live = await long_session(store, "old", turns=30)
    path = tmp_path / "old.jsonl"
    old = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    for record in old:
        record.pop("checkpoint", None)
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in old))
    restored = CompactionMemory.restore_from_log("old", log_store=store)
    assert state(restored) == state(live)
    assert _restored_event(restored)["from_compaction"] is None


async def test_a_checkpoint_of_an_unknown_version_is_not_trusted(tmp_path: Path) -> None:
    store = InMemoryLogStore()
    live = await long_session(store, "v", turns=30)
    records = list(store.read("v"))
    for record in records:
        if "checkpoint" in record:
            record["checkpoint"] = {**record["checkpoint"], "version": 99, "next_seq": -5}
    rewritten = InMemoryLogStore()
    for record in records:
        rewritten.append("v", record)
    restored = CompactionMemory.restore_from_log("v", log_store=rewritten)
    assert state(restored) == state(live)
    assert _restored_event(restored)["from_compaction"] is None


async def test_a_log_without_compactions_is_read_once_backwards(tmp_path: Path) -> None:
    store = JSONLLogStore(tmp_path)
    live = await drive(
        store, "short", [("message", user("hi")), ("message", answer("hello"))], 10_000
    )
    with (tmp_path / "short.jsonl").open("ab") as log:
        log.write(b"not json\n")
        os.fsync(log.fileno())
    restored = CompactionMemory.restore_from_log("short", log_store=store)
    assert state(restored) == state(live)
    assert [(p.line, p.torn) for p in restored.restore_problems] == [(4, False)]


async def test_a_log_without_compactions_starts_at_its_newest_periodic_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every ``CHECKPOINT_EVERY`` messages without a compaction in force, a
    ``checkpoint`` record; a restore applies only the records after the
    newest and holds the context's earlier messages unbuilt until read."""
    monkeypatch.setattr(checkpoint, "CHECKPOINT_EVERY", 10)
    store = JSONLLogStore(tmp_path)
    live = await long_session(store, "flat", turns=12, threshold=10**9)  # 48 messages
    assert live.compaction_count == 0
    records = list(store.read("flat"))
    marks = [r for r in records if r["type"] == "checkpoint"]
    assert [m["through_seq"] for m in marks] == [9, 19, 29, 39]
    assert marks[-1]["context_seqs"] == [[0, 39]]
    restored = CompactionMemory.restore_from_log("flat", log_store=store)
    messages = restored._state.messages
    unbuilt = [m for m in messages if isinstance(m, LoggedMessage) and not _built(m)]
    assert unbuilt == messages[:40]  # seqs 0-39 from their records; 40-47 applied
    assert state(restored) == state(live)
    assert restored.restore_problems == []

    # The early system_prompt record edited: the restore never applies it (the
    # checkpoints hold the prompt in force); a full replay does.
    prompt = next(i for i, r in enumerate(records) if r["type"] == "system_prompt")
    path = tmp_path / "flat.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[prompt] = lines[prompt].replace(b"Be brief.", b"Tampered.")
    path.write_bytes(b"".join(lines))
    fast = CompactionMemory.restore_from_log("flat", log_store=store)
    full = CompactionMemory.restore_from_log("flat", log_store=store, full_replay=True)
    assert (fast.system_prompt, full.system_prompt) == ("Be brief.", "Tampered.")


def _built(message: ChatMessage) -> bool:
    try:
        ChatMessage.__dict__["role"].__get__(message, ChatMessage)
    except AttributeError:
        return False
    return True


async def test_a_periodic_checkpoint_is_not_written_while_a_compaction_is_in_force(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoint, "CHECKPOINT_EVERY", 4)
    store = InMemoryLogStore()
    live = await long_session(store, "c", turns=20)
    assert live.compaction_count >= 2
    records = list(store.read("c"))
    first = next(i for i, r in enumerate(records) if r["type"] == "compaction")
    assert any(r["type"] == "checkpoint" for r in records[:first])
    assert not any(r["type"] == "checkpoint" for r in records[first:])


async def test_a_torn_line_that_later_records_follow_is_named_as_a_write_cut_short(
    tmp_path: Path,
) -> None:
    store = JSONLLogStore(tmp_path)
    live = await drive(store, "cut", [("message", user("hi")), ("message", answer("hello"))], 9_000)
    with (tmp_path / "cut.jsonl").open("ab") as log:
        log.write(b'{"type": "message", "seq": 2, "message": {"role": "us')  # the crash
    live = CompactionMemory.restore_from_log("cut", log_store=store)
    await live.add_message(user("still there?"))  # the next append starts a fresh line

    restored = CompactionMemory.restore_from_log("cut", log_store=store, full_replay=True)

    [problem] = restored.restore_problems
    assert "a record cut short by a crash during its write" in str(problem)
    assert "the lines after it are intact" in str(problem)
    assert state(restored) == state(live)


def test_a_backward_read_numbers_its_problems_as_a_forward_read_does(tmp_path: Path) -> None:
    good = b'{"type": "message", "seq": 0}\n'
    lines = [good, b"not json\n", b"\n", good, b"[1]\n", good, b"{broken\n", good, b'{"type"']
    (tmp_path / "odd.jsonl").write_bytes(b"".join(lines))
    store = JSONLLogStore(tmp_path)
    forward: list[Any] = []
    backward: list[Any] = []

    records = list(store.read("odd", forward))
    reversed_records = list(store.read_reversed("odd", backward))

    assert reversed_records == records[::-1]
    assert [(p.line, p.error, p.torn) for p in backward[::-1]] == [
        (p.line, p.error, p.torn) for p in forward
    ]
    assert [p.line for p in forward] == [2, 5, 7, 9]


async def flat_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CompactionMemory:
    """48 messages without a compaction, a checkpoint every 10 (the last at seq 39)."""
    monkeypatch.setattr(checkpoint, "CHECKPOINT_EVERY", 10)
    return await long_session(JSONLLogStore(tmp_path), "flat", turns=12, threshold=10**9)


async def test_messages_restored_from_a_jsonl_log_are_held_as_their_lines_until_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A JSONL log hands over each record's line: a context message before
    the checkpoint is kept as its line, not the dict it parsed to, and built
    from it on its first read (its context form: a cut tool result's cut)."""
    monkeypatch.setattr(checkpoint, "CHECKPOINT_EVERY", 10)
    store = JSONLLogStore(tmp_path)
    memory = CompactionMemory(
        config=CompactionMemoryConfig(
            session_id="cut", token_threshold=10**9, max_tool_result_tokens=30
        ),
        log_store=store,
        model_name=MODEL,
    )
    for turn in range(3):
        await memory.add_message(user(f"Where is order #{turn}?"))
        await memory.add_message(calls(f"call_{turn}"))
        await memory.add_message(result(f"call_{turn}", f"order #{turn} is in Lyon " * 40))
        await memory.add_message(answer("In Lyon."))
    await memory.flush()
    logged = [r for r in store.read("cut") if r["type"] == "message"]
    assert sum("context_message" in r for r in logged) == 3  # each long result was cut

    restored = CompactionMemory.restore_from_log("cut", log_store=store)

    messages = restored._state.messages
    assert all(isinstance(m, LoggedMessage) and not _built(m) for m in messages[:10])
    sources = [object.__getattribute__(m, "_logged") for m in messages[:10]]
    assert all(isinstance(source, bytes) for source in sources)
    assert [orjson.loads(source)["seq"] for source in sources] == list(range(10))
    assert messages == memory._state.messages  # built: the context forms, cuts included
    assert [object.__getattribute__(m, "_logged") for m in messages[:10]] == [None] * 10
    assert state(restored) == state(memory)


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda line: line.replace(b'"content":"', b'"content":"\xff', 1), id="utf-8"),
        pytest.param(lambda line: line.replace(b"}", b"", 1), id="json"),
    ],
)
async def test_a_damaged_line_among_the_context_messages_is_reported_by_the_restore(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: Any
) -> None:
    """Every line a restore keeps unparsed has been parsed once by it: a
    line that is not JSON, or not UTF-8, is a problem of the restore, named
    by its line number (as a full replay names it), never an error at a
    later read of the message."""
    await flat_session(tmp_path, monkeypatch)
    path = tmp_path / "flat.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    number = next(i for i, line in enumerate(lines) if b'"seq":4,' in line) + 1  # a question
    assert damage(lines[number - 1]) != lines[number - 1]
    lines[number - 1] = damage(lines[number - 1])
    path.write_bytes(b"".join(lines))

    restored = CompactionMemory.restore_from_log("flat", log_store=JSONLLogStore(tmp_path))
    full = CompactionMemory.restore_from_log(
        "flat", log_store=JSONLLogStore(tmp_path), full_replay=True
    )

    assert number in {p.line for p in restored.restore_problems}
    assert [str(p) for p in restored.restore_problems] == [str(p) for p in full.restore_problems]
    assert 4 not in [meta.seq for meta in restored._state.meta]
    assert [m.to_dict() for m in restored._state.messages] == [
        m.to_dict() for m in full._state.messages
    ]


async def test_a_restore_leaves_the_collector_as_it_found_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The collector is paused while the log is read; after it, it is on
    again if it was, and what the restore kept is where a collection finds
    it (the young generation: nothing moved past the collector's counting)."""
    await flat_session(tmp_path, monkeypatch)
    store = JSONLLogStore(tmp_path)
    threshold = gc.get_threshold()
    try:
        gc.disable()
        CompactionMemory.restore_from_log("flat", log_store=store)
        assert not gc.isenabled()
        gc.enable()
        gc.set_threshold(5, 10**9, 10**9)  # young collections often; none of the older ones
        restored = CompactionMemory.restore_from_log("flat", log_store=store)
        assert gc.isenabled()
        young = {id(o) for generation in (0, 1) for o in gc.get_objects(generation)}
        assert all(id(m) in young for m in restored._state.messages[:40])
    finally:
        gc.enable()
        gc.set_threshold(*threshold)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.lists(
        st.one_of(
            st.builds(
                lambda n, text: orjson.dumps({"type": "message", "seq": n, "t": text}),
                st.integers(0, 99),
                st.text(max_size=40),
            ),
            st.sampled_from([b"", b"  ", b"not json", b"[1]", b'{"type"', b"\xff"]),
        ),
        max_size=30,
    ),
    block=st.integers(1, 64),
    ends=st.booleans(),
)
def test_a_backward_read_in_any_block_size_gives_the_lines_of_a_forward_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lines: list[bytes], block: int, ends: bool
) -> None:
    """Blocks of any size (lines across their edges, longer than them): the
    records, their lines and their problems are a forward read's, reversed."""
    monkeypatch.setattr(jsonl, "_BLOCK", block)
    data = b"\n".join(lines) + (b"\n" if ends and lines else b"")
    (tmp_path / "any.jsonl").write_bytes(data)
    store = JSONLLogStore(tmp_path)
    forward: list[Any] = []
    backward: list[Any] = []

    records = list(store.read("any", forward))
    pairs = list(store.read_reversed_lines("any", backward))

    assert [record for record, _ in pairs] == records[::-1]
    assert all(orjson.loads(line) == record for record, line in pairs)
    assert sorted(line.rstrip(b"\n") for _, line in pairs) == sorted(
        line for line in lines if line.strip() and isinstance(_parsed(line), dict)
    )
    assert [(p.line, p.error, p.torn) for p in backward[::-1]] == [
        (p.line, p.error, p.torn) for p in forward
    ]


def _parsed(line: bytes) -> Any:
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return record if isinstance(record, dict) and isinstance(record.get("type"), str) else None
