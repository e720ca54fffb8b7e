"""The ledger: what a summary carries verbatim from one compaction to the next.

A summary is rewritten at every compaction, and every rewrite can lose the
exact string a user asked to keep: a booking reference, a passport number, "never
book red-eye flights". The ledger is the part that is not rewritten. Each
compaction of the library's own compactors (offline and model; a user's
``compact_fn`` owns its summary, and carries only the operator's pins) takes
the ledger of the compaction in force, adds what the folded messages name, and
carries every entry forward verbatim until a later message supersedes it:

- **instructions**: the user's sentences that tell the agent how to behave or
  what to keep ("remember", "always", "never", "don't", "make sure", "I
  prefer", "from now on"...), quoted whole;
- **identifiers** (ids, codes, e-mails, URLs, paths: ``memory.compaction.identifiers``)
  and phone numbers that the user, the assistant, its tool calls or a tool
  result named, and the
  **numbers, amounts, dates and names** the user named with words that label
  them ("my dentist Dr Alvarez", "check-in: 12 May") or in a message asking to
  remember them, and in a task agent's session (tool calls) the user's bare
  numbers, amounts and dates too (a bare name, and in a conversation between
  people any bare value, is the narrative's to quote, dated and attributed); of the
  others' only identifiers that are not bare numbers. Each entry keeps its label
  ("passport number", "booking reference") when the text has one; a
  transcript's date stamp is not an entry. A bare number the user gives
  without a label ("What is 1234 times 5678?": a question's operands, not
  labelled by "what" or "times") is one of the user's numbers, not an id.
  Source code names only its paths and URLs (a tool result that reads as
  code, a call's argument that is a body of code: ``memory.compaction.code``):
  its other names are the program's vocabulary. Call ids are bookkeeping and
  never carried. Said again later, an entry keeps
  its place and takes the highest rank of its mentions.

A later message of the user supersedes an entry when it gives the same label another value
of the same kind and says it is a change ("actually", "instead", "new",
"changed", "correction"...), or the label is specific (two words or more, as
"passport number"): the new entry replaces the old, and the summary says
``(corrected from OLD, #seq)``.

**Budget and what gives way.** The ledger has ``LEDGER_SHARE`` of the summary's
budget (the narrative gets the rest plus whatever the ledger leaves unused).
When its entries do not all fit, they give way in this order, the oldest of a
rank first: identifiers found only in tool results; then those the assistant
named; then the user's names, numbers and dates; then the user's identifiers;
instructions, and identifiers from a message that asked to remember them, last.
What gives way is recorded on the compaction record (``ledger_given_way``),
never dropped silently; an entry that gave way is not carried further.

**The operator's word** (``memory.compaction.pins``): an entry ``pinned_by``
the instructions of an explicit compaction, or added by an operator's
correction of a summary, never gives way, whatever the budget, and is listed
unless the narrative holds it exactly, until the operator unpins it.

In the summary's text the ledger is one block after the narrative, under
``LEDGER_HEADING``, listing the entries the narrative does not already contain
word for word (instructions are always listed). The compaction record keeps
the whole ledger (``ledger``), so the next compaction reads it from there, not
from the text.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..messages import ChatMessage
from .code import CODE_KINDS, reads_as_code, without_bodies
from .identifiers import Identifier, find_identifiers, normalise, worth_keeping
from .offline.scan import PHATIC, STOPWORDS

LEDGER_HEADING = "Kept verbatim from earlier in the conversation:"
LEDGER_SHARE = 0.4
"""Share of a summary's token budget the ledger may take."""
SCAN_CHARS = 20_000
"""Characters of one message read for entries (a huge tool result's head)."""
IDENTIFIERS_CACHE = 1_024
"""Texts whose identifiers are kept (``_identifiers_of``): at most 20 MB of text."""

INSTRUCTION = "instruction"
PHRASE = "phrase"
"""An entry's ``kind`` for a quoted phrase the operator pinned."""
# Ranks: what gives way first has the lowest.
TOOL_RANK, ASSISTANT_RANK, USER_DETAIL_RANK, USER_ID_RANK, PINNED_RANK = range(5)
_USER_ID_KINDS = frozenset({"id", "email", "phone", "url", "path", "version"})

