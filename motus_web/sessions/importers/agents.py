"""An agent's session (``formats.ParsedSession``) as log records, its own compactions in place."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import orjson

from memory import INSTRUCTION_ROLES, ChatMessage
from memory.log import LogRecord

from .formats import ParsedCompaction, ParsedSession
from .identity import fingerprints
from .ingest import BATCH, chat_message
from .runner import Replayer, with_provider_tokens

TITLE_CHARS = 80  # of a first request that titles a session


def first_request(messages: list[dict[str, Any]]) -> str | None:
    """The first user message's text, on one line and trimmed to ``TITLE_CHARS``.

    Text the tool wrapped in markup (Claude Code's ``<command-name>``,
    ``<system-reminder>``...) is not a request and is passed over.
    """
    for message in messages:
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = " ".join(
                str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p
            )
        text = " ".join(str(content or "").split())
        if text and not text.startswith("<"):
            return text if len(text) <= TITLE_CHARS else text[: TITLE_CHARS - 1].rstrip() + "…"
    return None


def units(parsed: ParsedSession) -> Iterator[tuple[int | None, Any]]:
    """The session's messages ``(index, raw)`` and own compactions ``(None, compaction)``,
    in the order they happened (a compaction at ``at`` comes before message ``at``)."""
    compactions = sorted(parsed.compactions, key=lambda c: c.at)
    for index, raw in enumerate(parsed.messages):
        while compactions and compactions[0].at <= index:
            yield None, compactions.pop(0)
        yield index, raw
    for compaction in compactions:
        yield None, compaction


def unit_fingerprints(parsed: ParsedSession) -> list[str]:
    """``identity.fingerprints`` of the session's units (see ``units``)."""

    def value(index: int | None, item: Any) -> Any:
        if index is not None:
            return item
        return {"compaction": item.summary, "trigger": item.trigger, "at": item.at}

    return fingerprints(value(index, item) for index, item in units(parsed))


def message_seqs(parsed: ParsedSession) -> dict[int, int]:
    """The seq each message (by index) gets: instructions get none, the others count up."""
    seqs: dict[int, int] = {}
    for index, raw in enumerate(parsed.messages):
        role = raw.get("role") if isinstance(raw, dict) else None
        if not (isinstance(role, str) and role in INSTRUCTION_ROLES):
            seqs[index] = len(seqs)
    return seqs


def seq_at(parsed: ParsedSession, shared_units: int) -> int | None:
    """The seq of the last message among the first ``shared_units`` units, if any."""
    seqs = message_seqs(parsed)
    last: int | None = None
    for number, (index, _) in enumerate(units(parsed)):
        if number >= shared_units:
            break
        if index is not None and index in seqs:
            last = seqs[index]
    return last


def agent_batches(
    parsed: ParsedSession,
    replayer: Replayer,
    location: str,
    count: Callable[[str], None],
    start: int = 0,
) -> Iterator[list[LogRecord]]:
    """The records of an agent's session: its messages, with its own compactions in place.

    ``start`` units (see ``units``) are already in the replayer's memory (an
    update of a stored session): they are counted, not added again. (After a
    rewind, ``growth``, the rest get later seqs than a new session's would.)
    """
    seqs = message_seqs(parsed)
    after = [seqs[i] for n, (i, _) in enumerate(units(parsed)) if n >= start and i in seqs]
    shift = replayer.memory.next_seq - after[0] if after else 0
    pending: list[ChatMessage] = []
    tokens: dict[int, int] = {}

    def flush() -> list[LogRecord]:
        batch = with_provider_tokens(replayer.add(pending), tokens)
        pending.clear()
        return batch

    for number, (index, item) in enumerate(units(parsed)):
        if index is None:
            if number >= start:
                yield flush()
                yield replayer.compaction(**_external(item, replayer), model=parsed.source_tool)
            continue
        where = f"{location}, message {index + 1}" if location else f"message {index + 1}"
        count(where)
        if number < start:
            continue
        message = chat_message(item, where)
        if index in seqs and index in parsed.provider_input_tokens:
            tokens[seqs[index] + shift] = parsed.provider_input_tokens[index]
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


def seq_of_call(parsed: ParsedSession, call: object) -> int | None:
    """The seq of the assistant message that made tool call ``call``."""
    if not isinstance(call, str):
        return None
    seqs = message_seqs(parsed)
    for index, message in enumerate(parsed.messages):
        calls = message.get("tool_calls")
        if isinstance(calls, list) and any(
            isinstance(c, dict) and c.get("id") == call for c in calls
        ):
            return seqs.get(index)
    return None
