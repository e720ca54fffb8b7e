"""Which format a file is in, from its content, and the parser for it.

``detect`` looks at the first bytes only (gzip-compressed or not): the first
value of the file as far as those bytes go, parsed with ``ijson`` so a first line
or document longer than the head still shows its keys. Codex rollouts are told
apart from Motus logs (both start with a ``session_meta`` line) by Codex's
``payload``.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import ijson

from . import anthropic, chatgpt, claude_code, codex, gemini_cli, openhands
from ._io import HEAD_SIZE, cut_short, encoding_problem, open_plain, plain_head
from ._json import nesting_too_deep, without_surrogate_escapes
from .model import FormatProblem, ParsedSession

# Format name -> what it is and where it lives on disk (shown when a file is not recognised).
SUPPORTED: dict[str, str] = {
    "claude-code": "Claude Code transcript (~/.claude/projects/<project>/<session>.jsonl)",
    "codex-cli": "Codex CLI rollout (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl)",
    "chatgpt": "ChatGPT export (conversations.json from Settings > Data controls > Export)",
    "claude-ai": "Claude.ai export (conversations.json from Settings > Privacy > Export data)",
    "gemini-cli": "Gemini CLI session (~/.gemini/tmp/<project hash>/chats/session-*.jsonl or "
    ".json)",
    "anthropic-messages": "Anthropic Messages API request or response (JSON)",
    "openhands": "OpenHands event stream (output.jsonl of an evaluation run, one event a line)",
    "motus-log": "Motus JSONL conversation log",
    "openai-chat": "OpenAI chat messages (a JSON list, an object with 'messages', or JSONL)",
}
# Format name -> the model that counts a session whose file names none (the
# format's ``ESTIMATE_MODEL``; the others: the importer's setting).
ESTIMATE_MODELS: dict[str, str] = {
    claude_code.FORMAT: claude_code.ESTIMATE_MODEL,
    codex.FORMAT: codex.ESTIMATE_MODEL,
    gemini_cli.FORMAT: gemini_cli.ESTIMATE_MODEL,
    anthropic.FORMAT: anthropic.ESTIMATE_MODEL,
    anthropic.CLAUDE_AI: anthropic.ESTIMATE_MODEL,
}
# Parsed by the Motus importer itself, not here.
MOTUS_FORMATS = frozenset({"motus-log", "openai-chat"})
# The Motus log's record types (memory.log.records.RECORD_TYPES), kept here so
# that detection needs none of the library's internals.
_MOTUS_TYPES = frozenset(
    {
        "session_meta",
        "system_prompt",
        "message",
        "compaction",
        "compaction_failed",
        "compaction_warning",
        "compaction_revert",
        "reset",
    }
)
_CLAUDE_CODE_TYPES = frozenset(
    {
        "user",
        "assistant",
        "system",
        "summary",
        "progress",
        "file-history-snapshot",
        "queue-operation",
        "custom-title",
    }
)
_CLAUDE_CODE_KEYS = frozenset(
    {"uuid", "parentUuid", "leafUuid", "sessionId", "isSidechain", "messageId"}
)
_ANTHROPIC_BLOCKS = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use", "document"}
)
_EVENT_LIMIT = 20_000


def detect(head: bytes, name: str) -> str | None:
    """The format of a file from its first bytes (``HEAD_SIZE`` is enough), or ``None``.

    Returns a key of ``SUPPORTED``. The content alone decides (gzip by its magic
    bytes), so a renamed file is detected the same; ``name`` is for future hints.
    """
    head = plain_head(head)
    if encoding_problem(head):
        return None
    events = _events(without_surrogate_escapes(head))
    if not events:
        return None
    shape = _Shape(events)
    if shape.top == "map":
        return _detect_object(shape)
    if shape.top == "array":
        return _detect_list(shape)
    return None


def unrecognised(source: str, reason: str | None = None) -> FormatProblem:
    """The problem for a file in no supported format, listing the formats."""
    listed = "; ".join(SUPPORTED.values())
    why = f"{reason}. " if reason else ""
    return FormatProblem(source, "", f"{why}Unrecognised format. Supported formats: {listed}")


def parse(
    stream: BinaryIO,
    name: str,
    subagents: Iterable[tuple[BinaryIO, str]] = (),
    max_messages: int | None = None,
) -> Iterator[ParsedSession | FormatProblem]:
    """Detect the format of ``stream`` (binary, seekable) and yield what it holds.

    Yields each session, or a ``FormatProblem`` for each thing that refused one
    (naming the file, the line or record, and the field). ``subagents`` are the
    subagent transcripts of a Claude Code session. ``max_messages`` (an upload's
    cap) is applied while reading where the format streams its lines (Claude
    Code: see ``claude_code.parse``); the writer applies it to the rest. Raises
    ``ValueError`` for the Motus formats, which the Motus importer reads.
    """
    plain = open_plain(stream)
    try:
        head = plain.read(HEAD_SIZE)
        plain.seek(0)
    except _UNREADABLE as error:
        yield _unreadable(name, error)
        return
    format_ = detect(head, name)
    if format_ in MOTUS_FORMATS:
        raise ValueError(f"{name} is a {SUPPORTED[str(format_)]}: read it with the Motus importer")
    try:
        match format_:
            case "claude-code":
                yield from claude_code.parse(plain, name, subagents, max_messages)
            case "codex-cli":
                yield from codex.parse(plain, name)
            case "chatgpt":
                yield from chatgpt.parse(plain, name)
            case "claude-ai":
                yield from anthropic.parse_claude_ai(plain, name)
            case "gemini-cli":
                yield from gemini_cli.parse(plain, name)
            case "anthropic-messages":
                yield from anthropic.parse(plain, name)
            case "openhands":
                yield from openhands.parse(plain, name)
            case _:
                yield unrecognised(name, _reason(head))
    except _UNREADABLE as error:
        yield _unreadable(name, error)
    if why := cut_short(plain):
        yield FormatProblem(name, "", why, warning=True)


# A damaged gzip stream (truncated, bad CRC) or a failing disk, met while reading.
_UNREADABLE = (EOFError, OSError, zlib.error)


def _unreadable(name: str, error: Exception) -> FormatProblem:
    return FormatProblem(name, "", f"the file cannot be read to its end: {error}")


def parse_path(path: Path) -> Iterator[ParsedSession | FormatProblem]:
    """``parse`` a file on disk; a Claude Code session brings its subagent transcripts."""
    with path.open("rb") as stream:
        files = claude_code.subagent_files(path)
        handles = [child.open("rb") for child in files]
        try:
            yield from parse(stream, str(path), list(zip(handles, map(str, files), strict=True)))
        finally:
            for handle in handles:
                handle.close()


def _reason(head: bytes) -> str | None:
    plain = head.removeprefix(b"\xef\xbb\xbf")
    problem = encoding_problem(plain)
    if problem:
        return problem[:1].upper() + problem[1:]
    if not plain.strip():
        return "The file is empty"
    if plain.lstrip()[:1] not in (b"{", b"["):
        return "The file is not JSON or JSONL"
    return None


def _events(head: bytes) -> list[tuple[str, str, Any]]:
    """The parse events of the first JSON value in ``head``, as far as it goes;
    none when it nests too deep to parse with paths (the parser refuses it)."""
    events: list[tuple[str, str, Any]] = []
    if nesting_too_deep(io.BytesIO(head)):
        return events
    try:
        for event in ijson.parse(io.BytesIO(head)):
            events.append(event)
            if len(events) >= _EVENT_LIMIT or (
                event[0] == "" and event[1] in ("end_map", "end_array")
            ):
                break
    except ijson.JSONError:
        pass  # the head ends mid-value, or a second JSONL line follows: enough seen
    return events


class _Shape:
    """What the head's events say about the first value."""

    def __init__(self, events: list[tuple[str, str, Any]]) -> None:
        first = events[0][1]
        self.top = (
            "map" if first == "start_map" else "array" if first == "start_array" else "scalar"
        )
        self.keys: dict[str, list[str]] = {}  # container prefix -> its keys, in order
        self.values: dict[str, Any] = {}  # prefix -> first scalar value
        for prefix, event, value in events:
            if event == "map_key":
                self.keys.setdefault(prefix, []).append(value)
            elif event not in ("start_map", "end_map", "start_array", "end_array"):
                self.values.setdefault(prefix, value)
        self.block_types = {
            value
            for prefix, event, value in events
            if event == "string" and prefix.endswith("content.item.type")
        }

    def has(self, prefix: str, *keys: str) -> bool:
        return any(key in self.keys.get(prefix, ()) for key in keys)


