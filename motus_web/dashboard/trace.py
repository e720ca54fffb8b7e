"""A session's memory trace: its log records as events, for the trace page and its JSON.

Messages, compaction events and context changes live in three tables; the
trace pages through their union ordered by log position, so a page costs the
same few queries however long the session is (unfiltered, a page is a range
of positions: ``LogPaginator``).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
from django.core.paginator import Page, Paginator
from django.db.models import IntegerField, QuerySet, Value
from django.utils.functional import cached_property

from motus_web.sessions import rows
from motus_web.sessions.models import CompactionEvent, ContextChange, Message, Session

# Filter values, with their labels.
KINDS: dict[str, str] = {
    "": "Everything",
    "message": "Messages added",
    "truncation": "Truncated tool results",
    "compaction": "Compactions",
    "compaction_failed": "Failed compactions",
    "compaction_warning": "Warnings",
    "compaction_revert": "Reverts",
    "tool_results_cleared": "Old tool results cleared",
    "change": "Prompt changes and resets",
}
_EVENT_KINDS = {
    "compaction": CompactionEvent.Kind.OK,
    "compaction_failed": CompactionEvent.Kind.FAILED,
    "compaction_warning": CompactionEvent.Kind.WARNING,
    "compaction_revert": CompactionEvent.Kind.REVERT,
}
_MESSAGE, _EVENT, _CHANGE = 0, 1, 2


def keys(
    session: Session, kind: str, positions: range | None = None
) -> QuerySet[Any, tuple[int, int, int]]:
    """``(position, table, pk)`` of the session's records that ``kind`` selects,
    in log order; with ``positions``, only those at log positions in it."""
    bound = {} if positions is None else {"position__gte": positions.start}
    if positions is not None:
        bound["position__lt"] = positions.stop
    messages = session.messages.filter(**bound)
    events = session.compaction_events.filter(**bound)
    changes = session.context_changes.filter(**bound)
    if kind == "truncation":
        messages, events, changes = (
            messages.filter(truncation__isnull=False),
            events.none(),
            changes.none(),
        )
    elif kind == "message":
        events, changes = events.none(), changes.none()
    elif kind in _EVENT_KINDS:
        messages, events, changes = (
            messages.none(),
            events.filter(kind=_EVENT_KINDS[kind]),
            changes.none(),
        )
    elif kind == "tool_results_cleared":
        messages, events = messages.none(), events.none()
        changes = changes.filter(
            kind__in=[
                ContextChange.Kind.TOOL_RESULTS_CLEARED,
                ContextChange.Kind.TOOL_RESULTS_RESTORED,
            ]
        )
    elif kind == "change":
        messages, events = messages.none(), events.none()
    parts = [
        query.order_by()  # each part unordered: SQLite refuses ORDER BY inside a UNION
        .annotate(table=Value(table, output_field=IntegerField()))
        .values_list("position", "table", "pk")
        for query, table in ((messages, _MESSAGE), (events, _EVENT), (changes, _CHANGE))
    ]
    return parts[0].union(parts[1], parts[2], all=True).order_by("position")


class LogPaginator(Paginator):
    """Pages of every record of a session's log (the trace unfiltered): the
    store gives each record the next position (1 onwards, after the
    session_meta), so page ``n`` is a range of positions read by index and
    the count is the session's own, whatever the session's length."""

    def __init__(self, session: Session, per_page: int) -> None:
        super().__init__(keys(session, ""), per_page)
        self.session = session

    @cached_property
    def count(self) -> int:
        return max(self.session.record_count - 1, 0)

    def page(self, number: int | str) -> Page:
        number = self.validate_number(number)
        first = 1 + (number - 1) * self.per_page
        return Page(keys(self.session, "", range(first, first + self.per_page)), number, self)


def paginator(session: Session, kind: str, per_page: int) -> Paginator:
    """The trace's pages of the records ``kind`` selects."""
    return (
        LogPaginator(session, per_page) if kind == "" else Paginator(keys(session, kind), per_page)
    )


@dataclass(frozen=True, slots=True)
class Entry:
    position: int
    kind: str  # the record's type
    row: Message | CompactionEvent | ContextChange


def entries(session: Session, page_keys: Iterable[tuple[int, int, int]]) -> list[Entry]:
    """The rows behind one page of ``keys``: one query per table."""
    wanted: dict[int, list[int]] = {_MESSAGE: [], _EVENT: [], _CHANGE: []}
    order = list(page_keys)
    for _, table, pk in order:
        wanted[table].append(pk)
    found: dict[tuple[int, int], Message | CompactionEvent | ContextChange] = {}
    if wanted[_MESSAGE]:
        found.update(((_MESSAGE, m.pk), m) for m in Message.objects.filter(pk__in=wanted[_MESSAGE]))
    if wanted[_EVENT]:
        found.update(
            ((_EVENT, e.pk), e) for e in CompactionEvent.objects.filter(pk__in=wanted[_EVENT])
        )
    if wanted[_CHANGE]:
        found.update(
            ((_CHANGE, c.pk), c) for c in ContextChange.objects.filter(pk__in=wanted[_CHANGE])
        )
    out = []
    for position, table, pk in order:
        row = found[(table, pk)]
        out.append(Entry(position, rows.record_of(row)["type"], row))
    return out


def json_chunks(session: Session, kind: str) -> Iterator[bytes]:
    """The selected records as one JSON array, streamed a record at a time."""
    return _array(_records(session, kind))


def _records(session: Session, kind: str) -> Iterator[dict[str, Any]]:
    batch: list[tuple[int, int, int]] = []
    for key in keys(session, kind).iterator(chunk_size=500):
        batch.append(key)
        if len(batch) >= 500:
            yield from (_record(entry) for entry in entries(session, batch))
            batch.clear()
    yield from (_record(entry) for entry in entries(session, batch))


def _record(entry: Entry) -> dict[str, Any]:
    return {"position": entry.position, **rows.record_of(entry.row)}


def openai_messages(session: Session) -> Iterator[bytes]:
    """Every logged message as an OpenAI chat ``messages`` array, system prompt first."""
    system = [{"role": "system", "content": session.system_prompt}] if session.system_prompt else []
    messages = (m.as_dict() for m in session.messages.order_by("seq").iterator(chunk_size=500))
    return _array(itertools.chain(system, messages))


def _array(items: Iterable[Any]) -> Iterator[bytes]:
    yield b"["
    first = True
    for item in items:
        yield (b"" if first else b",\n") + dumps(item)
        first = False
    yield b"]\n"


def dumps(value: Any) -> bytes:
    """JSON bytes of ``value``; a lone surrogate (which orjson refuses) as its escape."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value).encode()
