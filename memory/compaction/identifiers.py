"""Identifiers in conversation text, and whether a summary kept them.

A summary that drops a booking code, a file path or a person's name loses
what the agent needs next. ``extract_identifiers`` finds such tokens in text:
URLs, emails, file paths, ids and codes, dates, amounts, numbers with units
and proper names. ``kept_in`` tells which of them a summary still mentions.
Pure functions on strings: no I/O, no model.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Identifier", "extract_identifiers", "kept_in"]

_MONTHS = (
    "Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
    "Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?"
)
_UNITS = (
    "%|percent|ms|s|sec|seconds?|min|minutes?|h|hours?|days?|weeks?|months?|years?|"
    "mm|cm|m|km|mi|miles?|ft|in|kg|g|mg|lb|lbs|oz|t|l|ml|L|"
    "B|KB|MB|GB|TB|KiB|MiB|GiB|TiB|kB|Hz|kHz|MHz|GHz|W|kW|kWh|V|A|°C|°F|C|F|"
    "tokens?|px|pt|em|rem|x"
)
_CURRENCY = "USD|EUR|GBP|JPY|CHF|CAD|AUD|CNY|INR|SEK|NOK|DKK|PLN"

# Order matters: earlier kinds claim their text first, so a URL's path is not
# also reported as a path, nor a date's digits as a number.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("url", re.compile(r"\b(?:https?|ftp)://[^\s<>\"'`)\]}]+[^\s<>\"'`)\]}.,;:!?]")),
    ("email", re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,}\b")),
    (
        "date",
        re.compile(
            r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b"
            r"|\b\d{1,2}/\d{1,2}/\d{2,4}\b"
            rf"|\b\d{{1,2}} (?:{_MONTHS})\.?(?: \d{{4}})?\b"
            rf"|\b(?:{_MONTHS})\.? \d{{1,2}}(?:st|nd|rd|th)?(?:,? \d{{4}})?\b"
        ),
    ),
    (
        "path",
        re.compile(
            r"(?<![\w/])(?:~|\.{1,2})?/(?:[\w.-]+/)*[\w.-]+"
            r"|\b[A-Za-z]:\\(?:[\w. -]+\\)*[\w.-]+"
            r"|\b[\w-]+(?:/[\w.-]+)+\.[A-Za-z0-9]{1,6}\b"
            r"|\b[\w-]+\.(?:py|js|ts|tsx|jsx|json|jsonl|yaml|yml|toml|md|txt|csv|html|css|"
            r"sql|sh|go|rs|java|rb|php|c|h|cpp|ini|cfg|log|pdf|png|jpg|xml)\b"
        ),
    ),
    (
        "amount",
        re.compile(
            r"[$€£¥]\s?\d[\d,]*(?:\.\d+)?(?:\s?(?:k|m|bn|million|billion))?"
            rf"|\b\d[\d,]*(?:\.\d+)?\s?(?:{_CURRENCY})\b"
            rf"|\b(?:{_CURRENCY})\s?\d[\d,]*(?:\.\d+)?"
        ),
    ),
    ("number", re.compile(rf"(?<![\w.])\d[\d,]*(?:\.\d+)?\s?(?:{_UNITS})(?![\w])")),
    (
        "id",
        re.compile(
            r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
            r"|\b[0-9a-f]{12,64}\b"
            r"|\b(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*\b"
            r"|#\d+\b"
        ),
    ),
    (
        "name",
        re.compile(r"\b[A-Z][a-z]+(?:[ -](?:[A-Z][a-z]+|[A-Z]\.))*(?: [A-Z][a-z]+)*\b"),
    ),
)

# Capitalised words that start sentences or name nothing in particular.
_COMMON = frozenset(
    [
        "A",
        "An",
        "The",
        "This",
        "That",
        "These",
        "Those",
        "It",
        "Its",
        "I",
        "I'm",
        "We",
        "You",
        "He",
        "She",
        "They",
        "Our",
        "Your",
        "My",
        "His",
        "Her",
        "Their",
        "There",
        "Here",
        "What",
        "When",
        "Where",
        "Which",
        "Who",
        "Why",
        "How",
        "Yes",
        "No",
        "Not",
        "Please",
        "Thanks",
        "Thank",
        "Hi",
        "Hello",
        "Ok",
        "Okay",
        "Sure",
        "Also",
        "And",
        "But",
        "Or",
        "If",
        "So",
        "Then",
        "Now",
        "Let",
        "Can",
        "Could",
        "Would",
        "Should",
        "Will",
        "Do",
        "Does",
        "Did",
        "Is",
        "Are",
        "Was",
        "Were",
        "Be",
        "Been",
        "Have",
        "Has",
        "Had",
        "Done",
        "Note",
        "Sorry",
        "Great",
        "Good",
        "Well",
        "Found",
        "Booking",
        "Question",
        "Answer",
        "Result",
        "Error",
        "User",
        "Assistant",
        "Tool",
        "System",
        "Summary",
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "Today",
        "Tomorrow",
        "Yesterday",
        "Call",
        "Called",
        "Get",
        "Set",
        "Use",
        "Used",
        "After",
        "Before",
        "During",
        "For",
        "From",
        "In",
        "On",
        "At",
        "To",
        "With",
        "Without",
        "By",
        "Of",
        "As",
        "All",
        "Any",
        "Some",
        "Each",
        "Every",
        "Both",
        "One",
        "Two",
        "Three",
        "First",
        "Second",
        "Next",
        "Last",
        "See",
        "Mail",
        "Email",
        "Dr",
        "Mr",
        "Mrs",
        "Ms",
        "Prof",
        "St",
        "Dear",
        "Best",
        "Regards",
        "Kind",
        "Re",
        "Fwd",
        "Cc",
        "Subject",
        "Date",
        "Time",
        "Name",
        "Id",
        "Ref",
    ]
)
_MIN_ID_CHARS = 2


@dataclass(frozen=True, slots=True, order=True)
class Identifier:
    """``kind`` is one of url, email, date, path, amount, number, id, name."""

    kind: str
    value: str


def extract_identifiers(text: str) -> list[Identifier]:
    """The identifiers in ``text``, each once, in order of first appearance.

    Linear in the text's length (the patterns do not backtrack on long runs).
    """
    taken = bytearray(len(text))
    found: dict[str, Identifier] = {}
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(text):
            start, end = match.span()
            if any(taken[start:end]):
                continue
            value = match.group().strip()
            if kind == "name" and _starts_sentence(text, start):
                # Any first word of a sentence is capitalised: it names
                # nothing alone, and before a name it is usually a verb.
                words = value.split(" ")
                if len(words) < 3:
                    continue
                value = " ".join(words[1:])
            if not _worth_keeping(kind, value):
                continue
            taken[start:end] = b"\x01" * (end - start)
            key = _normal(value)
            if key not in found:
                found[key] = Identifier(kind, value)
    order = {ident.value: text.find(ident.value) for ident in found.values()}
    return sorted(found.values(), key=lambda ident: order[ident.value])


def _worth_keeping(kind: str, value: str) -> bool:
    if kind == "name":
        words = [word for word in re.split(r"[ -]", value) if word]
        return not all(word in _COMMON for word in words)
    if kind == "id":
        return len(value) >= _MIN_ID_CHARS or value.startswith("#")
    return True


def _starts_sentence(text: str, start: int) -> bool:
    """Whether ``start`` opens a sentence, where any word is capitalised."""
    before = text[max(0, start - 3) : start].rstrip(" \t\"'(*-")
    return not before or before[-1] in ".!?:\n"


def _normal(value: str) -> str:
    return re.sub(r"\s+", "", value).casefold()


def kept_in(summary: str, identifiers: Iterable[Identifier]) -> list[tuple[Identifier, bool]]:
    """Each identifier with whether ``summary`` mentions it (ignoring case and spacing)."""
    haystack = _normal(summary)
    return [(ident, _normal(ident.value) in haystack) for ident in identifiers]
