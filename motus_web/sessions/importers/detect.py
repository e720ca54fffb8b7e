"""Which format a file is in, from its first non-blank line."""

from __future__ import annotations

import enum
from typing import BinaryIO

import orjson

from memory import load_json as loads
from memory.log import records


class Format(enum.Enum):
    MOTUS_LOG = "Motus JSONL conversation log"
    MESSAGES_JSONL = 'JSONL, one {"messages": [...]} per line'
    JSON = "JSON document"


FIRST_LINE_MAX_BYTES = 8 * 1024 * 1024  # read to tell JSONL from a JSON document


def detect_format(stream: BinaryIO) -> Format:
    """Read up to the first non-blank line of ``stream`` (at most
    ``FIRST_LINE_MAX_BYTES`` of it), then rewind it.

    A JSONL file's first line is a whole JSON object; a JSON document either
    spreads over lines (its first line does not parse) or is one line that is
    not a log record or a ``messages`` object. A first line longer than the
    bound is taken for a JSON document (a one-line list of messages), which
    the JSON parser streams, rather than held whole here. A file that is not
    JSON at all is left to the JSON parser, which says where it breaks.
    """
    first = b""
    while line := stream.readline(FIRST_LINE_MAX_BYTES):
        if line.strip():
            first = line
            break
    stream.seek(0)
    try:
        head = loads(first)
    except orjson.JSONDecodeError:
        return Format.JSON
    if isinstance(head, dict) and head.get("type") in records.RECORD_TYPES:
        return Format.MOTUS_LOG
    if isinstance(head, dict) and isinstance(head.get("messages"), list):
        return Format.MESSAGES_JSONL
    return Format.JSON
