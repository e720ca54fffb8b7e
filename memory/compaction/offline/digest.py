"""Choosing the sentences that fit the budget.

Every piece (sentence or clause) of the items, the earlier summary's included,
competes for the budget on one scale: the information it adds per token it
costs. Information is the sum of its words' weights: how rare the word is
among the pieces at hand (inverse document frequency, so a word said in every
other sentence adds little) times how specific its kind is (``scan``:
identifiers, numbers, names, plain words). A word already said by a chosen
piece counts ``REPEAT`` of its weight again, so the choice spreads over many
facts instead of repeating one. The cost of a piece is its tokens, plus the
line prefix, date and section title it would be the first to need.

The choice is greedy with lazy re-evaluation (a piece's value only falls as
others are chosen, so a heap of stale upper bounds is exact enough and keeps
it near O(n log n)). The first sentence of the latest user and assistant
messages is chosen before anything else, so the summary always ends on where
the conversation stood.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .layout import TITLES, section_of
from .scan import IDENTIFIER, Item, Piece

REPEAT = 0.3  # the share of a word's weight it adds again after it was said
USER_WEIGHT = 1.3  # a user's own words (requests, facts about them) weigh more
LATEST_SHARE = 0.2
JOIN_TOKENS = 2  # " ... " between two messages on one line
COST_POWER = 0.8
IDF_POWER = 2.0
LINE_SHARERS = 3  # a line's prefix is weighed as shared by up to this many of its pieces  # at most this share of the budget goes to the forced latest state


@dataclass(slots=True)
class _Candidate:
    item: int
    piece: Piece
    tokens: int
    key: str  # the text without spaces: the same clause is often quoted twice


@dataclass(slots=True)
class _State:
    """What the chosen pieces already pay for: lines, dates, section titles, words."""

    used: int
    items: set[int] = field(default_factory=set)
    dates: set[tuple[str, str | None]] = field(default_factory=set)
    sections: set[str] = field(default_factory=set)
    lines: set[tuple[str, str, str | None]] = field(default_factory=set)
    said: set[str] = field(default_factory=set)
    texts: set[str] = field(default_factory=set)  # chosen pieces, spaces removed


def choose(
    items: Sequence[Item], budget: int, fixed: int, count: Callable[[str], int]
) -> list[tuple[int, Piece]]:
    """The pieces to keep as ``(item index, piece)``, most valuable first, their
    cost estimated to fit ``budget`` tokens of which ``fixed`` are already
    taken (the header)."""
    candidates = [
        _Candidate(n, piece, count(piece.text) + 1, "".join(piece.text.split()))
        for n, item in enumerate(items)
        for piece in item.pieces
    ]
    if not candidates:
        return []
    weights = _word_weights(candidates)
    state = _State(used=fixed)
    chosen: list[tuple[int, Piece]] = []
    line_cost = _LineCost(items, count)

    def take(candidate: _Candidate) -> None:
        state.used += candidate.tokens + line_cost.extra(candidate.item, state)
        item = items[candidate.item]
        state.items.add(candidate.item)
        state.dates.add((section_of(item), item.date))
        state.sections.add(section_of(item))
        state.lines.add((section_of(item), item.speaker, item.date))
        state.said.update(word for word, _ in candidate.piece.words)
        state.texts.add(candidate.key)
        chosen.append((candidate.item, candidate.piece))

    latest_budget = int(LATEST_SHARE * (budget - fixed))
    rest: list[_Candidate] = []
    for candidate in candidates:
        item = items[candidate.item]
        first = item.pieces[0] is candidate.piece
        cost = candidate.tokens + line_cost.extra(candidate.item, state)
        if item.latest and first and cost <= latest_budget and state.used + cost <= budget:
            latest_budget -= cost
            take(candidate)
        else:
            rest.append(candidate)

    def value(candidate: _Candidate) -> float:
        if candidate.key in state.texts:
            return 0.0  # said already, word for word
        gain = sum(
            weights[word] * kind * (REPEAT if word in state.said else 1.0)
            for word, kind in candidate.piece.words
        )
        if items[candidate.item].role == "user":
            gain *= USER_WEIGHT
        return gain / (candidate.tokens + line_cost.shared(candidate.item, state)) ** COST_POWER

    siblings: dict[int, list[int]] = {}
    for n, candidate in enumerate(rest):
        siblings.setdefault(candidate.item, []).append(n)
    heap = [(-value(c), n) for n, c in enumerate(rest)]
    heapq.heapify(heap)
    taken: set[int] = set()
    while heap and state.used < budget:
        _, n = heapq.heappop(heap)
        if n in taken:
            continue
        candidate = rest[n]
        fresh = value(candidate)
        if fresh <= 0:
            continue
        if heap and fresh < -heap[0][0]:
            heapq.heappush(heap, (-fresh, n))  # no longer the best: look again later
            continue
        cost = candidate.tokens + line_cost.extra(candidate.item, state)
        if state.used + cost > budget:
            continue
        first_of_line = candidate.item not in state.items
        take(candidate)
        taken.add(n)
        if first_of_line:  # its line is paid for now: the rest of its message got cheaper
            for sibling in siblings[candidate.item]:
                if sibling not in taken:
                    heapq.heappush(heap, (-value(rest[sibling]), sibling))
    return chosen


def _word_weights(candidates: Sequence[_Candidate]) -> dict[str, float]:
    frequency: dict[str, int] = {}
    kinds: dict[str, float] = {}
    for candidate in candidates:
        for word, kind in candidate.piece.words:
            frequency[word] = frequency.get(word, 0) + 1
            kinds[word] = max(kind, kinds.get(word, 0.0))
    total = len(candidates)
    rare = math.log(1 + total)
    weights = {word: math.log(1 + total / df) ** IDF_POWER for word, df in frequency.items()}
    for word, kind in kinds.items():
        if kind >= IDENTIFIER:
            # An id said again and again is the one the work is about: unlike a
            # word, it weighs more the more often it comes up.
            weights[word] = rare**IDF_POWER * math.sqrt(frequency[word])
    return weights


class _LineCost:
    """Tokens a piece costs beyond its own text: when its item has no chosen
    piece yet, the ``...`` that joins it to a line of the same speaker and
    date, or else a new line's prefix, its date, and the section title when
    the section is new."""

    def __init__(self, items: Sequence[Item], count: Callable[[str], int]) -> None:
        self._items = items
        self._count = count
        self._prefix: dict[str, int] = {}
        self._dates: dict[str, int] = {}
        self._titles = {section: count(title) + 1 for section, title in TITLES.items()}

    def extra(self, index: int, state: _State) -> int:
        if index in state.items:
            return 0
        item = self._items[index]
        section = section_of(item)
        if (section, item.speaker, item.date) in state.lines:
            return JOIN_TOKENS
        extra = self._cached(self._prefix, f"- {item.speaker}: ") + 2  # newline, a "..."
        if item.date and (section, item.date) not in state.dates:
            extra += self._cached(self._dates, f"[{item.date}] ")
        if section not in state.sections:
            extra += self._titles[section]
        return extra

    def shared(self, index: int, state: _State) -> float:
        """``extra`` spread over the pieces likely to share the line: tool data
        comes in many small clauses, each worth little alone."""
        item = self._items[index]
        share = min(LINE_SHARERS, len(item.pieces)) if item.role in ("tool", "call") else 1
        return self.extra(index, state) / share

    def _cached(self, cache: dict[str, int], text: str) -> int:
        tokens = cache.get(text)
        if tokens is None:
            tokens = cache[text] = self._count(text)
        return tokens