# An instruction is said to the agent: an imperative opening the sentence, or
# the user asking for something of "you" (not "I always loved painting").
_INSTRUCTION_CUE = re.compile(
    r"^(?:please\s+)?(?:always|never|don'?t|do not|remember|make sure|be sure|keep|avoid|only|"
    r"use|stop|note|from now on|going forward)\b"
    r"|\b(?:you|the agent|the assistant)\s+(?:should|must|shall|need to|have to|may not|"
    r"can'?t|cannot|mustn'?t|shouldn'?t)\b"
    r"|\bi(?:'d| would)?\s+(?:prefer|want you to|like you to|need you to|ask you to)\b"
    r"|\bplease\s+(?:always|never|don'?t|do not|remember|keep|make sure|use|avoid|only)\b",
    re.IGNORECASE,
)
INSTRUCTION_MAX_CHARS = 300
"""A longer sentence is not carried as an instruction (it is narrative)."""
_REMEMBER = re.compile(
    r"\b(?:remember|keep (?:track|a note)|note (?:down|that)|don'?t forget)\b", re.I
)
_CORRECTION_CUE = re.compile(
    r"\b(?:actually|instead|correction|corrected|change[sd]?|changing|updated?|new|now|"
    r"not\b.*\bbut|wrong|mistake|sorry|rather)\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
_LABEL_STOP_WORDS = """my the a an is are was were be it its our your his her their this that these
    those of for to and or with as at on in by i you he she we they me him us them
    what which who whom whose where when why how much many
    times plus minus over divided multiplied x than"""
# A label names what a value is: never a function word, an adverb or a
# pleasantry ("only $10", "great: Gatsby" are no labels).
_NO_CONTENT = STOPWORDS | PHATIC
_LABEL_NOUNS = frozenset({"day", "time", "meeting"})  # stop words that do name values
_LABEL_STOP = frozenset(_LABEL_STOP_WORDS.split()) | (_NO_CONTENT - _LABEL_NOUNS)
_COPULAS = frozenset({"is", "are", "was", "were", "be", "being"})
_LABEL_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")
# ``"flight_number": "`` just before a value: its key says what it is.
_JSON_KEY = re.compile(r'"([A-Za-z][A-Za-z_ -]{0,40})"\s*:\s*"?$')


class _Counter(Protocol):
    def count(self, text: str) -> int: ...


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One thing carried verbatim: its ``kind`` (``"instruction"`` or an
    identifier kind), ``value`` (the text exactly as written), ``label`` (the
    words that named it, lower case; ``""`` when none), the ``seq`` and
    ``role`` of the message it came from (``"operator"``: none, the operator
    named it), its ``rank`` (see the module), for a correction the value it
    ``replaces``, and for the operator's word ``pinned_by`` (``"instructions"``
    or ``"correction"``) and ``pinned_at`` (the compaction's number)."""

    kind: str
    value: str
    label: str
    seq: int | None
    role: str
    rank: int
    replaces: str | None = None
    pinned_by: str = ""
    pinned_at: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "value": self.value,
            "seq": self.seq,
            "role": self.role,
            "rank": self.rank,
        }
        if self.label:
            out["label"] = self.label
        if self.replaces is not None:
            out["replaces"] = self.replaces
        if self.pinned_by:
            out["pinned_by"] = self.pinned_by
            out["pinned_at"] = self.pinned_at
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LedgerEntry | None:
        """The entry ``data`` holds, or ``None`` for anything malformed."""
        kind, value, rank = data.get("kind"), data.get("value"), data.get("rank")
        seq, role = data.get("seq"), data.get("role")
        if not (isinstance(kind, str) and isinstance(value, str) and value):
            return None
        label = data.get("label", "")
        replaces = data.get("replaces")
        pinned_by, pinned_at = data.get("pinned_by"), data.get("pinned_at")
        return cls(
            kind=kind,
            value=value,
            label=label if isinstance(label, str) else "",
            seq=seq if isinstance(seq, int) and not isinstance(seq, bool) else None,
            role=role if isinstance(role, str) else "user",
            rank=rank if isinstance(rank, int) and not isinstance(rank, bool) else TOOL_RANK,
            replaces=replaces if isinstance(replaces, str) else None,
            pinned_by=pinned_by if isinstance(pinned_by, str) else "",
            pinned_at=pinned_at if isinstance(pinned_at, int) and pinned_at is not True else None,
        )

    @property
    def key(self) -> str:
        return f"{self.kind}:{normalise(self.value)}"

    @property
    def pinned(self) -> bool:
        """Whether it is the operator's word (see the module)."""
        return bool(self.pinned_by)

    def line(self) -> str:
        """How the entry reads in the summary."""
        if self.kind in (INSTRUCTION, PHRASE):
            text = f'"{self.value}"'
        else:
            text = f"{self.label}: {self.value}" if self.label else self.value
        if self.replaces is not None:
            where = f", #{self.seq}" if self.seq is not None else ""
            text += f" (corrected from {self.replaces}{where})"
        return text