def _detect_object(shape: _Shape) -> str | None:
    kind = shape.values.get("type")
    if shape.has("", "source") and shape.has("", "id") and shape.has("", *openhands.EVENT_KEYS):
        return "openhands"
    if shape.has("", "instance_id") and shape.has("", "history"):
        return "openhands"  # an evaluation record: the events under "history"
    if shape.has("", "payload") and (kind is None or kind in codex.LINE_TYPES):
        return "codex-cli"
    if kind in _CLAUDE_CODE_TYPES and shape.has("", *_CLAUDE_CODE_KEYS):
        return "claude-code"
    if kind is None and shape.has("", "parentUuid", "isSidechain"):
        return "claude-code"  # a first line whose type comes after the head
    if (
        kind == "message"
        and shape.values.get("role") == "assistant"
        and not shape.has("", "message")
    ):
        return "anthropic-messages"  # a response; a Motus message record nests its message
    if kind in _MOTUS_TYPES:
        return "motus-log"
    if shape.has("", "mapping"):
        return "chatgpt"
    if shape.has("", "chat_messages"):
        return "claude-ai"
    if shape.has("", "projectHash") and shape.has("", "sessionId") and not shape.has("", "type"):
        return "gemini-cli"  # the first line of a current .jsonl session: its metadata
    gemini = shape.values.get("messages.item.type") in gemini_cli.MESSAGE_TYPES
    if shape.has("", "messages") and (shape.has("", "projectHash") or gemini):
        return "gemini-cli"
    if shape.has("", "request") and shape.has("request", "messages"):
        return "anthropic-messages"
    if shape.has("", "messages"):
        model = shape.values.get("model")
        claude = isinstance(model, str) and model.startswith("claude")
        if shape.has("", "system") or shape.block_types & _ANTHROPIC_BLOCKS or claude:
            return "anthropic-messages"
        return "openai-chat"
    if shape.has("", "traj", "history"):
        return "openai-chat"
    return None


def _detect_list(shape: _Shape) -> str | None:
    if shape.has("item", "mapping"):
        return "chatgpt"
    if shape.has("item", "chat_messages"):
        return "claude-ai"
    if shape.has("item", "role"):
        return "anthropic-messages" if shape.block_types & _ANTHROPIC_BLOCKS else "openai-chat"
    if shape.has("item", "messages", "traj", "history"):
        return "openai-chat"
    return None
