"""Which stored session a conversation in a file is, and how the file's copy relates to it.

An imported session is keyed by its owner, its source format and the
conversation's own id (ChatGPT ``conversation_id``, Claude.ai ``uuid``, Claude
Code ``sessionId``, Codex rollout id, Gemini session id, a Motus log's
``session_id``). What was imported is remembered as a chain of fingerprints,
one per unit (a message or a tool's compaction, in order; a record of a Motus
log): unit ``i``'s fingerprint hashes every unit up to ``i``, so two copies
share their first ``n`` units exactly when their first ``n`` fingerprints are
equal. A copy is then ``unchanged`` (the same chain), ``extends`` the stored
one (the stored chain is its start: only the rest is appended) or
``diverges`` (its past changed, an edit or a rewind in the tool: it becomes a
branch of the stored session, keyed by the first unit that differs).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import orjson

FINGERPRINT_CHARS = 16  # 64 bits of SHA-256 per unit: a collision needs ~4e9 units
KEY_ID_MAX_CHARS = 160  # of the conversation's own id in a key (the column holds 255)


def conversation_key(owner: object, source_format: str, own_id: str) -> str:
    """The ``Session.source_key`` of a conversation: owner (``"-"`` for none), format, id."""
    return f"{owner if owner is not None else '-'}:{source_format}:{own_id[:KEY_ID_MAX_CHARS]}"


def branch_key(trunk_key: str, first_different: str) -> str:
    """The key of the branch that leaves ``trunk_key`` at the unit with that fingerprint."""
    return f"{trunk_key[: 255 - FINGERPRINT_CHARS - 1]}@{first_different}"


class FingerprintChain:
    """Fingerprints added one unit at a time (a stream); ``units`` is the chain so far."""

    def __init__(self) -> None:
        self.units: list[str] = []
        self._digest = hashlib.sha256()

    def add(self, unit: Any) -> None:
        self._digest.update(_canonical(unit))
        self.units.append(self._digest.copy().hexdigest()[:FINGERPRINT_CHARS])
        self._digest.update(b"\n")


def fingerprints(units: Iterable[Any]) -> list[str]:
    """The chained fingerprint of each unit (JSON values), in order."""
    chain = FingerprintChain()
    for unit in units:
        chain.add(unit)
    return chain.units


def _canonical(value: Any) -> bytes:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        # orjson refuses lone surrogates and integers past 64 bits; the standard
        # library writes both (escaped), the same way every time.
        return json.dumps(value, sort_keys=True, ensure_ascii=True).encode()


@dataclass(frozen=True, slots=True)
class Relation:
    """How a copy's fingerprints relate to the stored ones; ``shared``: units in common."""

    kind: Literal["unchanged", "extends", "diverges"]
    shared: int


def relation(stored: list[str], found: list[str]) -> Relation:
    """Compare a stored chain with a copy's (see the module docstring)."""
    if found == stored:
        return Relation("unchanged", len(found))
    if len(found) > len(stored) and (not stored or found[len(stored) - 1] == stored[-1]):
        return Relation("extends", len(stored))
    if len(found) < len(stored) and (not found or stored[len(found) - 1] == found[-1]):
        # An older copy (the stored one grew since): nothing in it is new.
        return Relation("unchanged", len(found))
    shared = 0
    for mine, theirs in zip(found, stored, strict=False):
        if mine != theirs:
            break
        shared += 1
    return Relation("diverges", shared)
