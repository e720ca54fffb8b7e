"""A deterministic, extractive summary of the messages a compaction folds away.

``offline_summary`` needs no model. Compaction uses it when no model client is
configured (the dashboard's demo, imports) and as the fallback when model
compaction keeps failing. It returns plain text with short headed sections::

    Summary of the earlier conversation (42 messages, extractive):
    User requests:
    - Hi! I'm looking to book a flight from New York to Seattle on May 20th.
    - Sure, my user ID is mia_li_3668.
    Identifiers: HAT136, 2024-05-20, mia_li_3668, ...
    Identifiers in tool results: certificate_7504069, ...
    Actions and results:
    - get_user_details(user_id=mia_li_3668) -> {"name": {"first_name": "Mia", ...
    - assistant: Your reservation has been booked.
    Errors:
    - book_reservation: Error: payment amount does not add up
    Latest state:
    - assistant: ...

What it keeps, in priority order when the budget is tight: every user request
(shortened to head ... tail, then to their keywords, then only the most
informative ones),
identifiers (ids, codes, paths, URLs, emails, dates, amounts, proper names; most
recent first), errors, tool calls and the assistant's key sentences, the latest
state, and what a previous summary held (its requests and identifiers are
folded in; an earlier summary written by a model is kept shortened). The
result never exceeds ``budget_tokens`` by ``counter.count``, so repeated
compactions do not grow the summary.

Everything is linear in the input: each message is scanned through a bounded
head and tail, and the regexes use bounded or possessive quantifiers only. The
text between identifiers is skipped by the regex engine, the work per distinct
word or token is done once per call, and each summary line is counted once (the
counts are kept per counter across calls, as each summary carries the lines of
the one before).
"""

from __future__ import annotations

import json
import logging
import math
import re
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Protocol

from .messages import ChatMessage

__all__ = ["offline_summary"]

logger = logging.getLogger(__name__)


class _Counter(Protocol):
    """What the summariser needs of a token counter (``memory.tokens.TokenCounter`` fits)."""

    def count(self, text: str) -> int: ...


# --- limits ---------------------------------------------------------------------------

_SCAN_HEAD = 12_000  # characters of a message scanned from its start...
_SCAN_TAIL = 4_000  # ...and from its end
_JSON_PARSE_LIMIT = 64_000  # tool results up to this size are parsed as JSON
_JSON_MAX_NODES = 5_000
_JSON_MAX_DEPTH = 12
_MAX_SENTENCES_PER_MESSAGE = 1_000
_ID_MAX_CHARS = 120

_HEADER_PREFIX = "Summary of the earlier conversation"
_EMPTY = "No earlier conversation."
_EARLIER = "Earlier summary:"
_REQUESTS = "User requests:"
_IDS = "Identifiers:"
_TOOL_IDS = "Identifiers in tool results:"
_ACTIONS = "Actions and results:"
_ERRORS = "Errors:"
_LATEST = "Latest state:"
_SECTION_HEADERS = (_EARLIER, _REQUESTS, _IDS, _TOOL_IDS, _ACTIONS, _ERRORS, _LATEST)
_ELLIPSIS = " … "

# (max characters, keywords only) from the fullest to the shortest form of a request
_REQUEST_LEVELS: tuple[tuple[int, bool], ...] = (
    (700, False),
    (360, False),
    (200, False),
    (120, True),
    (80, True),
    (50, True),
    (30, True),
)
_LATEST_LEVELS = (2400, 1200, 600, 300, 150, 70)
_EARLIER_LEVELS = (6000, 3000, 1500, 800, 400, 200, 100)
_SENTENCE_CHARS = 240
_CALL_ARGS_CHARS = 180
_RESULT_GIST_CHARS = 80
_ERROR_CHARS = 180

# share of the budget each section may take before the leftover is handed out
_SHARES = {
    "earlier": 0.15,
    "requests": 0.40,
    "ids": 0.20,
    "errors": 0.07,
    "actions": 0.20,
    "latest": 0.13,
}
# order in which the sections are served, and in which leftover budget is handed out
_PRIORITY = ("requests", "ids", "errors", "actions", "latest", "earlier")
# order in which they are printed
_LAYOUT = ("earlier", "requests", "ids", "actions", "errors", "latest")

# --- words ----------------------------------------------------------------------------


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


