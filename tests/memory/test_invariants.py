"""Property tests: every context the memory produces is valid, and restore is exact.

Hypothesis generates conversations with parallel tool calls, results in any
order, orphan and duplicate results, interrupted batches, ``content: null``,
empty strings, unicode and huge tool results, and the variants real providers
and tools produce (issue 7): lone surrogates anywhere, developer instructions,
custom (freeform) calls, reasoning, calls with empty ids, legacy function
calls, and tool results made of parts (text and images); it drives a ``CompactionMemory``
with a small threshold (so it compacts often, sometimes with a summariser that
fails), with tool-result clearing on or off (issue 28: old results become
stubs before anything is summarised). After every message the context must
satisfy the invariants below; at the end, the restored memory must equal the
live one, and the log must hold every message ever added.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory import (
    ChatMessage,
    CompactionMemory,
    CompactionMemoryConfig,
    InMemoryLogStore,
    LogStore,
)
from memory.compaction.summariser.with_model import CONTINUATION_TEMPLATE, CompactFn
from memory.json_values import clean_text
from memory.log import records

CONTINUATION_HEAD = CONTINUATION_TEMPLATE.split("{summary}")[0]
SYSTEM_PROMPT = "You are a careful agent. Никогда не сдавайся. 🚀 \ud83d"

texts = st.one_of(
    st.just(""),
    st.text(min_size=1, max_size=60),
    st.sampled_from(["booking HAT123 for mia_li_3668", "<|endoftext|> literal", "naïve café ☕"]),
    # Lone surrogates and pairs split in two code points, as models and terminals cut them.
    st.text(st.characters(categories=["Cs", "Ll", "So", "Zs"]), min_size=1, max_size=20),
    st.sampled_from(["mug \ud83d in stock?", "\udc00", "pair \ud83d\ude00"]),
)
contents = st.one_of(st.none(), texts, st.builds(lambda t: [{"type": "text", "text": t}], texts))
IMAGE = {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}}
result_contents = st.one_of(
    texts,
    st.builds(lambda t: [{"type": "text", "text": t}, IMAGE], texts),
)


def function_call(call_id: str, arguments: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "search", "arguments": arguments},
    }


def custom_call(call_id: str, text: str) -> dict[str, Any]:
    return {"id": call_id, "type": "custom", "custom": {"name": "apply_patch", "input": text}}


@st.composite
def assistant_answers(draw: st.DrawFn) -> dict[str, Any]:
    answer: dict[str, Any] = {"role": "assistant", "content": draw(texts)}
    reasoning = draw(st.sampled_from(["none", "text", "blocks"]))
    if reasoning == "text":
        answer["reasoning_content"] = draw(texts)
    elif reasoning == "blocks":
        thought = draw(texts)
        answer["reasoning_content"] = thought
        answer["thinking_blocks"] = [{"type": "thinking", "thinking": thought, "signature": "c2ln"}]
    return answer


KINDS = ["user", "answer", "tools", "tools", "orphan", "empty ids", "repeated ids", "legacy"]


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    counter = 0
    for _ in range(draw(st.integers(1, 40))):
        kind = draw(st.sampled_from(KINDS))
        if kind == "user":
            out.append({"role": "user", "content": draw(st.one_of(texts, contents.filter(bool)))})
        elif kind == "answer":
            out.append(draw(assistant_answers()))
        elif kind == "empty ids":
            # Calls without ids (Gemini, LM Studio): their results, also without, come in order.
            size = draw(st.integers(1, 3))
            out.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [function_call("", draw(texts)) for _ in range(size)],
                }
            )
            results = size - (1 if draw(st.integers(0, 9)) == 0 else 0)
            out.extend(
                {"role": "tool", "tool_call_id": "", "content": draw(result_contents)}
                for _ in range(results)
            )
        elif kind == "repeated ids":
            # A gateway that gives every call of a message the same id; results repeat it.
            size = draw(st.integers(2, 3))
            repeated = f"dup_{counter}"
            counter += 1
            out.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [function_call(repeated, draw(texts)) for _ in range(size)],
                }
            )
            out.extend(
                {"role": "tool", "tool_call_id": repeated, "content": draw(result_contents)}
                for _ in range(size)
            )
        elif kind == "legacy":
            out.append(
                {
                    "role": "assistant",
                    "content": None,
                    "function_call": {"name": "search", "arguments": draw(texts)},
                }
            )
            if draw(st.integers(0, 9)):
                out.append({"role": "function", "name": "search", "content": draw(texts)})
        elif kind == "orphan":
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": draw(st.sampled_from(["nope", "call_0"])),
                    "content": "x",
                }
            )
        else:
            ids = [f"call_{counter + i}" for i in range(draw(st.integers(1, 3)))]
            counter += len(ids)
            call = draw(st.sampled_from([function_call, function_call, custom_call]))
            calling: dict[str, Any] = {
                "role": "assistant",
                "content": draw(st.one_of(st.none(), texts)),
                "tool_calls": [call(i, draw(texts)) for i in ids],
            }
            if draw(st.booleans()):
                calling["reasoning_content"] = draw(texts)  # required back on tool-call turns
            out.append(calling)
            answered = draw(st.permutations(ids))
            if draw(st.integers(0, 9)) == 0:
                answered = answered[:-1]  # an interrupted batch
            for call_id in answered:
                size = draw(st.sampled_from([1, 1, 1, 40, 400]))
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": call_id,
                        "name": "search",
                        "content": draw(result_contents) * size,
                    }
                )
                if draw(st.integers(0, 14)) == 0:
                    out.append({"role": "tool", "tool_call_id": call_id, "content": "duplicate"})
    return out


def check_context(
    memory: CompactionMemory,
    added: list[ChatMessage],
    logged: dict[int, dict[str, Any]],
    system_role: str = "system",
) -> None:
    context = memory.get_context()
    assert context[0] == ChatMessage(role=system_role, content=clean_text(SYSTEM_PROMPT))  # type: ignore[arg-type]
    assert all(m.role not in ("system", "developer") for m in context[1:])
    continuations = [
        i
        for i, m in enumerate(context)
        if m.role == "user" and m.text.startswith(CONTINUATION_HEAD)
    ]
    assert continuations in ([], [1])
    assert (memory.summary is not None) == (continuations == [1])

    open_ids: set[str] = set()
    answered: set[str] = set()
    for position, message in enumerate(context):
        if message.role == "tool":
            assert message.tool_call_ids, "a tool message without an id reached the context"
            for call_id in message.tool_call_ids:
                assert call_id in open_ids, (
                    f"tool result {call_id} at {position} follows no matching call"
                )
                open_ids.discard(call_id)
                answered.add(call_id)
            continue
        assert not open_ids, f"calls {open_ids} lack a result before position {position}"
        open_ids = {c.id for c in message.tool_calls}
        assert all(c.id for c in message.tool_calls), "a call without an id reached the context"
        assert len(open_ids) == len(message.tool_calls), "two calls of one batch share an id"
    if memory.at_boundary:
        assert not open_ids

    # Messages kept after the cut are exactly what the log recorded for them,
    # or, for a cleared tool result, that message with the stub its clearing
    # record names (same role, call ids and name).
    cleared = memory._state.cleared_seqs()
    for message, meta in zip(memory.messages, memory._state.meta, strict=True):
        if meta.seq is not None:
            record = logged[meta.seq]
            expected = dict(record.get("context_message", record["message"]))
            if meta.seq in cleared:
                assert message.role == "tool"
                assert message.text.startswith("[tool result cleared")
                expected["content"] = message.content
            assert message.to_dict() == expected

    # The newest user request survives verbatim until an answer closes it.
    last_user = max((i for i, m in enumerate(added) if m.role == "user"), default=None)
    if last_user is not None:
        answered_after = any(
            m.role == "assistant" and not m.tool_calls for m in added[last_user + 1 :]
        )
        if not answered_after:
            assert any(
                m is added[last_user] or m == added[last_user] for m in context
            ) or _truncated(logged, last_user)

    # The running token total equals a recount from scratch.
    assert memory.estimate_context_tokens() == memory.token_counter.context_tokens(context)


def _truncated(logged: dict[int, dict[str, Any]], seq: int) -> bool:
    return "context_message" in logged[seq]


def run(
    conversation: list[dict[str, Any]],
    failures: list[bool],
    threshold: int,
    session_id: str = "prop",
    system_role: str = "system",
    clear_keep: int | None = None,
) -> tuple[CompactionMemory, InMemoryLogStore, CompactFn]:
    """Drive a logging memory through ``conversation``, checking the invariants
    after every message and that the log holds every message; returns the
    memory, its log and the summariser it used. ``clear_keep``: tool-result
    clearing on, keeping that many newest results (``None``: off)."""
    store = InMemoryLogStore()
    plan = iter(failures)

    def summarise(messages: list[ChatMessage], system_prompt: str) -> str:
        assert system_prompt == clean_text(SYSTEM_PROMPT)
        if next(plan, False):
            raise RuntimeError("summariser down")
        return f"summary of {len(messages)} messages"

    memory = CompactionMemory(
        config=CompactionMemoryConfig(
            session_id=session_id,
            token_threshold=threshold,
            max_tool_result_tokens=60,
            clear_tool_results=clear_keep is not None,
            clear_keep_tool_results=clear_keep or 0,
        ),
        compact_fn=summarise,
        log_store=store,
        model_name="gpt-4o",
    )
    memory.set_system_prompt(SYSTEM_PROMPT, role=system_role)  # type: ignore[arg-type]
    added: list[ChatMessage] = []

    async def drive() -> None:
        for data in conversation:
            message = ChatMessage.from_dict(data)
            await memory.add_message(message)
            added.append(message)
            logged = {r["seq"]: r for r in store.read(session_id) if r["type"] == records.MESSAGE}
            check_context(memory, added, logged, system_role)

    asyncio.run(drive())

    messages = [r for r in store.read(session_id) if r["type"] == records.MESSAGE]
    assert [r["seq"] for r in messages] == list(range(len(conversation)))
    assert [r["message"] for r in messages] == [
        ChatMessage.from_dict(d).to_dict() for d in conversation
    ]
    return memory, store, summarise


def assert_restores_exactly(
    memory: CompactionMemory, store: LogStore, compact_fn: CompactFn
) -> None:
    restored = CompactionMemory.restore_from_log(
        memory.session_id, log_store=store, compact_fn=compact_fn
    )
    assert [m.to_dict() for m in restored.get_context()] == [
        m.to_dict() for m in memory.get_context()
    ]
    assert restored.estimate_context_tokens() == memory.estimate_context_tokens()
    assert restored.at_boundary == memory.at_boundary
    assert restored.compaction_count == memory.compaction_count
    assert restored.restore_problems == []
    assert restored.system_role == memory.system_role


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    conversation=conversations(),
    failures=st.lists(st.booleans(), max_size=8),
    threshold=st.integers(150, 900),
    system_role=st.sampled_from(["system", "developer"]),
    clear_keep=st.one_of(st.none(), st.integers(0, 3)),
)
def test_every_context_is_valid_and_restores_exactly(
    conversation: list[dict[str, Any]],
    failures: list[bool],
    threshold: int,
    system_role: str,
    clear_keep: int | None,
) -> None:
    memory, store, summarise = run(
        conversation, failures, threshold, system_role=system_role, clear_keep=clear_keep
    )
    assert_restores_exactly(memory, store, summarise)
