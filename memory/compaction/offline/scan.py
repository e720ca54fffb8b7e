"""Reading messages into sentences and clauses, and what each one tells.

A message becomes an ``Item``: who said it (``user``, ``assistant``, a tool),
the session date it belongs to, and its ``Piece``s in order. A piece is a
verbatim sentence of the message's text (split by ``sentencex``, line by line),
or, for JSON-looking tool results and tool-call arguments, a verbatim clause
between JSON punctuation (``"flight_number": "HAT136"``). Each piece carries the
words that may make it worth keeping, with a weight for how specific each kind
of word is (identifiers and numbers above names, names above plain words;
common words count for nothing); ``digest`` turns these into scores.

A piece without a content word (every word a stop word or a ``PHATIC`` one,
or a name the speakers go by: "Talk to you later.", "And Bon Appetit!",
"Thanks, Mel!") is ``filler``: it keeps its place in its message, so a cut
around it shows, and is never chosen.

Who speaks: a message's role, unless the conversation names its speakers in
the text. It does when nearly all messages with text (three in four) open
with a label (``Name:``, one to three capitalised words, then any whitespace,
a line break too), at least two labels are used (or the speakers named
before), each stays with one role, and there are no tool calls or results:
then the label is the speaker, and the quoted text starts after it; a message
without a label is its role's name when that role used one. ``user`` /
``assistant`` are shown only where no name is known. The ``party`` of an item is
who the fairness rule of ``digest`` counts it for: the named speaker, or
``user`` / ``assistant`` (the assistant's reasoning included); tool calls and
results are nobody's.

Dates: a message opening with a bracketed stamp that holds a date (``[1:56 pm
on 8 May, 2023] ...``) starts a session: the whole stamp, date and time, is
the date of it and of every message after it until the next stamp; else a
date in the message's metadata. ``scan`` starts from the date in force before
its first message (carried by the previous summary), so a batch starting
mid-session is dated.

Scanning is linear and bounded: a message is read through its first
``SCAN_HEAD`` and last ``SCAN_TAIL`` characters, and a piece that finds no
sentence boundary within ``PIECE_MAX_CHARS`` is cut there with ``...``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from sentencex import segment

from memory.messages import ChatMessage

from ..code import is_body, is_listing_line, is_prose, is_structured, reads_as_code

SCAN_HEAD = 16_000  # characters read from the start of a message...
SCAN_TAIL = 4_000  # ...and from its end
PIECE_MAX_CHARS = 400  # a longer sentence is split at clause commas, then cut
ELLIPSIS = "..."
# Each compaction reads the previous summary's sentences again: remember their words.
WORDS_CACHE = 16_384

REQUESTS = "requests"
TOOL_DATA = "tool_data"
ACTIONS = "actions"
ERRORS = "errors"
EARLIER = "earlier"
CONVERSATION = "conversation"
ROLE_WORDS = frozenset({"user", "assistant", "tool", "summary", "system"})

# Words that say nothing on their own: function words and the fillers of chat.
_STOPWORDS = """a about above after again against all almost also am an and any anyone anything are
    around as at away back be because been before being below between both but by can can't
    cannot could couldn't did didn't do does doesn't doing don't done down during each else
    even ever every few for from further get gets getting go goes going gone gonna good got
    great had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers
    herself hey hi him himself his how how's i i'd i'll i'm i've if in into is isn't it it's
    its itself just know let let's like lot lots made make makes many maybe me might more most
    much must my myself need no nor not now of off oh ok okay on once one only or other ought
    our ours ourselves out over own please pretty quite really right said same say see she
    she'd she'll she's should shouldn't so some something still such sure take than thank
    thanks that that's the their theirs them themselves then there there's these they they'd
    they'll they're they've thing things think this those though through to too totally under
    until up us very want was wasn't way we we'd we'll we're we've well were weren't what
    what's when when's where where's which while who who's whom why why's will with won't
    would wouldn't wow yeah yes yet you you'd you'll you're you've your yours yourself
    yourselves awesome amazing cool glad hope love nice sounds super wonderful"""
STOPWORDS = frozenset(_STOPWORDS.split())
# Words of greetings, sign-offs, thanks and pleasantries: they weigh nothing,
# and a sentence of nothing else is filler ("Talk to you later.").
_PHATIC = """hello hiya howdy bye goodbye cya later soon talk talking chat chatting catch
    catching sweet yay woohoo hooray yippee phew whoa woah ooh aww ugh hmm huh oops gosh
    geez yikes stay sound
    care cheers congrats congratulations welcome appetit bon haha hahaha lol omg yep yup
    nope thx xoxo hugs luck wish wishes best happy proud excited sorry fun enjoy enjoyed
    enjoying fantastic terrific brilliant lovely incredible morning evening night day
    weekend time meet meeting keep touch news course problem worries agree agreed true
    exactly absolutely definitely indeed appreciate appreciated means safe buddy dear"""
PHATIC = frozenset(_PHATIC.split())
_NO_CONTENT = STOPWORDS | PHATIC

PLAIN = 1.0  # a word not among the stop words
NAME = 1.5  # capitalised inside a sentence, or an acronym
NUMBER = 1.6  # has a digit: amounts, dates, counts
IDENTIFIER = 2.2  # letters with digits, underscores, dots, slashes or @: ids, paths, emails
KEY_WEIGHT = 0.1  # a JSON key's words: the schema, repeated in every record

WORD = re.compile(r"\w+(?:['\u2019./@:+-]\w+)*")
_ERROR_HEAD = re.compile(r"(?:error|exception|traceback|failed|fatal)\b", re.IGNORECASE)
_EXCEPTION_LINE = re.compile(r"^[A-Z]\w*(?:Error|Exception)\b", re.MULTILINE)
# "[1:56 pm on 8 May, 2023] text": a date stamp ahead of a message's text.
_STAMP = re.compile(r"\A\s*\[([^\[\]\n]{4,60})\]\s*")
# "Caroline: text", "Dr Ana Silva: text": a speaker's label ahead of a message's text.
# Any whitespace may follow the colon, a line break too ("Caroline:\n text").
_LABEL = re.compile(r"([A-Z][\w'\u2019.-]{0,30}(?: [A-Z][\w'\u2019.-]{0,30}){0,2}):\s+(?=\S)")
_MONTHS = "jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec"
_DATE = re.compile(
    rf"\d{{4}}-\d{{2}}-\d{{2}}"
    rf"|\d{{1,2}}\s+(?:{_MONTHS})[a-z]*\.?,?\s+\d{{4}}"
    rf"|(?:{_MONTHS})[a-z]*\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}",
    re.IGNORECASE,
)
_DATE_KEYS = ("date", "timestamp", "created_at", "time")
_CLAUSE = re.compile(r"(?<=[,;])\s+")
# A string literal (to its closing quote, or to the end when it is cut), or a
# piece of JSON punctuation that separates clauses.
_JSON_PUNCTUATION = re.compile(r'"(?:[^"\\]|\\.)*+"?|[{}\[\],\n]', re.DOTALL)
_LIST_MARKER = re.compile(r"(?:\d{1,3}|[a-zA-Z])[.)]")


@dataclass(frozen=True, slots=True)
class Piece:
    """A verbatim sentence or clause; ``index`` is its place in its message, and
    a gap between the indices of two kept pieces is shown as ``...``."""

    text: str
    index: int
    words: tuple[tuple[str, float], ...]  # (lower-cased word, kind weight), distinct
    lead: str = " "  # what joins it to the piece before it in its message
    filler: bool = False  # no content word: never chosen


@dataclass(slots=True)
class Item:
    """One message (or one line of a previous summary) as a sequence of pieces.

    ``speaker`` is how the line is attributed (``user``, ``assistant``,
    ``assistant called NAME``, ``tool NAME``, or the name a conversation gives
    its speaker); ``size`` is how many pieces the whole message had, so a cut
    at the end is shown; ``order`` is chronological; ``party`` is who the
    fairness rule counts it for (``None``: tool data, a model's summary).
    In a task, the newest message of each party is the ``latest`` state, and
    the earliest user message is its ``first_request``.
    """

    section: str
    speaker: str
    date: str | None
    pieces: list[Piece]
    size: int
    order: int
    role: str
    latest: bool = False  # the newest of its party: its opening is kept first
    first_request: bool = False  # a task's first user request: its opening too
    structured: bool = False  # JSON clauses rather than sentences
    party: str | None = None


@lru_cache(maxsize=WORDS_CACHE)
def words_of(text: str, *, structured: bool = False) -> tuple[tuple[str, float], ...]:
    """The words of ``text`` that carry information, each once, with its kind
    weight. In a JSON clause (``structured``) the words of a key name are
    schema, not information: they weigh ``KEY_WEIGHT`` unless they hold three
    digits or more (a key that is itself an id: ``"credit_card_4421486":``)."""
    key_end = _key_end(text) if structured else 0
    found: dict[str, float] = {}
    for n, match in enumerate(WORD.finditer(text)):
        word = match.group()
        lower = word.lower()
        if lower in _NO_CONTENT:
            continue
        weight = _kind(word, sentence_initial=n == 0 and not structured)
        if match.start() < key_end and sum(c.isdigit() for c in word) < 3:
            weight *= KEY_WEIGHT
        if weight and weight > found.get(lower, 0.0):
            found[lower] = weight
    return tuple(found.items())


def name_words(speakers: Iterable[str]) -> frozenset[str]:
    """The words a named speaker may be called by: each word of their names,
    lower case, and its beginnings of three letters or more ("mel" for
    Melanie). Roles (``user``, ``assistant``, a tool) are not names."""
    out: set[str] = set()
    for speaker in speakers:
        if speaker.split(" ", 1)[0] in ROLE_WORDS:
            continue
        for word in speaker.lower().split():
            out.update(word[:n] for n in range(3, len(word) + 1))
    return frozenset(out)


def _key_end(clause: str) -> int:
    """Where the ``"key":`` at the start of a JSON clause ends (0: there is none)."""
    if not clause.startswith('"'):
        return 0
    close = clause.find('"', 1)
    if close < 0 or clause[close + 1 : close + 2] != ":":
        return 0
    return close + 1


@lru_cache(maxsize=WORDS_CACHE)
def _kind(word: str, *, sentence_initial: bool) -> float:
    has_digit = any(c.isdigit() for c in word)
    has_alpha = any(c.isalpha() for c in word)
    if has_digit and (has_alpha or any(c in "_/@" for c in word)):
        return IDENTIFIER
    if "_" in word or "@" in word or "/" in word or ("." in word and has_alpha):
        return IDENTIFIER
    if has_digit:
        return NUMBER if len(word) > 1 else 0.0  # a digit alone could be anything
    if len(word) <= 2:
        return 0.0
    if word.isupper():
        # Six capitals or more is a code (a booking reference), not an acronym.
        return IDENTIFIER if len(word) >= 6 else NAME
    if word[0].isupper() and not sentence_initial:
        return NAME
    return PLAIN


def sentences(text: str) -> list[tuple[str, str]]:
    """Verbatim sentences of ``text``, line by line, stripped, none empty, as
    ``(lead, sentence)``: ``lead`` joins it to the one before, a space, or
    nothing where the text had none between them ("doing!🌟")."""
    out: list[tuple[str, str]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        found = [s.strip() for s in segment("en", line)]
        if len(found) > 1 and _LIST_MARKER.fullmatch(found[0]):
            # "2. **Flight HAT083**": the number of a list item is not a sentence.
            stripped = line.strip()
            end = stripped.find(found[1], len(found[0])) + len(found[1])
            found[:2] = [stripped[:end]]
        end = -1  # where the sentence before ended in the line (none yet)
        for sentence in found:
            if not sentence:
                continue
            at = line.find(sentence, max(end, 0))
            lead = "" if 0 < end == at else " "
            end = at + len(sentence) if at >= 0 else -1
            out.extend((lead if n == 0 else " ", part) for n, part in enumerate(_bounded(sentence)))
    return out


def clauses(text: str) -> list[tuple[str, str]]:
    """Verbatim clauses of JSON-like text, the runs between ``{ } [ ] ,`` outside
    string literals, as ``(lead, clause)``: ``lead`` is the punctuation between
    it and the clause before (spaces dropped, one after a comma), so clauses
    next to each other join back into the text they came from."""
    out: list[tuple[str, str]] = []
    start = 0
    lead: list[str] = []
    for match in _JSON_PUNCTUATION.finditer(text):
        char = match.group()
        if char[0] == '"':
            continue  # a string literal, skipped whole: its commas are its own
        if _add_clause(out, "".join(lead), text[start : match.start()]):
            lead = []
        if char != "\n":
            lead.append(", " if char == "," else char)
        start = match.end()
    _add_clause(out, "".join(lead), text[start:])
    return out


def _add_clause(out: list[tuple[str, str]], lead: str, raw: str) -> bool:
    added = False
    # A string value may hold a raw line separator (JSON allows U+2028): a piece
    # never spans two lines, so the summary reads back line by line.
    for line in raw.splitlines():
        clause = line.strip()
        if clause and any(c.isalnum() for c in clause):
            for n, part in enumerate(_bounded(clause)):
                out.append((lead if n == 0 else " ", part))
            lead = " "
            added = True
    return added


def _bounded(text: str) -> list[str]:
    """``text`` itself, or its clauses when it is too long, each at most
    ``PIECE_MAX_CHARS`` (cut at a space, ``...`` appended, when nothing else works)."""
    if len(text) <= PIECE_MAX_CHARS:
        return [text] if text else []
    out: list[str] = []
    for part in _CLAUSE.split(text):
        if len(part) > PIECE_MAX_CHARS:
            cut = part[:PIECE_MAX_CHARS]
            space = cut.rfind(" ")
            part = (cut[:space] if space > PIECE_MAX_CHARS // 2 else cut) + ELLIPSIS
        if part:
            out.append(part)
    return out


def is_error(text: str) -> bool:
    """Whether a tool result reports a failure: it starts with an error word (or
    is a JSON object whose first key is one), or holds a Python traceback or
    an exception line near its start."""
    head = text.lstrip()[:200]
    if _ERROR_HEAD.match(head) or _ERROR_HEAD.match(head.removeprefix('{"').lstrip()):
        return True  # "Error: ...", or a JSON object whose first key is "error"
    return "Traceback (most recent call last)" in text or bool(_EXCEPTION_LINE.search(head))


def date_stamp(text: str) -> tuple[str | None, str]:
    """``(stamp, rest)`` when ``text`` opens with a bracketed stamp holding a
    date (``[1:56 pm on 8 May, 2023] ...``: the stamp is ``1:56 pm on 8 May,
    2023``, date and time as written), else ``(None, text)``."""
    match = _STAMP.match(text)
    if match is None or _DATE.search(match.group(1)) is None:
        return None, text
    return match.group(1).strip(), text[match.end() :]


def speaker_label(text: str) -> tuple[str | None, str]:
    """``(name, rest)`` when ``text`` opens with ``Name: ``, else ``(None, text)``."""
    match = _LABEL.match(text)
    if match is None:
        return None, text
    return match.group(1), text[match.end() :]


def date_of(message: ChatMessage) -> str | None:
    """The date a message's own metadata gives (``extra['timestamp']`` and the like)."""
    for key in _DATE_KEYS:
        value = message.extra.get(key)
        if isinstance(value, str) and value:
            match = _DATE.search(value[:64])
            if match is not None:
                return match.group()
    return None


def _bounded_text(text: str) -> tuple[str, str | None]:
    """Head of a long text, and its tail when the middle was skipped."""
    if len(text) <= SCAN_HEAD + SCAN_TAIL:
        return text, None
    return text[:SCAN_HEAD], text[-SCAN_TAIL:]


def split(text: str, *, structured: bool) -> tuple[list[tuple[str, str]], int | None]:
    """The pieces of ``text`` and, when its middle was skipped, the index of the
    first piece after the gap."""
    head, tail = _bounded_text(text)
    splitter = clauses if structured else sentences
    first = splitter(head)
    if tail is None:
        return first, None
    # The cut ends cut a word or a clause in two: drop the broken ends.
    first, last = first[:-1], splitter(tail)[1:]
    return first + last, len(first)


@dataclass(frozen=True, slots=True)
class Scanned:
    """The items of some messages, and the date in force after the last one."""

    items: list[Item]
    date: str | None


@dataclass(frozen=True, slots=True)
class _Read:
    message: ChatMessage
    text: str  # without its stamp
    date: str | None
    label: str | None


def scan(
    messages: Sequence[ChatMessage | Mapping[str, object]],
    *,
    first_order: int,
    date: str | None = None,
    names: Iterable[str] = (),
) -> Scanned:
    """The items of ``messages``, in order; messages that cannot be read are
    skipped. ``date``: the date in force before the first message. ``names``:
    speakers known from before (the previous summary's), never filler alone."""
    reads: list[_Read] = []
    for raw in messages:
        try:
            message = ChatMessage.coerce(raw)
        except (TypeError, ValueError):
            continue
        stamp, text = date_stamp(message.text)
        date = stamp or date_of(message) or date
        label, _ = speaker_label(text)
        reads.append(_Read(message, text, date, label))
    known = tuple(names)
    by_role = _names_speakers(reads, known)
    speakers = {r.label for r in reads if r.label} if by_role is not None else set()
    context = _Context(name_words([*speakers, *known]), {})
    items: list[Item] = []
    order = first_order
    for read in reads:
        speaker: str = read.message.role
        text = read.text
        if by_role is not None:
            if read.label is not None:
                speaker, text = read.label, speaker_label(text)[1]
            else:
                speaker = by_role.get(speaker, speaker)
        for item in _items_of(read.message, speaker, text, read.date, context, order):
            items.append(item)
            order += 1
    return Scanned(items, date)


UNLABELLED_RATIO = 3
"""Labelled messages a batch needs per unlabelled one to name its speakers."""


def _names_speakers(reads: Sequence[_Read], known: Sequence[str]) -> dict[str, str] | None:
    """The name each role goes by when the text names its speakers (see the
    module docstring), else ``None``. A message without a label takes the one
    name its role goes by (none when its role used several)."""
    roles: dict[str, str] = {}
    labelled = unlabelled = 0
    for read in reads:
        message = read.message
        if message.role == "tool" or message.tool_calls:
            return None
        if message.role == "system" or not read.text.strip():
            continue
        if read.label is None:
            unlabelled += 1
        elif roles.setdefault(read.label, message.role) != message.role:
            return None
        else:
            labelled += 1
    # Two speakers named in the batch, or the ones named before; and nearly
    # every message labelled (three in four), so "Note: ..." and "Warning: ..."
    # opening two messages of three name no one.
    if not roles or labelled < UNLABELLED_RATIO * unlabelled:
        return None
    if len(roles) < 2 and not set(roles) <= set(known):
        return None
    by_role: dict[str, str] = {}
    for name, role in roles.items():
        by_role[role] = name if role not in by_role else role
    return {role: name for role, name in by_role.items() if name != role}


@dataclass(frozen=True, slots=True)
class _Context:
    names: frozenset[str]  # words the speakers go by: never content alone
    call_names: dict[str, str]  # tool call id -> tool name


def _items_of(
    message: ChatMessage, speaker: str, text: str, date: str | None, context: _Context, order: int
) -> list[Item]:
    out: list[Item] = []
    role = message.role
    if role == "tool":
        calls = context.call_names
        name = message.name or next((calls[i] for i in message.tool_call_ids if i in calls), "")
        structured = is_structured(text)
        texts, gap = split(text, structured=structured)
        section = ERRORS if is_error(text) else TOOL_DATA
        speaker = f"tool {name}" if name else "tool"
        code = section == TOOL_DATA and reads_as_code(text)
        out.append(
            _item(section, speaker, date, texts, gap, order, role, None, context, structured, code)
        )
        return out
    if role == "system":
        return out
    party = speaker
    reasoning = message.reasoning_text
    if reasoning:  # what a thinking model worked out is summarised like what it said
        thought, gap = split(reasoning, structured=False)
        if thought:
            out.append(
                _item(
                    ACTIONS, f"{speaker} reasoning", date, thought, gap, order, role, party, context
                )
            )
    texts, gap = split(text, structured=False)
    if texts:
        section = REQUESTS if role == "user" else ACTIONS
        out.append(_item(section, speaker, date, texts, gap, order, role, party, context))
    for call in message.tool_calls:
        context.call_names[call.id] = call.name
        args, gap = split(call.arguments, structured=True)
        if args:  # a call without arguments says nothing a piece could quote
            caller = f"{speaker} called {call.name or 'a tool'}"
            out.append(
                _item(
                    ACTIONS, caller, date, args, gap, order + len(out), "call", None, context, True
                )
            )
    return out


def _item(
    section: str,
    speaker: str,
    date: str | None,
    texts: list[tuple[str, str]],
    gap: int | None,
    order: int,
    role: str,
    party: str | None,
    context: _Context,
    structured: bool = False,
    code: bool = False,
) -> Item:
    pieces = pieces_of(texts, gap, structured=structured, names=context.names, code=code)
    size = (pieces[-1].index + 1) if pieces else 0
    return Item(
        section, speaker, date, pieces, size, order, role, structured=structured, party=party
    )


def pieces_of(
    texts: Sequence[tuple[str, str]],
    gap: int | None,
    *,
    structured: bool,
    names: frozenset[str],
    first_index: int = 0,
    code: bool = False,
) -> list[Piece]:
    """Pieces of ``(lead, text)`` pairs, numbered from ``first_index``; a
    skipped middle (``gap``: the index of the first text after it) leaves a
    hole in the numbers, so it renders as "...". The words of ``names`` (the
    speakers', ``name_words``) do not count. The words of source code (``code``:
    the text's but its prose sentences; a call's argument that is a body of
    code: that clause) weigh like a JSON key's (``memory.compaction.code``)."""
    pieces: list[Piece] = []
    for i, (lead, text) in enumerate(texts):
        index = first_index + (i if gap is None or i < gap else i + 1)
        words = _content_words(text, structured, names)
        if (code and not is_prose(text)) or (structured and is_body(text)) or is_listing_line(text):
            words = tuple((word, weight * KEY_WEIGHT) for word, weight in words)
        pieces.append(Piece(text, index, words, lead, not words and not structured))
    return pieces


@lru_cache(maxsize=WORDS_CACHE)
def _content_words(
    text: str, structured: bool, names: frozenset[str]
) -> tuple[tuple[str, float], ...]:
    words = words_of(text, structured=structured)
    if not names:
        return words
    # Who speaks is on the line already: calling them by name says nothing.
    return tuple(pair for pair in words if pair[0] not in names)
