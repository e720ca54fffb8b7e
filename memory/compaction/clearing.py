"""Tool-result clearing: the cheap step taken before anything is summarised.

When a compacting memory reaches its threshold and the config's
``clear_tool_results`` is on, tool results older than the newest
``clear_keep_tool_results`` are replaced in the context by a one-line stub
that names the call (tool name and call id), the result's size (tokens and
UTF-8 bytes) and where the full result is (the session log, by message seq).
The memory summarises only when that does not bring the context under the
threshold. The knobs follow Anthropic's ``clear_tool_uses_20250919`` context
edit (``keep``, ``clear_at_least``, ``exclude_tools``; docs: "Context
editing", platform.claude.com/docs/en/build-with-claude/context-editing), the
same strategy as Claude Code's micro-compaction and LangChain's
``ClearToolUsesEdit``.

What is never cleared: a result of the turn a compaction would keep verbatim
(the newest unit and the request it works on), so a compaction always folds
every stub it finds and the context after it holds none; a result of an
excluded tool; a result already a stub; a message without a log seq (a
placeholder result, which no record could give back).

The context stays valid: a stub is the same tool message with its content
replaced, in the same place, answering the same call id(s).

Nothing here changes a memory: ``plan_clearing`` picks the results and writes
their stubs; ``memory.compaction.state.CompactionState.clear_tool_results``
applies a ``tool_results_cleared`` record, live and on restore.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from typing import Any

from ..messages import ChatMessage
from ..state import EntryMeta

STUB_PREFIX = "[tool result cleared"


def stub_text(*, name: str | None, call_id: str, tokens: int, size: int, seq: int) -> str:
    """The one-line stub of a cleared result: the call, its size in tokens and
    UTF-8 bytes, and the message seq of the full result in the log."""
    tool = name or "a tool"
    return (
        f"{STUB_PREFIX}: {tool} call {call_id} returned {tokens:,} tokens "
        f"({size:,} bytes); the full result is in the session log, message {seq}]"
    )


def stub_message(original: ChatMessage, stub: str) -> ChatMessage:
    """``original`` with ``stub`` as its content: same role, call id(s) and name."""
    return dataclasses.replace(original, content=stub)


def call_names(messages: Sequence[ChatMessage]) -> dict[str, str]:
    """Call id -> tool name, from the assistant messages' tool calls."""
    return {
        call.id: call.name
        for message in messages
        if message.role == "assistant"
        for call in message.tool_calls
        if call.id
    }


def plan_clearing(
    messages: Sequence[ChatMessage],
    meta: Sequence[EntryMeta],
    tokens: Sequence[int],
    *,
    keep: int,
    protected: Collection[int],
    cleared_seqs: Collection[int],
    exclude_tools: Collection[str],
    count: Any,
) -> list[dict[str, Any]]:
    """The ``cleared`` items of a ``tool_results_cleared`` record for this
    context (parallel lists as ``ContextState`` holds them), oldest first;
    ``[]`` when nothing may be cleared.

    ``keep``: the newest tool results left whole (counted over the results
    not cleared yet, excluded tools included, as Anthropic counts tool uses);
    ``protected``: context indices a compaction would keep verbatim;
    ``cleared_seqs``: seqs already stubs; ``count(message) -> int``: tokens of
    a stub message in the context. A stub that would not be smaller than its
    result is not written.
    """
    names = call_names(messages)
    results = [
        i
        for i, message in enumerate(messages)
        if message.role == "tool" and meta[i].seq is not None and meta[i].seq not in cleared_seqs
    ]
    older = results[: max(0, len(results) - keep)]
    items: list[dict[str, Any]] = []
    for i in older:
        message, seq = messages[i], meta[i].seq
        assert seq is not None
        ids = message.tool_call_ids
        name = message.name or next((names[c] for c in ids if c in names), None)
        if i in protected or (name is not None and name in exclude_tools):
            continue
        call_id = ", ".join(ids) or "?"
        size = len(message.text.encode("utf-8"))
        stub = stub_text(name=name, call_id=call_id, tokens=tokens[i], size=size, seq=seq)
        stub_tokens = count(stub_message(message, stub))
        if stub_tokens >= tokens[i]:
            continue
        items.append(
            {
                "seq": seq,
                "tool_call_id": call_id,
                "name": name,
                "tokens": tokens[i],
                "bytes": size,
                "stub": stub,
                "stub_tokens": stub_tokens,
            }
        )
    return items


def freed_tokens(items: Sequence[dict[str, Any]]) -> int:
    """Context tokens the clearing of ``items`` frees."""
    return sum(int(item["tokens"]) - int(item["stub_tokens"]) for item in items)
