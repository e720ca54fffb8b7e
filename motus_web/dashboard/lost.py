"""Which identifiers a compaction's summary kept from the messages it folded.

Message text is read by the database as a bounded prefix of its stored JSON
(``TEXT_LIMIT`` characters of the content and of the tool calls), so no
stored message, however large, is loaded whole for this.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet, TextField
from django.db.models.functions import Cast, Substr

from memory import Identifier, find_identifiers, kept_in
from motus_web.sessions.models import CompactionEvent, Message

from .session_list import preview

FOLDED_LIMIT = 2000  # folded messages read for one report; a longer fold is marked partial
TEXT_LIMIT = 20_000  # characters of a message's stored content (and calls) searched


@dataclass(frozen=True, slots=True)
class Text:
    seq: int
    role: str
    text: str


def texts(messages: QuerySet[Message]) -> list[Text]:
    """The first ``FOLDED_LIMIT`` of ``messages`` as bounded text, in seq order."""
    rows: Iterable[tuple[Any, ...]] = (
        messages.order_by("seq")
        .annotate(
            start=Substr(Cast("content", TextField()), 1, TEXT_LIMIT),
            calls=Substr(Cast("tool_calls", TextField()), 1, TEXT_LIMIT),
        )
        .values_list("seq", "role", "start", "calls")[:FOLDED_LIMIT]
    )
    return [
        Text(seq, role, "\n".join(filter(None, [preview(start) or start, _without_ids(calls)])))
        for seq, role, start, calls in rows
    ]


# A call's own id is the API's bookkeeping, not something the conversation
# named: the summary need not keep it (as the LLM compactor's check does not).
_CALL_ID = re.compile(r'"id"\s*:\s*"(?:[^"\\]|\\.)*"')


def _without_ids(calls: str | None) -> str | None:
    return _CALL_ID.sub("", calls) if calls else calls


@dataclass(frozen=True, slots=True)
class Found:
    identifier: Identifier
    kept: bool
    from_user: bool  # named in a user message


@dataclass(frozen=True, slots=True)
class Report:
    found: tuple[Found, ...]
    partial: bool  # more messages were folded than were read

    @property
    def kept(self) -> int:
        return sum(item.kept for item in self.found)

    @property
    def total(self) -> int:
        return len(self.found)

    @property
    def lost_from_user(self) -> list[str]:
        return [item.identifier.value for item in self.found if item.from_user and not item.kept]


def report(event: CompactionEvent, folded: Sequence[Text]) -> Report:
    """Every identifier in ``folded``, kept or lost in ``event.summary``."""
    by_user: set[Identifier] = set()
    ordered: dict[Identifier, None] = {}
    for message in folded:
        found = find_identifiers(message.text)
        ordered.update(dict.fromkeys(found))
        if message.role == Message.Role.USER:
            by_user.update(found)
    checked = kept_in(event.summary, ordered)
    return Report(
        tuple(Found(ident, kept, ident in by_user) for ident, kept in checked),
        partial=len(folded) >= FOLDED_LIMIT,
    )


def lost_user_identifiers(
    events: Iterable[CompactionEvent], user_texts: Sequence[Text]
) -> dict[int, list[str]]:
    """For each successful compaction (by position), the identifiers from the
    user messages it folded that its summary does not mention."""
    out: dict[int, list[str]] = {}
    for event in events:
        if event.kind != CompactionEvent.Kind.OK or event.summarized_first_seq is None:
            continue
        last = event.summarized_last_seq if event.summarized_last_seq is not None else -1
        kept = set(event.replayed_seqs or [])
        folded = [
            m
            for m in user_texts
            if event.summarized_first_seq <= m.seq <= last and m.seq not in kept
        ]
        identifiers = {i: None for m in folded for i in find_identifiers(m.text)}
        lost = [ident.value for ident, ok in kept_in(event.summary, identifiers) if not ok]
        if lost:
            out[event.position] = lost
    return out
