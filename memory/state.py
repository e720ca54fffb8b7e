"""``ContextState``: what a memory holds, and the only code that changes it.

A memory's state is its instructions (the system prompt and its role), the
tool schemas sent with every request, the context (the messages after the
instructions, each with its log ``seq``, its turn unit and its tokens), the
open tool-call batch and the next ``seq``. Every change of it is a method
here, called in the same way live and on restore (``memory.compaction.restore``
builds a state from a log's records through these methods), so a restored
memory is built by the same code as the live one. Nothing here does I/O,
logs or traces: the memory records what it did.

Text enters clean: every string of a message and the system prompt is freed of
lone surrogates on the way in (``memory.json_values``), so a UTF-8 log holds
exactly the live context. Tool calls without ids get deterministic ones when
they enter the context (``memory.call_ids``).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Self

from .call_ids import with_call_ids
from .json_values import clean_text
from .lazy_tokens import ContextFigure, RunningTotal, TokenCell
from .log.records import MessageRecord, built_clean, now_iso
from .messages import INSTRUCTION_ROLES, ChatMessage, InstructionRole, InvalidMessageError
from .tokens import REPLY_PRIMING_TOKENS, TokenCounter
from .tokens.calibration import TokenCalibration
from .tokens.counter import ends_turn
from .tokens.truncation import Truncation, fit_tool_result
from .units import Classification, TurnTracker, Unit, placeholder_results


class EntryMeta(NamedTuple):
    """Where a context message came from: its log ``seq`` (``None`` for derived
    messages such as a placeholder result or a continuation) and its turn unit."""

    seq: int | None
    unit: Unit | None
    unit_index: int | None


Entry = tuple[ChatMessage, EntryMeta, int]
"""One context message, where it came from, and its tokens."""


@dataclass(slots=True)  # not frozen: a frozen __init__ costs a call per field, per message
class Ingested:
    """The outcome of adding one message: what the log and the trace need (read only)."""

    seq: int
    message: ChatMessage
    context_message: ChatMessage
    counted: TokenCell  # its tokens, counted when first read (``memory.lazy_tokens``)
    classification: Classification
    truncation: Truncation | None
    ts: str  # when it was added (ISO-8601 UTC): its trace event's and its record's time
    context: ContextFigure | None  # the context's size after it, when counted lazily

    @property
    def tokens(self) -> int:
        """Tokens of the message as it sits in the context."""
        return self.counted.get()


class ContextState:
    """The instructions, tools and context of a memory, with their token counts.

    ``messages``, ``meta`` and ``tokens`` are parallel lists (the context in
    order); ``tokens_total`` is their sum, kept as messages come and go, so
    ``context_tokens()`` never re-tokenises. Token figures are estimates in
    tokens of ``model_name``'s tokenizer (``memory.tokens``).

    With ``lazy_tokens`` (``BasicMemory``), a message other than a tool result
    is not counted when it is added but when a size is first asked for
    (``sync()``, which every reader of ``tokens`` calls first), once.
    """

    def __init__(
        self,
        *,
        model_name: str | None,
        max_tool_result_tokens: int,
        calibration: TokenCalibration | None = None,
    ) -> None:
        self.model_name = model_name
        self._counter: TokenCounter | None = None
        # What the provider's reports taught about the estimate (shareable).
        self.calibration = calibration if calibration is not None else TokenCalibration()
        self.max_tool_result_tokens = max_tool_result_tokens
        self.system_prompt = ""
        self.system_role: InstructionRole = "system"
        self._system_tokens: int | None = None
        self.tool_schemas: list[dict[str, Any]] = []
        self.tools_tokens = 0
        self.messages: list[ChatMessage] = []
        self.meta: list[EntryMeta] = []
        self.tokens: list[int] = []
        self.tokens_total = 0
        # Thinking the provider counts only while its turn lasts
        # (``TokenCounter.turn_reasoning_tokens``): in no message's own count.
        self.turn_reasoning = 0
        self.tracker = TurnTracker()
        self.next_seq = 0
        # ``BackgroundMemory``: the recalled block sent after the instructions,
        # and the last seq its extractor has read (``memory.background``).
        self.memory_block = ""
        self.extracted_through = -1
        self.lazy_tokens = False
        # Lazily counted messages: (index in ``tokens``, its cell), not yet in
        # ``tokens_total``; and the running total after the last message.
        self._pending: list[tuple[int, TokenCell]] = []
        self._running = RunningTotal(None, None)

    @property
    def counter(self) -> TokenCounter:
        # Kept while the model is the same: every message asks for it twice.
        counter = self._counter
        if counter is None or counter.model != self.model_name:
            counter = self._counter = TokenCounter.for_model(self.model_name)
        return counter

    def copy(self) -> Self:
        """An independent copy (separate lists and tracker; messages are immutable)."""
        clone = copy.copy(self)
        clone.tool_schemas = list(self.tool_schemas)
        clone.messages = list(self.messages)
        clone.meta = list(self.meta)
        clone.tokens = list(self.tokens)
        clone._pending = list(self._pending)
        clone.tracker = self.tracker.copy()
        return clone

    # -- instructions and tools --------------------------------------------------

    def instructions(self) -> ChatMessage | None:
        """The system (or developer) message: the prompt, then the recalled
        memory block when there is one; ``None`` when both are empty: strict
        providers refuse an empty system message."""
        text = "\n\n".join(part for part in (self.system_prompt, self.memory_block) if part)
        if not text:
            return None
        return ChatMessage(role=self.system_role, content=text)

    def set_memory_block(self, block: str) -> None:
        """Place ``block`` (recalled long-term memories) after the instructions;
        ``""`` removes it. Counted with the instructions."""
        self.memory_block = clean_text(block)
        self._system_tokens = None

    def set_system_prompt(self, prompt: str, role: str | None = "system") -> None:
        """Set the prompt and its role (a log's ``system_role``: ``None`` is
        ``"system"``). Raises ``InvalidMessageError`` for another role."""
        if role not in (None, *INSTRUCTION_ROLES):
            raise InvalidMessageError(f"unknown instruction role {role!r}")
        self.system_prompt = clean_text(prompt)
        self.system_role = "developer" if role == "developer" else "system"
        self._system_tokens = None

    def set_tools(self, schemas: Sequence[Mapping[str, Any]]) -> None:
        """The tool schemas sent with every request, counted once, the way the
        model's provider renders them. Raises ``TypeError`` for schemas JSON
        cannot hold."""
        self.tool_schemas = [dict(schema) for schema in schemas]
        # As the provider renders them (``memory.tokens.provider_rules``).
        self.tools_tokens = self.counter.tools_tokens(self.tool_schemas)

    def set_model(self, model_name: str) -> None:
        """Name the model once it is known; the schemas are counted again with its tokenizer."""
        self.model_name = model_name
        self._system_tokens = None
        if self.tool_schemas:
            self.set_tools(self.tool_schemas)

    # -- reading ---------------------------------------------------------------

    def context(self) -> list[ChatMessage]:
        """The messages of a request: the instructions (when there are any), then the context."""
        instructions = self.instructions()
        return [instructions, *self.messages] if instructions else list(self.messages)

    def message_tokens(self, message: ChatMessage, *, content_tokens: int | None = None) -> int:
        """Tokens one message costs in a request, the chat format's overhead included."""
        return self.counter.message_tokens(message, content_tokens=content_tokens)

    def instruction_tokens(self) -> int:
        if self._system_tokens is None:
            instructions = self.instructions()
            self._system_tokens = self.message_tokens(instructions) if instructions else 0
        return self._system_tokens

    def context_tokens(self) -> int:
        """Estimated tokens of a request: instructions, tool schemas, context and
        the reply's priming. O(1): nothing is re-tokenised."""
        self.sync()
        return (
            self.instruction_tokens()
            + self.tools_tokens
            + self.tokens_total
            + self.turn_reasoning
            + REPLY_PRIMING_TOKENS
        )

    @property
    def at_boundary(self) -> bool:
        """No tool call is waiting for its result."""
        return self.tracker.at_boundary

    def entries(self) -> list[Entry]:
        self.sync()
        return list(zip(self.messages, self.meta, self.tokens, strict=True))

    def sync(self) -> None:
        """Count the messages still uncounted (``lazy_tokens``), and recount
        when the messages list was edited directly (the design's
        custom-memory example calls ``self._messages.clear()``)."""
        if self._edited() or not self._pending:
            return
        pending, self._pending = self._pending, []
        for index, cell in pending:
            tokens = cell.get()
            self.tokens[index] = tokens
            self.tokens_total += tokens
        # Every cell is counted now: the running totals since the last read are
        # summed in one pass, which unlinks them, so the ones no trace event
        # holds are freed (a chain of one per message would live on, and the
        # cyclic collector would walk it again and again).
        self._running.get()

    def _edited(self) -> bool:
        """Recount everything if the messages list was edited directly; says whether it was."""
        if len(self.tokens) == len(self.messages) and len(self.meta) == len(self.messages):
            return False
        self.tokens = [self.message_tokens(m) for m in self.messages]
        self.meta = [EntryMeta(None, None, None) for _ in self.messages]
        self.tokens_total = sum(self.tokens)
        self.turn_reasoning = self.counter.current_turn_reasoning(self.messages)
        self._pending = []
        self._running = RunningTotal(None, None, self.tokens_total)
        return True

    # -- changing --------------------------------------------------------------

    def ingest(
        self,
        message: ChatMessage,
        *,
        seq: int | None = None,
        context_message: ChatMessage | None = None,
        tokens: int | None = None,
    ) -> Ingested:
        """Number, truncate, classify and append one message.

        ``context_message`` and ``tokens`` are given on restore (the truncated
        form and the count the log recorded), so a restore never re-truncates
        or re-tokenises. Raises ``InvalidMessageError`` for an instruction message.
        """
        if message.role in INSTRUCTION_ROLES:
            raise InvalidMessageError(
                f"{message.role} messages are not added to the conversation: use "
                f"set_system_prompt(text, role={message.role!r})"
            )
        self._edited()
        seq = self.next_seq if seq is None else seq
        truncation = None
        content_tokens = None
        if context_message is None:
            tracker = self.tracker
            context_message = with_call_ids(message, seq, tracker.pending, tracker.answered)
            fitted = fit_tool_result(context_message, self.max_tool_result_tokens, self.counter)
            context_message, truncation = fitted.message, fitted.truncation
            content_tokens = fitted.content_tokens
        self.next_seq = seq + 1
        classification = self.tracker.classify(context_message)
        if tokens is not None:
            counted = TokenCell(value=tokens)
        elif self.lazy_tokens and content_tokens is None:
            # With the counter of now: a later set_model must not change the figure.
            counted = TokenCell(functools.partial(self.counter.message_tokens, context_message))
        else:
            counted = TokenCell(
                value=self.message_tokens(context_message, content_tokens=content_tokens)
            )
        if classification.abandoned:
            # Placeholder results close an abandoned batch, so the context stays valid.
            for placeholder in placeholder_results(classification.abandoned):
                self.push(placeholder, EntryMeta(None, "B", classification.unit_index - 1))
        if classification.in_context:
            meta = EntryMeta(seq, classification.unit, classification.unit_index)
            self.push(context_message, meta, counted)
        context = None
        if self.lazy_tokens:
            fixed = self.instruction_tokens() + self.tools_tokens + REPLY_PRIMING_TOKENS
            context = ContextFigure(fixed, self._running)
        return Ingested(
            seq, message, context_message, counted, classification, truncation, now_iso(), context
        )

    def message_record(
        self,
        ingested: Ingested,
        *,
        provider_tokens: int | None = None,
        usage: dict[str, Any] | None = None,
    ) -> MessageRecord:
        """The log record of a message just ingested (``context_tokens``: the
        context's size now, with it)."""
        truncation = ingested.truncation
        c = ingested.classification
        fields: dict[str, Any] = dict(
            ts=ingested.ts,
            seq=ingested.seq,
            message=ingested.message,
            tokens=ingested.tokens,
            unit=c.unit,
            unit_index=c.unit_index,
            context_tokens=self.context_tokens(),
            # Written when the context holds another form: a truncated result,
            # or assigned tool-call ids (``memory.call_ids``).
            context_message=(
                ingested.context_message
                if ingested.context_message is not ingested.message
                else None
            ),
            truncation=truncation.as_dict() if truncation else None,
            anomaly=c.anomaly,
            provider_tokens=provider_tokens,
            usage=usage,
        )
        if usage is not None or provider_tokens is not None:
            return MessageRecord(**fields)  # the caller's report: cleaned as any value
        # Otherwise every field is the memory's own: clean messages, numbers,
        # ASCII units, and anomaly texts made of those messages' ids.
        return built_clean(MessageRecord, **fields)

    def push(
        self, message: ChatMessage, meta: EntryMeta, tokens: int | TokenCell | None = None
    ) -> None:
        """Append one context message; ``tokens``: its count, or a cell that
        counts it later (``None``: counted now)."""
        if tokens is None:
            tokens = self.message_tokens(message)
        cell = tokens if isinstance(tokens, TokenCell) else TokenCell(value=tokens)
        if self.lazy_tokens:
            self._running = RunningTotal(self._running, cell)
        self.messages.append(message)
        self.meta.append(meta)
        if ends_turn(message):
            self.turn_reasoning = 0
        elif message.thinking_blocks:
            self.turn_reasoning += self.counter.turn_reasoning_tokens(message)
        if not cell.counted:
            self._pending.append((len(self.tokens), cell))
            self.tokens.append(0)  # in tokens_total once counted (sync)
            return
        count = cell.get()
        self.tokens.append(count)
        self.tokens_total += count

    def replace(self, entries: list[Entry]) -> None:
        """Make the context ``entries``."""
        self.replace_columns(
            [m for m, _, _ in entries], [meta for _, meta, _ in entries], [t for _, _, t in entries]
        )

    def replace_columns(
        self, messages: list[ChatMessage], meta: list[EntryMeta], tokens: list[int]
    ) -> None:
        """Make the context ``messages`` (parallel lists, as the state holds
        them, which it takes as its own: a restore's, built for it)."""
        self.messages = messages
        self.meta = meta
        self.tokens = tokens
        self.tokens_total = sum(tokens)
        self.turn_reasoning = self.counter.current_turn_reasoning(messages)
        self._pending = []
        self._running = RunningTotal(None, None, self.tokens_total)

    def clear_messages(self) -> int:
        """Empty the context and the open batch; returns how many messages left it."""
        cleared = len(self.messages)
        self.replace([])
        self.tracker = TurnTracker()
        return cleared

    def reset(self) -> int:
        """Start the context again (``reset()`` of a memory); returns the messages dropped."""
        return self.clear_messages()
