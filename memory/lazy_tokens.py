"""Token figures counted when they are first read, each message once.

``BasicMemory`` never compacts, so nothing it does needs a message's tokens
on the way in (a tool result is still counted then, to be cut to its limit).
It keeps each message's count as a ``TokenCell`` that encodes the message on
its first read and remembers the result, and the context's size after each
message as a ``RunningTotal`` over the cells before it: the context's size
(``estimate_context_tokens()``) and the trace's per-message ``tokens`` and
``context_tokens`` are then the figures an eager count gives, computed when
someone asks, and never twice.
"""

from __future__ import annotations

from collections.abc import Callable


class TokenCell:
    """One message's tokens: ``get()`` counts them on the first call."""

    __slots__ = ("_count", "_value")

    def __init__(self, count: Callable[[], int] | None = None, value: int = 0) -> None:
        self._count = count
        self._value = value

    @property
    def counted(self) -> bool:
        return self._count is None

    def get(self) -> int:
        count = self._count
        if count is not None:
            self._value = count()
            self._count = None  # the message is no longer held for its count
        return self._value


class RunningTotal:
    """The sum of the tokens of the context's messages up to one of them.

    Each total links to the one before it (``previous``) until it is read;
    a read walks back to the nearest known sum and fills in every total on
    the way, so reading all of them costs one pass.
    """

    __slots__ = ("_cell", "_previous", "_sum")

    def __init__(self, previous: RunningTotal | None, cell: TokenCell | None, start: int = 0):
        self._previous = previous
        self._cell = cell
        self._sum: int | None = start if cell is None else None

    def get(self) -> int:
        unknown: list[RunningTotal] = []
        node: RunningTotal | None = self
        while node is not None and node._sum is None:
            unknown.append(node)
            node = node._previous
        total = node._sum if node is not None and node._sum is not None else 0
        for each in reversed(unknown):
            assert each._cell is not None
            total += each._cell.get()
            each._sum, each._previous, each._cell = total, None, None
        assert self._sum is not None
        return self._sum


class ContextFigure:
    """The context's size after a message: ``fixed`` tokens (instructions,
    tool schemas, the reply's priming, as they were then) plus ``messages``."""

    __slots__ = ("_fixed", "_messages")

    def __init__(self, fixed: int, messages: RunningTotal) -> None:
        self._fixed = fixed
        self._messages = messages

    def get(self) -> int:
        return self._fixed + self._messages.get()


Deferred = TokenCell | ContextFigure
"""A trace field whose value is read when the trace is."""
