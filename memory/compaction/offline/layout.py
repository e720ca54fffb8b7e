"""The summary's text: rendering chosen items, and reading a rendered summary back.

Two layouts, decided from the messages: a task layout when the summarised
messages (or the previous summary) hold a tool call or a tool result, a
conversation layout otherwise. The task layout groups items in sections,
chronological within each::

    Summary of the earlier conversation (42 messages; quoted, "..." where cut):
    User requests:
    - user: I want to change my flight to Seattle. ... It's mia_li_3668.
    Identifiers and tool results:
    - tool get_user_details: "user_id": "mia_li_3668" ... "payment_methods":
      {"credit_card_4421486": {"source": "credit_card" ...
    Actions and results:
    - assistant called get_reservation_details: "reservation_id": "HATHAT"
    - assistant: Flight HAT222 is full. HAT240 on May 22 costs $120 more.
    Errors:
    - tool book_reservation: Error: payment amount does not add up
    Latest state:
    - user: OK, book HAT240 then, and email me at mia.li@example.com.

The conversation layout is who said what, by date: under each session date,
one line per speaker in the order they first spoke, each line chronological
(titled "Who said what:" when the conversation has no dates)::

    Summary of the earlier conversation (42 messages, the last dated [1:14 pm
    on 25 May, 2023]; quoted, "..." where cut):
    Who said what, by date:
    - [1:56 pm on 8 May, 2023] Caroline: I went to a LGBTQ support group
      yesterday and it was so powerful. ... I'm keen on counseling.
    - Melanie: ... I painted that lake sunrise last year!
    - [1:14 pm on 25 May, 2023] Melanie: I ran a charity race for mental health
      last Saturday.

(A line is one line; it is wrapped here.) When tool calls appear later in a
conversation, the user's and the assistant's earlier lines move to the task
sections; lines of named speakers keep their heading. A date is shown where it changes
within a section, and the header names the date in force at the last
summarised message, so the next compaction dates a batch that starts
mid-session. In the task layout, consecutive messages of one speaker on one
date share a line, joined by ``...``. Pieces next to each other in their
message are joined by a space, JSON clauses by the punctuation that stood
between them; ``...`` stands where pieces were left out, before the first
kept one, between two, or after the last. ``parse`` reads either layout back
into items, so a later compaction can weigh the earlier summary's sentences
against the new ones; text that is not in this layout (a summary a model
wrote) becomes one "Earlier summary" item of its sentences.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from .scan import (
    ACTIONS,
    CONVERSATION,
    EARLIER,
    ELLIPSIS,
    ERRORS,
    REQUESTS,
    TOOL_DATA,
    Item,
    Piece,
    clauses,
    name_words,
    pieces_of,
    sentences,
)

HEADER = 'Summary of the earlier conversation ({count} messages{dated}; quoted, "..." where cut):'
EMPTY = "No earlier conversation."
LATEST = "latest"
PERSON = "person"
TITLES = {
    EARLIER: "Earlier summary:",
    REQUESTS: "User requests:",
    TOOL_DATA: "Identifiers and tool results:",
    ACTIONS: "Actions and results:",
    ERRORS: "Errors:",
    CONVERSATION: "Who said what, by date:",
    LATEST: "Latest state:",
}
SECTION_ORDER = (EARLIER, REQUESTS, TOOL_DATA, ACTIONS, ERRORS, CONVERSATION, LATEST)
TASK_SECTIONS = frozenset({TOOL_DATA, ERRORS})  # only a task agent's summary has these
UNDATED = "Who said what:"  # a conversation's title when it has no dates
_SECTION_OF_TITLE = {title: section for section, title in TITLES.items()} | {UNDATED: CONVERSATION}
_HEADER = re.compile(
    r"Summary of the earlier conversation \((\d+) messages?"
    r"(?:, the last dated \[([^\[\]\n]{1,64})\])?[;,)]"
)
_LINE = re.compile(r"- (?:\[([^\[\]]{1,64})\] )?([^:\n]{1,160}?): (.*)")
_GAP = " " + ELLIPSIS + " "
RUNS_CACHE = 16_384  # quoted runs whose split is remembered
LINE_CHARS = 800  # a line of one speaker's messages goes on to a new line past this


@dataclass(frozen=True, slots=True)
class Previous:
    """A previous summary read back: its items, how many messages it covered
    and the date in force at the last of them."""

    items: list[Item]
    count: int
    date: str | None = None


def header(count: int, date: str | None = None) -> str:
    return HEADER.format(count=count, dated=f", the last dated [{date}]" if date else "")


def section_of(item: Item) -> str:
    """Where an item is shown: a task's latest state has a section of its own,
    a conversation's stays in its place by date."""
    return LATEST if item.latest and item.section != CONVERSATION else item.section


