"""The values a long-term store holds: scopes, memories, their provenance and history.

A memory is one sentence-sized statement (a fact, a preference or an event)
kept across sessions for one scope. It is never edited in place: every change
(an update, a supersession, a forget, a restore) appends a ``Version``, and
every session that said it again adds a ``Provenance`` link, so "why is this
remembered" and "what did it say before" always have an answer.
"""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import ConfigurationError

Kind = Literal["fact", "preference", "event"]
KINDS: tuple[Kind, ...] = ("fact", "preference", "event")
Status = Literal["active", "forgotten", "superseded", "flagged"]
STATUSES: tuple[Status, ...] = ("active", "forgotten", "superseded", "flagged")
_PUNCTUATION = str.maketrans("", "", string.punctuation + "\u2018\u2019\u201c\u201d")
_ID_PART = re.compile(r"[A-Za-z0-9_.@:-]{1,128}")


@dataclass(frozen=True, slots=True)
class Scope:
    """Whose memories: a user, an agent, or a user with one agent.

    Memories never cross scopes: a store reads and writes only the memories
    whose scope equals the one given (``Scope(user_id="ann")`` does not see
    ``Scope(user_id="ann", agent_id="support")``). Ids are 1-128 characters of
    letters, digits and ``_.@:-``. Raises ``ConfigurationError`` when both are
    ``None`` or an id is malformed.
    """

    user_id: str | None = None
    agent_id: str | None = None

    def __post_init__(self) -> None:
        if self.user_id is None and self.agent_id is None:
            raise ConfigurationError("a scope needs a user_id, an agent_id or both")
        for name in ("user_id", "agent_id"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, str) and _ID_PART.fullmatch(value)):
                raise ConfigurationError(f"{name} must be 1-128 of [A-Za-z0-9_.@:-], got {value!r}")

    @property
    def key(self) -> str:
        """The scope as one string (``"user=ann;agent=support"``), the stores' column."""
        return f"user={self.user_id or ''};agent={self.agent_id or ''}"

    def to_dict(self) -> dict[str, str]:
        return {k: v for k, v in (("user_id", self.user_id), ("agent_id", self.agent_id)) if v}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scope:
        return cls(user_id=data.get("user_id") or None, agent_id=data.get("agent_id") or None)

    @classmethod
    def from_key(cls, key: str) -> Scope:
        parts = dict(part.split("=", 1) for part in key.split(";"))
        return cls(user_id=parts.get("user") or None, agent_id=parts.get("agent") or None)


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a memory was said: the session, the ``seq`` range of the log's
    messages it came from (``None`` for an operator's edit), who wrote it
    (``"offline"``, ``"model:<name>"``, ``"agent"``, ``"operator:<name>"``) and when
    (ISO-8601 UTC)."""

    session_id: str | None
    first_seq: int | None
    last_seq: int | None
    extractor: str
    ts: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
            "extractor": self.extractor,
            "ts": self.ts,
        }


@dataclass(frozen=True, slots=True)
class Version:
    """One state of a memory, in order (``number`` 1 is its creation): its
    text, kind, status and importance then, what changed it (``action``:
    ``add``, ``update``, ``supersede``, ``forget``, ``restore``), by whom and why."""

    number: int
    text: str
    kind: Kind
    status: Status
    importance: float
    action: str
    actor: str
    reason: str
    ts: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "text": self.text,
            "kind": self.kind,
            "status": self.status,
            "importance": self.importance,
            "action": self.action,
            "actor": self.actor,
            "reason": self.reason,
            "ts": self.ts,
        }


@dataclass(frozen=True, slots=True)
class Memory:
    """A memory as it stands (its newest version), with its provenance links.

    ``when`` is the time the statement is about when one is known (an event's
    date, as said or as the session's date); ``superseded_by`` names the memory
    that replaced it. ``importance`` is in [0, 1].
    """

    id: str
    scope: Scope
    kind: Kind
    text: str
    status: Status
    importance: float
    created_at: str
    updated_at: str
    version: int
    when: str | None = None
    superseded_by: str | None = None
    provenance: tuple[Provenance, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "scope": self.scope.to_dict(),
            "kind": self.kind,
            "text": self.text,
            "status": self.status,
            "importance": self.importance,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "version": self.version,
            "when": self.when,
            "superseded_by": self.superseded_by,
            "provenance": [p.to_dict() for p in self.provenance],
        }


@dataclass(frozen=True, slots=True)
class Hit:
    """A search result: the memory and its score (higher is better; see
    ``memory.background.scoring``)."""

    memory: Memory
    score: float


@dataclass(frozen=True, slots=True)
class Purged:
    """What a purge removed for good: the memory ids and, for each table, the
    rows deleted (``{"memories": 3, "versions": 5, "provenance": 4}``)."""

    memory_ids: tuple[str, ...]
    rows: Mapping[str, int]


def dedupe_key(text: str) -> str:
    """The form two statements share when they say the same thing in the same
    words: lower case, punctuation removed, whitespace collapsed."""
    return " ".join(text.lower().translate(_PUNCTUATION).split())


NEAR_DUPLICATE = 0.8  # word-set Jaccard from which two statements are one memory
_NEGATION_WORDS = """not no never dont doesnt didnt isnt arent wasnt werent cant cannot wont
    longer anymore neither nor"""
_NEGATIONS = frozenset(_NEGATION_WORDS.split())


def near_duplicate(key: str, other: str) -> bool:
    """Whether two ``dedupe_key``s say the same thing in nearly the same words:
    their word sets overlap by ``NEAR_DUPLICATE`` (Jaccard) or more, with the
    same numbers and the same negations ("I have 2 cats" and "I have 3 cats",
    "I like tea" and "I don't like tea" are different statements)."""
    a, b = set(key.split()), set(other.split())
    if len(a) < 3 or len(b) < 3:
        return False
    if {w for w in a if w.isdigit()} != {w for w in b if w.isdigit()}:
        return False
    if a & _NEGATIONS != b & _NEGATIONS:
        return False
    return len(a & b) / len(a | b) >= NEAR_DUPLICATE


def tombstone_key(scope_key: str, key: str) -> str:
    """What a purge leaves of a statement: a SHA-256 of its scope and
    ``dedupe_key``, enough to refuse it when it is read again, never its words."""
    return hashlib.sha256(f"{scope_key}\0{key}".encode()).hexdigest()


def check_kind(kind: str) -> Kind:
    """``kind`` when it is a known kind; raises ``ConfigurationError`` otherwise."""
    if kind not in KINDS:
        raise ConfigurationError(f"kind must be one of {KINDS}, got {kind!r}")
    return kind


def check_importance(importance: float) -> float:
    if isinstance(importance, bool) or not isinstance(importance, int | float):
        raise ConfigurationError(f"importance must be a number in [0, 1], got {importance!r}")
    if not 0.0 <= importance <= 1.0:
        raise ConfigurationError(f"importance must be in [0, 1], got {importance!r}")
    return float(importance)
