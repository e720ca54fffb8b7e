"""Newer wins: when a statement replaces an earlier one.

A statement makes ``claims``: a subject (the speaker: "I", or the name of a
transcript's ``"Name: "`` label) with an attribute and a value, or its
negation. A new statement ``replaces`` an older one when they make a claim
on the same subject and attribute with another value, or one negates what
the other asserts. The rules are general, not examples:

- where one lives: "I live in / I'm based in / I moved to / I relocated to X",
  negated by "I no longer live in X", "I don't live in X anymore";
- where one works: "I work at / for X", "I joined X", "I now work at X", "I got
  a job at X", negated by "I left X", "I quit X", "I no longer work at X";
- a named attribute: "my <phone number / address / favourite colour /
  boss ...> is Y" (the attributes in ``_ATTRIBUTES``, or any "<noun> number");
- a liking: "I like / love / enjoy / prefer X" against "I no longer like X",
  "I don't like X anymore", "I hate X", "I stopped eating X";
- a new number for the same thing: two short sentences that have or measure
  a quantity ("have", "weigh", "earn", "run"...) in the same words but for
  their numbers ("I have 2 kids" then "I have 3 kids"); an id or a date
  inside a word ("ticket 4-2") is no quantity.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sentencex import segment

from .types import dedupe_key

_SPEAKER = re.compile(r"^([A-Z][\w.'-]{0,20}(?: [A-Z][\w.'-]{0,20}){0,2}):\s+")
_NAME = r"(?P<v>[A-Z][\w'&.-]*(?:\s+(?:of\s+|de\s+|the\s+)?[A-Z][\w'&.-]*)*)"
_ADVERB = r"(?:now |currently |still |actually |just |recently |finally )?"
_RESIDENCE = (
    rf"\bI(?:'m| am| have| 've)? {_ADVERB}(?:live|living|lived|reside|residing|based|settled|"
    rf"moved|moving|relocated|relocating)(?: back)? (?:in|to|at|into) (?:the city of )?{_NAME}",
)
_NOT_RESIDENCE = (
    rf"\bI (?:no longer|don't|do not|can't|cannot) (?:live|reside|stay) (?:in|at) {_NAME}",
    rf"\bI (?:left|moved (?:away )?(?:out of|from)) {_NAME}",
)
_EMPLOYER = (
    rf"\bI(?:'m| am)? {_ADVERB}(?:work|working|employed) (?:at|for|by|with) {_NAME}",
    rf"\bI {_ADVERB}(?:joined|started (?:a new job |a job |working )?at|got (?:a |the )?(?:new )?"
    rf"job (?:at|with)|took (?:a |the )?(?:new )?job (?:at|with)|was hired (?:at|by)) {_NAME}",
)
_NOT_EMPLOYER = (
    rf"\bI (?:no longer|don't|do not) work (?:at|for) {_NAME}",
    rf"\bI (?:left|quit|was laid off from|was fired from|resigned from) (?:my job at )?{_NAME}",
)
_ATTRIBUTES = (
    "name|phone|phone number|number|address|email|email address|age|birthday|salary|rent|"
    "weight|height|car|job|job title|title|role|employer|company|team|school|major|pin|"
    "password|plan|budget|goal|username|city|hometown|doctor|dentist|manager|boss|partner|"
    r"landlord|diet|gym|favou?rite \w+|\w+ number|\w+ address|\w+ name"
)
_MY_ATTRIBUTE = re.compile(
    rf"\b[Mm]y (?P<a>{_ATTRIBUTES}) (?:is|are|has changed to|changed to|was changed to)"
    r" (?:now |actually |still )?(?P<v>[^.,;!?]+)"
)
_OBJECT = (
    r"(?P<v>[\w' -]+?)(?= anymore| any more| these days| at all| now| in | on | at | with | during "
    r"| when | because | for | so much| very much| a lot|[.,;!?]|$)"
)
_LIKES = (
    rf"\bI (?:really |still |now |also |absolutely )?(?:like|love|enjoy|prefer|adore) {_OBJECT}",
)
_NOT_LIKES = (
    r"\bI (?:no longer|don't|do not|didn't|can't|cannot|can no longer|never) (?:really |even )?"
    rf"(?:like|love|enjoy|eat|drink|stand|prefer) {_OBJECT}",
    rf"\bI (?:hate|dislike|detest|stopped (?:liking|eating|drinking|enjoying)) {_OBJECT}",
)
# Per attribute: the patterns that assert a value, and those that negate one.
_RULES: tuple[tuple[str, tuple[re.Pattern[str], ...], tuple[re.Pattern[str], ...]], ...] = tuple(
    (name, tuple(map(re.compile, positive)), tuple(map(re.compile, negative)))
    for name, positive, negative in (
        ("residence", _RESIDENCE, _NOT_RESIDENCE),
        ("employer", _EMPLOYER, _NOT_EMPLOYER),
        ("likes", _LIKES, _NOT_LIKES),
    )
)
_DIGITS = re.compile(r"\d+(?:[.,]\d+)*")
# A quantity: a number standing alone, in a short sentence that has or measures it.
_QUANTITY = re.compile(r"(?<![\w-])\d+(?:[.,]\d+)*(?![\w-])")
_MEASURES = re.compile(
    r"\b(?:have|has|had|am|is|are|was|were|weigh|weighs|earn|earns|make|makes|pay|pays|cost|"
    r"costs|run|runs|owe|owes|turned|turn|turns|sleep|sleeps|drink|drinks|own|owns)\b"
)
QUANTITY_MAX_WORDS = 14
_FILLER = frozenset(["the", "a", "an", "to", "eating", "drinking", "playing", "watching"])
# Words that find the memories a claim's attribute was said with.
_ATTRIBUTE_WORDS = {
    "residence": "live lives living moved based reside relocated",
    "employer": "work works working job joined employed",
}


@dataclass(frozen=True, slots=True)
class Claim:
    """``subject`` says ``attribute`` is ``value`` (``negated``: is not)."""

    subject: str
    attribute: str
    value: str
    negated: bool = False


def claims(text: str) -> list[Claim]:
    """The claims of ``text`` (see the module docstring), in order."""
    speaker = _SPEAKER.match(text)
    subject = speaker.group(1) if speaker else "I"
    body = text[speaker.end() :] if speaker else text
    out: list[Claim] = []
    for sentence in (s.strip() for s in segment("en", body)):
        out.extend(_sentence_claims(subject, sentence))
    return out


def _sentence_claims(subject: str, sentence: str) -> list[Claim]:
    out: list[Claim] = []
    for attribute, positive, negative in _RULES:
        negated: list[tuple[int, int]] = []
        found: list[tuple[str, bool]] = []
        for pattern in negative:
            for match in pattern.finditer(sentence):
                found.append((_value(match.group("v")), True))
                negated.append(match.span())
        for pattern in positive:
            for match in pattern.finditer(sentence):
                if not any(a <= match.start() < b for a, b in negated):
                    found.append((_value(match.group("v")), False))
        for value, no in found:
            if attribute == "likes":  # what is liked is the attribute; yes or no its value
                out.append(Claim(subject, f"likes {value}", "yes", negated=no))
            else:
                out.append(Claim(subject, attribute, value, negated=no))
    for match in _MY_ATTRIBUTE.finditer(sentence):
        out.append(Claim(subject, f"my {match.group('a').lower()}", _value(match.group("v"))))
    numbers = _QUANTITY.findall(sentence)
    words = len(sentence.split())
    if numbers and 3 <= words <= QUANTITY_MAX_WORDS and _MEASURES.search(sentence):
        template = dedupe_key(_DIGITS.sub("#", sentence))
        out.append(Claim(subject, f"number: {template}", " ".join(numbers)))
    return out


def _value(text: str) -> str:
    words = [w for w in dedupe_key(text).split() if w not in _FILLER]
    return " ".join(words[:4])


def replaces(new: str, old: str) -> bool:
    """Whether statement ``new`` updates or contradicts statement ``old``."""
    olds = claims(old)
    for claim in claims(new):
        for before in olds:
            if (claim.subject, claim.attribute) != (before.subject, before.attribute):
                continue
            if claim.negated != before.negated:
                # "I no longer work at Acme" against "I work at Acme" (same
                # value); a liking has no other value.
                if claim.value == before.value:
                    return True
            elif not claim.negated and claim.value != before.value:
                return True
    return False


def related_terms(text: str) -> str:
    """Words that find the memories a statement of ``text`` may replace: those
    of its claims' attributes ("I moved to Lisbon" finds "I live in Porto")."""
    words: list[str] = []
    for claim in claims(text):
        words.append(_ATTRIBUTE_WORDS.get(claim.attribute, claim.attribute))
    return " ".join(words)
