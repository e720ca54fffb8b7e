"""``LoggedMessage``: a context message read from a log, typed when first used.

A restore of a long log puts every message of the live context back, and
building a ``ChatMessage`` (checking and cleaning every field) costs several
times the JSON parse of its line; even holding the dict each line parsed to
costs as much again as the parse (a large heap, allocated at once). Most of
those messages are never looked at again before the next compaction folds
them, so a restore from a checkpoint (``memory.compaction.checkpoint``)
holds each as what its store handed over, and the message is built from it
on the first read of any field:

- the bytes of its record's line (``logged_line``), from a store that keeps
  lines (``memory.log.store.LineLogStore``): the line is parsed again then,
  and its ``context_message`` (or ``message``) built;
- the message's dict (``logged``), from one that gives dicts.

Either way the message is then equal to ``ChatMessage.from_dict`` of that
dict in every field, ``isinstance`` of ``ChatMessage``, and compares equal
to it. What it was built from is dropped once it is built.

The line or dict must be one a store read from a log, which nobody else
changes (a dict becomes the message's own). The restore that made it has
already parsed the line and checked the message's role, so a damaged line is
reported by the restore (``LogProblem``, with its line number), never here;
a message that is not valid in some other field (only a log edited by hand)
raises ``InvalidMessageError`` at that first read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..json_values import loads
from ..messages import ChatMessage

_FIELDS = tuple(f.name for f in dataclasses.fields(ChatMessage))
_COMPARED = tuple(f.name for f in dataclasses.fields(ChatMessage) if f.compare)
_LAZY = frozenset(_FIELDS)


def context_message_of(record: Mapping[str, Any]) -> Any:
    """The message of a ``message`` record as it sits in the context: its
    ``context_message`` (a truncated tool result) or else its ``message``."""
    return record.get("context_message") or record.get("message")


class LoggedMessage(ChatMessage):
    """A ``ChatMessage`` built from its log line or dict on the first read of a field."""

    # The line (bytes) or the dict it is built from; None once built.
    __slots__ = ("_logged",)

    @classmethod
    def from_logged(cls, data: dict[str, Any]) -> LoggedMessage:
        """The message of ``data`` (an OpenAI chat dict parsed from a log), unbuilt."""
        return logged(data)

    @classmethod
    def from_line(cls, line: bytes) -> LoggedMessage:
        """The context message of the ``message`` record on ``line`` (its JSON), unbuilt."""
        return logged_line(line)

    def __getattr__(self, name: str) -> Any:
        # Called only for a slot not set yet: the fields before the first read.
        if name not in _LAZY:
            raise AttributeError(name)
        source = object.__getattribute__(self, "_logged")
        if source is None:  # built meanwhile, in another thread
            return object.__getattribute__(self, name)
        data = context_message_of(loads(source)) if type(source) is bytes else source
        built = ChatMessage.from_dict(data)
        for field_name in _FIELDS:
            object.__setattr__(self, field_name, getattr(built, field_name))
        object.__setattr__(self, "_logged", None)
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


def logged_line(line: bytes) -> LoggedMessage:
    """``LoggedMessage.from_line(line)``, as ``logged`` is ``from_logged``."""
    message = _new(LoggedMessage)
    _set_logged(message, line)
    return message