def _body(item: Item, pieces: Sequence[Piece]) -> tuple[bool, str, bool]:
    """``(cut before, text, cut after)`` of one item's kept pieces."""
    parts: list[str] = []
    for n, piece in enumerate(pieces):
        if n:
            adjacent = piece.index == pieces[n - 1].index + 1
            parts.append(_lead(pieces[n - 1], piece) if adjacent else _GAP)
        parts.append(piece.text)
    return pieces[0].index > 0, "".join(parts), pieces[-1].index < item.size - 1


def _lead(before: Piece, piece: Piece) -> str:
    # '"flights":' + '[{' reads better as '"flights": [{', as the JSON was written.
    opens = piece.lead.startswith(("[", "{"))
    return " " + piece.lead if opens and before.text.endswith(":") else piece.lead


def line(speaker: str, date: str | None, bodies: Sequence[tuple[bool, str, bool]]) -> str:
    """One rendered line: ``- [date] speaker: text``, ``...`` where text was
    left out; several messages of one speaker are joined by ``...``."""
    text = _GAP.join(body for _, body, _ in bodies)
    head = ELLIPSIS + " " if bodies[0][0] else ""
    tail = " " + ELLIPSIS if bodies[-1][2] else ""
    stamp = f"[{date}] " if date else ""
    return f"- {stamp}{speaker}: {head}{text}{tail}"


def render(chosen: Sequence[tuple[Item, Sequence[Piece]]], count: int, date: str | None) -> str:
    """The summary text of the chosen pieces, by section, in chronological
    order (``date``: the one in force at the last summarised message)."""
    by_section: dict[str, list[tuple[Item, Sequence[Piece]]]] = {}
    for item, pieces in sorted(chosen, key=lambda pair: pair[0].order):
        if pieces:
            by_section.setdefault(section_of(item), []).append((item, pieces))
    lines = [header(count, date)]
    for section in SECTION_ORDER:
        entries = by_section.get(section)
        if not entries:
            continue
        if section == CONVERSATION:
            entries = _by_date_and_speaker(entries)
            dated = any(item.date for item, _ in entries)
            lines.append(TITLES[section] if dated else UNDATED)
        else:
            lines.append(TITLES[section])
        lines.extend(_lines(entries))
    return "\n".join(lines)


def _by_date_and_speaker(
    entries: list[tuple[Item, Sequence[Piece]]],
) -> list[tuple[Item, Sequence[Piece]]]:
    """Who said what, by date: within each date, each speaker's items together,
    speakers in the order they first spoke, each speaker's in order."""
    rank: dict[tuple[str | None, str], int] = {}
    for item, _ in entries:
        rank.setdefault((item.date, item.speaker), len(rank))
    dates: dict[str | None, int] = {}
    for item, _ in entries:
        dates.setdefault(item.date, len(dates))
    return sorted(
        entries,
        key=lambda e: (dates[e[0].date], rank[(e[0].date, e[0].speaker)], e[0].order),
    )


def _lines(entries: Sequence[tuple[Item, Sequence[Piece]]]) -> list[str]:
    """Consecutive messages of one speaker on one date share a line (up to
    ``LINE_CHARS`` characters), so the prefix is not repeated for each; a
    date is shown where it changes."""
    out: list[str] = []
    shown: str | None = None
    group: list[tuple[bool, str, bool]] = []
    key: tuple[str, str | None] | None = None
    size = 0
    for item, pieces in entries:
        body = _body(item, pieces)
        if group and (item.speaker, item.date) == key and size + len(body[1]) <= LINE_CHARS:
            group.append(body)
            size += len(body[1])
            continue
        if group and key is not None:
            out.append(line(key[0], key[1] if key[1] != shown else None, group))
            shown = key[1] or shown
        group, key, size = [body], (item.speaker, item.date), len(body[1])
    if group and key is not None:
        out.append(line(key[0], key[1] if key[1] != shown else None, group))
    return out