@dataclass(frozen=True, slots=True)
class Ledger:
    """The entries carried, oldest first."""

    entries: tuple[LedgerEntry, ...] = ()

    @classmethod
    def from_record(cls, data: object) -> Ledger:
        """The ledger a compaction record's ``ledger`` field holds (``[]``/absent: empty)."""
        if not isinstance(data, list):
            return cls()
        entries = (LedgerEntry.from_dict(d) for d in data if isinstance(d, Mapping))
        return cls(tuple(e for e in entries if e is not None))

    def to_record(self) -> list[dict[str, Any]]:
        return [entry.to_dict() for entry in self.entries]

    def updated(
        self, messages: Sequence[tuple[int | None, ChatMessage]], instructions: str | None = None
    ) -> Ledger:
        """This ledger with what ``messages`` (``(seq, message)`` pairs, in
        order) name, superseded entries replaced. ``instructions`` (of
        ``compact(instructions=...)``) pin the entries whose label or value
        shares a word with them."""
        entries = list(self.entries)
        index = {entry.key: i for i, entry in enumerate(entries)}
        # A task agent's session (tool calls) carries the user's bare dates and
        # figures too; a conversation between people quotes them in its
        # narrative, dated and attributed, so only labelled ones are carried.
        task = any(m.role == "tool" or m.tool_calls for _, m in messages)
        for seq, message in messages:
            for entry in _entries_of(seq, message, task):
                if entry.key in index:
                    # Said again: it stays where it was first said, ranked as
                    # the weightiest of its mentions (the user naming what a
                    # tool returned).
                    at = index[entry.key]
                    if entry.rank > entries[at].rank:
                        entries[at] = replace(entries[at], rank=entry.rank)
                    continue
                old = _superseded(entries, entry, _text(message))
                if old is not None:
                    entry = replace(entry, replaces=entries[old].value)
                    del index[entries[old].key]
                    entries[old] = entry
                    index[entry.key] = old
                else:
                    index[entry.key] = len(entries)
                    entries.append(entry)
        if instructions:
            terms = {w.casefold() for w in _LABEL_WORD.findall(instructions) if len(w) > 3}
            entries = [replace(e, rank=PINNED_RANK) if _mentions(e, terms) else e for e in entries]
        return Ledger(tuple(entries))

    def fit(self, budget_tokens: int, counter: _Counter) -> tuple[Ledger, list[LedgerEntry]]:
        """The entries that fit ``budget_tokens`` (as ``render`` writes them all),
        and those that gave way, in the order of the module's rule. Pinned
        entries never give way, even past the budget."""
        costs = [counter.count(entry.line()) + 2 for entry in self.entries]
        used = counter.count(LEDGER_HEADING) + 2 + sum(costs)
        order = sorted(range(len(self.entries)), key=lambda i: (self.entries[i].rank, i))
        dropped: set[int] = set()
        for i in order:
            if used <= budget_tokens:
                break
            if self.entries[i].pinned:
                continue
            dropped.add(i)
            used -= costs[i]
        if len(dropped) == len(self.entries):
            return Ledger(), list(self.entries)
        kept = tuple(e for i, e in enumerate(self.entries) if i not in dropped)
        return Ledger(kept), [e for i, e in enumerate(self.entries) if i in dropped]

    def keeping_present(
        self, given_way: Sequence[LedgerEntry], narrative: str
    ) -> tuple[Ledger, list[LedgerEntry]]:
        """This ledger with the entries of ``given_way`` that ``narrative``
        quotes anyway (they cost nothing there, so they stay carried), and
        those that are really gone."""
        haystack = normalise(narrative)
        present = [e for e in given_way if normalise(e.value) in haystack]
        gone = [e for e in given_way if e not in present]
        return Ledger((*self.entries, *present)), gone

    def render(self, narrative: str = "") -> str:
        """The ledger's block for a summary whose narrative is ``narrative``:
        the entries the narrative lacks word for word (instructions always; a
        pinned entry unless the narrative holds it exactly, case and all);
        ``""`` when there are none."""
        haystack = normalise(narrative)
        lines = [
            entry.line()
            for entry in self.entries
            if entry.kind == INSTRUCTION
            or entry.replaces is not None
            or (entry.value not in narrative if entry.pinned else False)
            or normalise(entry.value) not in haystack
        ]
        if not lines:
            return ""
        return "\n".join([LEDGER_HEADING, *(f"- {line}" for line in lines)])


