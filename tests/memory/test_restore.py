"""The JSONL log and restore: exact, crash-tolerant, compatible with Motus logs."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from memory import (
    BasicMemory,
    ChatMessage,
    CompactionError,
    CompactionMemory,
    CompactionMemoryConfig,
    CompactionSessionState,
    InMemoryLogStore,
    JSONLLogStore,
    SessionExistsError,
    SessionNotFoundError,
    SessionState,
    Usage,
    upgrade_records,
)
from memory.log import InvalidSessionIdError, records

from .conftest import answer, calls, result, user

FIXTURES = Path(__file__).parent / "fixtures"
LONG = "word " * 250


def dicts(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    return [m.to_dict() for m in messages]


async def run_session(tmp_path: Path, threshold: int = 400) -> CompactionMemory:
    memory = CompactionMemory(
        config=CompactionMemoryConfig(
            session_id="sess-1",
            token_threshold=threshold,
            log_base_path=tmp_path,
            max_tool_result_tokens=50,
        ),
        compact_fn=lambda messages, system_prompt: "the summary",
        model_name="gpt-4o",
    )
    memory.set_system_prompt("be brief")
    for message in [
        user("q " + LONG),
        answer(LONG),
        user("find it"),
        calls("a", "b"),
        result("a", "huge " * 500),
        result("b", "small"),
        answer("found"),
        user("and then?"),
        calls("c"),
    ]:
        await memory.add_message(message)
    return memory


async def test_restore_from_log_reproduces_the_live_context(tmp_path: Path) -> None:
    live = await run_session(tmp_path)
    assert live.compaction_count >= 1
    restored = CompactionMemory.restore_from_log("sess-1", log_base_path=tmp_path)
    assert dicts(restored.get_context()) == dicts(live.get_context())
    assert restored.estimate_context_tokens() == live.estimate_context_tokens()
    assert not restored.at_boundary  # call c is still open
    assert restored.restore_problems == []


async def test_a_restored_memory_keeps_appending_to_the_same_log(tmp_path: Path) -> None:
    await run_session(tmp_path)
    restored = CompactionMemory.restore_from_log("sess-1", log_base_path=tmp_path)
    await restored.add_message(result("c", "late result"))
    lines = (tmp_path / "sess-1.jsonl").read_text().splitlines()
    last = json.loads(lines[-1])
    assert last["type"] == "message"
    assert last["seq"] == 9
    assert sum(1 for line in lines if json.loads(line)["type"] == "session_meta") == 1


async def test_a_truncated_tool_result_keeps_its_original_in_the_log(tmp_path: Path) -> None:
    live = await run_session(tmp_path)
    message_records = [r for r in JSONLLogStore(tmp_path).read("sess-1") if r["type"] == "message"]
    truncated = [r for r in message_records if "truncation" in r]
    assert len(truncated) == 1
    assert truncated[0]["message"]["content"] == "huge " * 500
    assert truncated[0]["truncation"]["original_tokens"] > 50
    assert all(m.text != "huge " * 500 for m in live.get_context())


async def test_a_torn_last_line_is_skipped_reported_and_the_next_append_starts_a_fresh_line(
    tmp_path: Path,
) -> None:
    live = await run_session(tmp_path)
    path = tmp_path / "sess-1.jsonl"
    lines_before = len(path.read_text().splitlines())
    with path.open("a") as handle:
        handle.write('{"type": "message", "seq": 9, "message": {"role": "to')
    restored = CompactionMemory.restore_from_log("sess-1", log_base_path=tmp_path)
    assert dicts(restored.get_context()) == dicts(live.get_context())
    assert len(restored.restore_problems) == 1
    problem = restored.restore_problems[0]
    assert problem.torn
    assert problem.line == lines_before + 1
    await restored.add_message(result("c", "after the crash"))
    again = CompactionMemory.restore_from_log("sess-1", log_base_path=tmp_path)
    assert again.get_context()[-1].text == "after the crash"
    assert [p.line for p in again.restore_problems] == [lines_before + 1]


async def test_a_corrupt_line_in_the_middle_is_reported_with_its_line_number(
    tmp_path: Path,
) -> None:
    await run_session(tmp_path)
    path = tmp_path / "sess-1.jsonl"
    lines = path.read_text().splitlines()
    lines.insert(3, "this is not json")
    path.write_text("\n".join(lines) + "\n")
    # A restore from the latest checkpoint never reads that line; one from the
    # first record reports it.
    fast = CompactionMemory.restore_from_log("sess-1", log_base_path=tmp_path)
    assert fast.restore_problems == []
    restored = CompactionMemory.restore_from_log("sess-1", log_base_path=tmp_path, full_replay=True)
    assert dicts(restored.get_context()) == dicts(fast.get_context())
    assert [(p.line, p.torn) for p in restored.restore_problems] == [(4, False)]
    events = [e for e in restored.get_memory_trace()["events"] if e["type"] == "log_problem"]
    assert events
    assert events[0]["line"] == 4


def test_an_unknown_session_raises_session_not_found(tmp_path: Path) -> None:
    with pytest.raises(SessionNotFoundError):
        CompactionMemory.restore_from_log("nobody", log_base_path=tmp_path)


@pytest.mark.parametrize("bad", ["..", ".", "../x", "a/b", "", "x" * 129, "nul\x00", "spa ce"])
def test_session_ids_that_could_escape_the_log_folder_are_refused(tmp_path: Path, bad: str) -> None:
    with pytest.raises(InvalidSessionIdError):
        JSONLLogStore(tmp_path).append(bad, {"type": "message"})
    with pytest.raises(ValueError, match="session id"):
        CompactionMemory.restore_from_log(bad, log_base_path=tmp_path)


def test_an_old_motus_log_loads(tmp_path: Path) -> None:
    (tmp_path / "motus-old.jsonl").write_bytes((FIXTURES / "motus-old.jsonl").read_bytes())
    restored = CompactionMemory.restore_from_log("motus-old", log_base_path=tmp_path)
    context = restored.get_context()
    assert context[0].text == "You are a helpful assistant."
    assert "User asked about flights to Seattle" in context[1].text
    assert [m.role for m in context[2:]] == ["user", "assistant", "tool", "assistant"]
    assert restored.compaction_count == 1
    assert restored.restore_problems == []


def test_upgrading_an_old_motus_log_fills_the_current_fields() -> None:
    old = [json.loads(line) for line in (FIXTURES / "motus-old.jsonl").read_text().splitlines()]
    upgraded = upgrade_records(old)
    assert upgraded[0]["type"] == "session_meta"
    assert upgraded[0]["session_id"] == "motus-old"
    assert upgraded[0]["config"]["safety_ratio"] == 0.8
    messages = [r for r in upgraded if r["type"] == "message"]
    assert [r["seq"] for r in messages] == list(range(len(messages)))
    assert all(r["tokens"] > 0 and r["unit"] in "ABC" for r in messages)
    compaction = next(r for r in upgraded if r["type"] == "compaction")
    assert compaction["through_seq"] == 3
    assert compaction["tokens_before"] > 0
    assert compaction["tokens_after"] > 0
    # Replaying the upgraded records gives the same context as the old ones.
    store = JSONLLogStore(FIXTURES)
    from memory import InMemoryLogStore

    staged = InMemoryLogStore()
    for record in upgraded:
        staged.append("motus-old", record)
    a = CompactionMemory.restore_from_log("motus-old", log_store=staged)
    b = CompactionMemory.restore_from_log("motus-old", log_store=store)
    assert dicts(a.get_context()) == dicts(b.get_context())


def _append_many(path: str, worker: int) -> None:
    store = JSONLLogStore(path)
    for i in range(200):
        store.append(
            "shared", {"type": "message", "worker": worker, "i": i, "pad": "x" * (i * 37 % 5000)}
        )


def test_two_processes_appending_to_one_session_never_interleave_bytes(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_append_many, args=(str(tmp_path), w)) for w in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    problems: list[Any] = []
    read = list(JSONLLogStore(tmp_path).read("shared", problems))
    assert problems == []
    assert len(read) == 400
    assert sorted((r["worker"], r["i"]) for r in read) == [
        (w, i) for w in range(2) for i in range(200)
    ]


async def test_session_state_round_trips_through_json_and_restores_the_context(
    tmp_path: Path,
) -> None:
    live = await run_session(tmp_path)
    data = json.loads(json.dumps(live.get_session_state().to_dict()))
    state = CompactionSessionState.from_dict(data)
    restored = CompactionMemory.restore(state)
    assert dicts(restored.get_context()) == dicts(live.get_context())
    assert restored.session_id == "sess-1"
    await restored.add_message(result("c", "x"))
    assert restored.at_boundary


async def test_editing_a_session_state_changes_neither_the_memory_nor_the_next_state(
    tmp_path: Path,
) -> None:
    live = await run_session(tmp_path)
    await live.add_message(result("c", "r"))
    await live.add_message(calls("d", "e"))
    context = dicts(live.get_context())
    state = live.get_session_state()
    expected = json.loads(json.dumps(state.to_dict()))
    data = state.to_dict()
    for message in data["messages"]:
        message["role"] = "edited"
        for call in message.get("tool_calls") or ():
            call["function"]["arguments"] = "edited"
    data["messages"].clear()
    data["seqs"].clear()
    assert dicts(live.get_context()) == context
    assert live.get_session_state().to_dict() == expected
    # Not deep copies: the state holds the context's own (immutable) text.
    texts = [m["content"] for m in live.get_session_state().messages]
    assert [t is m.content for t, m in zip(texts, live._messages, strict=True)] == [True] * len(
        texts
    )


async def test_basic_memory_state_round_trips() -> None:
    memory = BasicMemory(system_prompt="sys")
    for message in [user("a"), calls("x"), result("x", "r"), answer("done")]:
        await memory.add_message(message)
    state = SessionState.from_dict(json.loads(json.dumps(memory.get_session_state().to_dict())))
    assert dicts(BasicMemory.restore(state).get_context()) == dicts(memory.get_context())


async def test_a_fork_is_a_new_session_pointing_at_its_parent_and_restores_on_its_own(
    tmp_path: Path,
) -> None:
    live = await run_session(tmp_path)
    await live.add_message(result("c", "r"))
    child = live.fork()
    assert child.session_id != live.session_id
    assert child.parent_session_id == "sess-1"
    assert dicts(child.get_context()) == dicts(live.get_context())
    await child.add_message(user("only in the fork"))
    restored = CompactionMemory.restore_from_log(child.session_id, log_base_path=tmp_path)
    assert dicts(restored.get_context()) == dicts(child.get_context())
    parent = CompactionMemory.restore_from_log("sess-1", log_base_path=tmp_path)
    assert all(m.text != "only in the fork" for m in parent.get_context())


async def test_reset_clears_the_context_and_a_restore_agrees(tmp_path: Path) -> None:
    live = await run_session(tmp_path)
    await live.add_message(result("c", "r"))
    counts = live.reset()
    assert counts["messages"] > 0
    assert live.get_context() == [ChatMessage.system("be brief")]
    await live.add_message(user("fresh start"))
    restored = CompactionMemory.restore_from_log("sess-1", log_base_path=tmp_path)
    assert dicts(restored.get_context()) == dicts(live.get_context())


def test_log_records_are_tagged_with_a_type(tmp_path: Path) -> None:
    assert {"session_meta", "message", "compaction"} <= records.RECORD_TYPES


def test_upgrading_keeps_everything_a_record_already_says() -> None:
    old = [json.loads(line) for line in (FIXTURES / "motus-old.jsonl").read_text().splitlines()]
    old[0]["title"] = "Seattle trip"
    old[1]["custom"] = {"kept": True}
    upgraded = upgrade_records(old)
    assert [r["type"] for r in upgraded] == [r["type"] for r in old]
    for before, after in zip(old, upgraded, strict=True):
        assert after == {**after, **before}
    assert upgraded[0]["title"] == "Seattle trip"
    assert upgrade_records(upgraded) == upgraded


async def test_a_new_memory_refuses_the_id_of_a_session_that_already_has_a_log(
    tmp_path: Path,
) -> None:
    await run_session(tmp_path)
    again = CompactionMemory(
        config=CompactionMemoryConfig(session_id="sess-1", log_base_path=tmp_path),
        model_name="gpt-4o",
    )
    with pytest.raises(SessionExistsError, match="restore_from_log"):
        await again.add_message(user("hello"))
    restored = CompactionMemory.restore_from_log("sess-1", log_base_path=tmp_path)
    assert restored.restore_problems == []


def _rewrite(path: Path, edit: Any) -> None:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(r) + "\n" for r in edit(lines)))


@pytest.mark.parametrize(
    ("edit", "reported"),
    [
        (lambda rs: [r for r in rs for _ in range(2 if r.get("seq") == 2 else 1)], "seq 2 does"),
        (lambda rs: [{**r, "seq": 0} if r.get("seq") == 3 else r for r in rs], "seq 0 does"),
        (
            lambda rs: [r for r in rs for _ in range(2 if r["type"] == "compaction" else 1)],
            "number",
        ),
        (lambda rs: rs[1:], "does not start with a session_meta"),
        (lambda rs: [{**rs[0], "session_id": "someone-else"}, *rs[1:]], "names session"),
        (lambda rs: [{**rs[0], "config": "x"}, *rs[1:]], "config is not an object"),
        (
            lambda rs: [{**r, "through_seq": 999} if r["type"] == "compaction" else r for r in rs],
            "covers messages up to seq 999",
        ),
    ],
)
async def test_a_hand_edited_log_restores_what_it_can_and_reports_the_rest(
    tmp_path: Path, edit: Any, reported: str
) -> None:
    await run_session(tmp_path)
    _rewrite(tmp_path / "sess-1.jsonl", edit)
    restored = CompactionMemory.restore_from_log("sess-1", log_base_path=tmp_path, full_replay=True)
    assert any(reported in str(p) for p in restored.restore_problems), restored.restore_problems


async def test_reverting_a_bad_compaction_brings_the_context_back_and_restore_agrees(
    tmp_path: Path,
) -> None:
    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="rv", token_threshold=700, log_base_path=tmp_path),
        compact_fn=lambda messages, system_prompt: "a bad summary",
        model_name="gpt-4o",
    )
    memory.set_system_prompt("sys")
    await memory.add_message(user("q " + LONG))
    await memory.add_message(answer(LONG))
    before = dicts(memory.get_context())
    await memory.add_message(user("next " + LONG))
    assert memory.compaction_count == 1
    await memory.add_message(answer("short"))
    memory.revert_last_compaction("the summary lost the booking id")
    assert dicts(memory.get_context()) == [
        *before,
        user("next " + LONG),
        {"role": "assistant", "content": "short"},
    ]
    with pytest.raises(CompactionError):
        memory.revert_last_compaction()
    restored = CompactionMemory.restore_from_log("rv", log_base_path=tmp_path)
    assert dicts(restored.get_context()) == dicts(memory.get_context())
    revert = [r for r in JSONLLogStore(tmp_path).read("rv") if r["type"] == "compaction_revert"]
    assert revert[0]["reverts"] == 1
    assert revert[0]["reason"] == "the summary lost the booking id"


async def test_a_replys_whole_usage_is_logged_with_its_model_for_its_cost() -> None:
    store = InMemoryLogStore()
    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="u"), log_store=store, model_name="gpt-4o"
    )
    await memory.add_message(user("hi"))
    await memory.add_message(
        answer("hello"), usage=Usage(input_tokens=120, output_tokens=7, cached_input_tokens=100)
    )
    reply = list(store.read("u"))[-1]
    assert reply["provider_tokens"] == 120
    assert reply["usage"] == {
        "input_tokens": 120,
        "output_tokens": 7,
        "cached_input_tokens": 100,
        "model": "gpt-4o",
    }
