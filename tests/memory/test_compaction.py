"""Compaction: where it cuts, what it keeps, and how it fails."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from memory import (
    ChatMessage,
    CompactionError,
    CompactionMemory,
    CompactionMemoryConfig,
    ConfigurationError,
    InMemoryLogStore,
    ProviderTimeoutError,
    get_model_limits,
)
from memory.compaction.summariser.with_model import CONTINUATION_TEMPLATE
from memory.log import records

from .conftest import FakeClient, answer, calls, result, user

LONG = "word " * 250  # about 250 tokens


def memory_with(threshold: int = 400, **kwargs: Any) -> CompactionMemory:
    kwargs.setdefault("compact_fn", lambda messages, system_prompt: f"summary of {len(messages)}")
    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="s1", token_threshold=threshold),
        model_name="gpt-4o",
        log_store=kwargs.pop("log_store", InMemoryLogStore()),
        **kwargs,
    )
    memory.set_system_prompt("system rules")
    return memory


async def add_all(memory: CompactionMemory, *messages: dict[str, Any]) -> None:
    for message in messages:
        await memory.add_message(message)


def roles(memory: CompactionMemory) -> list[str]:
    return [m.role for m in memory.get_context()]


async def test_it_does_not_compact_below_the_threshold() -> None:
    memory = memory_with(threshold=10_000)
    await add_all(memory, user("hi"), answer(LONG), user("more"))
    assert memory.compaction_count == 0
    assert roles(memory) == ["system", "user", "assistant", "user"]


async def test_at_a_user_message_it_keeps_the_pending_request_after_the_summary() -> None:
    memory = memory_with()
    await add_all(memory, user("first " + LONG), answer(LONG), user("book flight HAT123"))
    assert memory.compaction_count == 1
    context = memory.get_context()
    assert [m.role for m in context] == ["system", "user", "user"]
    assert context[1].text.startswith(CONTINUATION_TEMPLATE.split("{summary}")[0])
    assert context[2] == ChatMessage.from_dict(user("book flight HAT123"))


async def test_at_a_tool_batch_it_replays_the_batch_and_the_request_verbatim() -> None:
    memory = memory_with(threshold=700)
    await add_all(memory, user("old " + LONG), answer(LONG), user("look up both"))
    await add_all(memory, calls("a", "b"), result("b", LONG))
    assert memory.compaction_count == 0
    await memory.add_message(result("a", "A-result"))
    assert memory.compaction_count == 1
    context = memory.get_context()
    assert [m.role for m in context] == ["system", "user", "user", "assistant", "tool", "tool"]
    assert context[2].text == "look up both"
    assert [m.tool_call_id for m in context[4:]] == ["b", "a"]


async def test_it_never_compacts_while_a_parallel_batch_is_open() -> None:
    memory = memory_with(threshold=600)
    await add_all(memory, user("q " + LONG), answer(LONG), user("go"), calls("a", "b", "c"))
    await add_all(memory, result("a", LONG), result("c", "small"))
    assert memory.estimate_context_tokens() > 600
    assert memory.compaction_count == 0
    assert not memory.at_boundary
    await memory.add_message(result("b", "done"))
    assert memory.compaction_count == 1
    assert memory.at_boundary


async def test_at_a_final_answer_everything_is_summarised() -> None:
    memory = memory_with()
    await add_all(
        memory, user("q " + LONG), calls("a"), result("a", LONG), answer("the answer " + LONG)
    )
    assert roles(memory) == ["system", "user"]
    assert memory.summary == "summary of 4"


async def test_a_new_summary_takes_the_previous_one_as_input() -> None:
    seen: list[list[ChatMessage]] = []

    def summarise(messages: list[ChatMessage], system_prompt: str) -> str:
        seen.append(messages)
        return f"summary #{len(seen)}"

    memory = memory_with(compact_fn=summarise)
    await add_all(memory, user("q " + LONG), answer(LONG))
    await add_all(memory, user("q2 " + LONG), answer(LONG))
    assert memory.compaction_count == 2
    assert "summary #1" in seen[1][0].text
    assert sum(1 for m in memory.get_context() if "summary #" in m.text) == 1


async def test_a_failed_compaction_leaves_the_context_and_is_retried_at_the_next_boundary() -> None:
    attempts: list[int] = []

    def flaky(messages: list[ChatMessage], system_prompt: str) -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("provider exploded")
        return "good summary"

    store = InMemoryLogStore()
    memory = memory_with(compact_fn=flaky, log_store=store)
    await add_all(memory, user("q " + LONG), answer(LONG))
    before = memory.get_context()
    assert memory.compaction_count == 0
    assert [m.to_dict() for m in memory.get_context()] == [m.to_dict() for m in before]
    assert all("provider exploded" not in m.text for m in memory.get_context())
    failed = [r for r in store.read("s1") if r["type"] == records.COMPACTION_FAILED]
    assert len(failed) == 1
    assert "provider exploded" in failed[0]["error"]
    assert failed[0]["model"] == "compact_fn"  # the summariser that failed, not the chat model
    assert memory.get_memory_trace()["failed_compactions"] == 1

    await memory.add_message(user("next"))
    assert memory.compaction_count == 1
    assert memory.summary == "good summary"


async def test_an_offline_compaction_that_fails_is_recorded_as_the_offline_summarisers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def broken(self: object, request: object) -> object:
        raise CompactionError("the summary would not lower the count")

    monkeypatch.setattr("memory.compaction.summariser.OfflineSummariser.summarise", broken)
    store = InMemoryLogStore()
    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="s1", token_threshold=400),
        model_name="gpt-4o",
        log_store=store,
    )
    await add_all(memory, user("q " + LONG), answer(LONG))

    failed = [r for r in store.read("s1") if r["type"] == records.COMPACTION_FAILED]
    assert [r["model"] for r in failed] == ["offline"]


@pytest.mark.parametrize("bad", ["", "   ", None, 42])
async def test_an_empty_or_non_text_summary_is_a_failure_not_a_summary(bad: object) -> None:
    memory = memory_with(compact_fn=lambda m, s: bad)
    await add_all(memory, user("q " + LONG), answer(LONG))
    assert memory.compaction_count == 0
    assert memory.summary is None


async def test_an_async_compact_fn_is_awaited() -> None:
    async def summarise(messages: list[ChatMessage], system_prompt: str) -> str:
        await asyncio.sleep(0)
        return "async summary"

    memory = memory_with(compact_fn=summarise)
    await add_all(memory, user("q " + LONG), answer(LONG))
    assert memory.summary == "async summary"


async def test_on_compact_receives_the_documented_stats() -> None:
    stats: list[dict[str, Any]] = []
    memory = memory_with(threshold=700, on_compact=stats.append)
    await add_all(memory, user("q " + LONG), answer(LONG), user("pending " + LONG))
    assert len(stats) == 1
    s = stats[0]
    assert s["messages_compacted"] == 2
    assert s["messages_replayed"] == 1
    assert s["compaction_number"] == 1
    assert s["summary"] == "summary of 2"
    assert s["summary_tokens"] > 0
    assert s["tokens_after"] < s["tokens_before"]


async def test_a_floor_above_the_threshold_warns_once_instead_of_compacting_every_time() -> None:
    store = InMemoryLogStore()
    memory = memory_with(threshold=200, log_store=store)
    await add_all(memory, user("q"), answer("a"), user("huge request " + LONG * 3))
    for i in range(5):
        await add_all(memory, calls(f"c{i}"), result(f"c{i}", "small"))
    log = list(store.read("s1"))
    warnings = [r for r in log if r["type"] == records.COMPACTION_WARNING]
    assert len(warnings) == 1
    assert warnings[0]["floor_tokens"] > warnings[0]["threshold"] == 200
    assert [r for r in log if r["type"] == records.COMPACTION] == []


async def test_model_summaries_fall_back_offline_after_repeated_failures() -> None:
    client = FakeClient(replies=[ProviderTimeoutError("slow"), ProviderTimeoutError("slow")])
    memory = memory_with(compact_fn=None, client=client)
    await add_all(memory, user("q mia_li_3668 " + LONG), answer(LONG))
    assert memory.compaction_count == 0
    await add_all(memory, user("again"))
    # Second failure in a row: the offline summariser takes over.
    assert memory.compaction_count == 1
    assert "mia_li_3668" in (memory.summary or "")
    trace = memory.get_memory_trace()
    assert trace["failed_compactions"] == 2
    assert [e["model"] for e in trace["events"] if e["type"] == "compaction"] == ["offline"]


async def test_model_summarisation_splits_into_requests_that_fit_the_compaction_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from memory.compaction import summariser as compaction_summariser
    from memory.tokens.model_limits import ModelLimits

    monkeypatch.setattr(
        compaction_summariser, "get_model_limits", lambda model: ModelLimits(1_200, 200, True)
    )
    client = FakeClient(replies=["s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8"])
    memory = memory_with(threshold=1_500, compact_fn=None, client=client)
    for i in range(12):
        await add_all(memory, user(f"q{i} " + LONG), answer(LONG))
        if memory.compaction_count:
            break
    assert memory.compaction_count == 1
    assert len(client.requests) > 1
    counter = memory.token_counter
    assert all(
        counter.context_tokens(request.messages) + 200 <= 1_200 for request in client.requests
    )
    # each chunk after the first folds the summary so far
    assert "s1" in client.requests[1].messages[1].text


async def test_without_client_or_compact_fn_it_uses_the_offline_summariser() -> None:
    memory = CompactionMemory(
        config=CompactionMemoryConfig(token_threshold=300), model_name="gpt-4o"
    )
    await add_all(memory, user("reservation ZFA04Y please " + LONG), answer(LONG))
    assert memory.compaction_count == 1
    assert "ZFA04Y" in (memory.summary or "")


async def test_set_model_fills_only_what_was_not_given(fake_client: FakeClient) -> None:
    other = FakeClient()
    memory = CompactionMemory(
        client=fake_client, config=CompactionMemoryConfig(compact_model_name="small")
    )
    memory.set_model(client=other, model_name="gpt-4o")
    assert memory._client is fake_client
    assert memory.model_name == "gpt-4o"
    assert memory._compact_model_name == "small"


async def test_the_threshold_defaults_to_the_context_window_times_the_safety_ratio() -> None:
    memory = CompactionMemory(config=CompactionMemoryConfig(safety_ratio=0.5), model_name="gpt-4o")
    assert memory.token_threshold == 64_000


@pytest.mark.parametrize(
    "kwargs",
    [
        {"safety_ratio": 0},
        {"safety_ratio": 1.5},
        {"safety_ratio": float("nan")},
        {"token_threshold": -5},
        {"max_tool_result_tokens": -1},
        {"session_id": "../etc/passwd"},
    ],
)
def test_invalid_config_raises_a_clear_error_at_construction(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        CompactionMemoryConfig(**kwargs)


async def test_manual_compaction_with_an_open_batch_keeps_the_batch_whole() -> None:
    memory = memory_with(threshold=100_000)
    await add_all(
        memory, user("q " + LONG), answer(LONG), user("go"), calls("a", "b"), result("a", "r")
    )
    assert await memory.compact() is not None
    assert roles(memory) == ["system", "user", "user", "assistant", "tool"]
    await memory.add_message(result("b", "r2"))
    assert roles(memory)[-2:] == ["tool", "tool"]
    assert memory.at_boundary


async def test_a_compaction_always_lowers_the_token_count() -> None:
    memory = memory_with(compact_fn=lambda m, s: "x " * 2000)
    await add_all(memory, user("q " + LONG), answer(LONG))
    assert memory.compaction_count == 0
    assert "would not make the context smaller" in memory.get_memory_trace()["events"][-1]["error"]


async def test_nothing_to_fold_says_why() -> None:
    memory = memory_with()
    assert memory.nothing_to_fold() == "nothing to fold: the context holds no message yet"
    await add_all(memory, user("Book a flight to Oslo."))
    assert "only the latest turn" in (memory.nothing_to_fold() or "")
    assert await memory.compact() is None
    await add_all(memory, answer("Done."), user("And a hotel."), answer(LONG))
    assert memory.nothing_to_fold() is None


async def test_a_compact_fn_that_hangs_times_out_and_leaves_the_context() -> None:
    async def hangs(messages: list[ChatMessage], system_prompt: str) -> str:
        await asyncio.sleep(3600)
        return "never"

    memory = memory_with(compact_fn=hangs, compaction_timeout_s=0.05)
    await add_all(memory, user("q " + LONG), answer(LONG))
    assert memory.compaction_count == 0
    assert "did not return within" in memory.get_memory_trace()["events"][-1]["error"]


async def test_a_broken_on_compact_callback_does_not_fail_add_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(stats: dict[str, Any]) -> None:
        raise KeyError("oops")

    memory = memory_with(on_compact=broken)
    await add_all(memory, user("q " + LONG), answer(LONG))
    assert memory.compaction_count == 1
    assert "on_compact callback raised" in caplog.text


async def test_when_compact_fn_keeps_failing_the_offline_summariser_prevents_an_overflow() -> None:
    def broken(messages: list[ChatMessage], system_prompt: str) -> str:
        raise RuntimeError("down")

    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="ovf"), model_name="gpt-4o", compact_fn=broken
    )
    for i in range(10):
        await memory.add_message(user(f"part {i} " + "data " * 18_000))
    window = get_model_limits("gpt-4o").context_window
    assert memory.estimate_context_tokens() < window
    assert memory.compaction_count >= 1
    assert memory.get_memory_trace()["failed_compactions"] >= 1


async def test_a_revert_with_nothing_to_revert_says_why() -> None:
    memory = CompactionMemory(
        config=CompactionMemoryConfig(token_threshold=100_000),
        compact_fn=lambda messages, system_prompt: "They said hello.",
    )
    with pytest.raises(CompactionError, match="there has been no compaction"):
        memory.revert_last_compaction()
    await memory.add_message({"role": "user", "content": "hello " * 50})
    await memory.add_message({"role": "assistant", "content": "hi " * 50})
    assert await memory.compact() == "They said hello."
    memory.revert_last_compaction()
    with pytest.raises(CompactionError, match="already reverted"):
        memory.revert_last_compaction()
