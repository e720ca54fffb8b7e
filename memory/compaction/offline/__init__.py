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

The rules a reader can hold it to:

* Fair: each speaker (or the user and the assistant) gets the budget in
  proportion to the turns they took (``digest``); tool data competes on
  information alone.
* Dated: every line sits under the date and time of the session it was said
  in; the header carries the date in force at the last message, and the next
  compaction starts from it, so a batch starting mid-session is dated.
* No filler: a sentence without a content word (greetings, sign-offs,
  thanks: ``scan``) is never chosen.
* Headings that fit (``layout``): requests, tool results, actions, errors and
  the latest state for a task agent (any tool call or result); who said what,
  by date, for a conversation.
* Instructions honoured: ``instructions`` pins the sentences holding their
  content terms, and identifiers shaped like the ones those name, first
  (``instructions``).

Jobs: ``scan`` splits messages into pieces and finds their informative words,
``instructions`` finds the pieces compaction instructions pin, ``digest``
chooses pieces within the budget, ``layout`` renders the text and reads an
earlier summary back, so its sentences compete with the new ones.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ...messages import ChatMessage
from . import layout
from .digest import Candidates, Choice, candidates, choose
from .instructions import pinned
from .scan import ACTIONS, CONVERSATION, REQUESTS, Item, Piece, scan

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
    instructions: str | None = None,
) -> str:
    """Summarise ``messages`` (the turns being folded) in at most ``budget_tokens`` tokens.

    ``messages``: ``ChatMessage`` objects (chat-format dicts are read too; ones
    that cannot be read are skipped). ``previous_summary``: the summary of what
    came before them, whose sentences are weighed again with the new ones
    (and whose header gives the date in force before the first message).
    ``counter``: anything with ``count(text) -> int`` (a ``TokenCounter``).
    ``instructions``: what the compaction was asked to keep ("keep every
    booking reference"); the sentences matching its content terms are chosen
    first, within the budget.

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
        return _summary(list(messages or ()), budget, counter, previous_summary, instructions)
    except Exception:
        # The last-resort summariser must not turn add_message() into a failure:
        # keep what the previous summary said, as far as it fits.
        logger.exception("offline_summary failed; keeping the previous summary")
        lines = (previous_summary or layout.EMPTY).splitlines()
        return _fit_lines(lines, budget, counter)


@dataclass(frozen=True, slots=True)
class _Prepared:
    """What a summary of some messages is chosen from, whatever its budget."""

    items: list[Item]
    count: int  # the messages summarised, earlier summaries' included
    date: str | None  # the date in force after the last message
    header_tokens: int
    pool: Candidates | None  # None: nothing to quote


# The last input prepared and what it gave: the compaction's ledger pass
# summarises the same messages again with a wider budget (``CompactionBase``).
# The messages are held with it, so their ids in its key stay theirs.
_last_prepared: tuple[tuple[object, ...], list[ChatMessage], _Prepared] | None = None


def _summary(
    messages: list[ChatMessage],
    budget: int,
    counter: _Counter,
    previous_summary: str | None,
    instructions: str | None,
) -> str:
    global _last_prepared
    # The messages by identity (a ChatMessage is immutable; a dict is not, so
    # a list holding one is never taken from the cache), the rest by value.
    key = (counter, previous_summary, instructions, tuple(map(id, messages)))
    last = _last_prepared
    immutable = all(isinstance(m, ChatMessage) for m in messages)
    if immutable and last is not None and last[0] == key:
        prepared = last[2]
    else:
        prepared = _prepare(messages, counter, previous_summary, instructions)
        _last_prepared = (key, messages, prepared)
    if prepared.pool is None:
        return _fit_lines([layout.EMPTY], budget, counter)
    choice = choose(prepared.pool, budget, prepared.header_tokens)
    return _fit(prepared.items, choice, prepared.count, prepared.date, budget, counter)


def _prepare(
    messages: list[ChatMessage],
    counter: _Counter,
    previous_summary: str | None,
    instructions: str | None,
) -> _Prepared:
    previous = layout.parse(previous_summary) if previous_summary else layout.Previous([], 0)
    known = {item.party for item in previous.items if item.section == CONVERSATION}
    scanned = scan(
        messages,
        first_order=len(previous.items),
        date=previous.date,
        names=sorted(party for party in known if party),
    )
    items = previous.items + scanned.items
    _arrange(items)
    _mark_pins(items, first_new=len(previous.items))
    count = previous.count + len(messages)
    if not any(item.pieces for item in items):
        return _Prepared(items, count, scanned.date, 0, None)
    cache = _counts_for(counter)

    def cached_count(text: str) -> int:
        tokens = cache.get(text)
        if tokens is None:
            tokens = cache[text] = counter.count(text)
        return tokens

    fixed = cached_count(layout.header(count, scanned.date)) + 1
    pool = candidates(items, cached_count, pinned(items, instructions))
    return _Prepared(items, count, scanned.date, fixed, pool)


def _arrange(items: list[Item]) -> None:
    """Put the items under the headings that fit (``layout``): a conversation
    when no item is a tool call or a tool's data, a task otherwise."""
    task = any(
        item.role in ("tool", "call") or item.section in layout.TASK_SECTIONS for item in items
    )
    for item in items:
        if not task and item.section in (REQUESTS, ACTIONS):
            item.section = CONVERSATION
        elif task and item.section == CONVERSATION and item.role != layout.PERSON:
            item.section = REQUESTS if item.role == "user" else ACTIONS


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


