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
title it would be the first to need. Filler (a piece without a content word,
``scan``) is never chosen.

The fairness rule: each party (a speaker, or the user and the assistant) is
given the budget in proportion to what it contributed, the turns it took among
the ones at hand (a message with content; an earlier summary's line counts one
per quoted run), so a verbose party does not buy budget by its length. While a
party still has a piece that fits, no other party is given more than its share
of what the parties were given so far (tokens of quoted text); a party's share
left unused goes to the others. Tool calls and results belong to no party:
they compete on information alone. (Weighing the user's words 1.3x, the rule
before, gave 91% of the summary's text to one speaker of a LoCoMo conversation
at 2,000 tokens, and kept the other one's answers less often than dropping the
oldest turns did. Shares by tokens rather than turns kept the same LoCoMo
answers and fewer of tau-bench's ids at 300 tokens, 92.7% against 95.0%: the
user's short requests lost to the assistant's long replies.)

Order of choice: first the pieces the compaction instructions pin
(``instructions``), by value, as far as the budget goes; then, in a task's
summary, the first sentence with content of the first user request (the
task, carried from summary to summary) and of the newest message of each
party, so it says what was asked and ends on where the work stood (at most
``LATEST_SHARE`` of the budget; a conversation's lines are chosen on their
information alone, the messages kept after the summary say where it
stands); then the rest,
greedily by value within the fairness rule, with lazy re-evaluation (a
piece's value only falls as others are chosen, so a heap of stale upper
bounds per party is exact enough and keeps it near O(n log n)).
(Pinning the first user request cost 0.013 of the LoCoMo answers kept at
2,000 tokens when LoCoMo was read as a task; it is a conversation now.)
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from .layout import TITLES, section_of
from .scan import CONVERSATION, IDENTIFIER, NAME, TOOL_DATA, Item, Piece

# Tuned on the LoCoMo and tau-bench checks of bench/compaction_quality.py.
REPEAT = 0.3  # the share of a word's weight it adds again after it was said
# Text a tool printed (code, logs, listings) is long and full of one-off
# numbers; what the assistant concluded from it is usually the better half.
TOOL_TEXT_WEIGHT = 0.5
# What people talk about is named (people, places, titles): in a conversation
# (no tool calls) a name weighs this instead of scan.NAME. From 1.5 to 3.5 it
# raised the LoCoMo answers kept at 2k-8k tokens by 0.02 on average; in a task
# agent's session, identifiers are what matters and names stay below them.
CONVERSATION_NAME = 3.5
IDF_POWER = 2.0  # > 1: a word said once outweighs several said a few times
# < 1: a long sentence with many facts is not penalised per token. 0.85-1.0 kept
# more LoCoMo answers than 0.8 at every threshold from 2k to 8k (mean 0.279
# against 0.271 at 0.9) once the speakers had fair shares.
COST_POWER = 0.9
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
    words: frozenset[str] = frozenset()  # the words of ``gains``


@dataclass(slots=True)
class _State:
    """What the chosen pieces already pay for: lines, dates, section titles,
    words; and the tokens each party was given."""

    used: int
    items: set[int] = field(default_factory=set)
    dates: set[tuple[str, str | None]] = field(default_factory=set)
    sections: set[str] = field(default_factory=set)
    lines: set[tuple[str, str, str | None]] = field(default_factory=set)
    said: set[str] = field(default_factory=set)
    texts: set[str] = field(default_factory=set)  # chosen pieces, spaces removed
    given: dict[str, int] = field(default_factory=dict)  # party -> tokens


@dataclass(frozen=True, slots=True)
class Candidates:
    """The pieces of ``items`` that compete, weighed: all ``choose`` needs
    besides the budget, the same for any budget. ``first``: those the
    compaction instructions ask for."""

    items: Sequence[Item]
    first: list[_Candidate]
    rest: list[_Candidate]
    shares: dict[str, float]
    lines: _LineCost


def candidates(
    items: Sequence[Item], count: Callable[[str], int], pinned: Collection[tuple[int, int]] = ()
) -> Candidates:
    """The ``Candidates`` of ``items``, their cost counted with ``count``.
    ``pinned``: ``(item index, piece index)`` of the pieces the compaction
    instructions ask for, chosen first."""
    pool = [
        _Candidate(n, piece, count(piece.text) + 1, "".join(piece.text.split()))
        for n, item in enumerate(items)
        for piece in item.pieces
        if not piece.filler
    ]
    if pool:
        _weigh(items, pool)
        pool = _best_of_each_item(pool)
    pins = set(pinned)
    first = [c for c in pool if (c.item, c.piece.index) in pins]
    rest = [c for c in pool if (c.item, c.piece.index) not in pins]
    return Candidates(items, first, rest, _shares(items), _LineCost(items, count))


