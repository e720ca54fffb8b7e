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
from .types import KINDS, Kind, Memory, dedupe_key

logger = logging.getLogger("memory.background")
Action = Literal["add", "update", "supersede", "none"]
ACTIONS: tuple[Action, ...] = ("add", "update", "supersede", "none")


@dataclass(frozen=True, slots=True)
class Excerpt:
    """What an extractor reads: ``messages`` as ``(seq, message)`` in log order,
    the session they belong to, and ``existing``: the scope's active memories
    most related to them (what an ``update`` or ``supersede`` may target)."""

    session_id: str | None
    messages: Sequence[tuple[int, ChatMessage]]
    existing: Sequence[Memory] = ()

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

_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|me|mine|myself|we|our|us)\b", re.I)
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
    rf"\b(?:(?:{_MONTHS})\b|(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)\b|"
    r"(?:yesterday|today|tomorrow|tonight|last (?:week|month|year|weekend|night)|"
    r"next (?:week|month|year|weekend)|ago)\b|(?:19|20)\d\d\b|\d{1,2}/\d{1,2}(?:/\d{2,4})?)",
)
_NUMBER = re.compile(r"\d")
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
_SPEAKER = re.compile(r"^(?:\[[^\]]{1,64}\]\s*)?[A-Z][\w .'-]{0,40}:\s+")
MIN_WORDS, MAX_WORDS = 4, 60


@dataclass(frozen=True, slots=True)
class OfflineExtractor:
    """Whole sentences the user said about themselves, verbatim.

    A sentence of a message whose role is in ``roles`` (default: the user's)
    is kept when it is a statement (not a question), of 4 to 60 words, in
    the first person, and says at least one of: a preference (like, love,
    prefer, hate, favourite, allergic...), something about the speaker (I am,
    I work, I live, I have...), people (my wife, my friends...), a place or a
    name (a capitalised word inside the sentence), a date or time, a number.
    Its kind is ``preference`` for a preference, ``event`` for one with a
    date or time, else ``fact``; its importance grows with the number of those
    signals. A transcript's leading ``"[stamp] Speaker: "`` is not part of the
    sentence. Needs no model and no network; the same sentence twice in an
    excerpt is one candidate.
    """

    roles: tuple[str, ...] = ("user",)

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
        for seq, message in excerpt.messages:
            if message.role not in self.roles:
                continue
            for candidate in sentence_candidates(message.text, seq):
                key = dedupe_key(candidate.text)
                if key not in seen:
                    seen.add(key)
                    out.append(candidate)
        return out


def sentence_candidates(text: str, seq: int | None = None) -> list[Candidate]:
    """The sentences of ``text`` the offline extractor keeps (see ``OfflineExtractor``)."""
    out = []
    for line in text.splitlines():
        line = _SPEAKER.sub("", line.strip())
        if not line:
            continue
        for sentence in segment("en", line):
            candidate = _candidate(sentence.strip(), seq)
            if candidate is not None:
                out.append(candidate)
    return out


def _candidate(sentence: str, seq: int | None) -> Candidate | None:
    words = sentence.split()
    if not MIN_WORDS <= len(words) <= MAX_WORDS or sentence.endswith("?"):
        return None
    if not _FIRST_PERSON.search(sentence):
        return None
    preference = bool(_PREFERENCE.search(sentence))
    date = _DATE.search(sentence)
    signals = [
        preference,
        bool(_SELF.search(sentence)),
        bool(_PEOPLE.search(sentence)),
        bool(_PROPER.search(sentence)),
        date is not None,
        bool(_NUMBER.search(sentence)),
    ]
    found = sum(signals)
    if not found:
        return None
    kind: Kind = "preference" if preference else "event" if date is not None else "fact"
    return Candidate(
        kind=kind,
        text=sentence,
        when=date.group(0) if date is not None else None,
        importance=min(1.0, 0.35 + 0.15 * found),
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
    said = "\n".join(
        f"[{seq}] {message.role}: {message.text}"
        for seq, message in excerpt.messages
        if message.text.strip()
    )
    return f"EXISTING MEMORIES:\n{existing}\n\nNEW MESSAGES:\n{said}"


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
        raise ExtractionError(f'the extraction reply is not {{"memories": [...]}}: {text[:200]!r}')
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
