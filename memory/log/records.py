"""The records of a conversation log, one JSON object per line.

Every record has a ``type`` and an ISO-8601 UTC timestamp ``ts``. The first
three types are the Motus log format (``session_meta``, ``message``,
``compaction``) and stay readable by Motus; everything this library adds is an
optional field or a new record type that older readers skip. A log written by
Motus (no ``seq``, no ``through_seq``) loads: messages are numbered in file
order and a compaction without ``through_seq`` summarises every message before it.

``session_meta``
    ``session_id``, ``system_prompt``, ``config`` (``safety_ratio``,
    ``token_threshold``, ``compact_model_name``, ``max_tool_result_tokens``),
    ``parent_session_id``; added: ``format_version``, ``memory_type``,
    ``model_name``, ``parent_seq`` (the last parent message a fork or restore
    was taken from), ``title``.
``system_prompt`` (added)
    ``system_prompt``: the prompt changed after the session started.
``message``
    ``message``: the message exactly as it was added (OpenAI chat dict). Added:
    ``seq`` (0-based, strictly increasing), ``tokens`` (estimated tokens of the
    message as it sits in the context), ``unit`` (``A``/``B``/``C``),
    ``context_message`` (only when a tool result was truncated: the message as
    it entered the context), ``truncation`` (``original_tokens``,
    ``original_bytes``, ``kept_tokens``).
``compaction``
    ``compaction_number``, ``messages_compacted``, ``summary``. Added:
    ``status`` (``"ok"``), ``trigger`` (``auto``/``manual``), ``through_seq``
    (the last message seq the boundary covers), ``summarized_seqs``
    (``[first, last]`` of the messages folded into the summary, or null),
    ``replayed_seqs`` (messages kept verbatim after the summary),
    ``messages_replayed``, ``tokens_before``, ``tokens_after``,
    ``summary_tokens``, ``model``, ``duration_s``, ``chunks``.
``compaction_failed`` (added)
    ``trigger``, ``through_seq``, ``error``, ``tokens_before``, ``model``,
    ``duration_s``. The context did not change.
``compaction_warning`` (added)
    ``through_seq``, ``reason``, ``floor_tokens``, ``threshold``: compaction
    could not bring the context under the threshold.
``compaction_revert`` (added)
    ``reverts`` (a ``compaction_number``), ``through_seq``, ``reason``: the
    context goes back to what it was before that compaction, plus every
    message added since.
``reset`` (added)
    ``through_seq``: the memory was reset; the context starts empty again.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

FORMAT_VERSION = 2

SESSION_META = "session_meta"
SYSTEM_PROMPT = "system_prompt"
MESSAGE = "message"
COMPACTION = "compaction"
COMPACTION_FAILED = "compaction_failed"
COMPACTION_WARNING = "compaction_warning"
COMPACTION_REVERT = "compaction_revert"
RESET = "reset"

RECORD_TYPES = frozenset(
    {
        SESSION_META,
        SYSTEM_PROMPT,
        MESSAGE,
        COMPACTION,
        COMPACTION_FAILED,
        COMPACTION_WARNING,
        COMPACTION_REVERT,
        RESET,
    }
)

Record = dict[str, Any]


def now_iso() -> str:
    """The current time as an ISO-8601 UTC string, the ``ts`` of every record."""
    return datetime.now(UTC).isoformat()
