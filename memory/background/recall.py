"""The recalled block: the memories most relevant to a request, within a token budget."""

from __future__ import annotations

from collections.abc import Sequence

from ..tokens import TokenCounter
from .dates import plain_when
from .types import Hit, Memory

OPEN = "<long_term_memory>"
CLOSE = "</long_term_memory>"
HEADER = (
    "Remembered from earlier conversations in this scope, most relevant first. "
    "It may be out of date; use it only where it helps, and do not mention this block."
)


def memory_line(memory: Memory) -> str:
    """``- [id] (kind, when) text``: the id lets the agent ``forget`` it; its
    time as a plain date (``dates.plain_when``: "yesterday" said on 8 May 2023
    is 7 May 2023, which a later reader could not work out)."""
    when = plain_when(memory.when)
    label = memory.kind if when is None else f"{memory.kind}, {when}"
    return f"- [{memory.id}] ({label}) {memory.text}"


def render_block(
    hits: Sequence[Hit], budget_tokens: int, counter: TokenCounter
) -> tuple[str, list[str], int]:
    """The block of ``hits`` (in their order) that fits ``budget_tokens``, with
    the ids placed and its tokens: ``("", [], 0)`` when none fits. A memory too
    large for the room left is passed over for the smaller ones after it."""
    frame = f"{OPEN}\n{HEADER}\n{CLOSE}"
    room = budget_tokens - counter.count(frame) - 1
    lines: list[str] = []
    ids: list[str] = []
    for hit in hits:
        line = memory_line(hit.memory)
        cost = counter.count(line) + 1  # with its newline
        if cost <= room:
            lines.append(line)
            ids.append(hit.memory.id)
            room -= cost
    if not lines:
        return "", [], 0
    block = "\n".join([OPEN, HEADER, *lines, CLOSE])
    tokens = counter.count(block)
    while tokens > budget_tokens and lines:  # merges at line ends can cost a token or two
        lines.pop()
        ids.pop()
        block = "\n".join([OPEN, HEADER, *lines, CLOSE])
        tokens = counter.count(block)
    return (block, ids, tokens) if lines else ("", [], 0)
