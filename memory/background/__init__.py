"""Long-term memory across sessions: the design's ``background`` memory type.

- ``types``: scopes, memories, provenance, versions;
- ``store``: the ``LongTermStore`` protocol and its rules (``VersionedStore``,
  over storage primitives a store implements: ``Row`` is what they exchange);
- ``sqlite``: the embedded store (SQLite, FTS5 and BM25);
- ``scoring``: how a search ranks (relevance, importance, recency);
- ``extract``: the offline and the model extractor;
- ``recall``: the block placed in the context;
- ``memory``: ``BackgroundMemory``;
- ``tools``: the agent's ``recall``, ``remember`` and ``forget``.
"""

from .extract import Candidate, Excerpt, Extractor, ModelExtractor, OfflineExtractor
from .memory import BackgroundMemory
from .scoring import query_terms
from .sqlite import SQLiteLongTermStore
from .store import Filters, LongTermStore, Row, VersionedStore
from .types import (
    KINDS,
    STATUSES,
    Hit,
    Kind,
    Memory,
    Provenance,
    Purged,
    Scope,
    Status,
    Version,
    dedupe_key,
)

__all__ = [
    "KINDS",
    "STATUSES",
    "BackgroundMemory",
    "Candidate",
    "Excerpt",
    "Extractor",
    "Filters",
    "Hit",
    "Kind",
    "LongTermStore",
    "Memory",
    "ModelExtractor",
    "OfflineExtractor",
    "Provenance",
    "Purged",
    "Row",
    "SQLiteLongTermStore",
    "Scope",
    "Status",
    "Version",
    "VersionedStore",
    "dedupe_key",
    "query_terms",
]
