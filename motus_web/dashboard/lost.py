"""Which identifiers a compaction's summary kept from what it folded.

"Before" is what the summary had to carry: the messages it folded and the
previous summary, which it folded in too, so an identifier dropped by an
earlier compaction and carried by its summary is still checked here.
Identifiers are ``memory.find_identifiers``'; the check leaves out what a
summary need not carry word for word (``memory.worth_keeping``: clock times,
prices, counts, schema words such as tool names and enum values, the API's own
call ids), the names of the tools called, proper names in a tool's output
(titles and headings more than names), and the names inside
source code (a tool result that reads as code, a call's argument that is a
body of code: only their paths and URLs count, ``memory.compaction.code``).
A tool call is read as its arguments, never its JSON envelope.

An identifier is lost only when the context after the compaction holds it
nowhere: not in the summary (as corrected), nor in the ledger the record
carries, nor in a message the compaction kept or replayed verbatim (its text
or its tool calls' arguments), nor in the long-term memory block in force at
the compaction (the newest ``memory_recall`` record before it: the block sits
in the system message the context starts with, ``recalled_blocks``).

Message text is read by the database as a bounded prefix of its stored JSON
(``TEXT_LIMIT`` characters of the content and of the tool calls), so no
stored message, however large, is loaded whole for this.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet, TextField
from django.db.models.functions import Cast, Substr

from memory import (
    CODE_KINDS,
    Identifier,
    find_identifiers,
    kept_in,
    reads_as_code,
    without_bodies,
    worth_keeping,
)
from motus_web.sessions.fields import unescape
from motus_web.sessions.models import CompactionEvent, Message, Session

FOLDED_LIMIT = 2000  # folded messages read for one report; a longer fold is marked partial
TEXT_LIMIT = 20_000  # characters of a message's stored content (and calls) searched


@dataclass(frozen=True, slots=True)
class Text:
    seq: int | None  # None: the previous summary
    role: str
    text: str
    tools: tuple[str, ...] = ()  # the names of the tools the message called
    code: bool = False  # source code: only its paths and URLs are checked

    @property
    def preview(self) -> str:
        """The start of the text, for a one-line list."""
        return self.text if len(self.text) <= 240 else self.text[:239] + "\u2026"


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
    out = []
    for seq, role, start, calls in rows:
        names, arguments = _calls(calls)
        content = preview(start) or start or ""
        bodiless = [without_bodies(a) for a in arguments]
        text = "\n".join(filter(None, [content, *bodiless]))
        code = role == Message.Role.TOOL and reads_as_code(content)
        out.append(Text(seq, role, text, names, code))
    return out


# In a tool-calls prefix the database cut short, the arguments that are whole.
_ARGUMENTS = re.compile(r'"(?:arguments|input)"\s*:\s*"((?:[^"\\]|\\.)*)"')
_NAME = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.){1,200})"')


def _calls(stored: str | None) -> tuple[tuple[str, ...], list[str]]:
    """The tool names and the argument texts of a message's stored ``tool_calls``."""
    if not stored:
        return (), []
    try:
        calls = json.loads(stored)
    except ValueError:  # cut at TEXT_LIMIT: read what is whole
        names = [json.loads(f'"{m}"') for m in _NAME.findall(stored)]
        return tuple(names), [json.loads(f'"{m}"') for m in _ARGUMENTS.findall(stored)]
    names, arguments = [], []
    for call in calls if isinstance(calls, list) else []:
        payload = (call.get("function") or call.get("custom")) if isinstance(call, dict) else None
        if isinstance(payload, dict):
            if isinstance(payload.get("name"), str):
                names.append(payload["name"])
            text = payload.get("arguments", payload.get("input"))
            if isinstance(text, str):
                arguments.append(text)
    return tuple(names), arguments


@dataclass(frozen=True, slots=True)
class Found:
    identifier: Identifier
    kept: bool
    from_user: bool  # named in a user message
    seq: int | None  # the first folded message that held it; None: the previous summary


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
    def lost(self) -> tuple[Found, ...]:
        return tuple(item for item in self.found if not item.kept)

    @property
    def lost_from_user(self) -> list[str]:
        return [item.identifier.value for item in self.found if item.from_user and not item.kept]


def _checked(text: Text, ignored: set[str]) -> list[Identifier]:
    # A tool's output is titles, listings and records, where capitals mark
    # headings more than names: of a tool's text only the shaped kinds count.
    return [
        ident
        for ident in find_identifiers(text.text)
        if worth_keeping(ident)
        and ident.value.casefold() not in ignored
        and (not text.code or ident.kind in CODE_KINDS)
        and not (text.role == Message.Role.TOOL and ident.kind == "name")
    ]


