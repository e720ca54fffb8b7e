"""The offline summary: sentences quoted from the conversation, chosen to fit a budget.

``offline_summary`` needs no model. Compaction uses it when no model client is
configured (imports, replay, the demo) and as the fallback when model
summarisation keeps failing. It keeps whole sentences (and, for JSON tool
results and call arguments, whole clauses) exactly as they were written,
attributed to who said them, under the session date where the conversation
has dates, chronological within sections (see ``layout`` for the text and
``digest`` for how sentences are chosen)::

    Summary of the earlier conversation (9 messages; quoted, "..." where cut):
    User requests:
    - user: ... I want to change my flight to Seattle next week. ... It's mia_li_3668.
      The reservation is HATHAT.
    Identifiers and tool results:
    - tool get_reservation_details: "reservation_id": "HATHAT" ... "flight_number":
      "HAT136" ... "payment_id": "credit_card_4421486", "amount": 250 ...
    Errors:
    - tool update_reservation_flights: Error: flight HAT222 not available on date 2024-05-22
    Latest state:
    - assistant: Flight HAT222 is full. HAT240 on May 22 costs $120 more.
    - user: OK, book HAT240 then, and email me at mia.li@example.com.

(one line per item; wrapped here): 172 tokens for nine messages of 277, at a
budget of 200. Nothing in it was written by the summariser but the header,
the section titles, the attributions and the ``...``.

Jobs: ``scan`` splits messages into pieces and finds their informative words,
``digest`` chooses pieces within the budget, ``layout`` renders the text and
reads an earlier summary back, so its sentences compete with the new ones.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Sequence
from typing import Protocol

from ...messages import ChatMessage

from . import layout
from .digest import choose
from .scan import ACTIONS, REQUESTS, Item, Piece, scan

__all__ = ["offline_summary"]

logger = logging.getLogger("memory.compaction")

_FIT_ROUNDS = 8
COUNTS_CACHE = 16_384


class _Counter(Protocol):
    """What the summariser needs of a token counter (``memory.TokenCounter`` fits)."""

    def count(self, text: str) -> int: ...


_COUNTS: weakref.WeakKeyDictionary[_Counter, dict[str, int]] = weakref.WeakKeyDictionary()


def offline_summary(
    messages: Sequence[ChatMessage],
    *,
    budget_tokens: int,
    counter: _Counter,
    previous_summary: str | None = None,
) -> str:
    """Summarise ``messages`` (the turns being folded) in at most ``budget_tokens`` tokens.

    ``messages``: ``ChatMessage`` objects (chat-format dicts are read too; ones
    that cannot be read are skipped). ``previous_summary``: the summary of what
    came before them, whose sentences are weighed again with the new ones.
    ``counter``: anything with ``count(text) -> int`` (a ``TokenCounter``).

    Returns the summary text, with ``counter.count(result) <= budget_tokens``;
    ``"No earlier conversation."`` when there is nothing to summarise (if it
    fits), ``""`` when the budget is not positive or nothing fits. Deterministic.
    Never raises on odd input: a failure of its own is logged and the previous
    summary kept (as far as it fits); only an error of ``counter.count``
    propagates.
    """
    budget = budget_tokens if isinstance(budget_tokens, int) else 0
    if budget <= 0:
        return ""
    try:
        return _summary(list(messages or ()), budget, counter, previous_summary)
    except Exception:
        # The last-resort summariser must not turn add_message() into a failure:
        # keep what the previous summary said, as far as it fits.
        logger.exception("offline_summary failed; keeping the previous summary")
        lines = (previous_summary or layout.EMPTY).splitlines()
        return _fit_lines(lines, budget, counter)


def _summary(
    messages: list[ChatMessage], budget: int, counter: _Counter, previous_summary: str | None
) -> str:
    previous = layout.parse(previous_summary) if previous_summary else layout.Previous([], 0)
    items = previous.items + scan(messages, first_order=len(previous.items))
    _mark_latest(items, first_new=len(previous.items))
    count = previous.count + len(messages)
    if not any(item.pieces for item in items):
        return _fit_lines([layout.EMPTY], budget, counter)
    cache = _counts_for(counter)

    def cached_count(text: str) -> int:
        tokens = cache.get(text)
        if tokens is None:
            tokens = cache[text] = counter.count(text)
        return tokens

    fixed = cached_count(layout.header(count)) + 1
    chosen = choose(items, budget, fixed, cached_count)
    return _fit(items, chosen, count, budget, counter)


def _counts_for(counter: _Counter) -> dict[str, int]:
    """Token counts of pieces, kept per counter across calls: every compaction
    weighs the previous summary's sentences again. Bounded by ``COUNTS_CACHE``."""
    try:
        cache = _COUNTS.get(counter)
        if cache is None or len(cache) > COUNTS_CACHE:
            cache = _COUNTS[counter] = {}
    except TypeError:  # a counter that cannot be weakly referenced: no reuse
        return {}
    return cache


def _mark_latest(items: list[Item], *, first_new: int) -> None:
    """Mark the newest user and assistant messages (among the new ones) as the
    latest state."""
    for section in (REQUESTS, ACTIONS):
        for item in reversed(items[first_new:]):
            if item.section == section and item.role in ("user", "assistant"):
                item.latest = True
                break


def _render(items: Sequence[Item], chosen: Sequence[tuple[int, Piece]], count: int) -> str:
    by_item: dict[int, list[Piece]] = {}
    for n, piece in chosen:
        by_item.setdefault(n, []).append(piece)
    pairs = [(items[n], sorted(pieces, key=lambda p: p.index)) for n, pieces in by_item.items()]
    return layout.render(pairs, count)


def _fit(
    items: Sequence[Item],
    chosen: list[tuple[int, Piece]],
    count: int,
    budget: int,
    counter: _Counter,
) -> str:
    """Render; while the exact count is over the budget (the choice counted
    pieces one by one, and tokens merge differently in the whole text), drop
    the pieces chosen last, the least valuable."""
    text = _render(items, chosen, count)
    for _ in range(_FIT_ROUNDS):
        over = counter.count(text) - budget
        if over <= 0:
            return text
        freed = 0
        while chosen and freed <= over:
            _, piece = chosen.pop()
            freed += max(1, len(piece.text) // 5)
        text = _render(items, chosen, count)
    return _fit_lines(text.splitlines(), budget, counter)


def _fit_lines(lines: list[str], budget: int, counter: _Counter) -> str:
    """The first lines that fit, whole; ``""`` when not even the first one does."""
    while lines:
        text = "\n".join(lines)
        if counter.count(text) <= budget:
            return text
        lines = lines[:-1]
    return ""
