"""Parsers for the files other agents and chat apps keep: Claude Code, Codex CLI,
ChatGPT and Claude.ai exports, Gemini CLI, Anthropic Messages requests.

Pure Python (no Django): each turns a file into ``ParsedSession`` objects (OpenAI
chat-format messages plus the tool's own compactions, branches and subagents) or
``FormatProblem`` objects saying what refused a session and where.
"""

from .detect import MOTUS_FORMATS, SUPPORTED, detect, parse, parse_path, unrecognised
from .model import FormatProblem, ParsedCompaction, ParsedSession

__all__ = [
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
