"""A memory's time as a plain date: relative words resolved against the day they were said.

The offline extractor keeps a memory's time as said (``when``): an absolute
date, the day the sentence was said (``"1:56 pm on 8 May, 2023"``, or ISO
``"2023-05-08"``), or a relative date after it (``"yesterday, said 8 May,
2023"``). A reader of the recall block, months later, cannot resolve
"yesterday"; this module does, the way temporal annotation resolves a
relative expression against its document time (TimeML's TIMEX3 with an
anchor, https://timeml.github.io/site/publications/timeMLdocs/timeml_1.2.1.html):
a day becomes that day (``"7 May 2023"``), a span the span before or after the
anchor (``"the week before 8 May 2023"``), a month or year that month or year.
What it cannot parse it returns unchanged: never a guessed date.
"""

from __future__ import annotations

import re
from datetime import date, timedelta

MONTHS = (
    *("January", "February", "March", "April", "May", "June"),
    *("July", "August", "September", "October", "November", "December"),
)
_MONTH_INDEX = {name.lower(): i + 1 for i, name in enumerate(MONTHS)}
_MONTH_INDEX.update({name[:3].lower(): i + 1 for i, name in enumerate(MONTHS)})
_MONTH_INDEX["sept"] = 9
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_DAY_MONTH_YEAR = re.compile(
    r"\b(\d{1,2})(?:st|nd|rd|th)?\s*(?:of\s+)?([A-Za-z]{3,9}),?\s+(\d{4})\b"
)
_MONTH_DAY_YEAR = re.compile(r"\b([A-Za-z]{3,9})\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\b")
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_CLOCK = re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?\s*(?:am|pm)?\b|\bon\b|T[\d:.+Z-]*", re.I)
_SAID = re.compile(r"^(?P<named>.*?),?\s*said (?P<anchor>.+)$", re.S)


def plain_date(day: date) -> str:
    """``"7 May 2023"``: day, month name, year (no leading zero, no comma)."""
    return f"{day.day} {MONTHS[day.month - 1]} {day.year}"


def parse_day(text: str) -> date | None:
    """The first calendar day ``text`` names (``"1:56 pm on 8 May, 2023"``,
    ``"May 8, 2023"``, ``"2023-05-08"``), or ``None``."""
    found = _ISO.search(text)
    if found:
        return _day(int(found[1]), int(found[2]), int(found[3]))
    found = _DAY_MONTH_YEAR.search(text)
    if found and found[2].lower() in _MONTH_INDEX:
        return _day(int(found[3]), _MONTH_INDEX[found[2].lower()], int(found[1]))
    found = _MONTH_DAY_YEAR.search(text)
    if found and found[1].lower() in _MONTH_INDEX:
        return _day(int(found[3]), _MONTH_INDEX[found[1].lower()], int(found[2]))
    return None


def _day(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def resolve(named: str, anchor: date) -> str | None:
    """The relative time ``named`` (``"yesterday"``, ``"last week"``,
    ``"Friday"``...) as a plain date or span around ``anchor``; ``None`` when
    it is not one this module knows."""
    words = named.strip().lower()
    before = f"before {plain_date(anchor)}"
    match words:
        case "today" | "tonight":
            return plain_date(anchor)
        case "yesterday" | "last night":
            return plain_date(anchor - timedelta(days=1))
        case "tomorrow":
            return plain_date(anchor + timedelta(days=1))
        case "last week" | "last weekend":
            return f"the {words.split()[1]} {before}"
        case "next week" | "next weekend":
            return f"the {words.split()[1]} after {plain_date(anchor)}"
        case "last month":
            previous = anchor.replace(day=1) - timedelta(days=1)
            return f"{MONTHS[previous.month - 1]} {previous.year}"
        case "last year":
            return str(anchor.year - 1)
        case "next year":
            return str(anchor.year + 1)
    if words in _WEEKDAYS:
        return f"the {words.capitalize()} {before}"
    return None


def plain_when(when: str | None) -> str | None:
    """``when`` with its anchor day and relative words resolved (module
    docstring): ``"yesterday, said 1:56 pm on 8 May, 2023"`` ->
    ``"7 May 2023"``; ``"1:56 pm on 8 May, 2023"`` -> ``"8 May 2023"``;
    anything else unchanged."""
    if when is None:
        return None
    said = _SAID.match(when)
    if said is None:
        day = parse_day(when)
        # An absolute date written another way stays as written (it may name a month only).
        return plain_date(day) if day is not None and _only_a_day(when) else when
    anchor = parse_day(said["anchor"])
    if anchor is None:
        return when
    named = said["named"].strip()
    if not named:
        return plain_date(anchor)
    resolved = resolve(named, anchor)
    return resolved if resolved is not None else f"{named}, said {plain_date(anchor)}"


def _only_a_day(text: str) -> bool:
    """Whether ``text`` is a day stamp (a date and maybe a clock time), nothing else."""
    rest = _ISO.sub("", _DAY_MONTH_YEAR.sub("", _MONTH_DAY_YEAR.sub("", text)))
    rest = _CLOCK.sub("", rest)
    return not rest.strip(" ,")


def day_of(when: str | None) -> date | None:
    """The day a memory's ``when`` is anchored to (the day it was said, else the day it names)."""
    if when is None:
        return None
    said = _SAID.match(when)
    return parse_day(said["anchor"] if said else when)
