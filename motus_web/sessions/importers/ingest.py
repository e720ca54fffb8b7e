"""Chat messages from what a parser found: checked, typed and batched."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterable, Iterator
from typing import Any

from memory import ChatMessage, InvalidMessageError

from .formats._io import kind
from .sources import Refused, clip

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
    _check_custom_calls(raw, message, location)
    return message


def _check_custom_calls(raw: dict[str, Any], message: ChatMessage, location: str) -> None:
    """Refuse a custom (freeform) tool call that ``ChatMessage`` would not keep as it is.

    Such a call (``{"type": "custom", "custom": {"name", "input"}}``, GPT-5, Codex)
    would be sent as an empty function; once ``ChatMessage`` keeps it, it imports.
    """
    calls = raw.get("tool_calls")
    if not isinstance(calls, list) or not message.tool_calls:
        return
    for call, kept in zip(calls, message.tool_calls, strict=False):
        if isinstance(call, dict) and call.get("type") == "custom" and kept.to_dict() != call:
            raise Refused(
                location,
                f"tool call {clip(str(call.get('id')), 80)!r} is a custom (freeform) tool call, "
                "which this version cannot import yet",
            )


def batched(messages: Iterable[ChatMessage]) -> Iterator[list[ChatMessage]]:
    iterator = iter(messages)
    while batch := list(itertools.islice(iterator, BATCH)):
        yield batch