def compose(narrative: str, ledger: Ledger) -> str:
    """A summary's text: the narrative, then the ledger's block."""
    block = ledger.render(narrative)
    return f"{narrative.rstrip()}\n\n{block}" if block else narrative


def narrative_of(summary: str | None, ledger: Ledger | None = None) -> str | None:
    """The part of a summary before its ledger block (what a summariser folds in
    again; the ledger itself is carried by the record). With ``ledger``, the
    lines of the block that are none of its entries (an operator's correction
    wrote them there) stay with the narrative."""
    if summary is None:
        return None
    head, found, block = summary.partition(f"\n\n{LEDGER_HEADING}")
    if not found:
        return summary
    if ledger is None:
        return head
    listed = {f"- {entry.line()}" for entry in ledger.entries}
    others = [line for line in block.splitlines() if line.strip() and line not in listed]
    return "\n".join([head, *others]) if others else head


# -- finding entries --------------------------------------------------------------------


# "[1:56 pm on 8 May, 2023] text": a transcript's date stamp, not something said.
_STAMP = re.compile(r"\A\s*\[[^\[\]\n]{4,60}\]\s*")


def _text(message: ChatMessage) -> str:
    text = message.text
    text = text if len(text) <= SCAN_CHARS else text[:SCAN_CHARS]
    return _STAMP.sub("", text, count=1)


def _entries_of(seq: int | None, message: ChatMessage, task: bool) -> Iterable[LedgerEntry]:
    role = message.role
    text = _text(message)
    # Call ids are the transcript's bookkeeping, not something to keep.
    call_ids = frozenset((*(c.id for c in message.tool_calls), *message.tool_call_ids))
    if role == "user":
        remember = bool(_REMEMBER.search(text))
        for sentence in _SENTENCE.findall(text):
            sentence = sentence.strip()
            if (
                _INSTRUCTION_CUE.search(sentence)
                and len(sentence.split()) >= 4
                and len(sentence) <= INSTRUCTION_MAX_CHARS
                and _says_something(sentence)
            ):
                yield LedgerEntry(INSTRUCTION, sentence, "", seq, role, PINNED_RANK)
        for identifier, label in _labelled(text):
            if remember:
                rank = PINNED_RANK
            elif identifier.kind in _USER_ID_KINDS and (label or not identifier.value.isdigit()):
                rank = USER_ID_RANK
            elif label or identifier.kind in _USER_ID_KINDS or (task and identifier.kind != "name"):
                rank = USER_DETAIL_RANK  # a bare number among them: it gives way before ids
            else:
                # A bare name (or, in a conversation, date or figure) says little
                # on its own: the narrative quotes it, dated and attributed.
                continue
            yield LedgerEntry(identifier.kind, identifier.value, label, seq, role, rank)
        return
    if role == "assistant":
        for identifier, label in _labelled(text):
            # An assistant's prices, counts, times and bare numbers are mostly
            # quoted tool data; its names and dates the narrative's to quote.
            if _carried_id(identifier):
                yield LedgerEntry(
                    identifier.kind, identifier.value, label, seq, role, ASSISTANT_RANK
                )
        for call in message.tool_calls:
            arguments = without_bodies(call.arguments[:SCAN_CHARS])
            for identifier, label in _labelled(arguments, call_ids):
                if _carried_id(identifier):
                    yield LedgerEntry(
                        identifier.kind, identifier.value, label, seq, role, ASSISTANT_RANK
                    )
        return
    if role == "tool":
        code = reads_as_code(text)
        for identifier, label in _labelled(text, call_ids):
            if _carried_id(identifier) and (not code or identifier.kind in CODE_KINDS):
                yield LedgerEntry(identifier.kind, identifier.value, label, seq, role, TOOL_RANK)


