"""How a search ranks memories: text relevance, then importance and recency.

``score = relevance x (0.6 + 0.4 x importance) x (0.75 + 0.25 x recency)``, where
``relevance`` is the store's full-text rank made positive (SQLite FTS5's
``bm25()`` negated; PostgreSQL's ``ts_rank_cd``), ``importance`` is the memory's
own [0, 1], and ``recency = 0.5 ** (age_days / HALF_LIFE_DAYS)`` of its last
update. Relevance dominates: an important or recent memory can outrank a
slightly better textual match, never one that matches much better.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from .types import Hit, Memory

HALF_LIFE_DAYS = 90.0
_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)?", re.UNICODE)
# Words too common to say what a question is about; they would match every memory.
_STOPWORDS = """a about after all also am an and any are as at be been but by can could did
    do does for from had has have he her him his how i if in into is it its me my no not of
    on or our she so than that the their them then there they this to too up us was we were
    what when where which who whom why will with would you your"""
STOPWORDS = frozenset(_STOPWORDS.split())


def query_terms(query: str, limit: int = 32) -> list[str]:
    """The distinct content words of ``query`` (lower case, stopwords left out),
    at most ``limit``, in order."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(query.lower()):
        word = word.replace("\u2019", "'").split("'")[0]
        if word and word not in STOPWORDS and word not in seen:
            seen[word] = None
            if len(seen) == limit:
                break
    return list(seen)


def recency(updated_at: str, now: datetime) -> float:
    """``0.5 ** (age_days / HALF_LIFE_DAYS)``; 1.0 for a time in the future."""
    try:
        then = datetime.fromisoformat(updated_at)
    except ValueError:
        return 0.0
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    age_days = max(0.0, (now - then).total_seconds() / 86_400)
    return float(0.5 ** (age_days / HALF_LIFE_DAYS))


def score(relevance: float, importance: float, updated_at: str, now: datetime) -> float:
    """The combined score of the module docstring."""
    return relevance * (0.6 + 0.4 * importance) * (0.75 + 0.25 * recency(updated_at, now))


# -- recall: the parts of a placed memory's score -------------------------------------

# The weights of ``Parts.total``, set on LoCoMo conversations 1, 3 and 5 and
# reported on 2 and 4 apart (bench/background_memory.py): one rule for every scope.
W_TEXT = 1.0
W_ENTITIES = 0.5
W_TIME = 0.25
W_RECENCY = 0.35
W_IMPORTANCE = 0.1
RECENT_HALF_RANK = 20.0  # the newest memory's recency is 1, the 20th's 0.5, the 40th's 0.25
_NAME = re.compile(r"\b[A-Z][a-z]+(?:['\u2019]s)?\b")
_ASKS_WHEN = re.compile(
    r"^\s*when\b|\bwhat (?:year|month|date|day|time)\b|\bhow long ago\b|\bwhich (?:year|month)\b",
    re.I,
)


@dataclass(frozen=True, slots=True)
class Parts:
    """Why a memory was placed: each part in [0, 1], and their weighted sum.

    ``text``: the store's full-text relevance divided by the best candidate's
    (0: no word of the request); ``entities``: the share of the names the
    request mentions (capitalised words) that the memory contains; ``time``:
    1 when the request asks when and the memory carries a date; ``recency``:
    ``0.5 ** (rank / RECENT_HALF_RANK)`` of its place among the scope's newest
    memories (0 beyond them); ``importance``: the memory's own."""

    text: float
    entities: float
    time: float
    recency: float
    importance: float

    @property
    def total(self) -> float:
        return (
            W_TEXT * self.text
            + W_ENTITIES * self.entities
            + W_TIME * self.time
            + W_RECENCY * self.recency
            + W_IMPORTANCE * self.importance
        )

    def to_dict(self) -> dict[str, float]:
        """The parts and ``total``, rounded to 4 places (as a ``memory_recall`` records them)."""
        fields = {
            "text": self.text,
            "entities": self.entities,
            "time": self.time,
            "recency": self.recency,
            "importance": self.importance,
            "total": self.total,
        }
        return {name: round(value, 4) for name, value in fields.items()}


def names_in(text: str) -> set[str]:
    """The capitalised words of ``text`` that are not stopwords, lower case,
    without a possessive ``'s``: the people, places and things it names."""
    out = set()
    for word in _NAME.findall(text):
        word = word.lower().replace("\u2019", "'").removesuffix("'s")
        if word not in STOPWORDS:
            out.add(word)
    return out


def asks_when(query: str) -> bool:
    """Whether ``query`` asks for a time ("When did...", "what year...")."""
    return bool(_ASKS_WHEN.search(query))


def recall_ranking(
    query: str, matched: Sequence[Hit], newest: Sequence[Memory]
) -> list[tuple[Hit, Parts]]:
    """The candidates for the recall block, best ``Parts.total`` first.

    ``matched``: the store's search for ``query`` (its score is the
    relevance); ``newest``: the scope's newest active memories, newest first
    (so what was just said is placed even when it shares no word with the
    request, as a conversation's newest turns would be). A memory in both
    counts once; each hit's ``score`` is its total."""
    best = max((hit.score for hit in matched), default=0.0)
    relevance = {hit.memory.id: hit.score / best if best > 0 else 0.0 for hit in matched}
    recency = {m.id: 0.5 ** (rank / RECENT_HALF_RANK) for rank, m in enumerate(newest)}
    wanted = names_in(query)
    dated = asks_when(query)
    pool = {hit.memory.id: hit.memory for hit in matched}
    for m in newest:
        pool.setdefault(m.id, m)
    out = []
    for memory_id, memory in pool.items():
        if wanted:
            present = names_in(memory.text) | set(query_terms(memory.text, limit=256))
            entities = len(wanted & present) / len(wanted)
        else:
            entities = 0.0
        parts = Parts(
            text=relevance.get(memory_id, 0.0),
            entities=entities,
            time=1.0 if dated and memory.when else 0.0,
            recency=recency.get(memory_id, 0.0),
            importance=memory.importance,
        )
        out.append((Hit(memory, parts.total), parts))
    out.sort(key=lambda pair: -pair[1].total)
    return out