def identifiers_in(
    texts: Sequence[Text],
) -> tuple[dict[Identifier, int | None], set[Identifier]]:
    """The identifiers a summary of ``texts`` is checked for, each with the seq
    of the first text holding it, and those a user named. This is the one
    definition the pages use (a compaction's report, a replay's comparison):
    every speaker's and tool result's identifiers, not the tools' own names,
    only paths and URLs of source code, only what ``memory.worth_keeping``."""
    ignored = {name.casefold() for text in texts for name in text.tools}
    by_user: set[Identifier] = set()
    first: dict[Identifier, int | None] = {}
    for text in texts:
        found = _checked(text, ignored)
        for ident in found:
            first.setdefault(ident, text.seq)
        if text.role == Message.Role.USER:
            by_user.update(found)
    return first, by_user


def report(
    event: CompactionEvent,
    folded: Sequence[Text],
    previous_summary: str | None = None,
    summary: str | None = None,
    verbatim: Sequence[Text] = (),
    block: str = "",
) -> Report:
    """Every identifier in ``folded`` and in ``previous_summary``, kept or lost
    in the context after ``event``: ``summary`` (an operator's correction of
    it), else ``event.summary``, the ledger ``event`` carries,
    ``verbatim``, the messages it kept or replayed word for word, and
    ``block``, the long-term memory block in force (``recalled_blocks``); named by
    the user when a user message held it or the user's ledger entry that
    gave way at ``event``."""
    before = list(folded)
    if previous_summary:
        before.append(Text(None, "summary", previous_summary))
    first, by_user = identifiers_in(before)
    by_user |= set(_given_way_by_user(event)) & first.keys()  # carried from the user's words
    checked = kept_in(kept_text(event, summary, verbatim, block), first)
    return Report(
        tuple(Found(ident, kept, ident in by_user, first[ident]) for ident, kept in checked),
        partial=len(folded) >= FOLDED_LIMIT,
    )


def kept_text(
    event: CompactionEvent,
    summary: str | None = None,
    verbatim: Iterable[Text] = (),
    block: str = "",
) -> str:
    """All the text the context after ``event`` holds word for word: the
    summary (``summary``, an operator's correction, else the event's), the
    values of the ledger its record carries (not once corrected: the
    correction is what the context holds), the ``verbatim`` messages (their
    text and tool calls' arguments) and ``block``, the long-term memories
    recalled into it."""
    entries = event.record_extra.get("ledger") if summary is None else None
    ledger = [
        entry["value"]
        for entry in (entries if isinstance(entries, list) else [])
        if isinstance(entry, dict) and isinstance(entry.get("value"), str)
    ]
    kept = event.summary if summary is None else summary
    return "\n".join([kept or "", *ledger, *(text.text for text in verbatim), block])


def recalled_blocks(session: Session, events: Sequence[CompactionEvent]) -> dict[int, str]:
    """For each of ``events`` (by position), the long-term memory block in force
    when it compacted: that of the newest ``memory_recall`` record before it
    (``""``: none, or a session without long-term memory). One query."""
    if not events:
        return {}
    recalls = list(
        session.context_changes.filter(
            kind="memory_recall", position__lt=max(e.position for e in events)
        )
        .order_by("position")
        .values_list("position", "record_extra")
    )
    out: dict[int, str] = {}
    for event in events:
        before = [extra for position, extra in recalls if position < event.position]
        block = before[-1].get("block") if before and isinstance(before[-1], dict) else None
        out[event.position] = block if isinstance(block, str) else ""
    return out