_CUE_WORDS_TEXT = """always never don't dont do not remember make sure be keep avoid only use
    stop note from now on going forward please prefer want like need ask you should must"""
_CUE_WORDS = frozenset(_CUE_WORDS_TEXT.split())
INSTRUCTION_MIN_CONTENT = 2
"""Content words an instruction needs besides its cue ("Keep up the good work!" has one)."""


def _says_something(sentence: str) -> bool:
    """Whether a sentence with an instruction's cue asks for something: it
    names an identifier, or holds ``INSTRUCTION_MIN_CONTENT`` words that are
    neither the cue's, function words nor pleasantries."""
    if any(i.kind not in ("name", "time") for i in _identifiers_of(sentence)):
        return True
    words = [w.casefold().strip("'") for w in _LABEL_WORD.findall(sentence)]
    content = [w for w in words if w not in _CUE_WORDS and w not in _NO_CONTENT]
    return len(content) >= INSTRUCTION_MIN_CONTENT


def _carried_id(identifier: Identifier) -> bool:
    """Whether an identifier the assistant or a tool named is carried: ids,
    codes, addresses and paths, but not bare figures (prices, counts, lines:
    ``384.0``), schema words or call ids (``identifiers.worth_keeping``)."""
    return (
        identifier.kind in _USER_ID_KINDS
        and not identifier.value.isdigit()
        and worth_keeping(identifier)
    )


@functools.lru_cache(maxsize=IDENTIFIERS_CACHE)
def _identifiers_of(text: str) -> tuple[Identifier, ...]:
    """``find_identifiers``, kept for the last texts scanned (each at most
    ``SCAN_CHARS``): the same tool result or request comes back in many
    sessions of one file (half the scans of the tau-bench demo's import)."""
    return tuple(find_identifiers(text))


def _labelled(text: str, skip: frozenset[str] = frozenset()) -> Iterable[tuple[Any, str]]:
    """Each identifier of ``text`` (but those in ``skip``) with the words that label it."""
    for identifier in _identifiers_of(text):
        if identifier.value in skip:
            continue
        at = text.find(identifier.value)
        yield identifier, _label(text[max(0, at - 60) : max(0, at)])


def _label(before: str) -> str:
    """The words just before a value that say what it is, within its clause:
    "my passport number is" -> "passport number", "booking reference:" ->
    "booking reference", a JSON key ``"flight_number": "`` -> "flight
    number"; none across another value or a preposition ("HAT123 for" -> "")."""
    key = _JSON_KEY.search(before)
    if key is not None:
        words = key.group(1).replace("_", " ").replace("-", " ").casefold().split()
        return " ".join(words) if len(words) <= 3 else ""
    # A label is on the value's own line: "registry\n9dd68ea" is a list's lines.
    before = before.rstrip(" \t")
    if before.endswith((":", "=")):
        before = before[:-1]
    clause = re.split(r"[,;.!?()\[\]{}\n\"]", before)[-1]
    words = clause.split()
    while words and words[-1].casefold() in _COPULAS:
        words.pop()
    label: list[str] = []
    for word in reversed(words):
        lowered = word.casefold()
        if lowered in _LABEL_STOP or len(label) == 3 or not _LABEL_WORD.fullmatch(word):
            break
        label.insert(0, lowered)
    return " ".join(label)


def _superseded(entries: list[LedgerEntry], new: LedgerEntry, text: str) -> int | None:
    """The index of the entry ``new`` corrects, if any (see the module)."""
    if new.kind == INSTRUCTION or not new.label or new.role != "user":
        # Only the user corrects: a tool's listing names many values of one key.
        return None
    specific = len(new.label.split()) >= 2
    if not specific and not _CORRECTION_CUE.search(text):
        return None
    for i in range(len(entries) - 1, -1, -1):
        old = entries[i]
        if (
            old.label == new.label
            and old.kind == new.kind
            and old.seq != new.seq
            and old.role == new.role
        ):
            return i
    return None


def _mentions(entry: LedgerEntry, terms: set[str]) -> bool:
    words = {w.casefold() for w in _LABEL_WORD.findall(f"{entry.label} {entry.value}")}
    return bool(words & terms)
