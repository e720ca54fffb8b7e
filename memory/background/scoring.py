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
from datetime import UTC, datetime

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
