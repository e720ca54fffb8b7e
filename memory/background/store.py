"""``LongTermStore``: the protocol every long-term store follows, and its rules.

The rules are written once, in ``VersionedStore``, over a handful of storage
primitives that each store implements (``SQLiteLongTermStore`` here, the
dashboard's Django store in ``motus_web``):

- **Scope**: every call names a ``Scope``; a memory of another scope is
  "not found" (``LongTermMemoryError``), never read or changed.
- **Dedupe**: ``add`` of a statement an active memory of the scope already
  holds (same ``dedupe_key``, or a ``near_duplicate`` of it among the
  ``NEAR_CANDIDATES`` best full-text matches) adds a provenance link to that
  memory instead of a second memory; the same link twice is kept once.
- **Newer wins**: ``supersede`` marks the old memory ``superseded`` and names
  its successor; a supersession by the words of a memory that the target
  already replaced (directly or down its chain) only links them there, so
  re-reading a conversation never brings an older statement back over a
  newer one.
- **History**: nothing is changed in place. ``update``, ``supersede``,
  ``forget`` and ``restore`` append a ``Version`` and move the memory's current
  row to it; ``history`` lists every version.
- **Forgetting sticks**: ``add`` of a statement a forgotten, flagged or
  superseded memory of the scope holds (what re-reading the same messages does: an extraction
  after a crash, an import again, a restore, a fork) links it there and keeps
  it as it is; only an operator's add (``extractor`` ``"operator:..."``)
  makes it active again, as a new memory.
- **Purge** is the one real deletion (a person's request to be forgotten): it
  deletes the memories, their versions and their links, leaves a tombstone
  per statement (``tombstone_key``: a hash, not the words), and says what it
  removed (``Purged``). ``add`` of a purged statement by anyone but an
  operator raises ``LongTermMemoryError``.
- **Data, never instructions** (``memory.background.guard``): text is stored
  ``neutralise``-d (no tag, template token or role label can form in it);
  text that reads as an instruction to the model is kept ``flagged``, with
  the reason in its first version: never searched, so never recalled.

Each operation is one transaction of the store: a crash mid-write leaves
either all of it or none.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

from ..errors import LongTermMemoryError
from ..log.records import now_iso
from . import scoring
from .guard import instruction_reason, neutralise
from .types import (
    Hit,
    Kind,
    Memory,
    Provenance,
    Purged,
    Scope,
    Status,
    Version,
    check_importance,
    check_kind,
    dedupe_key,
    near_duplicate,
    tombstone_key,
)

OPERATOR = "operator:"  # the actor prefix of a person's own edits
MAX_CHAIN = 50  # successors followed to tell a statement already replaced
NEAR_CANDIDATES = 5  # full-text matches compared word by word for a near-duplicate
SEARCH_CANDIDATES = 5  # full-text candidates per result asked for, rescored with importance/recency


@dataclass(frozen=True, slots=True)
class Filters:
    """What ``list`` narrows to: ``status`` (``None``: any), ``kind``, the
    ``session_id`` of a provenance link, ``since``/``until`` (ISO-8601, on the
    last update) and a full-text ``query``."""

    status: Status | None = None
    kind: Kind | None = None
    session_id: str | None = None
    since: str | None = None
    until: str | None = None
    query: str | None = None


@runtime_checkable
class LongTermStore(Protocol):
    """Memories kept across sessions, per scope (see the module docstring).

    Every method raises ``LongTermMemoryError`` for a memory id that is not in
    ``scope`` or a change its status does not allow, and
    ``ConfigurationError`` for an unknown kind or an importance outside [0, 1].
    """

    def add(
        self,
        scope: Scope,
        *,
        text: str,
        kind: Kind,
        provenance: Provenance,
        importance: float = 0.5,
        when: str | None = None,
    ) -> tuple[Memory, bool]:
        """Remember ``text``; returns the memory and whether it is new (``False``:
        an active memory already said it, and got the provenance link)."""
        ...

    def update(
        self,
        scope: Scope,
        memory_id: str,
        *,
        text: str | None = None,
        kind: Kind | None = None,
        importance: float | None = None,
        actor: str,
        reason: str = "",
        provenance: Provenance | None = None,
    ) -> Memory:
        """A new version of an active memory with the fields given changed."""
        ...

    def supersede(
        self,
        scope: Scope,
        memory_id: str,
        *,
        text: str,
        kind: Kind,
        provenance: Provenance,
        importance: float = 0.5,
        when: str | None = None,
        reason: str = "",
    ) -> Memory:
        """Replace an active memory with a new one (returned); the old one
        becomes ``superseded`` and names its successor."""
        ...

    def link(self, scope: Scope, memory_id: str, provenance: Provenance) -> bool:
        """Add a provenance link to a memory (it was said again); ``False`` when
        that link is already there."""
        ...

    def forget(self, scope: Scope, memory_id: str, *, actor: str, reason: str = "") -> Memory:
        """Stop recalling an active memory (a ``forgotten`` version; nothing deleted)."""
        ...

    def restore(self, scope: Scope, memory_id: str, *, actor: str, reason: str = "") -> Memory:
        """Make a forgotten memory active again (a new version)."""
        ...

    def get(self, scope: Scope, memory_id: str) -> Memory: ...

    def search(
        self, scope: Scope, query: str, *, limit: int = 10, kinds: Sequence[Kind] | None = None
    ) -> list[Hit]:
        """Active memories matching ``query``, best first (``memory.background.scoring``)."""
        ...

    def memories(
        self, scope: Scope, filters: Filters | None = None, *, limit: int = 100, offset: int = 0
    ) -> list[Memory]:
        """Memories of ``scope``, newest update first."""
        ...

    def history(self, scope: Scope, memory_id: str) -> list[Version]: ...

    def count(self, scope: Scope, *, status: Status | None = "active") -> int: ...

    def purge(self, scope: Scope, memory_ids: Sequence[str] | None = None) -> Purged:
        """Delete for good ``memory_ids`` (``None``: all of ``scope``)."""
        ...


@dataclass(slots=True)
class Row:
    """A memory's current row, as the storage primitives exchange it."""

    id: str
    scope_key: str
    kind: Kind
    text: str
    key: str
    status: Status
    importance: float
    created_at: str
    updated_at: str
    version: int
    when: str | None = None
    superseded_by: str | None = None