def parse(text: str, *, first_order: int = 0) -> Previous:
    """Read a summary back into items; its own layout line by line, anything
    else (a summary a model wrote, the lines an operator's correction added to
    ours) as one "Earlier summary" item of its sentences, first."""
    match = _HEADER.match(text)
    if match is None:
        earlier = _earlier(text, first_order)
        return Previous([earlier] if earlier is not None else [], 0)
    found_lines: list[tuple[str, str, str | None, str]] = []
    others: list[str] = []
    section = REQUESTS
    date: str | None = None
    lines = text.splitlines()
    # A correction may have written before the header's end or after it on its line.
    head_rest = lines[0][match.end() :].strip() if lines else ""
    if head_rest and not head_rest.startswith('quoted, "..." where cut'):
        others.append(head_rest)
    for line in lines[1:]:
        if line in _SECTION_OF_TITLE:
            section = _SECTION_OF_TITLE[line]
            date = None
            continue
        found = _LINE.fullmatch(line)
        if found is None:
            if line.strip():
                others.append(line.strip().removeprefix("- "))
            continue
        date = found.group(1) or date
        found_lines.append((section, found.group(2), date, found.group(3)))
    names = name_words(speaker for section, speaker, _, _ in found_lines if section == CONVERSATION)
    items: list[Item] = []
    earlier = _earlier("\n".join(others), first_order) if others else None
    if earlier is not None:
        items.append(earlier)
    for section, speaker, line_date, body in found_lines:
        read = _item_of_line(section, speaker, line_date, body, first_order + len(items), names)
        if read is not None:
            items.append(read)
    return Previous(items, int(match.group(1)), match.group(2))


def _earlier(text: str, order: int) -> Item | None:
    """The "Earlier summary" item of ``text``'s sentences; ``None`` when it has none."""
    texts = sentences(text)
    if not texts:
        return None
    pieces = pieces_of(texts, None, structured=False, names=frozenset())
    return Item(EARLIER, "summary", None, pieces, len(pieces), order, "summary")


def _item_of_line(
    section: str, speaker: str, date: str | None, body: str, order: int, names: frozenset[str]
) -> Item | None:
    role = _role_of(speaker)
    if section == LATEST:
        section = {"user": REQUESTS, "tool": TOOL_DATA}.get(role, ACTIONS)
    head_cut = body.startswith(ELLIPSIS + " ")
    tail_cut = body.endswith(" " + ELLIPSIS)
    if head_cut:
        body = body[len(ELLIPSIS) + 1 :]
    if tail_cut:
        body = body[: -len(ELLIPSIS) - 1]
    structured = role in ("tool", "call") and body[:1] == '"'
    pieces: list[Piece] = []
    index = 1 if head_cut else 0
    for run in body.split(_GAP):
        texts = _run_texts(run, structured)
        pieces.extend(pieces_of(texts, None, structured=structured, names=names, first_index=index))
        index += len(texts) + 1  # and the gap
    if not pieces:
        return None
    size = pieces[-1].index + (2 if tail_cut else 1)
    party = None if role in ("tool", "call") else speaker.removesuffix(" reasoning")
    return Item(
        section, speaker, date, pieces, size, order, role, structured=structured, party=party
    )


@lru_cache(maxsize=RUNS_CACHE)
def _run_texts(run: str, structured: bool) -> tuple[tuple[str, str], ...]:
    """The clauses or sentences of a quoted run: every compaction reads the
    previous summary again, so most runs were split before."""
    return tuple(clauses(run) if structured else sentences(run))


def _role_of(speaker: str) -> str:
    """``user``, ``assistant``, ``tool``, ``call``, ``summary``, or ``person``:
    a speaker the conversation named, whose role the summary does not say."""
    if " called " in speaker:
        return "call"
    first = speaker.split(" ", 1)[0]
    return first if first in ("user", "assistant", "tool", "summary") else PERSON