def choose(pool: Candidates, budget: int, fixed: int) -> Choice:
    """Choose the pieces to keep, their cost estimated to fit ``budget`` tokens
    of which ``fixed`` are already taken (the header); the pinned ones first.
    ``Choice.chosen`` lists them as ``(item index, piece)``, most valuable
    first."""
    choice = Choice(pool.items, budget, fixed, pool.lines, pool.shares)
    if pool.first:
        choice.greedy(pool.first, fair=False)
    choice.rest = choice.latest(pool.rest)
    if choice.rest:
        choice.greedy(choice.rest, fair=True)
    return choice


class Choice:
    """The pieces chosen so far, and what choosing more would cost."""

    def __init__(
        self,
        items: Sequence[Item],
        budget: int,
        fixed: int,
        lines: _LineCost,
        shares: dict[str, float],
    ) -> None:
        self.items = items
        self.budget = budget
        self.fixed = fixed
        self.shares = shares
        self.state = _State(used=fixed)
        self.lines = lines
        self.chosen: list[tuple[int, Piece]] = []
        self.rest: list[_Candidate] = []  # the candidates after the pinned ones
        self._taken: set[int] = set()  # id() of the chosen candidates

    def top_up(self, used: int) -> bool:
        """Choose more of the rest, now that the rendered text is known to take
        ``used`` tokens (the estimate counts each piece alone, a little more
        than it takes in the whole text); whether any was chosen. (Filling the
        rest the first estimate left, about 4% of the budget, kept 0.006 more of
        the LoCoMo answers at 2k-8k tokens.)"""
        target = used
        if target >= self.state.used:
            return False
        before = len(self.chosen)
        self.state.used = target
        rest = [c for c in self.rest if id(c) not in self._taken]
        if rest:
            self.greedy(rest, fair=True)
        return len(self.chosen) > before

    def cost(self, candidate: _Candidate) -> int:
        return candidate.tokens + self.lines.extra(candidate.item, self.state)

    def take(self, candidate: _Candidate) -> None:
        state = self.state
        cost = self.cost(candidate)
        state.used += cost
        party = self.items[candidate.item].party
        if party is not None:  # its text: the dates and titles are everyone's
            state.given[party] = state.given.get(party, 0) + candidate.tokens
        section, speaker, date = self.lines.key(candidate.item)
        state.items.add(candidate.item)
        state.dates.add((section, date))
        state.sections.add(section)
        state.lines.add((section, speaker, date))
        state.said.update(candidate.words)
        state.texts.add(candidate.key)
        self.chosen.append((candidate.item, candidate.piece))
        self._taken.add(id(candidate))

    def value(self, candidate: _Candidate) -> float:
        return self._value(candidate, self.lines.extra(candidate.item, self.state))

    def _value(self, candidate: _Candidate, extra: int) -> float:
        """``value``, given the candidate's ``_LineCost.extra`` now."""
        state = self.state
        if candidate.key in state.texts:
            return 0.0  # said already, word for word
        said = state.said
        gain = candidate.gain
        if not said.isdisjoint(candidate.words):  # (else nothing to take off: the same float)
            gain -= (1 - REPEAT) * sum(g for w, g in candidate.gains if w in said)
        shared = extra / self.lines.sharers(candidate.item)
        return gain / (candidate.tokens + shared) ** COST_POWER

    def latest(self, candidates: list[_Candidate]) -> list[_Candidate]:
        """Take the first candidate of each latest item and of the first
        request, within ``LATEST_SHARE`` of the budget; the candidates not taken."""
        room = int(LATEST_SHARE * (self.budget - self.fixed))
        rest: list[_Candidate] = []
        opened: set[int] = set()
        for candidate in candidates:
            n = candidate.item
            first = n not in opened
            opened.add(n)
            item = self.items[n]
            cost = self.cost(candidate)
            if (
                first
                and (item.latest or item.first_request)
                and cost <= room
                and self.state.used + cost <= self.budget
            ):
                room -= cost
                self.take(candidate)
            else:
                rest.append(candidate)
        return rest

    def greedy(self, pool: list[_Candidate], *, fair: bool) -> None:
        """Take the most valuable candidates of ``pool`` while they fit; with
        ``fair``, within the fairness rule."""
        heaps: dict[str | None, list[tuple[float, int]]] = {}
        siblings: dict[int, list[int]] = {}
        for n, candidate in enumerate(pool):
            party = self.items[candidate.item].party if fair else None
            heaps.setdefault(party, []).append((-self.value(candidate), n))
            siblings.setdefault(candidate.item, []).append(n)
        for heap in heaps.values():
            heapq.heapify(heap)
        taken: set[int] = set()
        smallest = min(c.tokens for c in pool)
        while self.budget - self.state.used >= smallest:
            tops: list[tuple[float, int, str | None]] = []
            for party in self._eligible(heaps):
                top = self._fresh_top(heaps[party], pool, taken)
                if top is not None:
                    tops.append((*top, party))
            if not tops:
                if any(heaps.values()):
                    continue  # the eligible ones ran out: look at the others
                return
            best = max(tops, key=lambda t: (t[0], -t[1]))
            for value, n, party in tops:
                if n != best[1]:
                    heapq.heappush(heaps[party], (-value, n))
            candidate = pool[best[1]]
            first_of_line = candidate.item not in self.state.items
            self.take(candidate)
            taken.add(best[1])
            if first_of_line:  # its line is paid for now: the rest of its message got cheaper
                heap = heaps[best[2]]
                for sibling in siblings[candidate.item]:
                    if sibling not in taken:
                        heapq.heappush(heap, (-self.value(pool[sibling]), sibling))

    def _eligible(self, heaps: dict[str | None, list[tuple[float, int]]]) -> list[str | None]:
        """The parties that may be given a piece now: no party beyond its share
        while another one within its share still has a candidate."""
        if len(heaps) == 1:
            return list(heaps)
        given = self.state.given
        total = sum(given.values())
        shares = self.shares
        eligible: list[str | None] = []
        over: list[str | None] = []
        for party, heap in heaps.items():
            if not heap:
                continue
            if party is None or given.get(party, 0) <= shares.get(party, 0.0) * total:
                eligible.append(party)
            else:
                over.append(party)
        if over and all(party is None for party in eligible):
            eligible.extend(over)  # the others have nothing left: the rest is theirs
        return eligible

    def _fresh_top(
        self, heap: list[tuple[float, int]], pool: list[_Candidate], taken: set[int]
    ) -> tuple[float, int] | None:
        """Pop the candidate of ``heap`` with the best current value that fits,
        or ``None``; ones that no longer fit (the budget only shrinks) or add
        nothing are dropped."""
        while heap:
            _, n = heapq.heappop(heap)
            if n in taken:
                continue
            candidate = pool[n]
            extra = self.lines.extra(candidate.item, self.state)
            if self.state.used + candidate.tokens + extra > self.budget:
                continue
            fresh = self._value(candidate, extra)
            if fresh <= 0:
                continue
            if heap and fresh < -heap[0][0]:
                heapq.heappush(heap, (-fresh, n))  # no longer the best: look again later
                continue
            return fresh, n
        return None


