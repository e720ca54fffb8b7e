"""Facts, not payloads: what of a message is material shared rather than said.

A pasted log, code, a table, a tool's output or a long list is read by the
offline extractor as lines; each line that looks like a sentence would
become a memory, so one paste could flood the store. These rules tell such
lines apart (``payload_lines``): what is inside a fenced block, and lines that
look like code, a log or a trace, a table row, or a shell prompt. A message
whose lines are mostly those (``is_payload``) gives at most
``MAX_PER_MESSAGE`` statements, however many of its lines read as sentences.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

MAX_PER_MESSAGE = 5  # statements one message (a turn of the user) gives at most
PAYLOAD_MIN_LINES = 8  # lines a message has before its shape says "pasted material"
SYMBOL_SHARE = 0.2  # of a line's characters in _SYMBOLS: code, paths, markup
_FENCE = re.compile(r"^\s*(?:```|~~~)")
_LIST_ITEM = re.compile(r"^\s*(?:[-*\u2022+]|\d{1,3}[.)])\s+")
_SHAPED = re.compile(
    r"^(?:\s{4,}|\t)\S"  # indented code
    r"|^\s*\|.*\|\s*$"  # a markdown table row
    r"|\t.*\t"  # tab-separated columns
    r"|^\s*[$#>%] \S"  # a shell prompt
    r"|^\s*\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d"  # a log timestamp
    r"|^\s*\[?\d\d:\d\d:\d\d"
    r"|^\s*\[?(?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|CRITICAL|FATAL)\b"
    r"|^\s*(?:Traceback \(most recent call last\)|File \"[^\"]+\", line \d+|at [\w.$<>]+\()"
    r"|^\s*(?:def|class|import|from|return|const|let|var|function|public|private|if|for|"
    r"while|SELECT|INSERT|UPDATE|DELETE|CREATE)\b.*[:;{(=]\s*$"
    r"|^\s*[{}\[\]();]+\s*$"  # a bracket line
    r"|^\s*[\w.-]+\s*[:=]\s*\S+\s*$",  # a key: value / key=value line
)
_SYMBOLS = frozenset('{}[]()<>;:=$/\\_|#@*`~^&%"')


def list_item(line: str) -> bool:
    """Whether ``line`` is an item of a list (``- ``, ``* ``, ``1. ``...)."""
    return bool(_LIST_ITEM.match(line))


def without_marker(line: str) -> str:
    """``line`` without its list marker."""
    return _LIST_ITEM.sub("", line, count=1)


def shaped(line: str) -> bool:
    """Whether ``line`` looks like code, a log, a trace, a table row or a prompt."""
    text = line.strip()
    if not text:
        return False
    if _SHAPED.search(line):
        return True
    symbols = sum(1 for c in text if c in _SYMBOLS)
    return len(text) >= 12 and symbols / len(text) > SYMBOL_SHARE


def payload_lines(lines: Sequence[str]) -> set[int]:
    """The indexes of ``lines`` that are material, not statements: inside a
    fenced block (its fences included), or ``shaped``."""
    out: set[int] = set()
    fenced = False
    for index, line in enumerate(lines):
        if _FENCE.match(line):
            out.add(index)
            fenced = not fenced
        elif fenced or shaped(line):
            out.add(index)
    return out


def is_payload(lines: Sequence[str]) -> bool:
    """Whether a message of ``lines`` is pasted material: at least
    ``PAYLOAD_MIN_LINES`` non-empty lines, half of them or more material or
    list items (a long list reads like one)."""
    filled = [i for i, line in enumerate(lines) if line.strip()]
    if len(filled) < PAYLOAD_MIN_LINES:
        return False
    material = payload_lines(lines)
    listed = sum(1 for i in filled if i in material or list_item(lines[i]))
    return 2 * listed >= len(filled)
