"""The agent's long-term memory tools: ``recall``, ``remember`` and ``forget``.

Plain async functions (the agent derives their schemas from the signatures
and docstrings) over a ``BackgroundMemory``'s store and scope; each answers a
JSON string, ``{"status": "ok", ...}`` or ``{"status": "error", "message"}``.
What ``remember`` and ``forget`` write is logged as a ``memory_extraction``
record with ``extractor: "agent"``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError, LongTermMemoryError
from ..log.records import now_iso
from .extract import Candidate
from .types import KINDS, check_kind

if TYPE_CHECKING:
    from .memory import BackgroundMemory

MAX_RECALL_RESULTS = 20


def build_long_term_tools(memory: BackgroundMemory) -> list[Callable[..., Any]]:
    """The three tools, bound to ``memory``."""

    async def recall(query: str, max_results: int = 10) -> str:
        """Search what you remember from earlier conversations with this user
        (facts, preferences, events), best match first, each with its id.

        Args:
            query: Words to look for, e.g. "allergies" or "sister's name".
            max_results: How many memories to return (at most 20).
        """
        limit = min(max(int(max_results), 1), MAX_RECALL_RESULTS)
        hits = memory.search(query, limit=limit)
        results = [
            {"id": h.memory.id, "kind": h.memory.kind, "text": h.memory.text, "when": h.memory.when}
            for h in hits
        ]
        return _answer({"status": "ok", "query": query, "count": len(results), "results": results})

    async def remember(text: str, kind: str = "fact") -> str:
        """Remember something for later conversations with this user: one
        self-contained sentence. Saying the same thing again adds nothing.

        Args:
            text: The sentence to remember, e.g. "Ann is allergic to peanuts."
            kind: "fact", "preference" or "event".
        """
        try:
            candidate = Candidate(kind=check_kind(kind), text=text, importance=0.8)
        except ConfigurationError:
            return _error(f"kind must be one of {', '.join(KINDS)}")
        seq = memory.next_seq - 1
        candidate = Candidate(
            kind=candidate.kind, text=text, importance=0.8, first_seq=seq, last_seq=seq
        )
        written = memory.write([candidate], actor="agent")
        memory.record_tool_write(written)
        entry = written[0]
        if entry["action"] == "refused":
            return _error(entry["error"])
        return _answer({"status": "ok", "id": entry["memory_id"], "action": entry["action"]})

    async def forget(memory_id: str, reason: str = "") -> str:
        """Stop remembering a memory (by the id that recall or the memory
        block shows), e.g. when the user says it is wrong or asks you to forget it.

        Args:
            memory_id: The memory's id, as shown in brackets.
            reason: Why, in a few words.
        """
        try:
            forgotten = memory.store.forget(
                memory.scope, memory_id, actor="agent", reason=reason or "asked by the agent"
            )
        except LongTermMemoryError as exc:
            return _error(str(exc))
        memory.record_tool_write(
            [
                {
                    "memory_id": forgotten.id,
                    "action": "forget",
                    "kind": forgotten.kind,
                    "text": forgotten.text,
                    "ts": now_iso(),
                }
            ]
        )
        return _answer({"status": "ok", "id": forgotten.id, "action": "forget"})

    return [recall, remember, forget]


def _answer(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False)


def _error(message: str) -> str:
    return _answer({"status": "error", "message": message})
