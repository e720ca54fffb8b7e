"""Long-term memory across sessions: the design's ``background`` memory type.

- ``types``: scopes, memories, provenance, versions;
- ``store``: the ``LongTermStore`` protocol and its rules (``VersionedStore``);
- ``sqlite``: the embedded store (SQLite, FTS5 and BM25);
- ``scoring``: how a search ranks (relevance, importance, recency);
- ``extract``: the offline and the model extractor;
- ``recall``: the block placed in the context;
- ``memory``: ``BackgroundMemory``;
- ``tools``: the agent's ``recall``, ``remember`` and ``forget``.
"""

from .extract import Candidate, Excerpt, Extractor, ModelExtractor, OfflineExtractor
from .memory import BackgroundMemory
from .sqlite import SQLiteLongTermStore
from .store import Filters, LongTermStore, VersionedStore
from .types import Hit, Memory, Provenance, Purged, Scope, Version

__all__ = [
    "BackgroundMemory",
    "Candidate",
    "Excerpt",
    "Extractor",
    "Filters",
    "Hit",
    "LongTermStore",
    "Memory",
    "ModelExtractor",
    "OfflineExtractor",
    "Provenance",
    "Purged",
    "SQLiteLongTermStore",
    "Scope",
    "Version",
    "VersionedStore",
]
