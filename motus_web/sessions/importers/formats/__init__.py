"""Parsers for the files other agents and chat apps keep: Claude Code, Codex CLI,
ChatGPT and Claude.ai exports, Gemini CLI, Anthropic Messages requests.

Pure Python (no Django): each turns a file into ``ParsedSession`` objects (OpenAI
chat-format messages plus the tool's own compactions, branches and subagents) or
``FormatProblem`` objects saying what refused a session and where::

    for item in parse_path(path):          # or parse(stream, name) for an upload
        if isinstance(item, FormatProblem):
            report(str(item))              # "file: line 12: field 'message.content': ..."
        else:
            store(item)                    # item.messages, item.compactions, ...

``detect(head, name)`` names the format from the first ``HEAD_SIZE`` bytes, so an
importer can send the Motus formats (``MOTUS_FORMATS``) to its own reader and
everything else here; ``unrecognised(name)`` is the problem that lists them all.

Where each format keeps what the chat format has no field for, on a message:
``claude_code`` (the transcript lines it came from), ``chatgpt`` (the node's
message fields), ``reasoning_items`` / ``codex_items`` (Codex Responses items),
``gemini_call`` (a tool call's status and display); on the session, ``extra``.
"""

from ._io import HEAD_SIZE
from .detect import (
    ESTIMATE_MODELS,
    MOTUS_FORMATS,
    SUPPORTED,
    detect,
    parse,
    parse_path,
    unrecognised,
)
from .model import FormatProblem, ParsedCompaction, ParsedSession

__all__ = [
    "ESTIMATE_MODELS",
    "HEAD_SIZE",
    "MOTUS_FORMATS",
    "SUPPORTED",
    "FormatProblem",
    "ParsedCompaction",
    "ParsedSession",
    "detect",
    "parse",
    "parse_path",
    "unrecognised",
]
