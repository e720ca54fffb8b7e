"""The memory tools: the agent searches its session's full log and reads past summaries.

A compaction folds messages into a summary; the log still has every one of
them. ``CompactionMemory.build_tools()`` gives the agent two plain async
functions over the memory's log store (JSONL, in-memory or the dashboard's
database: anything with ``read``):

- ``search_conversation_log(query, max_results=10)``: the messages whose text,
  tool-call arguments or tool name contain ``query`` (case-insensitive), with
  their ``seq``, oldest first, each cut to a window around the match;
- ``read_compaction_summary(compaction_number=-1)``: the summary of a
  compaction, ``-1`` for the latest.

Both return JSON text with a ``status`` (``ok``, ``no_summaries``,
``not_found``, ``error``) and never raise for a bad argument or a log that
cannot be read: the model reads the answer and can try again. Their output is
bounded in characters (``OUTPUT_MAX_CHARS``) and results (``MAX_RESULTS``).
The scanning itself is pure (``search_records``, ``read_summary``) and runs in
a worker thread, so a long log does not stall the event loop.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import LogError
from ..log.records import COMPACTION, COMPACTION_REVERT, MESSAGE, RESET
from ..log.store import AsyncLogStore
from ..messages import ChatMessage, InvalidMessageError

if TYPE_CHECKING:
    from .memory import CompactionMemory

MAX_RESULTS = 50
"""The most messages one search returns, whatever ``max_results`` asks."""
SNIPPET_CHARS = 800
"""Characters of a matching message returned: a window around the first match."""
OUTPUT_MAX_CHARS = 12_000
"""Characters of search results returned in all; the rest are counted, not shown."""
SUMMARY_MAX_CHARS = 40_000
"""Characters of a summary returned (summaries of imported sessions can be huge)."""


def search_records(
    records: Iterable[Mapping[str, Any]],
    query: str,
    *,
    max_results: int = 10,
    snippet_chars: int = SNIPPET_CHARS,
    output_chars: int = OUTPUT_MAX_CHARS,
) -> dict[str, Any]:
    """Search the message records of a log for ``query`` (case-insensitive substring).

    Returns ``{"status": "ok", "query", "count", "total_matches", "truncated",
    "results": [{"seq", "role", "name"?, "ts", "text"}]}``: the first
    ``max_results`` matches (at most ``MAX_RESULTS``) in log order, each
    ``text`` at most about ``snippet_chars`` characters around the first match,
    all of them within ``output_chars``; ``truncated`` says matches were left
    out. An empty query gives ``{"status": "error", "message"}``.
    """
    needle = query.casefold().strip()
    if not needle:
        return {"status": "error", "message": "the query is empty: give a word or phrase"}
    limit = min(max(max_results, 1), MAX_RESULTS)
    results: list[dict[str, Any]] = []
    total = 0
    used = 0
    for record in records:
        if record.get("type") != MESSAGE:
            continue
        try:
            message = ChatMessage.from_dict(record.get("message") or {})
        except InvalidMessageError:
            continue
        text = searchable_text(message)
        at = text.casefold().find(needle)
        if at < 0:
            continue
        total += 1
        if len(results) >= limit:
            continue
        hit: dict[str, Any] = {"seq": record.get("seq"), "role": message.role}
        if message.name:
            hit["name"] = message.name
        hit["ts"] = record.get("ts")
        hit["text"] = _window(text, at, len(needle), snippet_chars)
        size = len(json.dumps(hit, ensure_ascii=False))
        if used + size > output_chars:
            continue
        used += size
        results.append(hit)
    return {
        "status": "ok",
        "query": query,
        "count": len(results),
        "total_matches": total,
        "truncated": total > len(results),
        "results": results,
    }


def searchable_text(message: ChatMessage) -> str:
    """What a search looks in: the message's text, then its tool calls as
    ``name(arguments)``; a tool result is prefixed with its tool's name."""
    parts = [f"[{message.name}] {message.text}" if message.role == "tool" and message.name else ""]
    if not parts[0]:
        parts[0] = message.text
    parts.extend(f"{call.name}({call.arguments})" for call in message.tool_calls)
    return "\n".join(part for part in parts if part)


