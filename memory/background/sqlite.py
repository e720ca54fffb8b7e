"""``SQLiteLongTermStore``: long-term memories in one SQLite file, searched with FTS5.

Tables: ``memories`` (the current row of each memory), ``memory_versions``
(every version, appended), ``memory_provenance`` (links to what was said) and
``memory_tombstones`` (what purges leave: hashes, never text) and
``memories_fts``, an FTS5 index of the current text kept in step by triggers.
Search ranks with FTS5's ``bm25()`` (https://www.sqlite.org/fts5.html#the_bm25_function)
and the shared rescoring of ``memory.background.scoring``.

Writes run in ``BEGIN IMMEDIATE`` transactions in WAL mode: a crash mid-write
loses the whole operation, never part of it. One connection is shared by
the threads of a process under a lock (the background extractor writes from
the event loop while a tool may read).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .scoring import query_terms
from .store import Filters, Row, VersionedStore
from .types import Kind, Provenance, Purged, Status, Version

_SCHEMA = """
CREATE TABLE IF NOT EXISTS memories (
    id TEXT PRIMARY KEY,
    scope_key TEXT NOT NULL,
    kind TEXT NOT NULL,
    text TEXT NOT NULL,
    key TEXT NOT NULL,
    status TEXT NOT NULL,
    importance REAL NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    version INTEGER NOT NULL,
    happened TEXT,
    superseded_by TEXT
);
CREATE INDEX IF NOT EXISTS memories_scope_key ON memories (scope_key, key, status);
CREATE INDEX IF NOT EXISTS memories_scope_updated ON memories (scope_key, updated_at);
CREATE TABLE IF NOT EXISTS memory_versions (
    memory_id TEXT NOT NULL REFERENCES memories (id),
    number INTEGER NOT NULL,
    text TEXT NOT NULL,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    importance REAL NOT NULL,
    action TEXT NOT NULL,
    actor TEXT NOT NULL,
    reason TEXT NOT NULL,
    ts TEXT NOT NULL,
    PRIMARY KEY (memory_id, number)
);
CREATE TABLE IF NOT EXISTS memory_provenance (
    memory_id TEXT NOT NULL REFERENCES memories (id),
    session_id TEXT,
    first_seq INTEGER,
    last_seq INTEGER,
    extractor TEXT NOT NULL,
    ts TEXT NOT NULL,
    UNIQUE (memory_id, session_id, first_seq, last_seq)
);
CREATE INDEX IF NOT EXISTS memory_provenance_session ON memory_provenance (session_id);
CREATE TABLE IF NOT EXISTS memory_tombstones (
    scope_key TEXT NOT NULL,
    tombstone TEXT NOT NULL,
    PRIMARY KEY (scope_key, tombstone)
);
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(
    text, content='memories', content_rowid='rowid', tokenize='porter unicode61'
);
CREATE TRIGGER IF NOT EXISTS memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, text) VALUES (new.rowid, new.text);
END;
CREATE TRIGGER IF NOT EXISTS memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
END;
CREATE TRIGGER IF NOT EXISTS memories_au AFTER UPDATE OF text ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
    INSERT INTO memories_fts (rowid, text) VALUES (new.rowid, new.text);
