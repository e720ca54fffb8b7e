"""What a format parser hands the importer: sessions in a neutral shape, and problems.

Pure data: no Django, no database. Messages are OpenAI chat-format dicts
(``{"role", "content", "tool_calls", "tool_call_id", ...}``) with every field the
source format carried that the chat format has no place for kept as an extra key,
so an export writes it back out. Two extra keys have fixed meanings across formats:
``reasoning_content`` (the model's reasoning as text: Codex reasoning summaries,
ChatGPT thoughts, Gemini thoughts) and ``thinking_blocks`` (Anthropic ``thinking`` /
``redacted_thinking`` blocks exactly as the source had them, signatures included).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

# Model names a file writes where no model answered: Claude Code's for the
# messages it makes up itself (an API error, an interruption), ChatGPT's router.
_NOT_A_MODEL = frozenset({"<synthetic>", "auto"})


@dataclass(frozen=True, slots=True)
class ParsedCompaction:
    """A compaction the tool itself made, placed in the parsed message list.

    ``at`` counts the messages before it: the tool folded ``messages[:at]`` into
    ``summary``; ``messages[at:]`` came after. ``replacement`` is the context the
    tool rebuilt after the summary (Codex ``replacement_history``, as chat dicts),
    or ``None`` when the file does not say.
    """

    at: int
    summary: str
    trigger: str | None = None  # "auto" / "manual" as the tool wrote it
    tokens_before: int | None = None  # provider/tool-reported context size, tokens
    replacement: list[dict[str, Any]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ParsedSession:
    """One conversation read from an agent's or a chat app's own file.

    ``source_format`` is one of ``SOURCE_FORMATS``; ``source_tool`` names the
    program (with its version when the file says, e.g. ``"Claude Code 2.1.38"``).
    ``created_at`` is ISO-8601 text. ``provider_input_tokens`` maps a message index
    (into ``messages``) to the input tokens the provider reported for the request
    that produced that message. ``branches`` are the conversation's other paths
    (ChatGPT regenerations and edits, Claude Code rewinds), each a whole message
    list from the start; ``extra["branch_forks"][i]`` is how many leading messages
    branch ``i`` shares with ``messages``. ``children`` are subagent transcripts.
    ``model`` is the model the file says answered (the last one named, when the
    session switched), or ``None`` when it names none; the import counts tokens
    and takes the context window from it (``named_model``).
    """

    source_format: str
    source_tool: str
    original_id: str | None
    title: str | None
    created_at: str | None
    system_prompt: str | None
    messages: list[dict[str, Any]]
    provider_input_tokens: dict[int, int] = field(default_factory=dict)
    compactions: list[ParsedCompaction] = field(default_factory=list)
    branches: list[list[dict[str, Any]]] = field(default_factory=list)
    children: list[ParsedSession] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    model: str | None = None
    # The tool schemas every request carried (OpenAI function-tool dicts), counted
    # in the context as a live session's are (``set_tools``); None: the file has none.
    tools: list[dict[str, Any]] | None = None


@dataclass(frozen=True, slots=True)
class FormatProblem:
    """Something in a file that could not be read, and where.

    ``location`` is ``"line 12"`` (JSONL), ``"conversation 3"`` / ``"message 5"``
    (JSON), or ``""`` for the whole file; ``field`` is the dotted path of the
    offending field inside that line or record, when there is one. A
    ``warning`` refuses nothing: a damaged line that was skipped.
    """

    source: str
    location: str
    message: str
    field: str | None = None
    # A line skipped while the session was built from the rest, not a refusal.
    warning: bool = False

    def __str__(self) -> str:
        where = ": ".join(part for part in (self.source, self.location) if part)
        what = f"field {self.field!r}: {self.message}" if self.field else self.message
        return f"{where}: {what}" if where else what


class FormatError(Exception):
    """Raised inside a parser to refuse one session with a ``FormatProblem``."""

    def __init__(self, location: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.location = location
        self.field = field

    def problem(self, source: str) -> FormatProblem:
        return FormatProblem(source, self.location, str(self), self.field)


def named_model(names: Iterable[object]) -> str | None:
    """The last of ``names`` (in file order) that names a model, or ``None``.

    Anything but a non-empty string is skipped, and so are the placeholders
    tools write for messages no model produced (``"<synthetic>"``, ``"auto"``).
    """
    found: str | None = None
    for name in names:
        if isinstance(name, str) and name.strip() and name.strip() not in _NOT_A_MODEL:
            found = name.strip()
    return found
