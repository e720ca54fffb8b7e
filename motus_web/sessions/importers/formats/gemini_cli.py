"""Gemini CLI chat sessions: ``~/.gemini/tmp/<project hash>/chats/session-*.jsonl`` (current)
or ``session-*.json`` (older versions).

Current versions append one JSON record per line (google-gemini/gemini-cli,
``packages/core/src/services/chatRecordingService.ts``, read at commit
5411f113, August 2026): a first metadata line (``sessionId``, ``projectHash``,
``startTime``, ``kind``...), then message records (an ``id``; a later record
with the same id replaces the earlier one in place, as the CLI updates a
message with its tool calls and tokens), ``{"$set": {...}}`` metadata updates
(``summary``, ``lastUpdated``; a ``messages`` list there is a checkpoint that
replaces every message before it) and ``{"$rewindTo": id}`` (the CLI's rewind:
that message and all after it are dropped). ``fold`` applies them as the CLI's
``loadConversationRecord`` does, giving the older single document.

That document holds ``sessionId``, ``startTime``, ``summary`` and
``messages``, each with ``type`` ``user`` or ``gemini`` (``info``, ``error`` and
``warning`` entries are the CLI's own notices and are only counted). A ``gemini``
message carries its tool calls with their results (``toolCalls[].result``), its
thoughts (``thoughts[]``: subject and description) and the provider's token
counts (``tokens.input`` is the prompt size, cached tokens included).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, BinaryIO

from ._io import BOM, HEAD_SIZE, capped, json_lines, kind, loads, shown
from ._json import load
from .model import FormatError, FormatProblem, ParsedSession, named_model

FORMAT = "gemini-cli"
# A current model of the tool's provider: it counts a session whose file names none.
ESTIMATE_MODEL = "gemini-2.5-pro"
NOTICE_TYPES = frozenset({"info", "error", "warning"})
MESSAGE_TYPES = frozenset({"user", "gemini"}) | NOTICE_TYPES


def parse(stream: BinaryIO, source: str) -> Iterator[ParsedSession | FormatProblem]:
    """Yield the session in ``stream`` (either shape), or the problem that refuses it;
    damaged lines of a ``.jsonl`` file are skipped with a warning each."""
    damaged: list[FormatProblem] = []
    try:
        if _line_per_record(stream):
            document = fold(json_lines(stream), source, damaged)
        else:
            document = load(stream)
        session = _session(document)
    except FormatError as error:
        yield error.problem(source)
    else:
        yield session
    yield from capped(damaged, source)


def _line_per_record(stream: BinaryIO) -> bool:
    """Whether the file's first line is a whole JSON object that is a record
    (the ``.jsonl`` shape). An older document's first line is ``{`` when it is
    pretty-printed, or the whole document, which holds its ``messages`` list,
    when it is not. Rewinds ``stream``."""
    start = stream.tell()
    first = stream.readline(HEAD_SIZE).removeprefix(BOM)
    stream.seek(start)
    try:
        record = loads(first)
    except ValueError:
        return False
    return isinstance(record, dict) and not isinstance(record.get("messages"), list)


def fold(
    lines: Iterator[tuple[int, dict[str, Any] | str]], source: str, damaged: list[FormatProblem]
) -> dict[str, Any]:
    """The single document the records of a ``.jsonl`` session stand for; a line
    that cannot be read or is of no kind the CLI writes goes to ``damaged``."""
    metadata: dict[str, Any] = {}
    messages: dict[str, dict[str, Any]] = {}
    for number, record in lines:
        if isinstance(record, str):
            damaged.append(FormatProblem(source, f"line {number}", record, warning=True))
        elif isinstance(record.get("$rewindTo"), str):
            ids = list(messages)
            cut = ids.index(record["$rewindTo"]) if record["$rewindTo"] in ids else 0
            for dropped in ids[cut:]:
                del messages[dropped]
        elif isinstance(record.get("id"), str):
            messages[record["id"]] = record
        elif isinstance(record.get("$set"), dict):
            update = dict(record["$set"])
            if isinstance(update.get("messages"), list):
                messages = _by_id(update.pop("messages"))
            metadata.update(update)
        elif isinstance(record.get("sessionId"), str):
            update = dict(record)
            if isinstance(update.get("messages"), list):
                messages.update(_by_id(update.pop("messages")))
            metadata.update(update)
        else:
            why = "neither a message, a metadata line, $set nor $rewindTo: skipped"
            damaged.append(FormatProblem(source, f"line {number}", why, warning=True))
    if not metadata:
        raise FormatError("", "no metadata line (sessionId, projectHash): not a Gemini CLI session")
    return {**metadata, "messages": list(messages.values())}


def _by_id(messages: list[Any]) -> dict[str, dict[str, Any]]:
    return {m["id"]: m for m in messages if isinstance(m, dict) and isinstance(m.get("id"), str)}


def _session(document: object) -> ParsedSession:
    if not isinstance(document, dict):
        raise FormatError("", f"expected an object, got {kind(document)}")
    raw = document.get("messages")
    if not isinstance(raw, list):
        raise FormatError("", f"expected a list, got {kind(raw)}", "messages")
    messages: list[dict[str, Any]] = []
    tokens: dict[int, int] = {}
    notices: dict[str, int] = {}
    for number, record in enumerate(raw, start=1):
        where = f"message {number}"
        if not isinstance(record, dict):
            raise FormatError(where, f"expected an object, got {kind(record)}")
        kind_ = record.get("type")
        if isinstance(kind_, str) and kind_ in NOTICE_TYPES:
            notices[str(kind_)] = notices.get(str(kind_), 0) + 1
            continue
        if kind_ == "user":
            rest = _rest(record, ("type", "content"))
            messages.append(
                {"role": "user", "content": _content(record.get("content"), where), **rest}
            )
        elif kind_ == "gemini":
            reported = _input_tokens(record.get("tokens"))
            if reported is not None:
                tokens[len(messages)] = reported
            messages += _gemini(record, where)
        else:
            raise FormatError(
                where, f"expected user, gemini, info, error or warning, got {shown(kind_)}", "type"
            )
    extra = {
        k: v
        for k, v in document.items()
        if k not in ("messages", "sessionId", "startTime", "summary")
    }
    if notices:
        extra["notices"] = notices
    session_id, start, summary = (document.get(k) for k in ("sessionId", "startTime", "summary"))
    return ParsedSession(
        source_format=FORMAT,
        source_tool="Gemini CLI",
        original_id=session_id if isinstance(session_id, str) else None,
        title=summary if isinstance(summary, str) and summary.strip() else None,
        created_at=start if isinstance(start, str) else None,
        system_prompt=None,
        messages=messages,
        provider_input_tokens=tokens,
        extra=extra,
        model=named_model(
            [document.get("model")] + [m.get("model") for m in messages if m["role"] == "assistant"]
        ),
    )


def _rest(record: dict[str, Any], taken: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in taken}


def _input_tokens(tokens: object) -> int | None:
    value = tokens.get("input") if isinstance(tokens, dict) else None
    return value if isinstance(value, int) and value > 0 else None


def _content(raw: object, where: str, field: str = "content") -> str | list[dict[str, Any]]:
    """Gemini parts (a string, a part, or a list of either) as chat content."""
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    items = raw if isinstance(raw, list) else [raw]
    parts: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        if isinstance(item, str):
            parts.append({"type": "text", "text": item})
        elif isinstance(item, dict):
            text = item.get("text")
            parts.append(
                {"type": "text", "text": text}
                if item.keys() == {"text"} and isinstance(text, str)
                else item
            )
        else:
            raise FormatError(
                where, f"expected a string or a part, got {kind(item)}", f"{field}[{index}]"
            )
    if all(p.get("type") == "text" and p.keys() == {"type", "text"} for p in parts):
        return "".join(str(p["text"]) for p in parts)
    return parts


def _gemini(record: dict[str, Any], where: str) -> list[dict[str, Any]]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": _content(record.get("content"), where) or None,
    }
    thoughts = record.get("thoughts")
    if isinstance(thoughts, list) and thoughts:
        message["reasoning_content"] = "\n\n".join(
            "\n".join(
                str(t[k]) for k in ("subject", "description") if isinstance(t, dict) and t.get(k)
            )
            for t in thoughts
        )
    calls = record.get("toolCalls") or []
    if not isinstance(calls, list):
        raise FormatError(where, f"expected a list, got {kind(calls)}", "toolCalls")
    results: list[dict[str, Any]] = []
    for index, call in enumerate(calls):
        field = f"toolCalls[{index}]"
        if not isinstance(call, dict):
            raise FormatError(where, f"expected an object, got {kind(call)}", field)
        call_id, name = call.get("id"), call.get("name")
        if not isinstance(call_id, str) or not call_id:
            raise FormatError(where, f"expected a string, got {kind(call_id)}", f"{field}.id")
        if not isinstance(name, str):
            raise FormatError(where, f"expected a string, got {kind(name)}", f"{field}.name")
        arguments = json.dumps(call.get("args", {}), ensure_ascii=False, separators=(",", ":"))
        message.setdefault("tool_calls", []).append(
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        )
        results.append(_result(call, call_id, name, where, field))
    message.update(_rest(record, ("type", "content", "thoughts", "toolCalls")))
    if isinstance(thoughts, list) and thoughts:
        message["thoughts"] = thoughts
    return [message, *results]


def _result(
    call: dict[str, Any], call_id: str, name: str, where: str, field: str
) -> dict[str, Any]:
    """The tool message of one call: the text of its ``functionResponse`` output."""
    raw = call.get("result")
    result: dict[str, Any] = {"role": "tool", "tool_call_id": call_id, "name": name}
    responses = raw if isinstance(raw, list) else [raw] if raw is not None else []
    outputs = [
        r["functionResponse"].get("response")
        for r in responses
        if isinstance(r, dict) and isinstance(r.get("functionResponse"), dict)
    ]
    if responses and len(outputs) == len(responses):
        texts = [
            o["output"]
            if isinstance(o, dict) and isinstance(o.get("output"), str)
            else json.dumps(o)
            for o in outputs
        ]
        result["content"] = "\n".join(texts)
        if not all(isinstance(o, dict) and o.keys() == {"output"} for o in outputs):
            result["gemini_result"] = raw
    else:
        result["content"] = _content(raw, where, f"{field}.result")
    if call.get("status") == "error":
        result["is_error"] = True
    result["gemini_call"] = _rest(call, ("id", "name", "args", "result"))
    return result
