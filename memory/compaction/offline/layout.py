"""The summary's text: rendering chosen items, and reading a rendered summary back.

The layout, one item per line, grouped in sections and chronological within
each, the session date shown where it changes::

    Summary of the earlier conversation (42 messages; quoted, "..." where cut):
    User requests:
    - [8 May, 2023] user: Hi Sam! I joined a pottery class yesterday. ... My uncle
      left me his old Leica camera in Oslo.
    - [27 June, 2023] user: ... I'm applying to the Glasgow School of Art this autumn.
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

(A line is one line; it is wrapped here.) Consecutive messages of one speaker
on one date share a line, joined by ``...``. Pieces next to each other in
their message are joined by a space, JSON clauses by the punctuation that
stood between them; ``...`` stands where pieces were left out, before the
first kept one, between two, or after the last. ``parse`` reads this layout
back into items, so a later compaction can weigh the earlier summary's
sentences against the new ones; text that is not in this layout (a summary a
model wrote) becomes one "Earlier summary" item of its sentences.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .scan import (
    ACTIONS,
    EARLIER,
    ELLIPSIS,
    ERRORS,
    REQUESTS,
    TOOL_DATA,
    Item,
    Piece,
    clauses,
    sentences,
    words_of,
)

HEADER = 'Summary of the earlier conversation ({count} messages; quoted, "..." where cut):'
EMPTY = "No earlier conversation."
LATEST = "latest"
TITLES = {
    EARLIER: "Earlier summary:",
    REQUESTS: "User requests:",
    TOOL_DATA: "Identifiers and tool results:",
    ACTIONS: "Actions and results:",
    ERRORS: "Errors:",
    LATEST: "Latest state:",
}
SECTION_ORDER = (EARLIER, REQUESTS, TOOL_DATA, ACTIONS, ERRORS, LATEST)
_SECTION_OF_TITLE = {title: section for section, title in TITLES.items()}
_HEADER = re.compile(r"Summary of the earlier conversation \((\d+) messages?[;,)]")
_LINE = re.compile(r"- (?:\[([^\[\]]{1,64})\] )?([^:\n]{1,160}?): (.*)")
_GAP = " " + ELLIPSIS + " "
LINE_CHARS = 800  # a line of one speaker's messages goes on to a new line past this


@dataclass(frozen=True, slots=True)
class Previous:
    """A previous summary read back: its items and how many messages it covered."""

    items: list[Item]
    count: int


def header(count: int) -> str:
    return HEADER.format(count=count)


def section_of(item: Item) -> str:
    return LATEST if item.latest else item.section


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


def render(chosen: Sequence[tuple[Item, Sequence[Piece]]], count: int) -> str:
    """The summary text of the chosen pieces, by section, in chronological order.
    Consecutive messages of one speaker on one date share a line (up to
    ``LINE_CHARS`` characters), so the prefix is not repeated for each."""
    by_section: dict[str, list[tuple[Item, Sequence[Piece]]]] = {}
    for item, pieces in sorted(chosen, key=lambda pair: pair[0].order):
        if pieces:
            by_section.setdefault(section_of(item), []).append((item, pieces))
    lines = [header(count)]
    for section in SECTION_ORDER:
        entries = by_section.get(section)
        if not entries:
            continue
        lines.append(TITLES[section])
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
                lines.append(line(key[0], key[1] if key[1] != shown else None, group))
                shown = key[1] or shown
            group, key, size = [body], (item.speaker, item.date), len(body[1])
        if group and key is not None:
            lines.append(line(key[0], key[1] if key[1] != shown else None, group))
    return "\n".join(lines)


def parse(text: str, *, first_order: int = 0) -> Previous:
    """Read a summary back into items; its own layout line by line, anything
    else as one "Earlier summary" item of its sentences."""
    match = _HEADER.match(text)
    if match is None:
        texts = sentences(text)
        if not texts:
            return Previous([], 0)
        pieces = [Piece(t, i, words_of(t)) for i, (_, t) in enumerate(texts)]
        item = Item(EARLIER, "summary", None, pieces, len(pieces), first_order, "summary")
        return Previous([item], 0)
    items: list[Item] = []
    section = REQUESTS
    date: str | None = None
    order = first_order
    for line in text.splitlines()[1:]:
        if line in _SECTION_OF_TITLE:
            section = _SECTION_OF_TITLE[line]
            date = None
            continue
        found = _LINE.fullmatch(line)
        if found is None:
            continue
        date = found.group(1) or date
        read = _item_of_line(section, found.group(2), date, found.group(3), order)
        if read is not None:
            items.append(read)
            order += 1
    return Previous(items, int(match.group(1)))


def _item_of_line(
    section: str, speaker: str, date: str | None, body: str, order: int
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
    splitter = clauses if structured else sentences
    pieces: list[Piece] = []
    index = 1 if head_cut else 0
    for run in body.split(_GAP):
        for lead, text in splitter(run):
            pieces.append(Piece(text, index, words_of(text, structured=structured), lead))
            index += 1
        index += 1  # the gap
    if not pieces:
        return None
    size = pieces[-1].index + (2 if tail_cut else 1)
    return Item(section, speaker, date, pieces, size, order, role, structured=structured)


def _role_of(speaker: str) -> str:
    if " called " in speaker:
        return "call"
    first = speaker.split(" ", 1)[0]
    return first if first in ("user", "assistant", "tool", "summary") else "assistant"