def _shares(items: Sequence[Item]) -> dict[str, float]:
    """Each party's share of the turns the parties took: a message with
    content counts one, a line of an earlier summary one per run it quotes
    (its runs are separated by ``...``)."""
    turns: dict[str, int] = {}
    for item in items:
        if item.party is None or all(piece.filler for piece in item.pieces):
            continue
        indices = [piece.index for piece in item.pieces]
        runs = 1 + sum(1 for a, b in itertools.pairwise(indices) if b > a + 1)
        turns[item.party] = turns.get(item.party, 0) + runs
    total = sum(turns.values())
    return {party: n / total for party, n in turns.items()} if total else {}


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
        item = items[candidate.item]
        tool_text = item.section == TOOL_DATA and not item.structured
        scale = TOOL_TEXT_WEIGHT if tool_text else 1.0
        words = candidate.piece.words
        if item.section == CONVERSATION:
            candidate.gains = tuple(
                (word, weights[word] * (CONVERSATION_NAME if kind == NAME else kind) * scale)
                for word, kind in words
            )
        else:
            candidate.gains = tuple((word, weights[word] * kind * scale) for word, kind in words)
        candidate.gain = sum(g for _, g in candidate.gains)
        candidate.words = frozenset(word for word, _ in words)


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

    def sharers(self, index: int) -> int:
        """How many pieces are likely to share the line ``extra`` pays for."""
        return self._shares[index]