_NEGATIONS = _wordset(
    "no not nor never cannot can't don't doesn't didn't won't isn't aren't wasn't weren't "
    "shouldn't wouldn't couldn't haven't hasn't hadn't without"
)
_STOPWORDS = _NEGATIONS | _wordset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he he'd he'll he's her here here's hers herself him himself his
    how how's i i'd i'll i'm i've if in into is it it's its itself let's me more most my myself
    of off on once only or other ought our ours ourselves out over own same she she'd she'll
    she's should so some such than that that's the their theirs them themselves then there
    there's these they they'd they'll they're they've this those through to too under until up
    very was we we'd we'll we're we've were what what's when when's where where's which while
    who who's whom why why's with would you you'd you'll you're you've your yours yourself
    yourselves just also really yeah yes oh ok okay hey hi hello thanks thank please like got
    gonna wanna sure well wow let us will shall may might must"""
)
_FILLER = _STOPWORDS - _NEGATIONS  # what the keywords of a request leave out
_STARTERS = _STOPWORDS | _wordset(
    "great awesome cool congrats congratulations sounds dear good nice amazing sorry bye "
    "goodbye woohoo yay aww ah hmm hooray welcome true false none null"
)
_CAPITALISED = _wordset("may will us")  # filler in lower case, a month or a name otherwise
_CAPS_STOP = _wordset(
    "THE AND FOR YOU NOT BUT ARE ALL ANY CAN HAS HAD WAS OUT NOW NEW TODO NOTE FYI OK "
    "YES NO LOL OMG ASAP"
)
_READ_TOOL = re.compile(
    r"^(?:get|search|list|find|read|fetch|lookup|look_up|query|view|open|show|describe|"
    r"calculate|think|check|ls|cat|grep)(?:_|$)",
    re.IGNORECASE,
)


class _Words:
    """Whether a text holds one of some words (``\\b(?:word|...)\\b``), ignoring case.

    An ASCII text is lower-cased and searched with a case-sensitive copy of the
    pattern whose alternatives each start with a letter (the word boundary before
    them is checked just after it), so the search skips ahead to those letters
    instead of trying every alternative at every position; the answer is the same.
    """

    def __init__(self, *words: str) -> None:
        self.any_case = re.compile(rf"\b(?:{'|'.join(words)})\b", re.IGNORECASE)
        boundary = r"(?<!\w.)"  # after the first letter: no word character before it
        fast = "|".join(w[0] + boundary + w[1:] for w in words)
        self.ascii = re.compile(rf"(?:{fast})\b")

    def search(self, text: str) -> bool:
        if text.isascii():
            return self.ascii.search(text.lower()) is not None
        return self.any_case.search(text) is not None


_OUTCOME = _Words(
    "book(?:ed|ing)?",
    "cancel(?:l?ed|lation)",
    "confirm(?:ed|ation)",
    "updated?",
    "changed",
    "modified",
    "refund(?:ed)?",
    "created",
    "deleted",
    "removed",
    "added",
    "completed?",
    "done",
    "success(?:ful(?:ly)?)?",
    "decided",
    "agreed",
    "total",
    "paid",
    "charged",
    "scheduled",
    "fixed",
    "resolved",
    "upgraded",
    "downgraded",
    "transferred",
    "sent",
    "saved",
    "merged",
    "submitted",
    "approved",
    "rejected",
    "finished",
    "planned",
    "bought",
    "started",
    "moved",
    "adopted",
    "won",
    "lost",
    "married",
)
_TOOL_ERROR = _Words(
    "error",
    "exception",
    "traceback",
    "failed",
    "failure",
    "not found",
    "denied",
    "invalid",
    "unauthori[sz]ed",
)
_EXCEPTION_LINE = re.compile(r"[A-Z][\w.]{0,80}(?:Error|Exception|Exit|Interrupt)\b")
_ERROR_START = re.compile(
    r"(?i:error|fatal|failed|failure|panic)\b[:!\s]|[A-Z][\w.]{0,80}(?:Error|Exception):"
)
_TRACEBACK = "Traceback (most recent call last)"
_PROSE_ERROR = _Words("error", "exception", "traceback", "failed")
_RSQUO = "\u2019"  # right single quotation mark, the apostrophe of typeset text
_OPENERS = " \t*_\"'(\u201c\u2018"
_WORD = re.compile(r"[^\W_][\w'\u2019-]{0,40}")
_LOWER_WORD = re.compile(r"(?<![\w'\u2019])[a-z][a-z'\u2019]{0,40}")
# whitespace after a sentence's end, or line breaks: ``(?<=[.!?])\s+|\n+``, written to
# start with a whitespace character so that a split skips ahead to them
_SENTENCE_SPLIT = re.compile(r"\s(?:(?<=[.!?]\s)\s*|(?<=\n)\n*)")
# markdown removed from sentences: a leading run of these, then what _MARKDOWN_INLINE matches
_MARKDOWN_LEAD = re.compile(r"[\s>*#\u2022\u2013\u2014-]+")
_MARKDOWN_INLINE = re.compile(r"\*\*|__|`")
_OMITTED = re.compile(r"\((\d+) more requests? omitted for space\)")
_HEADER_LINE = re.compile(re.escape(_HEADER_PREFIX) + r" \((\d+) messages?, extractive\):")
_ID_KEY = re.compile(
    r"(?:^|_)(?:id|ids|number|code|ref|reference|uuid|key|sha|hash|path|url|email)$",
    re.IGNORECASE,
)
_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")
_NUMERIC_SUFFIX = re.compile(r"^\d+(?:st|nd|rd|th|s|am|pm|k|m|x|px|gb|mb|kb|kg|km|h|d|min)$", re.I)
_YEAR = re.compile(r"^(?:19|20)\d\d$")
_DIGIT = re.compile(r"\d")
_CAPS_AFTER = re.compile(r"[ \t]+[A-Z]{3,}\b")
_CAPS_BEFORE = re.compile(r"\b[A-Z]{3,}[ \t]+$")
_LETTER = re.compile(r"[^\W\d_]")

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_UNIT = (
    r"(?:%|percent\b|USD\b|EUR\b|GBP\b|dollars?\b|euros?\b|pounds?\b|ms\b|sec(?:onds?)?\b|"
    r"mins?\b|minutes?\b|hours?\b|hrs?\b|days?\b|weeks?\b|months?\b|years?\b|kg\b|lbs?\b|"
    r"km\b|miles?\b|KB\b|MB\b|GB\b|TB\b|tokens?\b|bags?\b|nights?\b|people\b|times\b)"
)
# an amount of money: a kind below, and a shortcut in _TOKEN
_MONEY = r"[$€£¥]\ ?\d[\d,]{0,15}(?:\.\d{1,2})?(?:\ ?(?:[kKM]\b|million\b|billion\b))?"
# The kinds of identifier, tried in this order at each position of a text by
# one left-to-right scan (``_TOKEN``, ``_Found.scan``). Every quantifier is
# bounded, possessive or followed by nothing, so the scan is linear. Plain
# lower-case words and small numbers match nothing (``word`` wants a digit, "_"
# or a capital).
_KINDS = rf"""
    (?P<url>https?://[^\s<>"'`{{}}|\\^\[\]]{{1,400}})
    |(?P<email>(?<![\w.%+-])[A-Za-z0-9._%+-]{{1,64}}@[A-Za-z0-9-]{{1,63}}(?:\.[A-Za-z0-9-]{{1,63}}){{1,6}})
    |(?P<uuid>[0-9a-fA-F]{{8}}-[0-9a-fA-F]{{4}}-[0-9a-fA-F]{{4}}-[0-9a-fA-F]{{4}}-[0-9a-fA-F]{{12}})
    |(?P<iso>\d{{4}}-\d{{2}}-\d{{2}}(?:[T\ ]\d{{2}}:\d{{2}}(?::\d{{2}})?)?)
    |(?P<dmy>\d{{1,2}}(?:st|nd|rd|th)?\ (?:of\ )?{_MONTH}\b\.?(?:,?\ \d{{4}}\b)?)
    |(?P<mdy>{_MONTH}\.?\ \d{{1,2}}(?:st|nd|rd|th)?\b(?:,?\ \d{{4}}\b)?)
    |(?P<my>{_MONTH},?\ \d{{4}}\b)
    |(?P<sdate>\d{{1,2}}/\d{{1,2}}/\d{{2,4}}\b)
    |(?P<time>\d{{1,2}}:\d{{2}}(?::\d{{2}})?(?:\ ?[AaPp]\.?[Mm]\b\.?)?
        |\d{{1,2}}\ ?[AaPp]\.?[Mm]\b\.?)
    |(?P<money>{_MONEY})
    |(?P<unit>\d[\d,]{{0,15}}(?:\.\d{{1,4}})?\ ?{_UNIT})
    |(?P<path>(?:~|\.{{1,2}})?/[\w.@+-]{{1,100}}(?:/[\w.@+-]{{1,100}}){{0,30}}
        |[A-Za-z]:\\[\w.@+-]{{1,100}}(?:\\[\w.@+-]{{1,100}}){{0,30}}
        |(?<![\w.-])[\w.-]{{1,100}}(?:/[\w.@+-]{{1,100}}){{1,30}})
    |(?P<name>[A-Z][^\W\d_A-Z]{{1,30}}(?:\ [A-Z][^\W\d_A-Z]{{1,30}}){{0,3}})(?![\w-])
    |(?P<word>\b(?!\d{{1,3}}(?![\w-]))(?=[\w-]{{0,64}}?[0-9_A-Z])[^\W_][\w-]*)
    """
# ``_TOKEN`` adds parts that only make the scan fast; what it finds is the same.
# A match is ``skip`` then a shortcut or a kind, or ``skip`` alone (ignored by
# the caller). Each group of alternatives is entered only at a character that can
# start one of them.
#
# ``skip`` swallows, in C, a stretch where no kind can start: most of any text.
# Its units are up to 32 ASCII lower-case letters and spaces, then a character
# that is neither a word character nor one of ``.%+@:/\~$€£¥-`` (a space, a
# comma...). No kind starts at a space or at such a character (they start with
# a word character or one of ``.%+-~/$€£¥``), nor in a run of lower-case letters
# that one of them follows: ``url`` would need a ":", ``email`` an "@", ``uuid``
# and ``iso`` a "-", ``path`` a "/" or a ":", ``word`` a digit, "_" or capital
# in its run of word characters, and the other kinds start with a digit or a
# capital. A unit backtracks over at most 32 characters, so the scan stays
# linear. The other units, for long runs of lower-case letters, are 32 letters
# after a letter and before 9 more: no kind starts there, as those that can
# start at a lower-case letter after a word character (``url``, ``uuid``, a
# Windows ``path``) need a ":" or a "-" within 9 characters. Where ``skip`` stops
# and no kind matches, that character is taken too: the scan would find nothing
# there either.
#
# ``fword`` is a shortcut to ``word`` for the commonest ids (HAT083, JFK,
# mia_li_3668): an ASCII word starting with a letter, with a digit, "_" or
# capital among its next 64 characters, and followed by none of the characters
# that would let it go on as an email, a path or a url. ``word`` would match it
# whole, and no kind before ``word`` matches there: they need one of "@/:-" or
# a leading digit, or (``name`` and the months) a capital then only lower case.
# ``fiso`` is ``iso`` where ``email`` cannot match (``iso`` comes after it, and
# ``uuid`` never matches a date), and ``fmoney`` is ``money``, the only kind that
# starts with a currency sign.
_SKIP = r"(?:[a-z ]{0,32}[^\w.%+@:/\\~$€£¥-]|(?<=[a-z])[a-z]{32}(?=[a-z]{9}))++"
_FAST_WORD = r"\b[A-Za-z](?=[a-z]{0,63}[0-9_A-Z])[A-Za-z0-9_]*+(?![\w.%+@:/\\-])"
_FAST_ISO = r"\d{4}-\d{2}-\d{2}(?![A-Za-z0-9._%+@-])(?:\ \d{2}:\d{2}(?::\d{2})?)?"
_TOKEN = re.compile(
    rf"""(?P<skip>{_SKIP})?+(?:
        (?=[A-Za-z\d$€£¥])(?:(?P<fword>{_FAST_WORD})|(?P<fiso>{_FAST_ISO})|(?P<fmoney>{_MONEY}))
        |(?=[\w.%+~/$€£¥-])(?:{_KINDS})
        |(?(skip)[\s\S]?|(?!))
    )""",
    re.VERBOSE,
)
# the groups by number (``Match.lastindex`` is the kind of a match)
_G_SKIP, _G_FWORD, _G_NAME, _G_PATH, _G_WORD = (
    _TOKEN.groupindex[kind] for kind in ("skip", "fword", "name", "path", "word")
)


# --- small text helpers ---------------------------------------------------------------


def _cap(text: str) -> str:
    """The bounded part of a text that is scanned: its head and its tail."""
    if len(text) <= _SCAN_HEAD + _SCAN_TAIL:
        return text
    return f"{text[:_SCAN_HEAD]}\n…\n{text[-_SCAN_TAIL:]}"


def _flat(text: str) -> str:
    return " ".join(text.split())


def _flat_short(text: str, max_chars: int) -> str:
    """``_shorten(_flat(text), max_chars)``, flattening only the ends of a long text.

    ``_shorten`` reads only the first and the last ``max_chars`` characters of a
    text longer than ``max_chars``; the whole words in the ends of ``text`` give them.
    """
    span = 2 * max_chars + 2
    if max_chars < 16 or len(text) < 2 * span:
        return _shorten(_flat(text), max_chars)
    head = text[:span].split()
    if not text[span].isspace():
        head = head[:-1]  # maybe cut
    tail = text[-span:].split()
    if not text[-span - 1].isspace():
        tail = tail[1:]
    first, last = " ".join(head), " ".join(tail)
    if len(first) > max_chars and len(last) > max_chars:
        return _shorten(f"{first} {last}", max_chars)
    return _shorten(_flat(text), max_chars)  # long runs of spaces


def _shorten(text: str, max_chars: int) -> str:
    """``text`` (already flat) in at most ``max_chars``: its head and tail around an ellipsis."""
    if len(text) <= max_chars:
        return text
    if max_chars <= len(_ELLIPSIS) + 8:
        cut = text.rfind(" ", 0, max(0, max_chars) + 1)
        return text[: cut if cut > 0 else max(0, max_chars)]
    room = max_chars - len(_ELLIPSIS)
    head_len = (room * 2 + 2) // 3
    tail_len = room - head_len
    cut = text.rfind(" ", 0, head_len + 1)
    head = text[: cut if cut > 0 else head_len]
    start = len(text) - tail_len
    cut = text.find(" ", start - 1)
    tail = text[cut + 1 :] if text[start - 1] != " " and cut >= 0 else text[start:]
    return f"{head.rstrip()}{_ELLIPSIS}{tail.lstrip()}".strip()


_PUNCT = ".,;:!?\"'()[]{}*_" + _RSQUO


def _rank_words(
    text: str,
    weights: Mapping[str, float],
    default: float,
    seen: dict[str, tuple[str, bool, bool, int]] | None = None,
) -> tuple[list[str], list[int]]:
    """The words of ``text`` (bare of punctuation) and the indexes of the telling ones, best first.

    Rare words, numbers, ids, names and negations are telling; filler words are left out.
    ``seen`` keeps what each distinct token is, across the calls that share it.
    """
    if seen is None:
        seen = {}
    tokens = text.split()
    scored: list[tuple[float, int]] = []
    after_stop = True  # the first token is never taken as capitalised
    for index, token in enumerate(tokens):
        about = seen.get(token)
        if about is None:
            about = seen[token] = _token_about(token)
        key, upper, stop, kind = about
        capitalised = upper and not after_stop
        after_stop = stop
        if kind == _FILLER_WORD:
            if not capitalised:
                continue
        elif kind == _SKIPPED_WORD:
            continue
        if kind == _NEGATION:
            weight = 2 * default
        elif kind == _NUMBERED:
            weight = default + weights.get(key, default)
        elif capitalised:
            weight = 1.5 * weights.get(key, default)
        else:
            weight = weights.get(key, default)
        scored.append((-weight, index))
    scored.sort()
    return [t.strip(_PUNCT) or t for t in tokens], [index for _, index in scored]


# what a token is to _rank_words
_PLAIN_WORD = 0
_FILLER_WORD = 1  # a filler word, telling only when capitalised ("May", "Will")
_SKIPPED_WORD = 2  # nothing (no letters or digits) or a filler word, capitalised or not
_NEGATION = 3
_NUMBERED = 4  # with a digit


def _token_about(token: str) -> tuple[str, bool, bool, int]:
    """A token's key (normalised), whether it could be capitalised, whether it ends a
    sentence (the next token then is not capitalised), and what kind of word it is."""
    key = _norm(token)
    upper = len(key) > 1 and token.lstrip(_PUNCT)[:1].isupper()
    stop = token.endswith((".", "!", "?", ":", "]"))
    if not key:
        kind = _SKIPPED_WORD
    elif key in _FILLER:
        kind = _FILLER_WORD if upper and key in _CAPITALISED else _SKIPPED_WORD
    elif key in _NEGATIONS:
        kind = _NEGATION
    elif any(c.isdigit() for c in key):
        kind = _NUMBERED
    else:
        kind = _PLAIN_WORD
    return key, upper, stop, kind


def _pick_words(words: list[str], ranked: list[int], max_chars: int) -> str:
    """The best-ranked ``words`` that fit ``max_chars``, in their order."""
    chosen: list[int] = []
    used = 0
    for index in ranked:
        size = len(words[index]) + 1
        if used + size <= max_chars + 1:
            chosen.append(index)
            used += size
    chosen.sort()
    return " ".join(words[i] for i in chosen)


def _norm(token: str) -> str:
    return token.lower().replace(_RSQUO, "'").strip(_PUNCT + "-")


def _content_words(text: str, seen: dict[str, tuple[str, ...]] | None = None) -> list[str]:
    """Lower-cased words that carry meaning, in order, without repeats.

    Words never span spaces, so each distinct run of non-spaces is read once;
    ``seen`` keeps what each gave, across the calls that share it.
    """
    if seen is None:
        seen = {}
    chunks = dict.fromkeys(text.lower().split())  # in order of first appearance
    for chunk in [c for c in chunks if c not in seen]:
        seen[chunk] = tuple(
            word
            for word in map(_norm, _WORD.findall(chunk))
            if (len(word) >= 3 and word not in _STOPWORDS) or word.isdigit()
        )
    return list(dict.fromkeys(chain.from_iterable(map(seen.__getitem__, chunks))))


def _clean_sentence(text: str) -> str:
    lead = _MARKDOWN_LEAD.match(text)
    if lead:
        text = text[lead.end() :]
    return _flat(_MARKDOWN_INLINE.sub("", text)).strip()


def _text_of(content: object) -> str:
    """The text of a message content: a string, a list of parts, or anything else."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list | tuple):
        parts: list[str] = []
        size = 0
        for part in content:
            if size > _SCAN_HEAD + _SCAN_TAIL:
                break
            if isinstance(part, str):
                piece = part
            elif isinstance(part, Mapping):
                value = part.get("text")
                if isinstance(value, str):
                    piece = value
                else:
                    kind = part.get("type")
                    piece = f"[{kind}]" if isinstance(kind, str) and kind else ""
            else:
                piece = ""
            if piece:
                parts.append(piece)
                size += len(piece)
        return "\n".join(parts)
    return str(content)


# --- messages -------------------------------------------------------------------------


@dataclass(slots=True)
class _Call:
    id: str
    name: str
    arguments: str


@dataclass(slots=True)
class _Msg:
    role: str
    text: str  # capped, not flattened
    calls: list[_Call]
    call_id: str | None
    name: str | None


def _normalise(message: object) -> _Msg | None:
    """Read a ChatMessage (or a chat dict) without trusting any of its fields."""
    if isinstance(message, Mapping):
        role: object = message.get("role")
        content: object = message.get("content")
        raw_calls: object = message.get("tool_calls")
        call_id: object = message.get("tool_call_id")
        name: object = message.get("name")
    else:
        role = getattr(message, "role", None)
        content = getattr(message, "content", None)
        raw_calls = getattr(message, "tool_calls", None)
        call_id = getattr(message, "tool_call_id", None)
        name = getattr(message, "name", None)
    if not isinstance(role, str):
        return None
    calls: list[_Call] = []
    if isinstance(raw_calls, list | tuple):
        calls = [_read_call(raw) for raw in raw_calls]
    return _Msg(
        role=role,
        text=_cap(_text_of(content)),
        calls=calls,
        call_id=call_id if isinstance(call_id, str) else None,
        name=name if isinstance(name, str) else None,
    )


def _read_call(raw: object) -> _Call:
    if isinstance(raw, Mapping):
        function = raw.get("function")
        function = function if isinstance(function, Mapping) else {}
        call_id, name, arguments = raw.get("id"), function.get("name"), function.get("arguments")
    else:
        call_id = getattr(raw, "id", None)
        name = getattr(raw, "name", None)
        arguments = getattr(raw, "arguments", None)
    if not isinstance(arguments, str):
        try:
            arguments = json.dumps(arguments, ensure_ascii=False) if arguments is not None else ""
        except (TypeError, ValueError, RecursionError):
            arguments = str(arguments)
    return _Call(
        id=call_id if isinstance(call_id, str) else "",
        name=name if isinstance(name, str) and name else "tool",
        arguments=_cap(arguments),
    )


def _parse_json(text: str) -> Any:
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{" or len(stripped) > _JSON_PARSE_LIMIT:
        return None
    try:
        return json.loads(stripped)
    except (ValueError, RecursionError):
        return None


def _compact(value: Any, depth: int = 0) -> str:
    """A short, readable rendering of a JSON value: ``{a=1, b=[x, y]}``."""
    if isinstance(value, str):
        return _flat_short(value, 60)
    if value is None or isinstance(value, bool | int | float):
        return json.dumps(value)
    if depth >= 3:
        return "…"
    if isinstance(value, Mapping):
        items = list(value.items())
        inner = ", ".join(f"{k}={_compact(v, depth + 1)}" for k, v in items[:8])
        return "{" + inner + (", …" if len(items) > 8 else "") + "}"
    if isinstance(value, list):
        inner = ", ".join(_compact(v, depth + 1) for v in value[:6])
        return "[" + inner + (", …" if len(value) > 6 else "") + "]"
    return _flat_short(str(value), 60)


def _call_signature(call: _Call) -> str:
    parsed = _parse_json(call.arguments)
    if isinstance(parsed, Mapping):
        args = ", ".join(f"{k}={_compact(v)}" for k, v in parsed.items())
    else:
        args = _flat(call.arguments)
    return f"{call.name}({_shorten(args, _CALL_ARGS_CHARS)})"


def _error_line(text: str) -> str | None:
    """The line of a tool result that says what went wrong, or ``None``.

    A result is an error when its first line says so ("Error: ...", "... not found"),
    when it holds a traceback (the exception line is kept), or when a line starts
    like an error report ("error: ...", "FAILED ...", "ValueError: ..."). Words like
    "error" inside code or prose further down do not count.
    """
    rest = text.lstrip()  # the first line that is not blank, without splitting them all
    if not rest:
        return None
    first = rest.split("\n", 1)[0].splitlines()[0].strip()
    if _TOOL_ERROR.search(first) and not first.startswith("Traceback"):
        return _flat_short(first, _ERROR_CHARS)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if _TRACEBACK in text and any(line.startswith(_TRACEBACK) for line in lines):
        exceptions = [line for line in lines if _EXCEPTION_LINE.match(line)]
        if exceptions:
            return _flat_short(exceptions[-1], _ERROR_CHARS)
    for line in lines[:200]:
        if _ERROR_START.match(line):
            return _flat_short(line, _ERROR_CHARS)
    return None


# --- identifiers ----------------------------------------------------------------------

# Where an identifier was seen, most telling first: said by the user or used in a
# tool call (or kept by an earlier summary); written by the assistant; only in a
# tool result. Within a tier, the most recent come first.
_SAID, _WRITTEN, _RESULT = 0, 1, 2


def _ident(text: str) -> str:
    """An identifier as recorded: trimmed of spaces and trailing punctuation; "" if unfit."""
    ident = text.strip().rstrip(".,;:!?)]}'\"" + _RSQUO)
    return ident if ident and len(ident) <= _ID_MAX_CHARS else ""


# what to do with a word-like token (``_word_kind``), the context aside
_NONE = 0  # an ordinary word, a small number: nothing
_ADD = 1  # an identifier
_CAPS = 2  # a word in capitals (JFK): a code, or a shouted word, decided at the end
_CAPS_UNLESS_SHOUTED = 3  # the same, unless it sits in a run of capitals words
_SNAKE = 4  # snake_case in prose: an id, unless a key or a call follows ('":', "=", "(")


def _word_kind(token: str, prose: bool) -> tuple[int, str]:
    """How to treat a word-like ``token`` wherever it appears, and the text to record.

    Depends on the token alone, so a scan decides it once per distinct token; what
    depends on the surrounding text (what follows a snake_case word, whether
    capitals are shouted) is left to ``_Found._act``.
    """
    token = token.strip("-")
    if not token or len(token) > 64 or (token.isalpha() and token.islower()):
        return _NONE, ""  # the common case: an ordinary word
    has_digit = _DIGIT.search(token) is not None
    has_alpha = not token.isdigit() and _LETTER.search(token) is not None
    if has_digit and not has_alpha:
        if _YEAR.match(token) or (len(token) >= (4 if prose else 6) and token.isdigit()):
            return _ADD, _ident(token)
        return _NONE, ""
    if has_digit:
        if _NUMERIC_SUFFIX.match(token):
            return _NONE, ""
        return _ADD, _ident(token)
    letters = token.replace("-", "")
    if letters.isalpha() and letters.isupper() and len(letters) >= 3:
        if token in _CAPS_STOP:
            return _NONE, ""
        return (_CAPS_UNLESS_SHOUTED if len(letters) >= 4 else _CAPS), token
    if token.endswith("s") and token[:-1].isupper():
        rest = _NONE  # "IDs", "URLs"
    elif any(c.isupper() for c in token[1:]) and any(c.islower() for c in token):
        rest = _ADD  # camelCase / PascalCase code names
    else:
        rest = _NONE
    if "_" in token and prose and rest == _NONE:
        return _SNAKE, _ident(token)
    return rest, _ident(token) if rest == _ADD else ""


@dataclass(slots=True)
class _Found:
    """Identifiers seen so far, by their last position (a running tick)."""

    # by tier (_SAID, _WRITTEN, _RESULT): identifier -> last tick
    tiers: tuple[dict[str, int], ...] = field(default_factory=lambda: ({}, {}, {}))
    # proper-name candidates: name -> (last tick, best tier); resolved at the end
    names: dict[str, tuple[int, int]] = field(default_factory=dict)
    mid_sentence_names: set[str] = field(default_factory=set)
    caps: dict[str, tuple[int, int]] = field(default_factory=dict)  # all-caps words
    lower_words: set[str] = field(default_factory=set)  # of the prose texts read so far
    prose: list[str] = field(default_factory=list)  # prose texts not read yet for lower_words
    tick: int = 0

    # how each word-like token was classified, per prose flag (see ``_word_kind``)
    word_kinds: tuple[dict[str, tuple[int, str]], dict[str, tuple[int, str]]] = field(
        default_factory=lambda: ({}, {})
    )
    # the text recorded for each url, email, uuid, date, time or amount matched
    idents: dict[str, str] = field(default_factory=dict)

    def add(self, ident: str, tier: int) -> None:
        ident = _ident(ident)
        if ident:
            self.tick += 1
            self.tiers[tier][ident] = self.tick

    def add_name(self, name: str, tier: int, initial: bool) -> None:
        self.tick += 1
        _, best = self.names.get(name, (0, tier))
        self.names[name] = (self.tick, min(tier, best))
        if not initial:
            self.mid_sentence_names.add(name)

    def scan(self, text: str, *, tier: int, prose: bool) -> int:
        """Record the identifiers of ``text``; return how many were found."""
        found = 0
        if prose:
            self.prose.append(text)  # its lower-case words are read when names are resolved
        kinds = self.word_kinds[prose]
        idents = self.idents
        target = self.tiers[tier]
        caps = self.caps
        for match in _TOKEN.finditer(text):
            group = match.lastindex  # the kind, by number (every match has one)
            if group == _G_SKIP or group is None:
                continue  # a stretch with no identifier
            token = match[group]  # the match may start with a skipped stretch
            if group in (_G_FWORD, _G_WORD):
                entry = kinds.get(token)
                if entry is None:
                    entry = kinds[token] = _word_kind(token, prose)
                code, ident = entry
                if code == _NONE:
                    continue
                found += 1
                if code == _ADD:  # the common cases, inlined: an id...
                    if ident:
                        self.tick += 1
                        target[ident] = self.tick
                elif code == _CAPS:  # ...and a short word in capitals (see ``_act``)
                    self.tick += 1
                    seen = caps.get(ident)
                    caps[ident] = (self.tick, tier if seen is None or tier < seen[1] else seen[1])
                else:
                    found += self._act(code, ident, tier, text, match.end()) - 1
            elif group == _G_NAME:
                found += self._name(token, tier, text, match.start(group))
            elif group == _G_PATH:
                if _is_path(token):
                    self.add(token, tier)
                    found += 1
                else:
                    for part in re.split(r"[/\\]", token):
                        found += self._word(part, tier, prose, text, match.end())
            else:  # url, email, uuid and the dates, times and amounts
                known = idents.get(token)
                if known is None:
                    known = idents[token] = _ident(
                        _flat(token).replace(",", "") if " " in token else token
                    )
                if known:
                    self.tick += 1
                    target[known] = self.tick
                found += 1
        return found

    def _word(self, token: str, tier: int, prose: bool, text: str, end: int) -> int:
        """Record ``token`` (a word-like piece ending at ``end`` in ``text``) if it is an id."""
        kinds = self.word_kinds[prose]
        entry = kinds.get(token)
        if entry is None:
            entry = kinds[token] = _word_kind(token, prose)
        return self._act(*entry, tier, text, end)

    def _act(self, code: int, ident: str, tier: int, text: str, end: int) -> int:
        """Do what ``_word_kind`` decided for a token ending at ``end`` in ``text``."""
        if code == _NONE:
            return 0
        if code == _SNAKE:
            if text[end : end + 3].lstrip().startswith(('":', "=", "(")):
                return 0  # a key or a function name, not an id
            code = _ADD
        if code == _ADD:
            if ident:
                self.tick += 1
                self.tiers[tier][ident] = self.tick
            return 1
        if code == _CAPS_UNLESS_SHOUTED and _shouted(text, end):
            return 0
        self.tick += 1  # a code (JFK, HATHAT) or a shouted word (IMPORTANT): decided at the end
        _, best = self.caps.get(ident, (0, tier))
        self.caps[ident] = (self.tick, min(tier, best))
        return 1

    def _name(self, token: str, tier: int, text: str, start: int) -> int:
        initial = _sentence_initial(text, start)
        words = token.split(" ")
        while initial and len(words) > 1 and words[0].lower() in _STARTERS:
            words = words[1:]
        name = " ".join(words)
        if name.endswith(("'s", _RSQUO + "s")):
            name = name[:-2]
        if len(name) < 2 or (len(words) == 1 and name.lower() in _STARTERS):
            return 0
        self.add_name(name, tier, initial)
        return 1

    def resolve_names(self) -> None:
        """Keep the capitalised words that look like names, not like sentence starts."""
        for candidate, (tick, tier) in self.names.items():
            words = candidate.split(" ")
            while len(words) > 1 and self._ordinary(words[0]):
                words = words[1:]  # "Hey Caroline", "Woohoo Melanie"
            name = " ".join(words)
            if all(self._ordinary(w) for w in words):
                continue  # "Flight", "Basic Economy": ordinary words, capitalised
            if name not in self.mid_sentence_names:
                continue  # only ever seen opening a sentence or a line ("Cabin Class:")
            target = self.tiers[tier]
            target[name] = max(target.get(name, 0), tick)

        for word, (tick, tier) in self.caps.items():
            if len(word) >= 4 and self._ordinary(word):
                continue  # "IMPORTANT", "NOTE": a word in capitals, not a code
            target = self.tiers[tier]
            target[word] = max(target.get(word, 0), tick)

    def _ordinary(self, word: str) -> bool:
        lower = word.lower().replace(_RSQUO, "'")
        if self.prose:  # the same words as matching each text, then replacing the apostrophe
            for text in self.prose:
                self.lower_words.update(_LOWER_WORD.findall(text.replace(_RSQUO, "'")))
            self.prose.clear()
        return lower in self.lower_words or lower in _STARTERS

    def walk_json(self, value: Any, *, tier: int) -> bool:
        """Record the identifiers of a parsed JSON value (values of id-like keys as ids).

        Returns whether every node was visited (big values are cut short).
        """
        stack: list[tuple[Any, str, int]] = [(value, "", 0)]
        nodes = 0
        while stack and nodes < _JSON_MAX_NODES:
            item, key, depth = stack.pop()
            nodes += 1
            if isinstance(item, Mapping):
                if depth < _JSON_MAX_DEPTH:
                    entries = [(v, str(k), depth + 1) for k, v in item.items()]
                    stack.extend(reversed(entries))
                    for k in item:
                        k_text = str(k)  # keys can be ids too: {"gift_card_8190333": {...}}
                        if sum(c.isdigit() for c in k_text) >= 3:
                            self._word(k_text, tier, False, "", 0)
            elif isinstance(item, list):
                if depth < _JSON_MAX_DEPTH:
                    stack.extend(reversed([(v, key, depth + 1) for v in item]))
            elif isinstance(item, str):
                short = item.strip()
                if key and _ID_KEY.search(key) and 0 < len(short) <= 64 and " " not in short:
                    self.add(short, tier)
                else:
                    self.scan(_cap(item), tier=tier, prose=False)
            elif (
                isinstance(item, int | float)
                and not isinstance(item, bool)
                and key
                and _ID_KEY.search(key)
            ):
                self.add(str(item), tier)
        return not stack


def _shouted(text: str, end: int) -> bool:
    """Whether the capitals word ending at ``end`` sits in a run of them ("ONE TOOL CALL")."""
    start = end
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    return bool(
        _CAPS_AFTER.match(text, end) or _CAPS_BEFORE.search(text, max(0, start - 40), start)
    )


def _is_path(token: str) -> bool:
    parts = [p for p in re.split(r"[/\\]", token) if p]
    if not parts or not any(c.isalpha() for c in token):
        return False
    if token.startswith(("/", "~", ".", "\\")) or (len(token) > 2 and token[1] == ":"):
        return len(parts) >= 2 or bool(_EXTENSION.search(token))
    return bool(_EXTENSION.search(parts[-1]))


def _sentence_initial(text: str, start: int) -> bool:
    """Whether the word at ``start`` opens a sentence, a line, a value or a list item."""
    i = start - 1
    while i >= 0 and text[i] in _OPENERS:
        i -= 1
    return i < 0 or text[i] in ".!?:;\n\r-#>{[]\u2022"


# --- the digest of what is being folded -------------------------------------------------


@dataclass(slots=True)
class _Line:
    """A candidate line of a section, with how much it is worth."""

    text: str
    order: int
    score: float
    words: tuple[str, ...] = ()
    pinned: bool = False  # chosen before the others (tool calls that changed something)


@dataclass(slots=True)
class _Digest:
    message_count: int = 0
    earlier: str = ""
    requests: list[str] = field(default_factory=list)
    omitted_requests: int = 0
    request_words: list[tuple[str, ...]] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    tool_ids: list[str] = field(default_factory=list)
    actions: list[_Line] = field(default_factory=list)
    errors: list[_Line] = field(default_factory=list)
    latest: list[tuple[str, str]] = field(default_factory=list)  # (label, text)
    weights: dict[str, float] = field(default_factory=dict)  # word -> how telling (idf)
    rare_weight: float = 1.0  # the weight of a word seen once


@dataclass(slots=True)
class _Previous:
    count: int = 0
    earlier: str = ""
    requests: list[str] = field(default_factory=list)
    omitted: int = 0
    ids: list[str] = field(default_factory=list)
    tool_ids: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _parse_previous(text: str) -> _Previous:
    """Read a summary this module wrote; anything else is kept as an opaque earlier summary."""
    previous = _Previous()
    text = _cap(text).strip()
    if not text or text == _EMPTY:
        return previous
    lines = text.splitlines()
    match = _HEADER_LINE.fullmatch(lines[0].strip())
    if match is None:
        previous.earlier = _flat(text)
        return previous
    previous.count = int(match.group(1))
    section = ""
    for raw in lines[1:]:
        line = raw.strip()
        header = next((h for h in _SECTION_HEADERS if line.startswith(h)), None)
        if header is not None:
            section = header
            rest = line[len(header) :].strip()
            if header in (_IDS, _TOOL_IDS) and rest:
                target = previous.ids if header == _IDS else previous.tool_ids
                target.extend(i.strip() for i in rest.split(", ") if i.strip())
            continue
        item = line[2:].strip() if line.startswith("- ") else line
        if not item:
            continue
        if section == _REQUESTS:
            omitted = _OMITTED.fullmatch(item)
            if omitted:
                previous.omitted += int(omitted.group(1))
            else:
                previous.requests.append(item)
        elif section == _EARLIER:
            previous.earlier = f"{previous.earlier} {item}".strip()
        elif section in (_ACTIONS, _LATEST):
            previous.actions.append(_shorten(item, _SENTENCE_CHARS))
        elif section == _ERRORS:
            previous.errors.append(item)
    return previous


def _digest(messages: Sequence[object], previous: _Previous) -> _Digest:
    found = _Found()
    digest = _Digest()
    seen: dict[str, tuple[str, ...]] = {}  # for _content_words
    memo: dict[str, tuple[str, ...]] = {}

    def words_of(text: str) -> tuple[str, ...]:
        """``_content_words(text)``, once per distinct text."""
        words = memo.get(text)
        if words is None:
            words = memo[text] = tuple(_content_words(text, seen))
        return words

    msgs = [m for m in (_normalise(x) for x in messages) if m is not None]
    msgs = [m for m in msgs if m.role != "system"]
    digest.message_count = previous.count + len(msgs)
    digest.earlier = previous.earlier
    digest.omitted_requests = previous.omitted

    # identifiers a previous summary held are older than anything here
    if previous.earlier:
        found.scan(previous.earlier, tier=_SAID, prose=True)
    results: dict[str, str] = {}
    for m in msgs:
        if m.role == "tool" and m.call_id and m.call_id not in results:
            results[m.call_id] = m.text
    known_calls = {c.id for m in msgs for c in m.calls if c.id}

    # word weights: rarer words say more
    doc_freq: dict[str, int] = {}
    sentences: list[list[tuple[str, tuple[str, ...]]]] = []
    for m in msgs:
        per_message: list[tuple[str, tuple[str, ...]]] = []
        if m.role in ("user", "assistant") and m.text:
            pieces = _SENTENCE_SPLIT.split(m.text)
            for piece in pieces[:_MAX_SENTENCES_PER_MESSAGE]:
                sentence = _clean_sentence(piece)
                if sentence:
                    per_message.append((sentence, words_of(sentence)))
            for word in {w for _, words in per_message for w in words}:
                doc_freq[word] = doc_freq.get(word, 0) + 1
        sentences.append(per_message)
    total_docs = max(1, len(msgs))

    digest.weights = {w: math.log((total_docs + 1) / (n + 0.5)) for w, n in doc_freq.items()}
    digest.rare_weight = math.log((total_docs + 1) / 1.5)

    def weight(words: tuple[str, ...]) -> float:
        return sum(digest.weights.get(w, digest.rare_weight) for w in words)

    # the last assistant message is shown whole under "Latest state"
    last_assistant = max((i for i, m in enumerate(msgs) if m.role == "assistant"), default=-1)
    order = 0
    for m, per_message in zip(msgs, sentences, strict=True):
        order += 1
        if m.role == "user":
            text = _flat(m.text)
            if text:
                digest.requests.append(text)
                digest.request_words.append(words_of(text))
            for sentence, _ in per_message:
                found.scan(sentence, tier=_SAID, prose=True)
        elif m.role == "assistant":
            for sentence, words in per_message:
                n_ids = found.scan(sentence, tier=_WRITTEN, prose=True)
                if (len(words) < 2 and not n_ids) or order - 1 == last_assistant:
                    continue
                line = _Line(f"assistant: {_shorten(sentence, _SENTENCE_CHARS)}", order, 1.0, words)
                if _PROSE_ERROR.search(sentence):
                    digest.errors.append(line)
                    continue
                outcome = _OUTCOME.search(sentence)
                score = weight(words) + 3.0 * n_ids + (4.0 if outcome else 0.0)
                if not (n_ids or outcome):
                    score *= 0.5  # small talk
                if sentence.endswith("?"):
                    score *= 0.4
                line.score = score
                digest.actions.append(line)
            for call in m.calls:
                parsed = _parse_json(call.arguments)
                before = found.tick
                if not (isinstance(parsed, Mapping | list) and found.walk_json(parsed, tier=_SAID)):
                    found.scan(call.arguments, tier=_SAID, prose=False)
                n_ids = min(4, found.tick - before)
                signature = _call_signature(call)
                result = results.get(call.id) if call.id else None
                error = _error_line(result) if result else None
                if error:
                    digest.errors.append(_Line(f"{signature}: {error}", order, 1.0))
                    text = f"{signature} -> failed (see Errors)"
                elif result and result.strip():
                    text = f"{signature} -> {_flat_short(result, _RESULT_GIST_CHARS)}"
                else:
                    text = signature
                words = words_of(signature)
                score = 0.5 * weight(words) + 3.0 * n_ids
                write = not _READ_TOOL.match(call.name)  # booking, editing, sending: an outcome
                digest.actions.append(_Line(text, order, score, words, pinned=write))
        elif m.role == "tool":
            parsed = _parse_json(m.text)
            if parsed is None or not found.walk_json(parsed, tier=_RESULT):
                found.scan(m.text, tier=_RESULT, prose=False)
            if m.call_id is None or m.call_id not in known_calls:
                label = m.name or "tool"
                error = _error_line(m.text)
                if error:
                    digest.errors.append(_Line(f"{label}: {error}", order, 1.0))
                elif m.text.strip():
                    gist = _flat_short(m.text, _RESULT_GIST_CHARS)
                    digest.actions.append(_Line(f"{label} result: {gist}", order, 1.0))
    found.resolve_names()

    # previous summary lines come before everything here
    digest.requests[:0] = previous.requests
    digest.request_words[:0] = [words_of(r) for r in previous.requests]
    prior = [
        _Line(text, -len(previous.actions) + i, weight(words_of(text)) * 0.7)
        for i, text in enumerate(previous.actions)
    ]
    for line in prior:
        line.words = words_of(line.text)
    digest.actions[:0] = prior
    digest.errors[:0] = [
        _Line(text, -len(previous.errors) + i, 1.0) for i, text in enumerate(previous.errors)
    ]

    said, written, in_results = (_recent_first(t) for t in found.tiers)
    digest.ids = _unique(said, written, previous.ids)
    named = set(digest.ids)
    digest.tool_ids = [i for i in _unique(in_results, previous.tool_ids) if i not in named]
    digest.latest = _latest(msgs)
    return digest


def _recent_first(seen: dict[str, int]) -> list[str]:
    return [k for k, _ in sorted(seen.items(), key=lambda kv: (-kv[1], kv[0]))]


def _unique(*lists: list[str]) -> list[str]:
    return list(dict.fromkeys(i for items in lists for i in items))


def _latest(msgs: list[_Msg]) -> list[tuple[str, str]]:
    """The last assistant message and the tool results around it."""
    last = next((i for i in range(len(msgs) - 1, -1, -1) if msgs[i].role == "assistant"), None)
    out: list[tuple[str, str]] = []
    tools: list[_Msg] = []
    if last is not None:
        m = msgs[last]
        text = _flat(m.text)
        if m.calls:
            calls = "; ".join(_call_signature(c) for c in m.calls[:4])
            text = f"{text} [calls {calls}]".strip()
        if text:
            out.append(("assistant", text))
        tools = [t for t in msgs[last + 1 :] if t.role == "tool"]
        if not tools:
            j = last - 1
            while j >= 0 and msgs[j].role == "tool":
                j -= 1
            tools = msgs[j + 1 : last]
    else:
        tools = [t for t in msgs if t.role == "tool"]
    for t in tools[-3:]:
        text = _flat(t.text)
        if text:
            out.append((f"{t.name or 'tool'} result", text))
    return out


# --- fitting the sections into the budget -------------------------------------------------


# Tokens of each summary line (with its newline), per counter and shared between
# calls: a compaction carries the lines of the previous summary over, so most of
# them were counted by the one before. A counter counts a text the same way every
# time; one that cannot be a weak dictionary key gets a fresh cache each call.
_LINE_COSTS: weakref.WeakKeyDictionary[Any, dict[str, int]] = weakref.WeakKeyDictionary()
_LINE_COSTS_MAX = 4096  # lines kept per counter (a few hundred a compaction)


def _line_costs(counter: _Counter) -> dict[str, int]:
    try:
        costs = _LINE_COSTS.get(counter)
        if costs is None or len(costs) > _LINE_COSTS_MAX:
            costs = _LINE_COSTS[counter] = {}
    except TypeError:  # not hashable, or no weak references to it
        costs = {}
    return costs


class _Planner:
    def __init__(self, digest: _Digest, counter: _Counter) -> None:
        self.digest = digest
        self.counter = counter
        self._costs = _line_costs(counter)
        self._levels: dict[tuple[int, bool], list[str]] = {}
        self._ranked: dict[int, tuple[list[str], list[int]]] = {}
        self._tokens: dict[str, tuple[str, bool, bool, int]] = {}  # for _rank_words

    def cost(self, line: str) -> int:
        """Tokens of a line, with its newline."""
        cached = self._costs.get(line)
        if cached is None:
            cached = self.counter.count(line) + 1
            self._costs[line] = cached
        return cached

    def header(self) -> str:
        return f"{_HEADER_PREFIX} ({self.digest.message_count} messages, extractive):"

    def render(self, budget: int) -> str:
        renderers: dict[str, Callable[[int], list[str]]] = {
            "earlier": self._earlier,
            "requests": self._requests,
            "ids": self._ids,
            "errors": self._errors,
            "actions": self._actions,
            "latest": self._latest,
        }
        header = self.header()
        room = budget - self.cost(header)
        active = [s for s in _PRIORITY if self._has(s)]
        total_share = sum(_SHARES[s] for s in active) or 1.0
        chosen: dict[str, list[str]] = {}
        used: dict[str, int] = {}
        for name in active:
            allowance = int(room * _SHARES[name] / total_share)
            chosen[name] = renderers[name](allowance)
            used[name] = self._lines_cost(chosen[name])
        slack = room - sum(used.values())
        for name in active:
            if slack <= 0:
                break
            lines = renderers[name](used[name] + slack)
            cost = self._lines_cost(lines)
            if cost > used[name]:
                slack -= cost - used[name]
                chosen[name], used[name] = lines, cost
        out = [header]
        for name in _LAYOUT:
            out.extend(chosen.get(name, ()))
        return "\n".join(out)

    def _has(self, section: str) -> bool:
        d = self.digest
        return bool(
            {
                "earlier": d.earlier,
                "requests": d.requests or d.omitted_requests,
                "ids": d.ids or d.tool_ids,
                "errors": d.errors,
                "actions": d.actions,
                "latest": d.latest,
            }[section]
        )

    def _lines_cost(self, lines: list[str]) -> int:
        return sum(self.cost(line) for line in lines)

    def _earlier(self, allowance: int) -> list[str]:
        for limit in _EARLIER_LEVELS:
            lines = [_EARLIER, f"- {_shorten(self.digest.earlier, limit)}"]
            if self._lines_cost(lines) <= allowance:
                return lines
        return []

    def _requests(self, allowance: int) -> list[str]:
        d = self.digest
        omitted_line = f"- ({d.omitted_requests} more requests omitted for space)"
        fixed = [_REQUESTS, omitted_line] if d.omitted_requests else [_REQUESTS]
        fixed_cost = self._lines_cost(fixed)
        if fixed_cost > allowance:
            return []
        for limit, keywords in _REQUEST_LEVELS:
            items = self._request_level(limit, keywords)
            if fixed_cost + self._lines_cost(items) <= allowance:
                return fixed + items
        # even the shortest forms do not fit: keep the first request (usually the task),
        # the last one, and the most informative of the others
        items = self._request_level(*_REQUEST_LEVELS[-1])
        n = len(items)
        omitted_total = d.omitted_requests + n
        room = allowance - self._lines_cost(
            [_REQUESTS, f"- ({omitted_total} more requests omitted for space)"]
        )
        if room < 0:
            return []
        forced = [i for i in dict.fromkeys((0, n - 1)) if 0 <= i < n]
        rest = sorted(  # telling words per token, with a nudge towards recent requests
            (i for i in range(n) if i not in forced),
            key=lambda i: (
                -self._density(d.request_words[i], items[i]) * (0.75 + 0.5 * i / n),
                -i,
            ),
        )
        keep: list[int] = []
        covered: set[str] = set()
        for i in [*reversed(forced), *rest]:
            cost = self.cost(items[i])
            if cost > room:
                continue
            words = d.request_words[i]
            if i not in forced and words and sum(w in covered for w in words) >= 0.8 * len(words):
                continue
            keep.append(i)
            covered.update(words)
            room -= cost
        keep.sort()
        omitted = d.omitted_requests + n - len(keep)
        head = [_REQUESTS]
        if omitted:
            head.append(f"- ({omitted} more requests omitted for space)")
        return head + [items[i] for i in keep] if keep or omitted else []

    def _request_level(self, limit: int, keywords: bool) -> list[str]:
        """Every request at one level of shortening (the first one, the task, twice as long)."""
        key = (limit, keywords)
        cached = self._levels.get(key)
        if cached is not None:
            return cached
        d = self.digest
        items = []
        for index, text in enumerate(d.requests):
            chars = limit * 2 if index == 0 else limit
            if keywords:
                if index not in self._ranked:
                    self._ranked[index] = _rank_words(text, d.weights, d.rare_weight, self._tokens)
                short = _pick_words(*self._ranked[index], chars)
            else:
                short = _shorten(text, chars)
            items.append(f"- {short}")
        self._levels[key] = items
        return items

    def _density(self, words: tuple[str, ...], line: str) -> float:
        d = self.digest
        return sum(d.weights.get(w, d.rare_weight) for w in words) / self.cost(line)

    def _ids(self, allowance: int) -> list[str]:
        out: list[str] = []
        for header, idents in ((_IDS, self.digest.ids), (_TOOL_IDS, self.digest.tool_ids)):
            if not idents:
                continue
            room = allowance - self._lines_cost(out) - self.cost(header + " ")
            kept: list[str] = []
            for ident in idents:
                cost = self.cost(ident)  # its tokens and the ", " before the next one
                if cost > room:
                    break
                kept.append(ident)
                room -= cost
            if kept:
                out.append(f"{header} {', '.join(kept)}")
        # per-item estimates can be off by a token or two: trim until the lines fit
        while out and self._lines_cost(out) > allowance:
            last = out[-1]
            header, _, rest = last.partition(": ")
            items = rest.split(", ")
            if len(items) <= 1:
                out.pop()
            else:
                out[-1] = f"{header}: {', '.join(items[:-1])}"
        return out

    def _errors(self, allowance: int) -> list[str]:
        room = allowance - self.cost(_ERRORS)
        latest: dict[str, _Line] = {}
        repeats: dict[str, int] = {}
        for line in self.digest.errors:
            latest[line.text] = line
            repeats[line.text] = repeats.get(line.text, 0) + 1
        kept: list[tuple[int, str]] = []
        for line in sorted(latest.values(), key=lambda ln: -ln.order):
            times = repeats[line.text]
            text = f"- {line.text}" + (f" (x{times})" if times > 1 else "")
            cost = self.cost(text)
            if cost <= room:
                kept.append((line.order, text))
                room -= cost
        kept.sort(key=lambda item: item[0])
        return [_ERRORS, *(t for _, t in kept)] if kept else []

    def _actions(self, allowance: int) -> list[str]:
        room = allowance - self.cost(_ACTIONS)
        lines = self.digest.actions

        def rank(line: _Line) -> tuple[bool, float, int]:
            density = line.score / self.cost(f"- {line.text}")
            return (not line.pinned, -line.order if line.pinned else -density, -line.order)

        chosen: list[tuple[int, int, str]] = []
        covered: set[str] = set()
        seen: set[str] = set()
        for index, line in sorted(enumerate(lines), key=lambda item: rank(item[1])):
            text = f"- {line.text}"
            cost = self.cost(text)
            if cost > room or line.text in seen:
                continue
            words = line.words
            if words and sum(w in covered for w in words) >= 0.8 * len(words):
                continue
            chosen.append((line.order, index, text))
            covered.update(words)
            seen.add(line.text)
            room -= cost
        chosen.sort()
        return [_ACTIONS, *(t for _, _, t in chosen)] if chosen else []

    def _latest(self, allowance: int) -> list[str]:
        for limit in _LATEST_LEVELS:
            lines = [_LATEST]
            for label, text in self.digest.latest:
                share = limit if label == "assistant" else limit // 2
                lines.append(f"- {label}: {_shorten(text, share)}")
            if self._lines_cost(lines) <= allowance:
                return lines
        return []


def _hard_fit(text: str, budget: int, counter: _Counter) -> str:
    """``text`` cut to ``budget`` tokens: the counter's ``truncate`` if it has one, else chars."""
    if counter.count(text) <= budget:
        return text
    truncate = getattr(counter, "truncate", None)
    if callable(truncate):
        try:
            cut = truncate(text, budget)
        except Exception:  # a counter's own failure must not break compaction
            cut = None
        if isinstance(cut, str) and counter.count(cut) <= budget:
            return cut
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if counter.count(text[:middle]) <= budget:
            low = middle
        else:
            high = middle - 1
    return text[:low]


def offline_summary(
    messages: Sequence[ChatMessage],
    *,
    budget_tokens: int,
    counter: _Counter,
    previous_summary: str | None = None,
) -> str:
    """Summarise ``messages`` (the turns being folded) in at most ``budget_tokens`` tokens.

    ``messages`` are ``ChatMessage`` objects (chat-format dicts are read too);
    ``previous_summary`` is the summary of everything before them, folded in.
    Deterministic, never raises on odd input, and linear in the input size.
    Returns ``"No earlier conversation."`` when there is nothing to summarise,
    and ``""`` only when the budget is not positive.
    """
    budget = budget_tokens if isinstance(budget_tokens, int) else 0
    if budget <= 0:
        return ""
    try:
        previous = _parse_previous(previous_summary) if previous_summary else _Previous()
        digest = _digest(list(messages or ()), previous)
        if not (
            digest.requests
            or digest.omitted_requests
            or digest.ids
            or digest.tool_ids
            or digest.actions
            or digest.errors
            or digest.latest
            or digest.earlier
        ):
            return _hard_fit(_EMPTY, budget, counter)
        planner = _Planner(digest, counter)
        target = budget
        text = ""
        for _ in range(4):
            text = planner.render(target)
            overflow = counter.count(text) - budget
            if overflow <= 0:
                return text
            target = max(1, target - overflow - max(2, budget // 50))
        return _hard_fit(text, budget, counter)
    except Exception:  # the last-resort compactor must not fail; keep what is safe
        logger.exception("offline_summary failed; falling back to a plain cut")
        fallback = _flat(previous_summary or "") or _EMPTY
        return _hard_fit(_shorten(fallback, budget * 8), budget, counter)
