"""Parsers, one per format: each yields transcripts or logs, and problems with their place.

JSONL is read line by line, so a large file never sits in memory whole; a JSON
document has to be loaded at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, BinaryIO

import orjson

from memory.json_values import loads  # reads escaped lone surrogates, as U+FFFD
from memory.log import LogProblem, parse_lines, records

from .sources import Found, MotusLog, Problem, Transcript

# Where runs keep their messages: OpenAI-style exports, tau-bench, SWE-agent.
MESSAGE_KEYS = ("messages", "traj", "history")


def parse_motus_log(stream: BinaryIO, source: str) -> Iterator[Found]:
    """One Motus log is one session: any bad line refuses all of it."""
    found: list[dict[str, Any]] = []
    lines: list[int] = []
    problems: list[Problem] = []
    for number, item in parse_lines(stream):
        if isinstance(item, LogProblem):
            detail = f"{item.error} (a torn last line)" if item.torn else item.error
            problems.append(Problem(source, f"line {number}", detail))
            continue
        found.append(item)
        lines.append(number)
    if found and found[0]["type"] != records.SESSION_META:
        problems.append(Problem(source, f"line {lines[0]}", "a Motus log starts with session_meta"))
    if problems:
        yield from problems
    elif found:
        yield MotusLog(found, lines)


def parse_messages_jsonl(stream: BinaryIO, source: str, stem: str) -> Iterator[Found]:
    """One session per line; a bad line is reported and the others still import."""
    for number, raw in enumerate(stream, start=1):
        if not raw.strip():
            continue
        location = f"line {number}"
        try:
            item = loads(raw)
        except orjson.JSONDecodeError as error:
            yield Problem(source, location, f"invalid JSON: {error.msg}")
            continue
        messages = item.get("messages") if isinstance(item, dict) else None
        if not isinstance(messages, list):
            yield Problem(source, location, "expected an object with a 'messages' list")
            continue
        yield Transcript(number, location, _title(item, stem, number), messages)


def parse_json(stream: BinaryIO, source: str, stem: str) -> Iterator[Found]:
    """A list of messages, an object with messages, or a list of such objects (runs)."""
    try:
        document = loads(stream.read())
    except orjson.JSONDecodeError as error:
        where = f"line {error.lineno} column {error.colno}"
        yield Problem(source, where, f"invalid JSON: {error.msg}")
        return
    if isinstance(document, list) and document and _looks_like_message(document[0]):
        yield Transcript(1, "", stem, document)
    elif isinstance(document, dict):
        messages = _messages_of(document)
        if messages is None:
            yield Problem(source, "", _EXPECTED)
        else:
            yield Transcript(1, "", _title(document, stem, None), messages)
    elif isinstance(document, list) and document:
        for index, run in enumerate(document, start=1):
            location = f"record {index}"
            messages = _messages_of(run) if isinstance(run, dict) else None
            if messages is None:
                yield Problem(source, location, _EXPECTED)
            else:
                yield Transcript(index, location, _title(run, stem, index), messages)
    else:
        yield Problem(source, "", _EXPECTED)


_EXPECTED = (
    "expected chat messages: a list of messages, an object with a "
    + ", ".join(repr(k) for k in MESSAGE_KEYS)
    + " list, or a list of such objects"
)


def _looks_like_message(item: object) -> bool:
    return isinstance(item, dict) and "role" in item


def _messages_of(run: dict[str, Any]) -> list[Any] | None:
    for key in MESSAGE_KEYS:
        if isinstance(run.get(key), list):
            return list(run[key])
    return None


def _title(run: dict[str, Any], stem: str, index: int | None) -> str:
    """The run's own title, else the file name with task and trial (tau-bench) or index."""
    title = run.get("title")
    if isinstance(title, str) and title.strip():
        return title.strip()
    parts = [stem]
    parts += [f"{key.replace('_id', '')} {run[key]}" for key in ("task_id", "trial") if key in run]
    if len(parts) == 1 and index is not None:
        parts.append(f"#{index}")
    return " · ".join(parts)
