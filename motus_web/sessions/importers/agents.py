"""An agent's session (``formats.ParsedSession``) as log records, its own compactions in place."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import orjson

from memory import INSTRUCTION_ROLES, ChatMessage
from memory.log import LogRecord

from .formats import ParsedCompaction, ParsedSession
from .ingest import BATCH, chat_message
from .runner import Replayer, with_provider_tokens


def agent_batches(
    parsed: ParsedSession,
    replayer: Replayer,
    seqs: dict[int, int],
    location: str,
    count: Callable[[str], None],
) -> Iterator[list[LogRecord]]:
    """The records of an agent's session: its messages, with its own compactions in place."""
    compactions = sorted(parsed.compactions, key=lambda c: c.at)
    pending: list[ChatMessage] = []
    tokens: dict[int, int] = {}
    next_seq = 0

    def flush() -> list[LogRecord]:
        batch = with_provider_tokens(replayer.add(pending), tokens)
        pending.clear()
        return batch

    for index, raw in enumerate([*parsed.messages, None]):
        while compactions and compactions[0].at <= index:
            yield flush()
            yield replayer.compaction(**_external(compactions.pop(0), replayer))
        if raw is None:
            break
        where = f"{location}, message {index + 1}"
        count(where)
        message = chat_message(raw, where)
        if message.role not in INSTRUCTION_ROLES:
            seqs[index] = next_seq
            if index in parsed.provider_input_tokens:
                tokens[next_seq] = parsed.provider_input_tokens[index]
            next_seq += 1
        pending.append(message)
        if len(pending) >= BATCH:
            yield flush()
    yield flush()


def _external(compaction: ParsedCompaction, replayer: Replayer) -> dict[str, Any]:
    """``record_external_compaction`` arguments for a tool's own compaction.

    Claude Code keeps nothing but its summary message (``messages[at:]`` come
    after). Codex rebuilds the context from ``replacement``: its items that are
    messages of the context are kept (``replayed_seqs``), the one that holds
    the summary is the continuation, and the whole history stays on the record.
    """
    extra: dict[str, Any] = {"source_compaction": compaction.extra} if compaction.extra else {}
    continuation = compaction.summary
    replayed: list[int] = []
    if compaction.replacement is not None:
        extra["replacement_history"] = compaction.replacement
        by_content: dict[tuple[str, bytes], list[int]] = {}
        for seq, message in replayer.context_seqs():
            by_content.setdefault(_content_key(message), []).append(seq)
        unmatched: list[int] = []
        for number, item in enumerate(compaction.replacement):
            text = item.get("content")
            if compaction.summary and isinstance(text, str) and compaction.summary in text:
                continuation = text
                continue
            found = by_content.get(_content_key(item))
            if found:
                replayed.append(found.pop())
            else:
                unmatched.append(number)
        if unmatched:
            extra["unmatched_replacement"] = unmatched
    return {
        "summary": compaction.summary,
        "continuation": continuation,
        "replayed_seqs": replayed,
        "trigger": compaction.trigger,
        "tokens_before": compaction.tokens_before,
        "extra": extra,
    }


def _content_key(message: dict[str, Any]) -> tuple[str, bytes]:
    content = orjson.dumps(message.get("content"), option=orjson.OPT_SORT_KEYS)
    return str(message.get("role")), content


def seq_of_call(parsed: ParsedSession, seqs: dict[int, int], call: object) -> int | None:
    """The seq of the assistant message that made tool call ``call``."""
    if not isinstance(call, str):
        return None
    for index, message in enumerate(parsed.messages):
        calls = message.get("tool_calls")
        if isinstance(calls, list) and any(
            isinstance(c, dict) and c.get("id") == call for c in calls
        ):
            return seqs.get(index)
    return None
