"""Choosing the sentences that fit the budget.

Every piece (sentence or clause) of the items, the earlier summary's included,
competes for the budget on one scale: the information it adds per token it
costs. Information is the sum of its words' weights: how rare the word is
among the pieces at hand (inverse document frequency, so a word said in every
other sentence adds little) times how specific its kind is (``scan``:
identifiers, numbers, names, plain words). Identifiers are the exception to
rarity: an id that keeps coming up is the one the work is about, so its
weight grows with its frequency. A word already said by a chosen piece counts
``REPEAT`` of its weight again, so the choice spreads over many facts instead
of repeating one, and a piece already quoted word for word counts nothing.
The cost of a piece is its tokens, plus the line prefix, date and section
title it would be the first to need.

The choice is greedy with lazy re-evaluation (a piece's value only falls as
others are chosen, so a heap of stale upper bounds is exact enough and keeps
it near O(n log n)). The opening sentence of the latest user and assistant
messages is chosen before anything else, so the summary always ends on where
the conversation stood. (Pinning the first user request as well, the task in
an agent session, cost 0.013 of the LoCoMo answers kept at 2,000 tokens,
0.154 against 0.167: it ranks on its own information like the rest.)
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .layout import TITLES, section_of
from .scan import IDENTIFIER, TOOL_DATA, Item, Piece

# Tuned on the LoCoMo and tau-bench checks of bench/compaction_quality.py.
REPEAT = 0.3  # the share of a word's weight it adds again after it was said
USER_WEIGHT = 1.3  # a user's own words (requests, facts about them) weigh more
# Text a tool printed (code, logs, listings) is long and full of one-off
# numbers; what the assistant concluded from it is usually the better half.
TOOL_TEXT_WEIGHT = 0.5
IDF_POWER = 2.0  # > 1: a word said once outweighs several said a few times
COST_POWER = 0.8  # < 1: a long sentence with many facts is not penalised per token
LATEST_SHARE = 0.2  # at most this share of the budget goes to the latest state first
JOIN_TOKENS = 2  # " ... " between two messages on one line
LINE_SHARERS = 3  # a tool line's prefix is weighed as shared by up to this many clauses
PIECES_PER_ITEM = 40  # the densest pieces of one message that compete, at most


@dataclass(slots=True)
class _Candidate:
    item: int
    piece: Piece
    tokens: int
    key: str  # the text without spaces: the same clause is often quoted twice
    gains: tuple[tuple[str, float], ...] = ()  # each word's weight in this piece
    gain: float = 0.0  # their sum, before any word was said


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
    _weigh(items, candidates)
    candidates = _best_of_each_item(candidates)
    state = _State(used=fixed)
    chosen: list[tuple[int, Piece]] = []
    lines = _LineCost(items, count)

    def take(candidate: _Candidate) -> None:
        state.used += candidate.tokens + lines.extra(candidate.item, state)
        section, speaker, date = lines.key(candidate.item)
        state.items.add(candidate.item)
        state.dates.add((section, date))
        state.sections.add(section)
        state.lines.add((section, speaker, date))
        state.said.update(word for word, _ in candidate.gains)
        state.texts.add(candidate.key)
        chosen.append((candidate.item, candidate.piece))

    latest_budget = int(LATEST_SHARE * (budget - fixed))
    rest: list[_Candidate] = []
    for candidate in candidates:
        item = items[candidate.item]
        cost = candidate.tokens + lines.extra(candidate.item, state)
        opening = item.pieces[0] is candidate.piece
        if item.latest and opening and cost <= latest_budget and state.used + cost <= budget:
            latest_budget -= cost
            take(candidate)
        else:
            rest.append(candidate)
    if not rest:
        return chosen

    def value(candidate: _Candidate) -> float:
        if candidate.key in state.texts:
            return 0.0  # said already, word for word
        said = state.said
        gain = candidate.gain - (1 - REPEAT) * sum(g for w, g in candidate.gains if w in said)
        return gain / (candidate.tokens + lines.shared(candidate.item, state)) ** COST_POWER

    siblings: dict[int, list[int]] = {}
    for n, candidate in enumerate(rest):
        siblings.setdefault(candidate.item, []).append(n)
    heap = [(-value(c), n) for n, c in enumerate(rest)]
    heapq.heapify(heap)
    taken: set[int] = set()
    smallest = min(c.tokens for c in rest)
    while heap and budget - state.used >= smallest:
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
        if state.used + candidate.tokens + lines.extra(candidate.item, state) > budget:
            continue
        first_of_line = candidate.item not in state.items
        take(candidate)
        taken.add(n)
        if first_of_line:  # its line is paid for now: the rest of its message got cheaper
            for sibling in siblings[candidate.item]:
                if sibling not in taken:
                    heapq.heappush(heap, (-value(rest[sibling]), sibling))
    return chosen


def _best_of_each_item(candidates: list[_Candidate]) -> list[_Candidate]:
    """At most ``PIECES_PER_ITEM`` candidates of each item, the densest: a tool
    result of a thousand clauses need not make the choice a thousand times slower."""
    by_item: dict[int, list[_Candidate]] = {}
    for candidate in candidates:
        by_item.setdefault(candidate.item, []).append(candidate)
    if all(len(group) <= PIECES_PER_ITEM for group in by_item.values()):
        return candidates
    kept: set[int] = set()
    for group in by_item.values():
        if len(group) > PIECES_PER_ITEM:
            group = sorted(group, key=lambda c: -c.gain / c.tokens)[:PIECES_PER_ITEM]
        kept.update(id(c) for c in group)
    return [c for c in candidates if id(c) in kept]


def _weigh(items: Sequence[Item], candidates: Sequence[_Candidate]) -> None:
    """Set each candidate's word gains: rarity among the candidates x kind."""
    frequency: dict[str, int] = {}
    kinds: dict[str, float] = {}
    for candidate in candidates:
        for word, kind in candidate.piece.words:
            frequency[word] = frequency.get(word, 0) + 1
            if kind > kinds.get(word, 0.0):
                kinds[word] = kind
    total = len(candidates)
    rare = math.log(1 + total) ** IDF_POWER
    weights: dict[str, float] = {}
    for word, df in frequency.items():
        if kinds[word] >= IDENTIFIER:
            # An id said again and again is the one the work is about: unlike a
            # word, it weighs more the more often it comes up.
            weights[word] = rare * math.sqrt(df)
        else:
            weights[word] = math.log(1 + total / df) ** IDF_POWER
    for candidate in candidates:
        scale = _scale(items[candidate.item])
        candidate.gains = tuple(
            (word, weights[word] * kind * scale) for word, kind in candidate.piece.words
        )
        candidate.gain = sum(g for _, g in candidate.gains)