END;
"""
_COLUMNS = (
    "id, scope_key, kind, text, key, status, importance, created_at, updated_at, version, "
    "happened, superseded_by"
)


class SQLiteLongTermStore(VersionedStore):
    """A ``LongTermStore`` in the SQLite file ``path`` (created with its
    folder when missing; ``":memory:"`` for one that lives with the object).
    Raises ``sqlite3.Error`` when the file cannot be opened or is not a database."""

    def __init__(self, path: str | Path = ":memory:") -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._depth = 0
        with self._atomic():
            for statement in _statements(_SCHEMA):
                self._db.execute(statement)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def _atomic(self) -> Iterator[None]:
        with self._lock:
            outer = self._depth == 0
            if outer:
                self._db.execute("BEGIN IMMEDIATE")
            self._depth += 1
            try:
                yield
            except BaseException:
                self._depth -= 1
                if outer:
                    self._db.execute("ROLLBACK")
                raise
            self._depth -= 1
            if outer:
                self._db.execute("COMMIT")

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    def _find(self, scope_key: str, key: str) -> list[Row]:
        rows = self._query(
            f"SELECT {_COLUMNS} FROM memories WHERE scope_key = ? AND key = ? ORDER BY rowid",
            (scope_key, key),
        )
        return [_row(row) for row in rows]

    def _bury(self, scope_key: str, tombstones: Sequence[str]) -> None:
        with self._lock:
            self._db.executemany(
                "INSERT OR IGNORE INTO memory_tombstones VALUES (?, ?)",
                [(scope_key, t) for t in tombstones],
            )

    def _buried(self, scope_key: str, tombstone: str) -> bool:
        return bool(
            self._query(
                "SELECT 1 FROM memory_tombstones WHERE scope_key = ? AND tombstone = ?",
                (scope_key, tombstone),
            )
        )

    def _row(self, scope_key: str, memory_id: str) -> Row | None:
        rows = self._query(
            f"SELECT {_COLUMNS} FROM memories WHERE scope_key = ? AND id = ?",
            (scope_key, memory_id),
        )
        return _row(rows[0]) if rows else None

    def _insert(self, row: Row) -> None:
        self._query(
            f"INSERT INTO memories ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            _values(row),
        )

    def _save(self, row: Row) -> None:
        self._query(
            "UPDATE memories SET kind = ?, text = ?, key = ?, status = ?, importance = ?, "
            "updated_at = ?, version = ?, happened = ?, superseded_by = ? WHERE id = ?",
            (
                row.kind,
                row.text,
                row.key,
                row.status,
                row.importance,
                row.updated_at,
                row.version,
                row.when,
                row.superseded_by,
                row.id,
            ),
        )

    def _append_version(self, memory_id: str, version: Version) -> None:
        v = version
        self._query(
            "INSERT INTO memory_versions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                memory_id,
                v.number,
                v.text,
                v.kind,
                v.status,
                v.importance,
                v.action,
                v.actor,
                v.reason,
                v.ts,
            ),
        )

    def _versions(self, memory_id: str) -> list[Version]:
        rows = self._query(
            "SELECT number, text, kind, status, importance, action, actor, reason, ts "
            "FROM memory_versions WHERE memory_id = ? ORDER BY number",
            (memory_id,),
        )
        return [Version(*row) for row in rows]

    def _link(self, memory_id: str, provenance: Provenance) -> bool:
        p = provenance
        with self._lock:
            cursor = self._db.execute(
                "INSERT OR IGNORE INTO memory_provenance VALUES (?, ?, ?, ?, ?, ?)",
                (memory_id, p.session_id, p.first_seq, p.last_seq, p.extractor, p.ts),
            )
            return cursor.rowcount == 1

    def _links(self, memory_ids: Sequence[str]) -> dict[str, list[Provenance]]:
        if not memory_ids:
            return {}
        marks = ", ".join("?" * len(memory_ids))
        rows = self._query(
            "SELECT memory_id, session_id, first_seq, last_seq, extractor, ts "
            f"FROM memory_provenance WHERE memory_id IN ({marks}) ORDER BY ts, rowid",
            list(memory_ids),
        )
        links: dict[str, list[Provenance]] = {}
        for memory_id, *fields in rows:
            links.setdefault(memory_id, []).append(Provenance(*fields))
        return links

    def _match(
        self,
        scope_key: str,
        terms: Sequence[str],
        limit: int,
        kinds: Sequence[Kind] | None,
        *,
        superseded: bool = False,
    ) -> list[tuple[Row, float]]:
        # Each term quoted, so FTS5 reads words, never its query syntax.
        match = " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
        kind_sql = ""
        params: list[Any] = [match, scope_key]
        if kinds:
            kind_sql = f" AND m.kind IN ({', '.join('?' * len(kinds))})"
            params.extend(kinds)
        params.append(limit)
        columns = ", ".join(f"m.{c.strip()}" for c in _COLUMNS.split(","))
        statuses = "'active', 'superseded'" if superseded else "'active'"
        rows = self._query(
            f"SELECT {columns}, bm25(memories_fts) FROM memories_fts "
            "JOIN memories m ON m.rowid = memories_fts.rowid "
            "WHERE memories_fts MATCH ? AND m.scope_key = ? "
            f"AND m.status IN ({statuses}){kind_sql} "
            "ORDER BY bm25(memories_fts) LIMIT ?",
            params,
        )
        return [(_row(row[:-1]), -float(row[-1])) for row in rows]

    def _rows(self, scope_key: str, filters: Filters, limit: int, offset: int) -> list[Row]:
        where, params = ["m.scope_key = ?"], [scope_key]
        if filters.status is not None:
            where.append("m.status = ?")
            params.append(filters.status)
        if filters.kind is not None:
            where.append("m.kind = ?")
            params.append(filters.kind)
        if filters.since is not None:
            where.append("m.updated_at >= ?")
            params.append(filters.since)
        if filters.until is not None:
            where.append("m.updated_at < ?")
            params.append(filters.until)
        if filters.session_id is not None:
            where.append("m.id IN (SELECT memory_id FROM memory_provenance WHERE session_id = ?)")
            params.append(filters.session_id)
        if filters.query:
            terms = query_terms(filters.query)
            if not terms:
                return []
            where.append("m.rowid IN (SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?)")
            params.append(" OR ".join('"' + t.replace('"', '""') + '"' for t in terms))
        columns = ", ".join(f"m.{c.strip()}" for c in _COLUMNS.split(","))
        rows = self._query(
            f"SELECT {columns} FROM memories m WHERE {' AND '.join(where)} "
            "ORDER BY m.updated_at DESC, m.id LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        return [_row(row) for row in rows]

    def _count(self, scope_key: str, status: Status | None) -> int:
        if status is None:
            rows = self._query("SELECT count(*) FROM memories WHERE scope_key = ?", (scope_key,))
        else:
            rows = self._query(
                "SELECT count(*) FROM memories WHERE scope_key = ? AND status = ?",
                (scope_key, status),
            )
        return int(rows[0][0])

    def _delete(self, scope_key: str, memory_ids: Sequence[str] | None) -> Purged:
        if memory_ids is None:
            ids = [
                r[0]
                for r in self._query("SELECT id FROM memories WHERE scope_key = ?", (scope_key,))
            ]
        else:
            ids = list(dict.fromkeys(memory_ids))
        counts = {"memories": 0, "versions": 0, "provenance": 0}
        marks = ", ".join("?" * len(ids))
        if ids:
            with self._lock:
                for table, column, name in (
                    ("memory_versions", "memory_id", "versions"),
                    ("memory_provenance", "memory_id", "provenance"),
                    ("memories", "id", "memories"),
                ):
                    cursor = self._db.execute(
                        f"DELETE FROM {table} WHERE {column} IN ({marks})", ids
                    )
                    counts[name] = cursor.rowcount
        return Purged(tuple(ids), counts)


def _row(values: Sequence[Any]) -> Row:
    return Row(*values)


def _values(row: Row) -> tuple[Any, ...]:
    return (
        row.id,
        row.scope_key,
        row.kind,
        row.text,
        row.key,
        row.status,
        row.importance,
        row.created_at,
        row.updated_at,
        row.version,
        row.when,
        row.superseded_by,
    )


def _statements(script: str) -> list[str]:
    """The statements of ``script`` (``executescript`` would commit the open
    transaction; triggers hold ``;`` inside ``BEGIN ... END``)."""
    statements, current = [], ""
    for line in script.strip().splitlines():
        current += line + "\n"
        if line.rstrip().endswith(";") and (
            "CREATE TRIGGER" not in current or line.strip() == "END;"
        ):
            statements.append(current.strip())
            current = ""
    return statements
