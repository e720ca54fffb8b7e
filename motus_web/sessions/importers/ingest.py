"""Chat messages from what a parser found: checked, typed and batched."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterable, Iterator

from memory import ChatMessage, InvalidMessageError

from .formats._io import kind
from .sources import Refused

BATCH = 500  # messages run through the memory, then written, at a time


def chat_message(raw: object, location: str) -> ChatMessage:
    if not isinstance(raw, dict):
        raise Refused(location, f"expected a message object, got {kind(raw)}")
    role = raw.get("role")
    if not isinstance(role, str):
        raise Refused(location, f"field 'role': expected a string, got {kind(role)}")
    # One "user" string for a million messages, not a million copies held by the context.
    raw["role"] = sys.intern(role)
    try:
        message = ChatMessage.from_dict(raw)
    except InvalidMessageError as error:
        raise Refused(location, str(error)) from None
    except (TypeError, ValueError, AttributeError) as error:
        raise Refused(location, f"not a chat message: {error}") from None
    return message


def batched(messages: Iterable[ChatMessage]) -> Iterator[list[ChatMessage]]:
    iterator = iter(messages)
    while batch := list(itertools.islice(iterator, BATCH)):
        yield batch
