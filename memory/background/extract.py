"""Extractors: what of a conversation is worth remembering in later ones.

An extractor reads the messages said since its last position (``Excerpt``)
with the scope's memories most related to them, and returns ``Candidate``
statements, each with an ``action`` against those memories: ``add`` (new),
``update`` (refine memory ``target``), ``supersede`` (memory ``target`` is no
longer true; this replaces it) or ``none`` (already known: only a provenance
link is added). Two are built:

- ``OfflineExtractor``, used when no model is configured: whole sentences the
  user said about themselves, kept verbatim;
- ``ModelExtractor``: a compact model asked for facts, preferences and events
  with their time, as JSON, with an action for each.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import orjson
from sentencex import segment

from ..clients.base import ChatClient
from ..errors import ExtractionError
from ..messages import ChatMessage
from .changes import replaces
from .guard import instruction_reason
from .payload import MAX_PER_MESSAGE, is_payload, list_item, payload_lines, without_marker
from .types import KINDS, Kind, Memory, dedupe_key

logger = logging.getLogger("memory.background")
Action = Literal["add", "update", "supersede", "none"]
ACTIONS: tuple[Action, ...] = ("add", "update", "supersede", "none")


@dataclass(frozen=True, slots=True)
class Excerpt:
    """What an extractor reads: ``messages`` as ``(seq, message)`` in log order,
    the session they belong to, ``existing``: the scope's active memories
    most related to them (what an ``update`` or ``supersede`` may target),
    ``said_on``: the date they were said (relative dates are relative to it),
    and ``before``: the message just before the first (a question the first
    may answer)."""

    session_id: str | None
    messages: Sequence[tuple[int, ChatMessage]]
    existing: Sequence[Memory] = ()
    said_on: str | None = None
    before: ChatMessage | None = None

    @property
    def first_seq(self) -> int | None:
        return self.messages[0][0] if self.messages else None

    @property
    def last_seq(self) -> int | None:
        return self.messages[-1][0] if self.messages else None


@dataclass(frozen=True, slots=True)
class Candidate:
    """One statement to remember. ``first_seq``/``last_seq``: the messages it
    came from; ``when``: the time it is about, as said (``None``: not said);
    ``importance`` in [0, 1]; ``target``: the memory an ``update`` or
    ``supersede`` acts on."""

    kind: Kind
    text: str
    action: Action = "add"
    target: str | None = None
    when: str | None = None
    importance: float = 0.5
    first_seq: int | None = None
    last_seq: int | None = None


class Extractor(Protocol):
    """Reads an ``Excerpt``; returns what to remember. ``name`` goes into every
    provenance link it causes (``"offline"``, ``"model:gpt-4o-mini"``). Raises
    ``ExtractionError`` when it cannot (the caller records it)."""

    @property
    def name(self) -> str: ...

    async def extract(self, excerpt: Excerpt) -> list[Candidate]: ...


# -- the offline extractor -----------------------------------------------------

# The speaker as subject or owner ("book me a table" is a request, not about "me").
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|mine|we|we're|we've|our)\b", re.I)
_REQUEST = re.compile(r"^(?:please|let's|can you|could you|would you)\b|\bplease\b", re.I)
# What holds for this conversation only (an intent, a thank-you, a doubt) or
# speaks about the listener: nothing a later conversation needs.
_CHATTER = re.compile(
    r"^(?:\w+,\s+)?(?:I'll|I will|I'd like|I would like|I'd love to|I need (?:help|to|the|a|an)\b|"
    r"I want to|I'm hoping|I am hoping|I'm not (?:sure|certain|entirely)|I don't (?:remember|know)"
    r"|I can't (?:seem to )?(?:find|remember)|I (?:really )?appreciate|thanks|thank you|"
    r"I understand|I confirm|I see\b|let me|yes\b|no worries|sure\b|okay\b|ok\b|"
    r"you\b|you're|you've|you'll|your\b)",
    re.I,
)
_PREFERENCE = re.compile(
    r"\b(?:like|likes|liked|love|loves|loved|prefer|prefers|preferred|hate|hates|enjoy|enjoys|"
    r"enjoyed|favou?rite|fond of|can't stand|cannot stand|passionate|into|allergic|vegan|"
    r"vegetarian|never|always)\b",
    re.I,
)
_MONTHS = (
    "January|February|March|April|May|June|July|August|September|October|November|December|"
    "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec"
)
_DATE = re.compile(
    rf"\b(?:(?:\d{{1,2}}(?:st|nd|rd|th)? (?:of )?)?(?:{_MONTHS})\b(?: \d{{1,2}}(?:st|nd|rd|th)?\b)?"
    r"(?:,? (?:19|20)\d\d\b)?|(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)\b|"
    r"(?:yesterday|today|tomorrow|tonight|last (?:week|month|year|weekend|night)|"
    r"next (?:week|month|year|weekend)|ago)\b|(?:19|20)\d\d\b|\d{1,2}/\d{1,2}(?:/\d{2,4})?)",
)
_NUMBER = re.compile(r"\d")
_YEAR = re.compile(r"\b(?:19|20)\d\d\b")
_PEOPLE = re.compile(
    r"\b(?:my|our) (?:wife|husband|partner|son|daughter|kids?|children|mom|mum|mother|dad|"
    r"father|parents?|brother|sister|siblings?|friends?|boss|colleagues?|cousin|aunt|uncle|"
    r"grandma|grandmother|grandpa|grandfather|family|boyfriend|girlfriend|fianc[ée]e?|dog|cat|"
    r"pets?|team|neighbou?r)\b",
    re.I,
)
_SELF = re.compile(
    r"\b(?:I am|I'm|I was|I work|I worked|I live|I lived|I moved|I grew up|I was born|my name|"
    r"I have|I've|I had|I got|I went|I visited|I started|I joined|I study|I studied|I teach|"
    r"I own|I bought|I ran|I signed|I finished|I adopted|I'll be|I play|I volunteer|I use)\b",
    re.I,
)
# A capitalised word that does not open the sentence: a name or a place.
_PROPER = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]{2,}\b")
_STAMP = re.compile(r"^\[[^\]]{1,64}\]\s*")
_SPEAKER = re.compile(r"^([A-Z][\w.'-]{0,20}(?: [A-Z][\w.'-]{0,20}){0,2}):\s+")
_WORDS = re.compile(r"[a-z0-9']+")
# Words that carry no content in a chat line (function words and small talk).
_SMALL_TALK = """a about after again all also am an and any are as at back be because been but by
    can could did do does doing done for from get got had has have having he her here him his
    how i if in into is it its it's i'm i've i'll i'd just me my no not now of off oh on or
    our out so some than that that's the their them then there they this those to too up us
    very was we we're were what when where which who will with would you your you're yeah
    yes wow really so much thanks thank great good nice awesome amazing cool glad happy sure
    okay ok totally definitely lot lots sounds like love well way things thing something
    know another think guess mean kinda kind stuff bit"""
_NOT_CONTENT = frozenset(_SMALL_TALK.split())
MIN_WORDS, MAX_WORDS = 4, 60
MIN_CONTENT_WORDS = 2
MAX_PER_TURN = 10  # statements one message gives at most, whatever its shape
# Where a sentence joins statements of its own subject: ", I ...", " and my ...".
_JOIN = re.compile(
    r"(?:,\s*(?:and\s+|but\s+|so\s+)?|;\s*|\s+(?:and|but)\s+)"
    r"(?=(?:I|I'm|I've|I'd|I'll|my|My|our|Our|we|We|we're|We're)\b)"
)
_CLAUSE_SUBJECT = re.compile(
    r"(?:I|I'm|I've|I'd|I'll|we|we're|we've)\b|(?:my|our)\s+(?:[\w'-]+\s+){0,2}"
    r"(?:is|are|was|were|has|have|had|lives|lived|works|worked|likes|loves|just|got|turned)\b",
    re.I,
)


@dataclass(frozen=True, slots=True)
class OfflineExtractor:
    """What the user said about themselves, people, places, dates and numbers, verbatim.

    Each line of a message whose role is in ``roles`` gives at most one
    candidate. By default (``roles=None``) those are the user's messages, and
    in a conversation between people, every speaker's: there each person
    speaks for themselves (the offline summary's fairness rule). A
    conversation is between people when every message with text in the
    excerpt (and the one before it) opens with a ``"Name: "`` label, each
    name keeps to one role, there are two names or more, and no tool is
    called. A line gives its statements, whole and in order, without
    its questions and its small talk, when at least one of them says
    something specific. A statement is a sentence that is not a question, of
    4 to 60 words, with at least two content words (not function words or
    small talk: "Wow, that's so great!" is none), and not a request ("please",
    "can you"...), nor chatter that holds for this conversation only or
    speaks of the listener (an intent, "I'll...", "I'd like to...", a
    thank-you, a doubt, "You're...") nor an instruction to the model (``guard.instruction_reason``:
    "ignore all previous instructions", "SYSTEM: ..."). It is specific when it
    names people (my wife, my friends...), a name or a place (a capitalised
    word inside the sentence), a date or time, or a number, or speaks in the
    first person. The first line of a reply to a question (the message
    before it ended with one) is kept whatever it says, followed by
    ``(answering "<the question>")``: "They were awestruck." means nothing
    alone. Keeping the line's other statements beside it keeps what
    gives it its sense ("We all made our own pots." after "I took my kids to a
    pottery workshop."): on LoCoMo, one memory per line places more answers
    than one per sentence (``bench/background_memory.py``). Its kind is
    ``preference`` when a statement states one (like, love, prefer, hate,
    favourite, allergic...), ``event`` when one names a date or time, else
    ``fact``; its importance grows with the signals of its most specific
    statement; its time (``when``) is the date a statement names when it is
    absolute, else the excerpt's ``said_on`` (after the relative date named).
    A transcript's leading ``"[stamp] "`` is dropped and its ``"Speaker: "``
    kept (who said it). A sentence that joins statements of their own subject
    ("My name is Ann, I live in Porto and I work at Acme.") gives each as its
    own memory (``clauses``). Facts, not payloads (``memory.background.payload``):
    the lines of a fenced block, code, logs, traces, table rows and prompts
    give nothing, and a message gives at most ``MAX_PER_TURN`` memories
    (``MAX_PER_MESSAGE`` when it is mostly pasted material or a long list),
    its most important. A statement that updates or contradicts one of the
    ``existing`` memories (``memory.background.changes``: moved, changed
    job, no longer likes, a new number for the same thing) supersedes it.
    Needs no model and no network; the same line twice in an excerpt is one
    candidate.
    """

    roles: tuple[str, ...] | None = None

    @property
    def name(self) -> str:
        return "offline"

    async def extract(self, excerpt: Excerpt) -> list[Candidate]:
        # Sentence splitting is CPU work: off the event loop the agent streams on.
        return await asyncio.to_thread(self.extract_now, excerpt)

    def extract_now(self, excerpt: Excerpt) -> list[Candidate]:
        """``extract`` without a thread (for batch use)."""
        seen: set[str] = set()
        out: list[Candidate] = []
        replaced: set[str] = set()
        previous = excerpt.before
        heard = [m for m in (excerpt.before,) if m is not None] + [m for _, m in excerpt.messages]
        everyone = self.roles is None and between_people(heard)
        roles = self.roles or ("user",)
        for seq, message in excerpt.messages:
            asked, previous = question_of(previous), message
            if not everyone and message.role not in roles:
                continue
            for candidate in sentence_candidates(message.text, seq, excerpt.said_on, asked):
                key = dedupe_key(candidate.text)
                if key not in seen:
                    seen.add(key)
                    out.append(_newer(candidate, excerpt.existing, replaced))
        return out


def _newer(candidate: Candidate, existing: Sequence[Memory], replaced: set[str]) -> Candidate:
    """``candidate`` as the supersession of the first active memory shown that
    it updates or contradicts (``changes.replaces``), once each."""
    for memory in existing:
        if memory.status != "active" or memory.id in replaced:
            continue
        if dedupe_key(memory.text) != dedupe_key(candidate.text) and replaces(
            candidate.text, memory.text
        ):
            replaced.add(memory.id)
            return dataclasses.replace(candidate, action="supersede", target=memory.id)
    return candidate


def between_people(messages: Sequence[ChatMessage]) -> bool:
    """Whether ``messages`` are a conversation between people (see ``OfflineExtractor``)."""
    roles: dict[str, str] = {}
    for message in messages:
        if message.role == "tool" or message.tool_calls:
            return False  # an agent at work
        text = message.text.strip()
        if not text or message.role == "system":
            continue
        speaker = _SPEAKER.match(_STAMP.sub("", text.splitlines()[0].strip()))
        if speaker is None or roles.setdefault(speaker.group(1), message.role) != message.role:
            return False
    return len(roles) >= 2


def question_of(message: ChatMessage | None) -> str | None:
    """The question ``message`` ends with (its last sentence, when it asks one)."""
    if message is None or not message.text.strip():
        return None
    last = segment("en", _speaker_free(message.text.strip().splitlines()[-1]))
    sentence = list(last)[-1].strip() if last else ""
    return sentence if sentence.endswith("?") and len(sentence.split()) >= 3 else None


def _speaker_free(line: str) -> str:
    line = _STAMP.sub("", line.strip())
    speaker = _SPEAKER.match(line)
    return line[speaker.end() :] if speaker else line


def sentence_candidates(
    text: str, seq: int | None = None, said_on: str | None = None, asked: str | None = None
) -> list[Candidate]:
    """What the offline extractor keeps of one message (see ``OfflineExtractor``);
    ``asked``: the question the message answers (the one before it ended with)."""
    out: list[Candidate] = []
    listed: set[int] = set()  # of ``out``: said as a list item (kept last when bounded)
    lines = text.splitlines()
    material = payload_lines(lines)
    for index, line in enumerate(lines):
        if index in material:
            continue
        found = _line_candidates(line, seq, said_on, asked if index == 0 else None)
        if list_item(line):
            listed.update(range(len(out), len(out) + len(found)))
        out.extend(found)
    return bounded(out, MAX_PER_MESSAGE if is_payload(lines) else MAX_PER_TURN, listed)


def _line_candidates(
    line: str, seq: int | None, said_on: str | None, asked: str | None
) -> list[Candidate]:
    out: list[Candidate] = []
    line = _STAMP.sub("", without_marker(line.strip()))
    speaker = _SPEAKER.match(line)
    label = f"{speaker.group(1)}: " if speaker else ""
    line = line[speaker.end() :] if speaker else line
    if not line:
        return out
    sentences = dict.fromkeys(s.strip() for s in segment("en", line))
    joined = {s: parts for s in sentences if len(parts := clauses(s)) > 1}
    for parts in joined.values():
        for part in parts:
            alone = _candidate(part, seq)
            if alone is not None and alone.importance > 0:
                when = when_said(alone.when, said_on)
                out.append(dataclasses.replace(alone, text=label + part, when=when))
    kept = [c for c in (_candidate(s, seq) for s in sentences if s not in joined) if c]
    signalled = [c for c in kept if c.importance > 0]
    answers = asked if kept else None
    if not signalled and answers is None:
        return out
    best = max(signalled or kept, key=lambda c: c.importance)
    dated = next((c.when for c in kept if c.when is not None), None)
    kinds = {c.kind for c in signalled}
    kind: Kind = "preference" if "preference" in kinds else "event" if dated else "fact"
    out.append(
        Candidate(
            kind=kind,
            text=label
            + " ".join(c.text for c in kept)
            + (f' (answering "{answers}")' if answers else ""),
            when=when_said(dated, said_on),
            importance=max(best.importance, 0.35),
            first_seq=seq,
            last_seq=seq,
        )
    )
    return out


def bounded(candidates: list[Candidate], most: int, listed: set[int]) -> list[Candidate]:
    """The ``most`` most important of ``candidates``, in their order; those
    said in prose before those said as ``listed`` items (the prose around a
    pasted list says what it is)."""
    if len(candidates) <= most:
        return candidates
    order = sorted(range(len(candidates)), key=lambda i: (i in listed, -candidates[i].importance))
    return [candidates[i] for i in sorted(order[:most])]


def clauses(sentence: str) -> list[str]:
    """The statements a sentence joins, each its own sentence ("My name is Ann,
    I live in Porto and I have two cats." gives three), or ``[sentence]`` when
    it joins none: a part after a comma, "and" or "but" counts when it opens
    with its own subject (I, we, "my sister is..."), and every part has three
    words or more."""
    parts = [p.strip(" ,;") for p in _JOIN.split(sentence)]
    if len(parts) < 2 or any(len(p.split()) < 3 for p in parts):
        return [sentence]
    if not all(_CLAUSE_SUBJECT.match(p) for p in parts[1:]):
        return [sentence]
    end = sentence[-1] if sentence[-1] in ".!" else "."
    return [p[0].upper() + p[1:].rstrip(".!") + end for p in parts]


def when_said(named: str | None, said_on: str | None) -> str | None:
    """A memory's time: the date its sentence names when that is absolute (has
    a year), else the day it was said, after the relative date it names
    (``"yesterday, said 8 May, 2023"``)."""
    if named is not None and (said_on is None or _YEAR.search(named)):
        return named
    if said_on is None:
        return None
    return f"{named}, said {said_on}" if named else said_on


def _candidate(sentence: str, seq: int | None) -> Candidate | None:
    """The statement ``sentence`` is, or ``None``; importance 0: not specific
    (kept only beside a specific one)."""
    words = sentence.split()
    if not MIN_WORDS <= len(words) <= MAX_WORDS or sentence.endswith("?"):
        return None
    if _REQUEST.search(sentence) or instruction_reason(sentence) is not None:
        return None
    if _CHATTER.match(sentence):
        return None
    content = [w for w in _WORDS.findall(sentence.lower()) if w not in _NOT_CONTENT]
    if len(content) < MIN_CONTENT_WORDS:
        return None
    preference = bool(_PREFERENCE.search(sentence))
    date = _DATE.search(sentence)
    specific = [
        bool(_PEOPLE.search(sentence)),
        bool(_PROPER.search(sentence)),
        date is not None,
        bool(_NUMBER.search(sentence)),
    ]
    personal = [preference, bool(_SELF.search(sentence))]
    found = sum(specific) + sum(personal)
    signalled = any(specific) or bool(_FIRST_PERSON.search(sentence))
    kind: Kind = "preference" if preference else "event" if date is not None else "fact"
    return Candidate(
        kind=kind,
        text=sentence,
        when=date.group(0) if date is not None else None,
        importance=min(1.0, 0.35 + 0.15 * found) if signalled else 0.0,
        first_seq=seq,
        last_seq=seq,
    )


# -- the model extractor -------------------------------------------------------

EXTRACTION_PROMPT = """You keep a long-term memory of the user across conversations.
From the NEW MESSAGES, extract what will still matter in a later conversation:
facts about the user (who they are, people, places, work, things they own,
numbers), their preferences, and events with their time. One self-contained
sentence each, in the user's words where possible. Ignore small talk and what
the assistant said unless the user confirmed it.
Compare each with the EXISTING MEMORIES and choose an action:
"add" (new), "update" (refines memory <target>), "supersede" (memory <target>
is no longer true and this replaces it), "none" (already remembered).
Reply with JSON only, no prose:
{"memories": [{"kind": "fact" | "preference" | "event", "text": "...",
  "when": "<date or time as said, or null>", "importance": <0.0-1.0>,
  "action": "add" | "update" | "supersede" | "none", "target": "<id or null>"}]}
Reply {"memories": []} when nothing is worth remembering."""

_FENCE = re.compile(r"^\s*```(?:json)?\s*|\s*```\s*$")


@dataclass(frozen=True, slots=True)
class ModelExtractor:
    """Asks ``model`` through ``client`` (``EXTRACTION_PROMPT``) and reads its JSON.

    Raises ``ExtractionError`` when the call fails or times out
    (``timeout_s``), when the reply did not end normally, or when it is not a
    JSON object with a ``memories`` list. Items that do not fit (an unknown
    kind or action, no text, an update or supersede whose ``target`` is not
    one of the existing memories shown) are left out, with a warning in the
    ``memory.background`` logger.
    """

    client: ChatClient
    model: str
    max_tokens: int = 800
    timeout_s: float = 60.0

    @property
    def name(self) -> str:
        return f"model:{self.model}"

    async def extract(self, excerpt: Excerpt) -> list[Candidate]:
        request = [
            ChatMessage(role="system", content=EXTRACTION_PROMPT),
            ChatMessage.user(render_excerpt(excerpt)),
        ]
        try:
            completion = await asyncio.wait_for(
                self.client.create(model=self.model, messages=request, max_tokens=self.max_tokens),
                timeout=self.timeout_s,
            )
        except TimeoutError as exc:
            raise ExtractionError(
                f"the extraction model did not answer within {self.timeout_s:g} s"
            ) from exc
        except Exception as exc:  # any provider failure: recorded, the turn is unaffected
            raise ExtractionError(f"the extraction model call failed: {exc}") from exc
        if not completion.ended_normally:
            raise ExtractionError(f"the extraction reply ended with {completion.finish_reason!r}")
        candidates, skipped = parse_reply(completion.message.text, excerpt)
        if skipped:
            logger.warning("the extraction reply had %d unusable items: left out", skipped)
        return candidates


def render_excerpt(excerpt: Excerpt) -> str:
    """The model's user message: the existing memories with their ids, then the new messages."""
    existing = "\n".join(f"- [{m.id}] ({m.kind}) {m.text}" for m in excerpt.existing) or "(none)"
    said_on = f"\n\nSAID ON: {excerpt.said_on}" if excerpt.said_on else ""
    said = "\n".join(
        f"[{seq}] {message.role}: {message.text}"
        for seq, message in excerpt.messages
        if message.text.strip()
    )
    return f"EXISTING MEMORIES:\n{existing}{said_on}\n\nNEW MESSAGES:\n{said}"


def parse_reply(text: str, excerpt: Excerpt) -> tuple[list[Candidate], int]:
    """The candidates of a model reply and how many items were left out.
    Raises ``ExtractionError`` when the reply is not ``{"memories": [...]}``."""
    body = _FENCE.sub("", text.strip())
    start, end = body.find("{"), body.rfind("}")
    try:
        data = orjson.loads(body[start : end + 1]) if start != -1 and end > start else None
    except orjson.JSONDecodeError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("memories"), list):
        # Described, never quoted: a reply that is not JSON is most often the
        # conversation itself (an echo), and the error is shown to operators.
        shape = "not JSON" if data is None else f"JSON without a list under {'memories'!r}"
        raise ExtractionError(
            f'the extraction reply is not {{"memories": [...]}}: {len(text):,} characters, {shape}'
        )
    known = {m.id for m in excerpt.existing}
    out: list[Candidate] = []
    skipped = 0
    for item in data["memories"]:
        candidate = _item(item, known, excerpt)
        if candidate is None:
            skipped += 1
        else:
            out.append(candidate)
    return out, skipped


def _item(item: object, known: set[str], excerpt: Excerpt) -> Candidate | None:
    if not isinstance(item, dict):
        return None
    kind, text, action = item.get("kind"), item.get("text"), item.get("action", "add")
    target, when, importance = item.get("target"), item.get("when"), item.get("importance", 0.5)
    if kind not in KINDS or action not in ACTIONS or not isinstance(text, str) or not text.strip():
        return None
    if action in ("update", "supersede") and target not in known:
        return None
    if action == "none" and target not in known:
        action = "add"  # "already known" of nothing shown: keep it rather than lose it
    if isinstance(importance, bool) or not isinstance(importance, int | float):
        importance = 0.5
    return Candidate(
        kind=kind,
        text=text.strip(),
        action=action,
        target=target if isinstance(target, str) else None,
        when=when if isinstance(when, str) and when.strip() else None,
        importance=min(1.0, max(0.0, float(importance))),
        first_seq=excerpt.first_seq,
        last_seq=excerpt.last_seq,
    )
