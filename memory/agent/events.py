"""The events of ``ReActAgent.stream()``: what one turn does, as it happens.

A turn yields, in order:

- ``TurnStarted`` first;
- for each model call: ``ThinkingDelta`` and ``AnswerDelta`` pieces as the reply
  streams in, then ``UsageReported`` (the provider's token counts), then
  ``MessageAdded`` for the reply once the memory (and its log) holds it;
- for a reply that calls tools: one ``ToolCallRequested`` per call (reply
  order), then a ``ToolResultReady`` per call as each finishes (completion
  order: they run concurrently), then ``MessageAdded`` per result (call order);
- ``CompactionStarted`` when an added message takes the context over the
  threshold, followed by ``CompactionFinished`` or ``CompactionFailed``;
- ``TurnError`` when the turn fails (a ``ProviderError``, a ``LogError``,
  ``MaxStepsExceeded``...); a reply whose tool calls cannot be made (their
  arguments are not JSON) is stored as failed, then ``TurnError`` carries an
  ``InvalidReplyError``;
- ``TurnFinished`` last, always, saying why the turn ended.

How the model's reply ended is in ``UsageReported.finish_reason`` (each model
call), ``TurnFinished.finish_reason`` (the turn's last reply) and, for a
reply that did not end normally, the stored message's ``finish_reason``
(``MessageAdded.message``; see ``memory.messages``).

Token figures are estimates in tokens of the model's tokenizer, except in
``UsageReported``, which carries what the provider counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..clients.base import Usage
from ..messages import ChatMessage

StopReason = Literal["answer", "max_steps", "interrupted", "error"]


@dataclass(frozen=True, slots=True)
class TurnStarted:
    """A turn began; ``user_message`` is ``None`` when it continues the context
    (a retry after an error) instead of adding a new request."""

    user_message: ChatMessage | None


@dataclass(frozen=True, slots=True)
class AnswerDelta:
    """A piece of the reply's text, in order; ``step`` is the model call (0-based)."""

    text: str
    step: int


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    """A piece of the model's reasoning, in order."""

    text: str
    step: int


@dataclass(frozen=True, slots=True)
class ToolCallRequested:
    """The reply asked for ``name(arguments)``; ``arguments`` is the model's JSON text."""

    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ToolResultReady:
    """A tool finished. ``is_error`` when it was unknown, got bad arguments,
    raised or was cancelled (``content`` then starts with ``"Error:"`` or
    ``"Cancelled:"``); ``duration_s`` is wall time in seconds."""

    call_id: str
    name: str
    content: str
    is_error: bool
    duration_s: float


@dataclass(frozen=True, slots=True)
class MessageAdded:
    """The memory holds a new message (and its log, when it has one, has stored it).

    ``seq`` is its log position among messages, ``tokens`` its estimated size
    in the context, ``unit`` its turn unit (``"A"`` request, ``"B"`` tool
    round, ``"C"`` answer) and ``context_tokens`` the context's size after it.
    """

    seq: int
    message: ChatMessage
    tokens: int
    unit: str | None
    unit_index: int | None
    context_tokens: int | None


@dataclass(frozen=True, slots=True)
class CompactionStarted:
    """The context (``tokens_before``) passed ``threshold``; a compaction is running."""

    tokens_before: int
    threshold: int


@dataclass(frozen=True, slots=True)
class CompactionFinished:
    """Compaction ``number`` folded ``messages_compacted`` messages into a summary
    and kept ``messages_replayed``; the context went from ``tokens_before`` to
    ``tokens_after``. ``model`` wrote the summary (``"offline"`` without one)."""

    number: int
    tokens_before: int | None
    tokens_after: int | None
    messages_compacted: int | None
    messages_replayed: int | None
    model: str | None


@dataclass(frozen=True, slots=True)
class CompactionFailed:
    """The compaction did not happen; the context is unchanged.

    ``skipped`` is true when nothing was tried (nothing to fold, or the summary
    and kept messages alone would not fit), false when an attempt failed.
    """

    error: str
    tokens_before: int | None
    skipped: bool = False


@dataclass(frozen=True, slots=True)
class UsageReported:
    """What the provider counted for model call ``step`` (``usage.input_tokens``
    is the whole prompt), the model that answered, and why its reply ended
    (``Completion.finish_reason``: ``"stop"``, ``"tool_calls"``, ``"length"``,
    ``"content_filter"``...; ``None`` when the provider said nothing)."""

    usage: Usage
    model: str | None
    step: int
    finish_reason: str | None = None


@dataclass(frozen=True, slots=True)
class TurnError:
    """The turn stopped on ``error`` (the exception itself: a ``ProviderError``,
    ``LogError``, ``MaxStepsExceeded``...). Every message added before it is in
    the memory, so the turn can be retried with ``stream()`` and no text."""

    error: Exception

    @property
    def message(self) -> str:
        return str(self.error) or type(self.error).__name__


@dataclass(frozen=True, slots=True)
class TurnFinished:
    """The last event of a turn.

    ``text`` is the final answer (``reason == "answer"``), or the partial
    answer kept when the turn was interrupted; ``steps`` is the number of
    model calls made. ``finish_reason`` is how the turn's last reply ended:
    the provider's reason (``"stop"``; ``"length"`` for an answer cut at the
    output limit...), ``"interrupted"`` when the turn was stopped mid-reply
    (or mid-tools), ``None`` when no reply came.
    """

    reason: StopReason
    text: str
    steps: int
    finish_reason: str | None = None


AgentEvent = (
    TurnStarted
    | AnswerDelta
    | ThinkingDelta
    | ToolCallRequested
    | ToolResultReady
    | MessageAdded
    | CompactionStarted
    | CompactionFinished
    | CompactionFailed
    | UsageReported
    | TurnError
    | TurnFinished
)
"""Any event ``ReActAgent.stream()`` yields."""
