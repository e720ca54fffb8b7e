"""The identifiers a text names, and which of them a summary lost.

An agent continuing from a summary needs the exact strings the conversation
used: a booking code, a file path, an order number, a person's name. A model
asked to summarise tends to paraphrase them away ("the user's reservation"),
so the LLM compactor checks its summary with ``lost_identifiers`` and appends
what is missing verbatim.

``extract_identifiers(text)`` finds, in order of first appearance and each
once: URLs, e-mail addresses (``+tags`` and all), phone numbers (international,
``+44 20 7946 0958``, and national, ``020 7946 0958``, ``(415) 555-0100``),
IBANs and card numbers written in groups, file paths, dates (in prose too:
``3 March 2025``, ``the 12th of March``), clock times (kind ``time``), version
numbers, money amounts with their currency, numbers with a unit, references
of groups joined by dashes or slashes (``771-20394-5``, ``INV/2024/00817``),
ids and codes (``HAT123``, ``mia_li_3668``,
``#42``, hashes, UUIDs, ``snake_case`` and ``CamelCase`` names, ``ALLCAPS``
codes, numbers of three or more digits) and proper names. ``find_identifiers``
gives the same with each one's kind, and ``kept_in`` says which of them a
summary contains. Pure functions on strings: no I/O, no model; linear in the
text's length.

What does not count, because agents' transcripts are full of it:

* a path needs a path's shape: ``/`` and at least two segments (``/etc/hosts``),
  ``./``, ``../`` or ``~/`` and one, a Windows drive, or a last segment with a
  file extension (``src/app.py``, ``/notes.txt``), or three relative segments
  (``lib/app/web``); ``n/a``, ``and/or``, ``w/o``, ``/tmp`` are words;
* every form is found whole: no group of a reference, an IBAN or a phone
  number is ever reported on its own (``771`` of ``771-20394-5``);
* two groups of digits only are a range, a fraction or a span of years
  (``10-15``, ``24/7``, ``1990-1995``) unless they hold seven digits or more;
* a date needs a month name or a four-digit year; ``0.7.12`` is a version;
* a unit that is also an English word or a lone letter (``in``, ``s``, ``m``)
  counts only written against its number (``5s``, ``3m``): ``1.5 in`` is not
  a length;
* a capitalised word that only ever opens a sentence or a line is a name
  only when it opens several, is not an English word in the text's own
  lower case, and does not read as one (``Installing``, ``Successfully``,
  ``Fixed``); ``True``, ``False``, ``None`` and other programming literals
  never are;
* terminal colour codes and the line numbers of a file listing (``253→``);
* the keys of JSON and of Python dicts (``"first_name":``): the values are
  what a conversation names, the keys are the schema's;
* CSS: declarations (``font-family: "Segoe UI", Roboto;``, ``margin-top: 12px``)
  and hex colours (``#1d2330``), with the fonts, sizes and names inside them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "Identifier",
    "extract_identifiers",
    "find_identifiers",
    "kept_in",
    "lost_identifiers",
    "worth_keeping",
]

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
    r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_UNIT = (
    r"(?:%|percent|ms|secs?|seconds?|mins?|minutes?|hrs?|hours?|days?|weeks?|months?|"
    r"years?|nights?|mm|cm|km|mi|miles?|ft|feet|inch(?:es)?|kg|mg|lbs?|oz|ml|"
    r"[KMGT]i?B|bytes?|kHz|[MG]Hz|Hz|k?Wh?|°[CF]|tokens?|px|pt|people|persons?|"
    r"guests?|adults?|children|kids|items?|pieces?|rooms?|seats?|tickets?|bags?)"
)
# Units that are also a letter of a sentence ("5 s", "2 m"): only against the number.
_ATTACHED_UNIT = r"(?:[smhglxV])"
_CURRENCY = r"(?:USD|EUR|GBP|JPY|CHF|CAD|AUD|CNY|INR|SEK|NOK|DKK|PLN|dollars?|euros?|pounds?)"

_FILE_EXTENSION = (
    r"\.(?:py|pyi|js|mjs|ts|tsx|jsx|json|jsonl|ya?ml|toml|md|rst|"
    r"txt|csv|tsv|html?|css|sql|sh|go|rs|java|kt|rb|php|c|h|cc|cpp|hpp|cs|swift|ini|"
    r"cfg|conf|env|log|lock|pdf|png|jpe?g|gif|svg|xml|zip|gz|tar|ipynb|db|sqlite3?)\b"
)

_CSS_PROPERTIES = (
    "color|background|margin|padding|border|display|position|width|height|top|left|right|"
    "bottom|font|opacity|transform|transition|cursor|overflow|content|flex|grid|gap|outline|"
    "filter|animation|visibility|float|clear|fill|stroke"
)
_CSS_DECLARATION = (
    rf"(?<![\w-])(?:--[\w-]+|[a-z]+(?:-[a-z]+)+|{_CSS_PROPERTIES})\s*:\s*"
    r"[^;{}\n\"]{1,200}(?:;|(?=\s*\})|(?=\"))"
)

_HEX_COLOUR = (
    r"(?<![\w&])#(?=[0-9a-fA-F]*[a-fA-F])(?:[0-9a-fA-F]{8}|[0-9a-fA-F]{6}|[0-9a-fA-F]{3,4})\b"
)

# Order matters: an earlier kind claims its text first, so the path inside a
# URL is not reported again, nor the digits of a date as a number.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "url",
        re.compile(
            r"\b(?:https?|ftp|file|s3|gs)://[^\s<>\"'`\u2018\u2019\u201c\u201d\u00ab\u00bb]*"
            r"[^\s<>\"'`\u2018\u2019\u201c\u201d\u00ab\u00bb.,;:!?)\]}]"
        ),
    ),
    ("email", re.compile(r"\b[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")),
    # An international phone number (E.164, written with spaces, dots or dashes
    # between its groups): "+44 7700 900461", "+1 (415) 555-0100".
    ("phone", re.compile(r"(?<![\w+])\+\d{1,3}(?:[ .-]?(?:\(\d{1,4}\)|\d{1,4})){2,5}(?![\w])")),
    # An IBAN and a card-like number written in groups ("DE89 3704 0044 0532 0130 00",
    # "4111 1111 1111 1111", "3782 822463 10005"), whole: their groups are not ids.
    (
        "id",
        re.compile(
            r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b"
            r"|(?<![\w-])\d{4}(?:([ -])\d{4}(?:\1\d{4}){1,2}(?:\1\d{1,4})?"
            r"|[ -]\d{6}[ -]\d{4,5})(?![\w-])"
        ),
    ),
    # A redaction placeholder ("[REDACTED_TEXT len=106 sha=81c7c868]") stands for
    # text that is not there: its length and checksum name nothing.
    ("", re.compile(r"\[REDACTED[A-Z_]*(?: [a-z]+=[\w.-]+)*\]")),
    # A terminal's colour codes ("\x1b[31m", or written as code: "\e[0m", "\u001b[1m")
    # are claimed first and not reported.
    ("", re.compile(r"(?:\x1b|\\(?:e|x1b|u001b|033))\[[0-9;?]*[A-Za-z]")),
    # So are the line numbers a file viewer puts before each line (Claude Code's
    # Read tool: "   253→", cat -n: "   253\t").
    ("", re.compile(r"^ *\d+→|^ +\d+\t", re.MULTILINE)),
    # The keys of JSON objects and Python dicts, quotes and all.
    ("", re.compile(r"\"(?:[^\"\\\n]|\\.){1,100}\"(?=\s*:)|'[^'\\\n]{1,100}'(?=\s*:)")),
    # CSS declarations, up to their ";" (or the rule's "}", or the attribute's quote),
    # and hex colours with a letter in them (#123 stays an issue number).
    ("", re.compile(_CSS_DECLARATION)),
    (
        "",
        re.compile(
            r"(?<![\w&])#(?=[0-9a-fA-F]*[a-fA-F])(?:[0-9a-fA-F]{8}|[0-9a-fA-F]{6}|[0-9a-fA-F]{3,4})\b"
        ),
    ),
    (
        "date",
        re.compile(
            # (A date starts with a digit or a month's initial: the lookahead rejects
            # every other position at once, four times faster on a long text.)
            r"(?=[\dJFMASOND])(?:"
            r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b"
            r"|(?<![\w.])\d{1,2}([/.])\d{1,2}\1\d{4}(?!\.?\d)"
            r"|(?<![\w.])\d{4}([/.])\d{1,2}\2\d{1,2}(?!\.?\d)"
            rf"|\b\d{{1,2}}(?:st|nd|rd|th)?(?: of)? {_MONTH}\.?,?(?: \d{{4}})?\b"
            rf"|\b{_MONTH}\.? \d{{1,2}}(?:st|nd|rd|th)?(?:,? \d{{4}})?\b"
            rf"|\b{_MONTH} \d{{4}}\b"
            r")"
        ),
    ),
    # A clock time ("14:00:00", "9:30 am"): a time of day, not a date.
    ("time", re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?(?:\s?[AaPp]\.?[Mm]\b)?(?![\d:])")),
    (
        "version",
        re.compile(
            r"(?<![\w.])(?:v\d+(?:\.\d+){1,3}|\d{1,4}\.\d{1,4}\.\d{1,4})"
            r"(?:-[0-9A-Za-z]+(?:\.[0-9A-Za-z]+)*)?(?!\.?\w)"
        ),
    ),
    (
        "path",
        re.compile(
            r"(?<![\w/.:])(?:~|\.{1,2})?/(?:[\w.@+-]+/)*[\w.@+-]*[\w@+-]"
            r"|\b[A-Za-z]:\\(?:[\w. -]+\\)*[\w.-]+"
            r"|\b[\w.-]+(?:/[\w.@+-]+)+(?:\.[A-Za-z0-9]{1,8})?(?![\w/])"
            rf"|\b[\w-]+(?:\.[\w-]+)*{_FILE_EXTENSION}"
        ),
    ),
    # A phone number in a national format: "020 7946 0958", "(415) 555-0100",
    # "415-555-0100", "06 12 34 56 78" (after dates and versions, which claim theirs).
    (
        "phone",
        re.compile(
            r"(?<![\w+/.-])(?:\(\d{2,5}\) ?\d{3,4}[ .-]\d{3,4}"
            r"|0\d{1,4}(?:[ .-]\d{2,4}){2,4}"
            r"|\d{3}([.-])\d{3}\1\d{4})(?![\w-]|[.,/]\d)"
        ),
    ),
    # A reference of groups joined by dashes or slashes ("771-20394-5",
    # "INV/2024/00817", "88213/B", "AB-12/CD"), whole: the group before a dash
    # is not the reference. Two groups of digits only make a range or a
    # fraction ("10-15", "24/7") unless they hold seven digits or more, and
    # never a span of years ("1990-1995", "2023/24"). Before amounts and counts,
    # so "771-20394-5 days" keeps its last group.
    (
        "id",
        re.compile(
            r"(?<![\w/.-])(?=[\w/-]*\d)(?!(?:19|20)\d\d[-/](?:19|20)?\d\d(?![\w/-]))(?:"
            r"[A-Za-z0-9]+(?:[-/][A-Za-z0-9]+){2,}"
            r"|(?=[\w/-]*[A-Za-z])[A-Za-z0-9]+[-/][A-Za-z0-9]+"
            r"|\d+[-/]\d+(?<=[\d/-]{8})"
            r")(?![\w-]|[/.]\w)"
        ),
    ),
    (
        "amount",
        re.compile(
            r"[$€£¥₹]\s?\d+(?:,\d{3})*(?:\.\d+)?(?:\s?(?:k|K|m|M|bn|million|billion|thousand)\b)?"
            rf"|\b\d+(?:,\d{{3}})*(?:\.\d+)?\s?{_CURRENCY}\b"
            rf"|\b{_CURRENCY}\s?\d+(?:,\d{{3}})*(?:\.\d+)?"
        ),
    ),
    (
        "number",
        re.compile(rf"(?<![\w.,])\d[\d,]*(?:\.\d+)?(?:\s?{_UNIT}|{_ATTACHED_UNIT})(?![\w])"),
    ),
    # An ordinal on its own ("the 14th", "3rd") is a count, not a code.
    ("", re.compile(r"\b\d{1,4}(?:st|nd|rd|th)\b")),
    (
        "id",
        re.compile(
            # Every kind but "#42" starts a word: one test rejects the middle
            # of every word at once.
            r"#\d+\b|\b(?=\w)(?:"
            r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
            # a function with its arity (Elixir, Erlang): String.trim/1, handle_info/2
            r"|\b[A-Za-z_][\w.]*[\w?!]/\d\b"
            # letters and digits mixed (HAT123, ZFA04Y, gpt-5.3-codex, a3f9c21), or
            # words joined by underscores (mia_li_3668, estimate_context_tokens)
            r"|\b(?=[\w.-]*\d)(?=[\w.-]*[A-Za-z])[A-Za-z0-9]+(?:[-_.][A-Za-z0-9]+)*\b"
            r"|\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b"
            r"|\b[a-z]+(?:[A-Z][a-z0-9]*)+\b|\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b"
            r"|\b[A-Z]{3,12}\b"
            r"|(?<![\w.,])\d{3,}(?:[.,]\d+)*(?![\w])"
            r")"
        ),
    ),
    ("name", re.compile(r"\b[A-Z][a-z]+(?:[ -][A-Z][a-z]+)*\b")),
)

# Capitalised words that name nothing in particular: sentence openers,
# pronouns, weekdays, the roles of a transcript.
_COMMON_WORDS = """
    a an the this that these those it its i i'm i've i'll we you he she they our your my his
    her their there here what when where which who whom whose why how yes no not please thanks
    thank hi hello hey ok okay sure also and but or if so then now let can could would should
    will do does did is are was were be been being have has had done note sorry great good well
    fine nice cool found just maybe perhaps actually yeah yep nope user assistant tool system
    summary result results error errors question answer today tomorrow yesterday monday tuesday
    wednesday thursday friday saturday sunday after before during for from in on at to with
    without by of as all any some each every both one two three first second third next last
    see call get set use make add run check look find show tell give take try keep read write
    open close start stop mr mrs ms dr prof st dear best regards kind re fwd cc subject date time
    name id ref my mine ours theirs however meanwhile anyway because since while although though
    file files cannot can't don't won't new current still case usage warning info debug fatal
    traceback output input
