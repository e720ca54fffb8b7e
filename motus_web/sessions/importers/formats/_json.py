"""Loading a JSON document that holds one session (Gemini CLI, Anthropic Messages).

Such a file is one conversation, which the import holds in memory anyway, so it
is loaded whole, up to ``DOCUMENT_MAX_BYTES`` and ``MAX_DEPTH`` levels; lists of
conversations are streamed by their own parsers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

import ijson
import orjson

from ._io import BOM, loads
from .model import FormatError, FormatProblem, ParsedSession

# The most a document loaded whole may hold (bytes): parsed, it costs several
# times its size. A Gemini CLI session or an API request of this size would be
# far past any model's context window.
DOCUMENT_MAX_BYTES = 64 * 1024 * 1024


def load(stream: BinaryIO) -> Any:
    """The document in ``stream``; raises ``FormatError`` naming where it breaks,
    or saying it is past ``DOCUMENT_MAX_BYTES`` or nests past ``MAX_DEPTH`` (both
    found without holding more than the cap)."""
    if nesting_too_deep(stream):
        raise FormatError("", TOO_DEEP)
    data = stream.read(DOCUMENT_MAX_BYTES + 1).removeprefix(BOM)
    if len(data) > DOCUMENT_MAX_BYTES:
        raise FormatError(
            "",
            f"the document is larger than {DOCUMENT_MAX_BYTES:,} bytes, the most one "
            "conversation's file is read whole: nothing of it was imported",
        )
    try:
        return loads(data)
    except orjson.JSONDecodeError as error:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            raise FormatError("", "the file is not UTF-8 text") from None
        raise FormatError(
            f"line {error.lineno} column {error.colno}", f"invalid JSON: {error.msg}"
        ) from None


# An escaped UTF-16 surrogate, as Python's json.dumps writes any character past
# U+FFFF ("\ud83d\ude00") and a lone one ("\ud83d") alike.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
# One that is not half of a pair: ijson's C backend cannot decode it (it raises
# UnicodeDecodeError on an otherwise valid file), orjson refuses it.
_LONE_SURROGATE_ESCAPE = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)
_CHUNK = 1 << 20


def without_surrogate_escapes(data: bytes) -> bytes:
    """``data`` with every escaped surrogate written as U+FFFD: for looking at a
    file's first bytes only (a pair becomes two replacement characters)."""
    return _SURROGATE_ESCAPE.sub(rb"\\ufffd", data)


def has_lone_surrogate_escape(stream: BinaryIO) -> bool:
    """Whether ``stream`` holds an escaped lone surrogate; read in chunks, then rewound."""
    start = stream.tell()
    tail = b""
    try:
        while chunk := stream.read(_CHUNK):
            window = tail + chunk
            # The last 6 bytes may be a high half whose low half is in the next chunk.
            if _LONE_SURROGATE_ESCAPE.search(window[:-6]):
                return True
            tail = window[-12:]
        return bool(_LONE_SURROGATE_ESCAPE.search(tail))
    finally:
        stream.seek(start)


# What ijson reads at a time. Its default (64 KB) copies a value that spans reads
# once per read: a 200 MB string took 8 minutes; in 8 MB reads it takes 4 s.
READ_BYTES = 8 * 1024 * 1024

# Lists and objects inside one another, at most, in a file read as a stream:
# ijson keeps the path of every open level, so a file of nothing but "[[[["
# would cost memory in the square of its depth. No conversation nests this deep
# (a message may hold memory.json_values.MAX_DEPTH levels, a few below it).
MAX_DEPTH = 256
TOO_DEEP = (
    f"lists and objects nest more than {MAX_DEPTH} levels deep, which no conversation "
    "does: the file is refused"
)


def nesting_too_deep(stream: BinaryIO) -> bool:
    """Whether the JSON in ``stream`` nests deeper than ``MAX_DEPTH``; read with
    ijson's path-free events (linear in the file), then rewound. A file that
    is not JSON is not too deep: its parser says what is wrong with it."""
    start = stream.tell()
    depth = 0
    try:
        for event, _ in ijson.basic_parse(stream, use_float=True, buf_size=READ_BYTES):
            if event in ("start_map", "start_array"):
                depth += 1
                if depth > MAX_DEPTH:
                    return True
            elif event in ("end_map", "end_array"):
                depth -= 1
    except (ijson.JSONError, UnicodeDecodeError):
        pass
    finally:
        stream.seek(start)
    return False


One = Callable[[object, int, str], ParsedSession | FormatProblem]


def conversations(
    stream: BinaryIO, source: str, one: One
) -> Iterator[ParsedSession | FormatProblem]:
    """An export of one conversation (an object, loaded whole) or of a list of
    them (streamed), each read by ``one(conversation, number, source)``.

    A bad conversation is reported and the others still parse; invalid JSON
    stops the file at the conversation where it breaks; a file nested too deep
    is refused before it is streamed (see ``MAX_DEPTH``).
    """
    if _first_char(stream) == b"{":
        try:
            document = load(stream)
        except FormatError as error:
            yield error.problem(source)
            return
        yield one(document, 1, source)
        return
    if nesting_too_deep(stream):
        yield FormatProblem(source, "", TOO_DEEP)
        return
    number = 0
    try:
        items = ijson.items(stream, "item", use_float=True, buf_size=READ_BYTES)
        for number, conversation in enumerate(items, start=1):
            yield one(conversation, number, source)
    except ijson.JSONError as error:
        yield FormatProblem(source, f"conversation {number + 1}", f"invalid JSON: {_short(error)}")


def _first_char(stream: BinaryIO) -> bytes:
    head = stream.read(4096).removeprefix(BOM)
    stream.seek(0)
    if stream.read(3) != BOM:
        stream.seek(0)
    return head.lstrip()[:1]


def _short(error: Exception) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= 200 else text[:200] + "..."
