"""``LoggedMessage``: a context message read from a log, typed when first used.

A restore of a long log puts every message of the live context back, and
building a ``ChatMessage`` (checking and cleaning every field) costs several
times the JSON parse of its line. Most of those messages are never looked at
again before the next compaction folds them, so a restore from a checkpoint
(``memory.compaction.checkpoint``) holds each as the dict its log record
parsed to, and the message is built from it on the first read of any field:
``LoggedMessage.from_logged(d)`` is then equal to ``ChatMessage.from_dict(d)``
in every field, ``isinstance`` of ``ChatMessage``, and compares equal to it.

The dict must be the one a store parsed from JSON and nobody else holds (it
becomes the message's own). A dict that is not a valid message raises
``InvalidMessageError`` at that first read; the log records it came from were
written by this library from valid messages, so only a log edited by hand
gets there.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..messages import ChatMessage

_FIELDS = tuple(f.name for f in dataclasses.fields(ChatMessage))
_COMPARED = tuple(f.name for f in dataclasses.fields(ChatMessage) if f.compare)
_LAZY = frozenset(_FIELDS)


class LoggedMessage(ChatMessage):
    """A ``ChatMessage`` built from its log dict on the first read of a field."""

    __slots__ = ("_logged",)

    @classmethod
    def from_logged(cls, data: dict[str, Any]) -> LoggedMessage:
        """The message of ``data`` (an OpenAI chat dict parsed from a log), unbuilt."""
        return logged(data)

    def __getattr__(self, name: str) -> Any:
        # Called only for a slot not set yet: the fields before the first read.
        if name not in _LAZY:
            raise AttributeError(name)
        built = ChatMessage.from_dict(object.__getattribute__(self, "_logged"))
        for field_name in _FIELDS:
            object.__setattr__(self, field_name, getattr(built, field_name))
        return object.__getattribute__(self, name)

    def __eq__(self, other: object) -> bool:
        # The dataclass's own __eq__ refuses another class; a ChatMessage of the
        # same fields is the same message.
        if not isinstance(other, ChatMessage):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in _COMPARED)

    __hash__ = ChatMessage.__hash__


_new = object.__new__
_set_logged = LoggedMessage.__dict__["_logged"].__set__


def logged(data: dict[str, Any]) -> LoggedMessage:
    """``LoggedMessage.from_logged(data)``, as a restore calls it for every
    context message: the slot set through its descriptor, with no lookups."""
    message = _new(LoggedMessage)
    _set_logged(message, data)
    return message
