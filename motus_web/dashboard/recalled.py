"""What the model was reminded of at a step: the recalled memories a request carried, and why.

``BackgroundMemory.recall`` logs each change of its block as a
``memory_recall`` record (a ``ContextChange`` row here) with the memories it
placed and the parts of their scores (``memory.background.scoring.Parts``).
The block a request carried is the restored context's (``steps.before``); its
scores are those of the newest ``memory_recall`` before the reply that placed
that very block. A log written before scores were recorded, or a block
carried by a fork or a restore, shows its memories without them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from motus_web.sessions.models import Message, Session
from motus_web.sessions.rows import record_of

PARTS = ("text", "entities", "time", "recency", "importance", "total")
_LINE = re.compile(r"^- \[([^\]\s]{1,64})\] (.*)$")


@dataclass(frozen=True, slots=True)
class Placed:
    """One memory in the block: its id, its line as the model saw it, and the
    parts of its score (``None``: not recorded)."""

    memory_id: str
    line: str
    parts: dict[str, float] | None


@dataclass(frozen=True, slots=True)
class Recalled:
    """The block a request carried: its memories in order, the request text
    it was recalled for and its tokens (``None`` when not recorded)."""

    placed: tuple[Placed, ...]
    query: str | None
    tokens: int | None
    budget_tokens: int | None
    scored: bool


def recalled_for(session: Session, reply: Message, block: str) -> Recalled | None:
    """The memories of ``block`` (the restored context's) for ``reply``;
    ``None`` when the request carried no block."""
    if not block:
        return None
    lines = [m for m in (_LINE.match(line) for line in block.splitlines()) if m]
    change = (
        session.context_changes.filter(kind="memory_recall", position__lt=reply.position)
        .order_by("-position")
        .first()
    )
    record: dict[str, Any] = dict(record_of(change)) if change is not None else {}
    own = record.get("block") == block
    scores = {}
    if own and isinstance(record.get("scores"), list):
        for entry in record["scores"]:
            if isinstance(entry, dict) and isinstance(entry.get("memory_id"), str):
                scores[entry["memory_id"]] = {
                    k: float(entry[k]) for k in PARTS if isinstance(entry.get(k), int | float)
                }
    placed = tuple(Placed(m[1], m[2], scores.get(m[1])) for m in lines)
    return Recalled(
        placed,
        record.get("query") if own else None,
        record.get("tokens") if own else None,
        record.get("budget_tokens") if own else None,
        bool(scores),
    )
