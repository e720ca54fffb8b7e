"""The stored start of a user message's text, so that lists never read a whole message.

The session list shows each session's first user message. Reading it from
``Message.content`` would make the database load the whole JSON value (a 19 MB
first message cost 285 ms against 20 ms), whatever the query cuts from it, so
the start is kept in its own short column, written with the message.
"""

from __future__ import annotations

import re
from typing import Any

PREVIEW_CHARS = 200  # characters kept; the list shows the first 90
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def preview_of(role: str, content: Any) -> str:
    """The first ``PREVIEW_CHARS`` characters of a user message's text, else "".

    ``content`` is the chat format's: a string, or a list of parts whose first
    ``{"type": "text", "text": ...}`` part is taken. NUL (which PostgreSQL text
    cannot hold) and lone surrogates (which UTF-8 cannot encode) become
    U+FFFD, so the column stores the same on every database.
    """
    if role != "user":
        return ""
    text = content if isinstance(content, str) else _first_text_part(content)
    start = text[:PREVIEW_CHARS]
    return start if start.isascii() and "\x00" not in start else _UNSTORABLE.sub("\ufffd", start)


def _first_text_part(content: Any) -> str:
    if not isinstance(content, list):
        return ""
    for part in content:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            return str(part["text"])
    return ""