"""
_COMMON = frozenset(_COMMON_WORDS.split())
_COMMON_CAPS_WORDS = (
    "THE AND FOR NOT YOU ARE BUT ALL ANY CAN HAS HAD WAS ONE OUR OUT USE NEW NOW GET SET OK "
    "YES NO TODO NOTE NULL NONE TRUE FALSE NAN NIL"
)
_COMMON_CAPS = frozenset(_COMMON_CAPS_WORDS.split())
# The constants of programming languages, capitalised the way code writes them.
_LITERALS = frozenset({"True", "False", "None", "Null", "Nil", "NaN", "Infinity", "Undefined"})
# How English inflects a word; names opening sentences rarely end so.
# (With a stem long enough to leave Emily, Kelly, Fred and Ming alone.)
_INFLECTED = re.compile(
    r"\w{3,}(?:ing|ed|ion|ions|ment|ments|ness|able|ible|ful|less|ize|ise)$|\w{4,}ly$"
)
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3})")
_CAPITALISED = re.compile(r"\b[A-Z][a-z]+\b")
_LOWER_WORD = re.compile(r"\b[a-z]+\b")
_NAME_JOIN = re.compile(r"[ -]")
_SENTENCE_END = ".!?:;|\n\"'”)"


@dataclass(frozen=True, slots=True)
class Identifier:
    """One identifier: ``kind`` (url, email, phone, date, time, version, path,
    amount, number, id or name) and ``value``, the text exactly as it first appeared."""

    kind: str
    value: str


_DIGIT = re.compile(r"\d")
# For each pattern, a text it can only match when this finds something in the
# text too (a character every match holds): most texts skip most patterns.
_NEEDS: tuple[re.Pattern[str] | None, ...] = (
    re.compile("://"),  # url
    re.compile("@"),  # email
    re.compile(r"\+"),  # phone
    _DIGIT,  # IBANs and card numbers
    re.compile(r"\[REDACTED"),  # redaction placeholders
    re.compile(r"[\x1b\\]"),  # colour codes
    re.compile("[→\t]"),  # line numbers
    re.compile(r"[\"']\s*:"),  # keys
    re.compile(r"[;}\"]"),  # CSS declarations (ended by one of these)
    re.compile("#"),  # hex colours
    _DIGIT,  # date
    re.compile(r"\d:\d"),  # time
    _DIGIT,  # version
    re.compile(rf"/|:\\|{_FILE_EXTENSION}"),  # path
    re.compile(r"\d[ .)-]\d"),  # national phone
    re.compile(r"\w[-/]\w"),  # dashed and slashed references
    _DIGIT,  # amount
    _DIGIT,  # number
    _DIGIT,  # ordinals
    None,  # id
    None,  # name
)


def find_identifiers(text: str) -> list[Identifier]:
    """The identifiers in ``text`` with their kinds, each once (compared
    ignoring case, spacing and thousands separators), in order of appearance."""
    claimed = bytearray(len(text))
    found: list[tuple[int, Identifier]] = []
    seen: set[str] = set()
    names_mid_sentence = _names_mid_sentence(text)
    for (kind, pattern), needs in zip(_PATTERNS, _NEEDS, strict=True):
        if needs is not None and needs.search(text) is None:
            continue
        for match in pattern.finditer(text):
            start, end = match.span()
            if claimed.find(1, start, end) != -1:
                continue
            value = match.group()
            if kind == "path" and not _path_shaped(value):
                continue
            if kind == "name":
                name = _proper_name(text, start, value, names_mid_sentence)
                if name is None:
                    continue
                value = name
            elif kind == "id" and (
                value in _LITERALS
                or (value.isupper() and value.isalpha() and value in _COMMON_CAPS)
            ):
                continue
            claimed[start:end] = b"\x01" * (end - start)
            if not kind:
                continue
            key = normalise(value)
            if key and key not in seen:
                seen.add(key)
                found.append((start, Identifier(kind, value)))
    found.sort(key=lambda item: item[0])
    return [identifier for _, identifier in found]


def extract_identifiers(text: str) -> list[str]:
    """The identifiers ``text`` names, each once, in order of first appearance
    (see the module docstring for what counts)."""
    return [identifier.value for identifier in find_identifiers(text)]


def lost_identifiers(folded_texts: Iterable[str], summary: str) -> list[str]:
    """The identifiers of ``folded_texts`` that ``summary`` does not contain.

    A summary keeps an identifier when it contains its text, ignoring case,
    spacing and thousands separators. Returned each once, in the order the
    folded texts first name them.
    """
    haystack = normalise(summary)
    lost: list[str] = []
    seen: set[str] = set()
    for text in folded_texts:
        for value in extract_identifiers(text):
            key = normalise(value)
            if key not in seen:
                seen.add(key)
                if key not in haystack:
                    lost.append(value)
    return lost


def kept_in(summary: str, identifiers: Iterable[Identifier]) -> list[tuple[Identifier, bool]]:
    """Each identifier with whether ``summary`` contains it (compared as in
    ``lost_identifiers``)."""
    haystack = normalise(summary)
    return [(identifier, normalise(identifier.value) in haystack) for identifier in identifiers]


# Kinds a summary need not carry word for word: clock times, prices and
# counts are read again from the tool that printed them.
_NOT_WORTH_KEEPING = frozenset({"time", "amount", "number"})
# A bare figure (a price, a count, a seat, "10519.0") is no reference unless it
# is as long as one: five digits or more (an order, a zip code).
_FIGURE = re.compile(r"\d{1,4}(?:[.,]\d+)*|\d+\.\d+")
# The vocabulary of a schema: tool names and enum values ("get_user_details",
# "one_way", "gift_card"): lower-case words joined by underscores, no digit.
_SCHEMA_WORD = re.compile(r"[a-z]+(?:_[a-z]+)+")
# An API's own bookkeeping: ids of tool calls, messages and responses.
_API_ID = re.compile(r"(?:call|toolu|msg|fc|resp|run|chatcmpl|req)_[A-Za-z0-9]{8,}")


def worth_keeping(identifier: Identifier) -> bool:
    """Whether a summary has to carry ``identifier`` word for word for it not
    to be lost: every kind but clock times, amounts and counts (``time``,
    ``amount``, ``number``), and no bare figure of fewer than five digits, no
    schema word (``get_user_details``, ``one_way``: a tool's name, an enum's
    value) and no API call or message id (``call_...``, ``toolu_...``)."""
    if identifier.kind in _NOT_WORTH_KEEPING:
        return False
    if identifier.kind != "id":
        return True
    value = identifier.value
    return not (
        _FIGURE.fullmatch(value) or _SCHEMA_WORD.fullmatch(value) or _API_ID.fullmatch(value)
    )


def normalise(value: str) -> str:
    """``value`` as compared: case-folded, without whitespace or thousands separators."""
    if "," in value:
        value = _THOUSANDS.sub("", value)
    # str.split() splits at the characters the pattern's \s matches (both
    # are str.isspace()), and no comma is one: the same as one pass of both.
    return "".join(value.split()).casefold()


def _names_mid_sentence(text: str) -> set[str]:
    """Capitalised words that are names even where they open a sentence: those
    that also appear mid-sentence, and ones that open several and read as a
    name, not as an English word (see the module docstring)."""
    mid: set[str] = set()
    openers: dict[str, int] = {}
    for match in _CAPITALISED.finditer(text):
        word = match.group()
        if word in _LITERALS:
            continue
        if not _starts_sentence(text, match.start()):
            mid.add(word)
        elif word.casefold() not in _COMMON and not _INFLECTED.search(word):
            openers[word] = openers.get(word, 0) + 1
    several = {word for word, count in openers.items() if count > 1}
    if several:
        lower = set(_LOWER_WORD.findall(text))
        several = {word for word in several if word.lower() not in lower}
    return mid | several


def _proper_name(text: str, start: int, value: str, mid_sentence: set[str]) -> str | None:
    words = _NAME_JOIN.split(value)
    opens = _starts_sentence(text, start)
    if opens and words[0] not in mid_sentence:
        words = words[1:]  # "Ask Mia Li" -> "Mia Li"; "Hello" -> nothing
    # Mid-sentence, a capitalised common word before a name is part of it
    # ("from New York", "with Dr Alvarez"); opening a sentence it is not.
    while words and (words[0] in _LITERALS or (opens and words[0].casefold() in _COMMON)):
        words = words[1:]
    if not words or all(word.casefold() in _COMMON or word in _LITERALS for word in words):
        return None
    return value[value.index(words[0]) :]


_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")


def _path_shaped(value: str) -> bool:
    """Whether a path match has a path's shape (see the module docstring)."""
    if value.startswith(("~/", "./", "../")) or value[1:3] == ":\\":
        return True
    segments = value.strip("/").split("/")
    if _EXTENSION.search(segments[-1]):
        return True
    # Without an extension, every segment must be a name ("12/05/24" is a date).
    wordy = all(any(c.isalpha() for c in segment) for segment in segments)
    return wordy and len(segments) >= (2 if value.startswith("/") else 3)


def _starts_sentence(text: str, start: int) -> bool:
    """Whether the word at ``start`` opens the text, a sentence, a line or a
    table cell, past the marks that lead a line ("- ", "→ ", "== ", "**")."""
    at = start
    floor = max(0, start - 8)
    while at > floor and not text[at - 1].isalnum():
        if text[at - 1] in _SENTENCE_END:
            return True
        at -= 1
    return at == 0