def _scale(item: Item) -> float:
    if item.role == "user":
        return USER_WEIGHT
    if item.section == TOOL_DATA and not item.structured:
        return TOOL_TEXT_WEIGHT
    return 1.0


class _LineCost:
    """Tokens a piece costs beyond its own text: when its item has no chosen
    piece yet, the ``...`` that joins it to a line of the same speaker and
    date, or else a new line's prefix, its date, and the section title when
    the section is new."""

    def __init__(self, items: Sequence[Item], count: Callable[[str], int]) -> None:
        prefixes: dict[str, int] = {}
        dates: dict[str, int] = {}
        self._keys: list[tuple[str, str, str | None]] = []
        self._costs: list[tuple[int, int]] = []  # (prefix, date) tokens
        self._shares: list[int] = []
        for item in items:
            self._keys.append((section_of(item), item.speaker, item.date))
            prefix = f"- {item.speaker}: "
            if prefix not in prefixes:
                prefixes[prefix] = count(prefix) + 2  # and a newline, a "..."
            stamp = f"[{item.date}] " if item.date else ""
            if stamp not in dates:
                dates[stamp] = count(stamp) if stamp else 0
            self._costs.append((prefixes[prefix], dates[stamp]))
            # Tool data comes in many small clauses, each worth little alone.
            tool = item.role in ("tool", "call")
            self._shares.append(min(LINE_SHARERS, len(item.pieces)) if tool else 1)
        self._titles = {section: count(title) + 1 for section, title in TITLES.items()}

    def key(self, index: int) -> tuple[str, str, str | None]:
        """``(section, speaker, date)``: items with the same key share a line."""
        return self._keys[index]

    def extra(self, index: int, state: _State) -> int:
        if index in state.items:
            return 0
        key = self._keys[index]
        if key in state.lines:
            return JOIN_TOKENS
        prefix, date = self._costs[index]
        extra = prefix
        if date and (key[0], key[2]) not in state.dates:
            extra += date
        if key[0] not in state.sections:
            extra += self._titles[key[0]]
        return extra

    def shared(self, index: int, state: _State) -> float:
        """``extra`` spread over the pieces likely to share the line."""
        return self.extra(index, state) / self._shares[index]