def read_summary(records: Iterable[Mapping[str, Any]], number: int = -1) -> dict[str, Any]:
    """The summary of compaction ``number`` (1 = the first, -1 = the latest) in a log.

    Returns ``{"status": "ok", "compaction_number", "messages_compacted",
    "summarized_seqs", "through_seq", "ts", "reverted", "summary",
    "truncated"}``, or ``{"status": "no_summaries" | "not_found", "message"}``.
    After a ``reset()`` the numbering starts again; a number then names the
    latest compaction that had it. ``reverted`` says the compaction was
    undone (its summary is no longer in the context).
    """
    by_number: dict[int, dict[str, Any]] = {}
    latest: dict[str, Any] | None = None
    count = 0
    for record in records:
        kind = record.get("type")
        if kind == RESET and record.get("scope") is None:
            count = 0  # reset() restarts the numbering, clear_messages() does not
        elif kind == COMPACTION and isinstance(record.get("summary"), str):
            count += 1
            raw = record.get("compaction_number")
            number_of = raw if isinstance(raw, int) and not isinstance(raw, bool) else count
            count = number_of
            entry = {**record, "compaction_number": number_of, "reverted": False}
            by_number[number_of] = entry
            latest = entry
        elif kind == COMPACTION_REVERT and record.get("reverts") in by_number:
            by_number[record["reverts"]]["reverted"] = True
    if latest is None:
        return {"status": "no_summaries", "message": "No compaction has happened yet."}
    chosen = latest if number == -1 else by_number.get(number)
    if chosen is None:
        available = ", ".join(str(n) for n in sorted(by_number))
        return {
            "status": "not_found",
            "message": f"There is no compaction {number}. Available: {available} (-1 = latest).",
        }
    summary: str = chosen["summary"]
    return {
        "status": "ok",
        "compaction_number": chosen["compaction_number"],
        "messages_compacted": chosen.get("messages_compacted"),
        "summarized_seqs": chosen.get("summarized_seqs"),
        "through_seq": chosen.get("through_seq"),
        "ts": chosen.get("ts"),
        "reverted": chosen["reverted"],
        "summary": summary[:SUMMARY_MAX_CHARS],
        "truncated": len(summary) > SUMMARY_MAX_CHARS,
    }


def build_memory_tools(memory: CompactionMemory) -> list[Callable[..., Any]]:
    """The two memory tools bound to ``memory``'s session and log store."""

    async def search_conversation_log(query: str, max_results: int = 10) -> str:
        """Search this session's full conversation log for a word or phrase
        (case-insensitive), including messages folded into a summary and tool
        results that were cut short. Use it to recover exact details (ids, file
        paths, error messages, numbers, names) a summary left out. Returns the
        matching messages with their seq, oldest first.

        Args:
            query: The text to look for, e.g. an id, a name or a phrase.
            max_results: How many matching messages to return (1-50).
        """
        answer = await _scan(
            memory, lambda records: search_records(records, query, max_results=max_results)
        )
        return json.dumps(answer, ensure_ascii=False)

    async def read_compaction_summary(compaction_number: int = -1) -> str:
        """Read the summary written at a compaction of this conversation: -1 for
        the latest, 1 for the first, 2 for the second, and so on.

        Args:
            compaction_number: Which compaction: -1 = the latest, 1 = the first.
        """
        answer = await _scan(memory, lambda records: read_summary(records, compaction_number))
        return json.dumps(answer, ensure_ascii=False)

    return [search_conversation_log, read_compaction_summary]


async def _scan(
    memory: CompactionMemory, scan: Callable[[Iterable[Mapping[str, Any]]], dict[str, Any]]
) -> dict[str, Any]:
    store = memory.log_store
    if store is None:
        return {"status": "error", "message": "this session has no conversation log"}
    if isinstance(store, AsyncLogStore):
        await memory.flush()  # what the memory queued must be in the store to be found
    session_id = memory.session_id

    def run() -> dict[str, Any]:
        if not store.exists(session_id):
            return scan([])
        return scan(store.read(session_id))

    try:
        return await asyncio.to_thread(run)
    except LogError as exc:
        return {"status": "error", "message": f"the conversation log could not be read: {exc}"}


def _window(text: str, at: int, length: int, chars: int) -> str:
    if len(text) <= chars:
        return text
    start = max(0, min(at - chars // 3, len(text) - chars))
    end = start + chars
    head = "..." if start > 0 else ""
    tail = "..." if end < len(text) else ""
    return f"{head}{text[start:end]}{tail}"
