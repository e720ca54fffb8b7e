"""``DjangoLongTermStore``: the library's long-term store over the dashboard's tables.

The rules (scope, dedupe, versions, purge) are ``memory.background.store.
VersionedStore``'s; this module only maps its storage primitives onto
``LongTermMemory``, ``LongTermMemoryVersion``, ``LongTermMemoryLink`` and
``LongTermMemoryTombstone``.
Full-text search is the database's own: on PostgreSQL ``to_tsvector('english',
text)`` matched by the query's words (``plainto_tsquery`` each, OR-ed) and
ranked with ``ts_rank_cd``; on SQLite FTS5 ranked with ``bm25()`` (migration
0007 creates either index); both then get the library's rescoring by
importance and recency (``memory.background.scoring``).

Every operation is one ``transaction.atomic()``: a crash mid-write leaves all
of it or none. Called from an event loop (the chat's consumer), an operation
runs on this module's one database thread and the caller waits for it (a few
milliseconds): Django's ORM refuses to run inside an event loop.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar, cast

from django.db import close_old_connections, connection, transaction

from memory.background import (
    Filters,
    Kind,
    Provenance,
    Purged,
    Row,
    Scope,
    Status,
    Version,
    VersionedStore,
    query_terms,
)

from .models import (
    LongTermMemory,
    LongTermMemoryLink,
    LongTermMemoryTombstone,
    LongTermMemoryVersion,
)

_DB_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="long-term-store")
T = TypeVar("T")


def _off_the_loop(method: Callable[..., T]) -> Callable[..., T]:
    @functools.wraps(method)
    def run(self: DjangoLongTermStore, *args: Any, **kwargs: Any) -> T:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return method(self, *args, **kwargs)
        return _DB_THREAD.submit(_with_fresh_connection, method, self, *args, **kwargs).result()

    return run


def _with_fresh_connection(method: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    # As channels' database_sync_to_async does: the thread's connection is closed
    # when it is too old (CONN_MAX_AGE) or broken, before and after.
    close_old_connections()
    try:
        return method(*args, **kwargs)
    finally:
        close_old_connections()


class DjangoLongTermStore(VersionedStore):
    """A ``LongTermStore`` in the dashboard's database (see the module docstring)."""

    @contextmanager
    def _atomic(self) -> Iterator[None]:
        with transaction.atomic():
            yield

    def _find(self, scope_key: str, key: str) -> list[Row]:
        found = LongTermMemory.objects.filter(scope_key=scope_key, key=key).order_by("id")
        return [r for r in (_row(m) for m in found) if r is not None]

    def _bury(self, scope_key: str, tombstones: Sequence[str]) -> None:
        LongTermMemoryTombstone.objects.bulk_create(
            [LongTermMemoryTombstone(scope_key=scope_key, tombstone=t) for t in tombstones],
            ignore_conflicts=True,
        )

    def _buried(self, scope_key: str, tombstone: str) -> bool:
        return LongTermMemoryTombstone.objects.filter(
            scope_key=scope_key, tombstone=tombstone
        ).exists()

    def _row(self, scope_key: str, memory_id: str) -> Row | None:
        found = LongTermMemory.objects.filter(scope_key=scope_key, public_id=memory_id)
        return _row(
            found.select_for_update().first() if connection.in_atomic_block else found.first()
        )

    def _insert(self, row: Row) -> None:
        LongTermMemory.objects.create(public_id=row.id, **_columns(row))

    def _save(self, row: Row) -> None:
        LongTermMemory.objects.filter(public_id=row.id).update(**_columns(row))

    def _append_version(self, memory_id: str, version: Version) -> None:
        memory = LongTermMemory.objects.get(public_id=memory_id)
        LongTermMemoryVersion.objects.create(memory=memory, **version.to_dict())

    def _versions(self, memory_id: str) -> list[Version]:
        rows = LongTermMemoryVersion.objects.filter(memory__public_id=memory_id).order_by("number")
        return [
            Version(
                r.number,
                r.text,
                cast("Kind", r.kind),
                cast("Status", r.status),
                r.importance,
                r.action,
                r.actor,
                r.reason,
                r.ts,
            )
            for r in rows
        ]

    def _link(self, memory_id: str, provenance: Provenance) -> bool:
        p = provenance
        memory = LongTermMemory.objects.get(public_id=memory_id)
        same = LongTermMemoryLink.objects.filter(
            memory=memory, session_id=p.session_id or "", first_seq=p.first_seq, last_seq=p.last_seq
        )
        if same.exists():
            return False
        LongTermMemoryLink.objects.create(
            memory=memory, **{**p.to_dict(), "session_id": p.session_id or ""}
        )
        return True

    def _links(self, memory_ids: Sequence[str]) -> dict[str, list[Provenance]]:
        links: dict[str, list[Provenance]] = {}
        rows = LongTermMemoryLink.objects.filter(memory__public_id__in=list(memory_ids))
        for link in rows.select_related("memory").order_by("ts", "id"):
            links.setdefault(link.memory.public_id, []).append(
                Provenance(
                    link.session_id or None, link.first_seq, link.last_seq, link.extractor, link.ts
                )
            )
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
        statuses = ("active", "superseded") if superseded else ("active",)
        ranked = self._ranked(scope_key, terms, limit, kinds, statuses=statuses)
        by_pk = LongTermMemory.objects.in_bulk([pk for pk, _ in ranked])
        out = []
        for pk, relevance in ranked:
            row = _row(by_pk.get(pk))
            if row is not None:
                out.append((row, relevance))
        return out

    def _ranked(
        self,
        scope_key: str,
        terms: Sequence[str],
        limit: int,
        kinds: Sequence[Kind] | None,
        *,
        statuses: Sequence[str] | None,
    ) -> list[tuple[int, float]]:
        """``(pk, relevance > 0)`` of the rows whose text has any of ``terms``
        and whose status is one of ``statuses`` (``None``: any), best first."""
        where = f" AND m.status IN ({', '.join(['%s'] * len(statuses))})" if statuses else ""
        if kinds:
            where += f" AND m.kind IN ({', '.join(['%s'] * len(kinds))})"
        if connection.vendor == "postgresql":
            # plainto_tsquery of each term, OR-ed: any word matches, as FTS5's query does.
            query = " || ".join(["plainto_tsquery('english', %s)"] * len(terms))
            sql = (
                "SELECT m.id, ts_rank_cd(to_tsvector('english', m.text), t.q) "
                f"FROM dashboard_longtermmemory m, (SELECT {query}) AS t(q) "
                f"WHERE to_tsvector('english', m.text) @@ t.q AND m.scope_key = %s{where} "
                "ORDER BY 2 DESC, m.id LIMIT %s"
            )
            params: list[Any] = [*terms, scope_key, *(statuses or ()), *(kinds or ()), limit]
        else:
            sql = (
                "SELECT m.id, -bm25(dashboard_longtermmemory_fts) "
                "FROM dashboard_longtermmemory_fts JOIN dashboard_longtermmemory m "
                "ON m.id = dashboard_longtermmemory_fts.rowid "
                f"WHERE dashboard_longtermmemory_fts MATCH %s AND m.scope_key = %s{where} "
                "ORDER BY bm25(dashboard_longtermmemory_fts) LIMIT %s"
            )
            match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
            params = [match, scope_key, *(statuses or ()), *(kinds or ()), limit]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return [(pk, float(rank)) for pk, rank in cursor.fetchall()]

    def _rows(self, scope_key: str, filters: Filters, limit: int, offset: int) -> list[Row]:
        rows = LongTermMemory.objects.filter(scope_key=scope_key)
        if filters.status is not None:
            rows = rows.filter(status=filters.status)
        if filters.kind is not None:
            rows = rows.filter(kind=filters.kind)
        if filters.since is not None:
            rows = rows.filter(updated_at__gte=filters.since)
        if filters.until is not None:
            rows = rows.filter(updated_at__lt=filters.until)
        if filters.session_id is not None:
            rows = rows.filter(links__session_id=filters.session_id).distinct()
        if filters.query:
            terms = query_terms(filters.query)
            if not terms:
                return []
            ranked = self._ranked(scope_key, terms, 100_000, None, statuses=None)
            rows = rows.filter(id__in=[pk for pk, _ in ranked])
        rows = rows.order_by("-updated_at", "public_id")[offset : offset + limit]
        return [r for r in (_row(m) for m in rows) if r is not None]

    def _count(self, scope_key: str, status: Status | None) -> int:
        rows = LongTermMemory.objects.filter(scope_key=scope_key)
        return (rows if status is None else rows.filter(status=status)).count()

    def _delete(self, scope_key: str, memory_ids: Sequence[str] | None) -> Purged:
        rows = LongTermMemory.objects.filter(scope_key=scope_key)
        if memory_ids is not None:
            rows = rows.filter(public_id__in=list(memory_ids))
        ids = tuple(rows.order_by("id").values_list("public_id", flat=True))
        versions = LongTermMemoryVersion.objects.filter(memory__in=rows).delete()[0]
        links = LongTermMemoryLink.objects.filter(memory__in=rows).delete()[0]
        memories = rows.delete()[0]
        return Purged(ids, {"memories": memories, "versions": versions, "provenance": links})


