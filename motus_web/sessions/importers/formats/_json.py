"""Loading a JSON document that holds one session (Gemini CLI, Anthropic Messages).

Such a file is one conversation, which the import holds in memory anyway, so it
is loaded whole; lists of conversations are streamed by their own parsers.
"""

from __future__ import annotations

from typing import Any, BinaryIO

import orjson

from ._io import BOM, loads
from .model import FormatError


def load(stream: BinaryIO) -> Any:
    """The document in ``stream``; raises ``FormatError`` naming where it breaks."""
    data = stream.read().removeprefix(BOM)
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
