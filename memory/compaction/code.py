"""Source code inside a conversation: read as a program, not as something said.

A coding agent's transcript is mostly code: the files it read (Claude Code's
``Read`` shows them behind a line-number gutter, ``    42→``), the files it
wrote, its edits (``old_string`` / ``new_string``), its scripts. Every name in
them has an identifier's shape (``querySelectorAll``, ``session_id``,
``INTEGER``), but they are the program's vocabulary, not what a person named,
and quoted sentence by sentence they are unreadable fragments. So the ledger
carries only the paths and URLs a body of code names, and the offline summary
weighs its pieces like a JSON key (but the sentences around it, "The file
src/app.py has been updated.": ``is_prose``): the requests, the commands and
their results, the files touched and the assistant's own words come first.

What reads as code:

* a tool result that is not JSON, of ``MIN_LINES`` lines or more, half of them
  behind a line-number gutter, or ``CODE_SHARE`` of them code lines (ending in
  ``{``, ``}``, ``;``, ``=>``, ``->`` or ``do``; opening with a closing bracket,
  a comment marker, a decorator or a keyword such as ``def``, ``class``,
  ``import``, ``const``, ``defmodule``);
* a tool call's argument that spans lines (a string value holding
  ``BODY_BREAKS`` escaped line breaks in the arguments' JSON: a file's
  content, an edit, a script) or whose one line is code (ends as a statement
  or a block does, or assigns a call's result: an edit of one line).
"""

from __future__ import annotations

import re

from .identifiers import find_identifiers

CODE_KINDS = frozenset({"path", "url"})
"""The kinds of identifier a body of code names that a person may need again."""
MIN_LINES = 3
CODE_SHARE = 0.4
BODY_BREAKS = 2
HEAD_CHARS = 4_000
"""Characters of a text read to decide (a listing's head says what it is)."""

_GUTTER = re.compile(r"^\s*\d+(?:→|\t)", re.MULTILINE)
_KEYWORDS = (
    "def|defp|defmodule|class|import|from|return|const|let|var|function|fn|pub|use|alias|"
    "require|if|elif|else|for|while|end|async|await|export|package|func|struct|impl|"
    "SELECT|INSERT|CREATE|ALTER"
)
_CODE_LINE = re.compile(
    rf"(?:[{{}};]|=>|->|\|>|\bdo)\s*$|^\s*(?:[}})\]]|//|/\*|\*/|#!|@\w|(?:{_KEYWORDS})\b)"
)
_JSON_STARTS = frozenset('"{[]}-0123456789tfn')
# One line of code, as an argument's whole value: it ends as a statement or a
# block does, or assigns the result of a call ("x = f(y)"). A keyword alone
# would not do: "for 2 adults" and "from the user" are not code.
_ONE_LINE_OF_CODE = re.compile(r"(?:[{};]|=>|->)\s*$|^[^=]*\w\s*=\s*[^=].*\w\(")
# A JSON string literal (to its end when the text was cut inside it): a
# call's arguments are JSON text.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*+(?:"|\Z)', re.DOTALL)


def reads_as_code(text: str) -> bool:
    """Whether a tool result is source code or a file listing (see the
    module); JSON (``is_structured``) is data, never code."""
    if is_structured(text):
        return False
    head = text[:HEAD_CHARS]
    lines = [line for line in head.splitlines() if line.strip()]
    if len(lines) < MIN_LINES:
        return False
    if 2 * len(_GUTTER.findall(head)) >= len(lines):
        return True
    code = sum(1 for line in lines if _CODE_LINE.search(_GUTTER.sub("", line, count=1)))
    return code >= CODE_SHARE * len(lines)


def is_listing_line(piece: str) -> bool:
    """Whether a piece opens with a file listing's line number (``    42→``):
    code wherever it is quoted, an earlier summary included."""
    return _GUTTER.match(piece) is not None


def is_prose(piece: str) -> bool:
    """Whether a sentence of a tool result that reads as code is a sentence
    a person wrote ("The file src/app.py has been updated."): four words or
    more, ending as sentences end, no gutter."""
    return (
        piece.rstrip().endswith((".", "!", "?"))
        and len(piece.split()) >= 4
        and not _GUTTER.match(piece)
    )


def without_bodies(arguments: str) -> str:
    """``arguments`` (a tool call's JSON text) with each body of code (a
    string value spanning lines) replaced by the paths and URLs it names, one
    per line: what is left is what a person may need again."""
    return _STRING.sub(_named_paths, arguments)


def _named_paths(match: re.Match[str]) -> str:
    literal = match.group()
    if not is_body(literal):
        return literal
    return "\n".join(i.value for i in find_identifiers(literal) if i.kind in CODE_KINDS)


def is_body(clause: str) -> bool:
    """Whether a clause of a call's arguments (or one string value) holds a
    body of code, or part of one: it spans lines, or its one line is code."""
    if clause.count("\\n") >= BODY_BREAKS:
        return True
    value = clause.rpartition('":')[2].strip().strip('"')
    return _ONE_LINE_OF_CODE.search(value) is not None


def is_structured(text: str) -> bool:
    """Whether ``text`` reads as JSON (an object or a list), so clauses fit it
    better: it opens with a bracket and what follows can start a JSON value
    (``[File: setup.py ...`` or a listing like ``[1/3] Building ...`` cannot)."""
    head = text.lstrip()[:40]
    if head[:1] not in ("{", "["):
        return False
    rest = head[1:].lstrip()
    return not rest or rest[0] in _JSON_STARTS