def lost_user_identifiers(
    events: Iterable[CompactionEvent],
    user_texts: Sequence[Text],
    corrected: Mapping[int, str] | None = None,
    verbatim: Sequence[Text] = (),
    blocks: Mapping[int, str] | None = None,
) -> dict[int, list[str]]:
    """For each successful compaction (by position), the identifiers from the
    user messages it folded, and those the user named that its ledger let go
    (``ledger_given_way``: carried by an earlier summary, dropped by this one),
    that the context after it holds nowhere: not its summary (the corrected
    summary, for a position in ``corrected``) or ledger, nor a message of
    ``user_texts`` or ``verbatim`` (any role's, tool calls' arguments
    included) it kept or replayed word for word, nor the long-term memory
    block in force (``blocks``, by position: ``recalled_blocks``)."""
    out: dict[int, list[str]] = {}
    for event in events:
        if event.kind != CompactionEvent.Kind.OK or event.summarized_first_seq is None:
            continue
        last = event.summarized_last_seq if event.summarized_last_seq is not None else -1
        kept = set(event.replayed_seqs or [])
        folded = [
            m
            for m in user_texts
            if m.seq is not None
            and event.summarized_first_seq <= m.seq <= last
            and m.seq not in kept
        ]
        identifiers = {i: None for m in folded for i in _checked(m, set())}
        identifiers.update(dict.fromkeys(_given_way_by_user(event)))
        through = event.through_seq if event.through_seq is not None else last
        replayed = [
            m
            for m in [*user_texts, *verbatim]
            if m.seq is not None and (m.seq in kept or last < m.seq <= through)
        ]
        context = kept_text(
            event,
            (corrected or {}).get(event.position),
            replayed,
            (blocks or {}).get(event.position, ""),
        )
        lost = [ident.value for ident, ok in kept_in(context, identifiers) if not ok]
        if lost:
            out[event.position] = lost
    return out


def _given_way_by_user(event: CompactionEvent) -> list[Identifier]:
    """The identifiers in the user's entries that ``event``'s ledger let go
    (an instruction's too: a sentence the user asked to keep)."""
    entries = event.record_extra.get("ledger_given_way")
    values = [
        entry["value"]
        for entry in (entries if isinstance(entries, list) else [])
        if isinstance(entry, dict)
        and entry.get("role") == Message.Role.USER
        and isinstance(entry.get("value"), str)
    ]
    return [i for value in values for i in find_identifiers(value) if worth_keeping(i)]


def preview(stored: object) -> str:
    """Readable text from the first characters of a message's stored JSON
    (``TEXT_LIMIT`` of them, cut by the database).

    The database cut the JSON mid-way, so it rarely parses: a string is
    unquoted and unescaped as far as it goes; for a list of parts, the text
    of the first text part.
    """
    if not isinstance(stored, str) or not stored:
        return ""
    start = stored
    if start.startswith("["):
        at = start.find('"text": "')
        if at < 0:
            at = start.find('"text":"')
            if at < 0:
                return ""
            start = start[at + 7 :]
        else:
            start = start[at + 8 :]
    if not start.startswith('"'):
        return ""
    return unescape(_unescape_prefix(start))


def _unescape_prefix(quoted: str) -> str:
    # Cut back to a point where closing the string makes valid JSON.
    body = quoted
    for cut in range(0, 7):
        candidate = body[: len(body) - cut] if cut else body
        end = _string_end(candidate)
        try:
            return str(json.loads(candidate[:end] if end else candidate + '"'))
        except ValueError:
            continue
    return quoted[1:]


def _string_end(text: str) -> int:
    """The index just past the JSON string's closing quote, or 0 when it is cut."""
    escaped = False
    for index, char in enumerate(text[1:], start=1):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == '"':
            return index + 1
    return 0


@dataclass(frozen=True, slots=True)
class Scores:
    """How the lost-list's choice of what to check agrees with a person's labels."""

    precision: float  # of the identifiers checked, the share a person labelled one
    recall: float  # of those a person labelled one, the share checked
    false_positives: tuple[str, ...]  # checked, labelled not (or not labelled: a fragment)
    misses: tuple[str, ...]  # labelled, not checked


def labelled_scores(items: Iterable[Mapping[str, Any]]) -> Scores:
    """Precision and recall of ``identifiers_in`` on a labelled set: ``items``
    of ``{"role", "text", "tools", "identifiers": {value: is_one}}``, each a
    message read alone (a tool's text as code when it reads as code). A value
    checked but not labelled counts as a false positive: it is a fragment or
    a form nobody listed. Raises ``ValueError`` on an empty set."""
    checked = wanted = hits = 0
    false_positives: list[str] = []
    misses: list[str] = []
    for item in items:
        role, text = str(item["role"]), str(item["text"])
        code = role == Message.Role.TOOL and reads_as_code(text)
        found, _ = identifiers_in([Text(None, role, text, tuple(item.get("tools", ())), code)])
        values = {ident.value for ident in found}
        labels: Mapping[str, bool] = item["identifiers"]
        checked += len(values)
        wanted += sum(labels.values())
        hits += sum(1 for value in values if labels.get(value))
        false_positives += [v for v in values if not labels.get(v)]
        misses += [v for v, one in labels.items() if one and v not in values]
    if not checked or not wanted:
        raise ValueError("the labelled set checks nothing or labels nothing an identifier")
    return Scores(hits / checked, hits / wanted, tuple(false_positives), tuple(misses))
