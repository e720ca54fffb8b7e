"""A stored session whose last messages were still being written when imported.

An agent writes one message in parts: Claude Code writes one line per content
block of a reply (its text, its thinking, each tool call), all with the same
message id. A sync between two of them imported the message as it was then;
once the file grows, that message has more in it, so the copy's fingerprints
differ from the stored ones from there on (``identity``: it "diverges"),
although nothing the tool had written changed. That is no rewind in the
tool, and no branch: the stored session is updated in place, by a rewind to
just before the first message that grew (the library's, so nothing logged
is changed), then the copy's messages from there.

``regrown`` decides it: the stored session's records from that message on
are that reply, which the copy's begins (the copy's has more parts: more
content blocks, more tool calls), then messages the copy has the same;
anything else there (another text, a compaction, a rewind, a turn the owner
chatted since) means the past did change.

``older`` decides the mirror case: a copy taken before the stored one (an
older backup, a file cut back), whose last message is the start of the stored
one's reply: it adds nothing and is said to be older, not branched.
"""

from __future__ import annotations

from typing import Any

from memory import LogPoint

from ..log_store import DatabaseLogStore
from .agents import message_seqs, units
from .formats import ParsedSession
from .ingest import chat_message
from .sources import Refused


def regrown(public_id: str, parsed: ParsedSession, shared: int) -> LogPoint | None:
    """Where to rewind the stored session ``public_id`` to take ``parsed`` from
    its unit ``shared`` on (the first unit whose fingerprint differs), when its
    records from there are only the start of what ``parsed`` holds; else ``None``."""
    found = list(units(parsed))[shared:]
    seqs = message_seqs(parsed)
    if not found or found[0][0] not in seqs:
        return None  # a compaction or an instruction differs
    first = seqs[found[0][0]]
    tail: list[dict[str, Any]] = []
    for record in DatabaseLogStore().read_reversed(public_id):
        seq = record.get("seq")
        if record.get("type") != "message" or not isinstance(seq, int) or seq < first:
            return None
        tail.append(record)
        if seq == first:
            break
    tail.reverse()
    if len(tail) > len(found):
        return None
    for number, (record, (index, raw)) in enumerate(zip(tail, found, strict=False)):
        if index is None or not isinstance(raw, dict):
            return None
        try:
            copy = chat_message(dict(raw), "").to_dict()
        except Refused:
            return None
        stored = record.get("message")
        # Only a reply is written in parts; what follows it (its calls' results) is whole.
        grew = number == 0 and copy.get("role") == "assistant" and _begins(stored, copy)
        if not (grew or stored == copy):
            return None
    return LogPoint("before_message", first)


def _begins(stored: object, copy: object) -> bool:
    """Whether ``copy`` is ``stored`` or ``stored`` with more parts written after
    it: a longer list (more content blocks, tool calls, source lines), an
    object with more keys (each of the stored ones begun again), a list of
    content blocks for a string (its one text block). A part itself is whole:
    a string only begins an equal one."""
    if isinstance(stored, str) and isinstance(copy, list):
        # A message's one text block is its content string; more make a list.
        return _begins([{"type": "text", "text": stored}], copy)
    if isinstance(stored, list) and isinstance(copy, list):
        return len(stored) <= len(copy) and all(
            _begins(a, b) for a, b in zip(stored, copy, strict=False)
        )
    if isinstance(stored, dict) and isinstance(copy, dict):
        return all(key in copy and _begins(value, copy[key]) for key, value in stored.items())
    return stored == copy


def older(public_id: str, parsed: ParsedSession, shared: int) -> bool:
    """Whether ``parsed`` is an older copy of the stored session ``public_id``:
    only its last unit (unit ``shared``, the first that differs) differs, and it
    is a reply the stored one holds more of (written in parts, as in ``regrown``)."""
    found = list(units(parsed))[shared:]
    seqs = message_seqs(parsed)
    if len(found) != 1 or found[0][0] not in seqs or not isinstance(found[0][1], dict):
        return False
    first = seqs[found[0][0]]
    try:
        copy = chat_message(dict(found[0][1]), "").to_dict()
    except Refused:
        return False
    if copy.get("role") != "assistant":
        return False
    for record in DatabaseLogStore().read_reversed(public_id):
        seq = record.get("seq")
        if not isinstance(seq, int) or seq < first:
            return False
        if seq == first:
            stored = record.get("message") if record.get("type") == "message" else None
            return stored != copy and _begins(copy, stored)
    return False