for _name in (
    "add",
    "update",
    "supersede",
    "link",
    "forget",
    "restore",
    "get",
    "search",
    "memories",
    "history",
    "count",
    "purge",
):
    setattr(DjangoLongTermStore, _name, _off_the_loop(getattr(VersionedStore, _name)))


OWNER_PREFIX = "user-"


def owner_scope(owner_pk: int, name: str = "") -> Scope:
    """The scope of a dashboard user's memories: ``user-<pk>``, and ``name`` as
    its agent id when given (one user's separate memories: "work", "home").
    Raises ``ConfigurationError`` for a name a scope cannot hold."""
    return Scope(user_id=f"{OWNER_PREFIX}{owner_pk}", agent_id=name or None)


def owner_of(scope: Scope) -> int | None:
    """The pk of the user whose memories ``scope`` holds (``owner_scope``'s);
    ``None`` for a scope the dashboard did not make."""
    user = scope.user_id or ""
    number = user.removeprefix(OWNER_PREFIX)
    return int(number) if user.startswith(OWNER_PREFIX) and number.isdigit() else None


def _columns(row: Row) -> dict[str, Any]:
    return {
        "scope_key": row.scope_key,
        "kind": row.kind,
        "text": row.text,
        "key": row.key,
        "status": row.status,
        "importance": row.importance,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
        "version": row.version,
        "happened": row.when or "",
        "superseded_by": row.superseded_by or "",
    }


def _row(memory: LongTermMemory | None) -> Row | None:
    if memory is None:
        return None
    return Row(
        id=memory.public_id,
        scope_key=memory.scope_key,
        kind=memory.kind,  # type: ignore[arg-type]
        text=memory.text,
        key=memory.key,
        status=memory.status,  # type: ignore[arg-type]
        importance=memory.importance,
        created_at=memory.created_at,
        updated_at=memory.updated_at,
        version=memory.version,
        when=memory.happened or None,
        superseded_by=memory.superseded_by or None,
    )