def _mark_pins(items: list[Item], *, first_new: int) -> None:
    """In a task, mark the newest message of each party (among the new ones)
    as the latest state, and the earliest user request (an earlier summary's
    included) as the task's first; a conversation has neither (``digest``)."""
    seen: set[str] = set()
    for item in reversed(items[first_new:]):
        if item.section == CONVERSATION:
            continue
        if item.party is not None and item.party not in seen:
            seen.add(item.party)
            item.latest = True
    first = next((item for item in items if item.section == REQUESTS), None)
    if first is not None:
        first.first_request = True


def _render(
    items: Sequence[Item], chosen: Sequence[tuple[int, Piece]], count: int, date: str | None
) -> str:
    by_item: dict[int, list[Piece]] = {}
    for n, piece in chosen:
        by_item.setdefault(n, []).append(piece)
    pairs = [(items[n], sorted(pieces, key=lambda p: p.index)) for n, pieces in by_item.items()]
    return layout.render(pairs, count, date)


def _fit(
    items: Sequence[Item],
    choice: Choice,
    count: int,
    date: str | None,
    budget: int,
    counter: _Counter,
) -> str:
    """Render; when the exact count leaves room (the choice counted pieces one
    by one, and tokens merge in the whole text), choose more once; while it is
    over the budget, drop the pieces chosen last, the least valuable."""
    chosen = choice.chosen
    count_text = _whole_counter(counter)
    text = _render(items, chosen, count, date)
    tokens = count_text(text)
    if tokens < budget and choice.top_up(tokens):
        text = _render(items, chosen, count, date)
        tokens = count_text(text)
    for _ in range(_FIT_ROUNDS):
        over = tokens - budget
        if over <= 0:
            return text
        freed = 0
        while chosen and freed <= over:
            _, piece = chosen.pop()
            freed += max(1, len(piece.text) // 5)
        text = _render(items, chosen, count, date)
        tokens = count_text(text)
    return _fit_lines(text.splitlines(), budget, counter)


def _whole_counter(counter: _Counter) -> Callable[[str], int]:
    """How to count a whole summary: by its lines when the counter can
    (``TokenCounter.count_lines``, the same figure), since renderings differ
    by a few lines only."""
    count_lines = getattr(counter, "count_lines", None)
    return count_lines if callable(count_lines) else counter.count


def _fit_lines(lines: list[str], budget: int, counter: _Counter) -> str:
    """The first lines that fit, whole; ``""`` when not even the first one does."""
    count_text = _whole_counter(counter)
    while lines:
        text = "\n".join(lines)
        if count_text(text) <= budget:
            return text
        lines = lines[:-1]
    return ""