class VersionedStore(ABC):
    """The ``LongTermStore`` rules over storage primitives (the ``_`` methods)."""

    # -- primitives --------------------------------------------------------------

    @abstractmethod
    def _atomic(self) -> AbstractContextManager[None]:
        """One transaction: everything inside is written, or nothing."""

    @abstractmethod
    def _find(self, scope_key: str, key: str) -> list[Row]:
        """The rows of ``scope_key`` with this ``dedupe_key``, any status, oldest first."""

    @abstractmethod
    def _bury(self, scope_key: str, tombstones: Sequence[str]) -> None:
        """Keep ``tombstone_key``s (the same one twice is kept once)."""

    @abstractmethod
    def _buried(self, scope_key: str, tombstone: str) -> bool: ...

    @abstractmethod
    def _row(self, scope_key: str, memory_id: str) -> Row | None: ...

    @abstractmethod
    def _insert(self, row: Row) -> None: ...

    @abstractmethod
    def _save(self, row: Row) -> None:
        """Write the current row (same id) after a version was appended."""

    @abstractmethod
    def _append_version(self, memory_id: str, version: Version) -> None: ...

    @abstractmethod
    def _versions(self, memory_id: str) -> list[Version]: ...

    @abstractmethod
    def _link(self, memory_id: str, provenance: Provenance) -> bool:
        """Add a provenance link; ``False`` when the same link is already there."""

    @abstractmethod
    def _links(self, memory_ids: Sequence[str]) -> dict[str, list[Provenance]]: ...

    @abstractmethod
    def _match(
        self,
        scope_key: str,
        terms: Sequence[str],
        limit: int,
        kinds: Sequence[Kind] | None,
        *,
        superseded: bool = False,
    ) -> list[tuple[Row, float]]:
        """Active rows (and superseded ones with ``superseded``) whose text
        matches any of ``terms``, with a positive full-text relevance, best
        first, at most ``limit``."""

    @abstractmethod
    def _rows(self, scope_key: str, filters: Filters, limit: int, offset: int) -> list[Row]: ...

    @abstractmethod
    def _count(self, scope_key: str, status: Status | None) -> int: ...

    @abstractmethod
    def _delete(self, scope_key: str, memory_ids: Sequence[str] | None) -> Purged: ...

    # -- the protocol ------------------------------------------------------------

    def add(
        self,
        scope: Scope,
        *,
        text: str,
        kind: Kind,
        provenance: Provenance,
        importance: float = 0.5,
        when: str | None = None,
    ) -> tuple[Memory, bool]:
        said, text = text, _text(text)
        kind, importance = check_kind(kind), check_importance(importance)
        flag = instruction_reason(said)
        operator = provenance.extractor.startswith(OPERATOR)
        key = dedupe_key(text)
        with self._atomic():
            rows = self._find(scope.key, key)
            existing = next((r for r in rows if r.status == "active"), None)
            if existing is None and flag is None:
                existing = self._near(scope.key, key)
            if existing is None and not operator:
                # Forgotten or flagged stays so, and superseded stays replaced,
                # whatever says it again.
                kept = ("forgotten", "flagged", "superseded")
                existing = next((r for r in rows if r.status in kept), None)
                if existing is None and self._buried(scope.key, tombstone_key(scope.key, key)):
                    raise LongTermMemoryError(
                        "this statement was purged from the scope: it is not remembered again"
                    )
            if existing is not None:
                self._link(existing.id, provenance)
                if existing.status == "active" and importance > existing.importance:
                    existing.importance = importance
                    self._save(existing)
                return self._memory(scope, existing), False
            row = self._new_row(scope, text, kind, importance, when)
            if flag is not None:
                row.status = "flagged"
            self._insert(row)
            reason = f"reads as an instruction to the model: {flag}" if flag else ""
            action = "flag" if flag else "add"
            self._append_version(row.id, _version(row, action, provenance.extractor, reason))
            self._link(row.id, provenance)
        return self._memory(scope, row), True

    def update(
        self,
        scope: Scope,
        memory_id: str,
        *,
        text: str | None = None,
        kind: Kind | None = None,
        importance: float | None = None,
        actor: str,
        reason: str = "",
        provenance: Provenance | None = None,
    ) -> Memory:
        action = "update"
        with self._atomic():
            row = self._current(scope, memory_id, "active")
            if text is not None:
                row.text = _text(text)
                row.key = dedupe_key(row.text)
                flag = instruction_reason(text)
                if flag is not None:
                    row.status, action = "flagged", "flag"
                    reason = f"reads as an instruction to the model: {flag}"
            if kind is not None:
                row.kind = check_kind(kind)
            if importance is not None:
                row.importance = check_importance(importance)
            self._advance(row, action, actor, reason)
            if provenance is not None:
                self._link(row.id, provenance)
        return self._memory(scope, row)

    def supersede(
        self,
        scope: Scope,
        memory_id: str,
        *,
        text: str,
        kind: Kind,
        provenance: Provenance,
        importance: float = 0.5,
        when: str | None = None,
        reason: str = "",
    ) -> Memory:
        flag = instruction_reason(text) if isinstance(text, str) else None
        if flag is not None:
            raise LongTermMemoryError(
                f"a memory is not superseded by text that reads as an instruction ({flag})"
            )
        text = _text(text)
        kind, importance = check_kind(kind), check_importance(importance)
        with self._atomic():
            old = self._current(scope, memory_id, "active")
            stale = self._replaced_by(scope.key, dedupe_key(text), old.id)
            if stale is not None:  # an older statement read again: linked, not brought back
                self._link(stale.id, provenance)
                return self._memory(scope, stale)
            new = self._new_row(scope, text, kind, importance, when)
            self._insert(new)
            self._append_version(new.id, _version(new, "add", provenance.extractor, reason))
            self._link(new.id, provenance)
            old.status, old.superseded_by = "superseded", new.id
            self._advance(old, "supersede", provenance.extractor, reason or f"by {new.id}")
        return self._memory(scope, new)

    def link(self, scope: Scope, memory_id: str, provenance: Provenance) -> bool:
        with self._atomic():
            row = self._current(scope, memory_id, None)
            return self._link(row.id, provenance)

    def forget(self, scope: Scope, memory_id: str, *, actor: str, reason: str = "") -> Memory:
        with self._atomic():
            row = self._current(scope, memory_id, "active")
            row.status = "forgotten"
            self._advance(row, "forget", actor, reason)
        return self._memory(scope, row)

    def restore(self, scope: Scope, memory_id: str, *, actor: str, reason: str = "") -> Memory:
        with self._atomic():
            row = self._current(scope, memory_id, "forgotten")
            clash = next((r for r in self._find(scope.key, row.key) if r.status == "active"), None)
            if clash is not None:
                raise LongTermMemoryError(
                    f"memory {memory_id} says what active memory {clash.id} says: not restored"
                )
            row.status = "active"
            self._advance(row, "restore", actor, reason)
        return self._memory(scope, row)

    def get(self, scope: Scope, memory_id: str) -> Memory:
        return self._memory(scope, self._current(scope, memory_id, None))

    def search(
        self, scope: Scope, query: str, *, limit: int = 10, kinds: Sequence[Kind] | None = None
    ) -> list[Hit]:
        terms = scoring.query_terms(query)
        if not terms or limit <= 0:
            return []
        now = datetime.now(UTC)
        matched = self._newest(
            scope.key,
            self._match(scope.key, terms, limit * SEARCH_CANDIDATES, kinds, superseded=True),
        )
        ranked = sorted(
            matched,
            key=lambda pair: -scoring.score(pair[1], pair[0].importance, pair[0].updated_at, now),
        )[:limit]
        links = self._links([row.id for row, _ in ranked])
        return [
            Hit(
                self._memory(scope, row, links.get(row.id, [])),
                scoring.score(relevance, row.importance, row.updated_at, now),
            )
            for row, relevance in ranked
        ]

    def memories(
        self, scope: Scope, filters: Filters | None = None, *, limit: int = 100, offset: int = 0
    ) -> list[Memory]:
        rows = self._rows(scope.key, filters or Filters(), limit, offset)
        links = self._links([row.id for row in rows])
        return [self._memory(scope, row, links.get(row.id, [])) for row in rows]

    def history(self, scope: Scope, memory_id: str) -> list[Version]:
        row = self._current(scope, memory_id, None)
        return self._versions(row.id)

    def count(self, scope: Scope, *, status: Status | None = "active") -> int:
        return self._count(scope.key, status)

    def purge(self, scope: Scope, memory_ids: Sequence[str] | None = None) -> Purged:
        with self._atomic():
            if memory_ids is None:
                rows = self._rows(scope.key, Filters(), 2**62, 0)
            else:
                rows = [self._current(scope, memory_id, None) for memory_id in memory_ids]
            # Every wording it ever had: an edited memory's older text is purged too.
            keys = {row.key for row in rows} | {
                dedupe_key(v.text) for row in rows for v in self._versions(row.id)
            }
            self._bury(scope.key, sorted(tombstone_key(scope.key, k) for k in keys))
            return self._delete(scope.key, memory_ids)

    # -- helpers -----------------------------------------------------------------

    def _new_row(
        self, scope: Scope, text: str, kind: Kind, importance: float, when: str | None
    ) -> Row:
        ts = now_iso()
        return Row(
            id=uuid.uuid4().hex[:12],
            scope_key=scope.key,
            kind=kind,
            text=text,
            key=dedupe_key(text),
            status="active",
            importance=importance,
            created_at=ts,
            updated_at=ts,
            version=1,
            when=when,
        )

    def _newest(self, scope_key: str, matched: list[tuple[Row, float]]) -> list[tuple[Row, float]]:
        """``matched`` with each superseded row replaced by the active memory at
        the end of its chain (dropped when there is none), each memory once
        with its best relevance: a question in the words of an older statement
        is answered by the newer one, never by the older alone."""
        best: dict[str, tuple[Row, float]] = {}
        for row, relevance in matched:
            steps = 0
            while row.status == "superseded" and row.superseded_by and steps < MAX_CHAIN:
                successor = self._row(scope_key, row.superseded_by)
                if successor is None:
                    break
                row, steps = successor, steps + 1
            if row.status != "active":
                continue
            if row.id not in best or best[row.id][1] < relevance:
                best[row.id] = (row, relevance)
        return list(best.values())

    def _replaced_by(self, scope_key: str, key: str, memory_id: str) -> Row | None:
        """A superseded memory of ``key`` whose chain of successors leads to
        ``memory_id``: what ``memory_id`` already replaced."""
        for row in self._find(scope_key, key):
            current, steps = row, 0
            while current.superseded_by and steps < MAX_CHAIN:
                if current.superseded_by == memory_id:
                    return row
                successor = self._row(scope_key, current.superseded_by)
                if successor is None:
                    break
                current, steps = successor, steps + 1
        return None

    def _near(self, scope_key: str, key: str) -> Row | None:
        """An active memory that says nearly what ``key`` says (``near_duplicate``)."""
        terms = scoring.query_terms(key)
        if not terms:
            return None
        for row, _ in self._match(scope_key, terms, NEAR_CANDIDATES, None):  # active only
            if near_duplicate(key, row.key):
                return row
        return None

    def _current(self, scope: Scope, memory_id: str, status: Status | None) -> Row:
        row = self._row(scope.key, memory_id) if isinstance(memory_id, str) else None
        if row is None:
            raise LongTermMemoryError(f"no memory {memory_id!r} in this scope")
        if status is not None and row.status != status:
            raise LongTermMemoryError(f"memory {memory_id} is {row.status}, not {status}")
        return row

    def _advance(self, row: Row, action: str, actor: str, reason: str) -> None:
        row.version += 1
        row.updated_at = now_iso()
        self._append_version(row.id, _version(row, action, actor, reason))
        self._save(row)

    def _memory(self, scope: Scope, row: Row, links: Sequence[Provenance] | None = None) -> Memory:
        if links is None:
            links = self._links([row.id]).get(row.id, [])
        return Memory(
            id=row.id,
            scope=scope,
            kind=row.kind,
            text=row.text,
            status=row.status,
            importance=row.importance,
            created_at=row.created_at,
            updated_at=row.updated_at,
            version=row.version,
            when=row.when,
            superseded_by=row.superseded_by,
            provenance=tuple(links),
        )


def _text(text: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise LongTermMemoryError("a memory's text must be a non-empty string")
    return neutralise(text)


def _version(row: Row, action: str, actor: str, reason: str) -> Version:
    return Version(
        number=row.version,
        text=row.text,
        kind=row.kind,
        status=row.status,
        importance=row.importance,
        action=action,
        actor=actor,
        reason=reason,
        ts=row.updated_at,
    )
