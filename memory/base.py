"""``BaseMemory``: the working memory every strategy shares.

The base class holds the context (system prompt + messages), counts each
message's tokens once when it is added, keeps the running total so the
threshold check never re-tokenises old messages, truncates oversized tool
results, classifies messages into turn units and records a bounded trace.
A subclass implements ``compact()`` and ``reset()``.

Everything a memory does is also a typed log record (``memory.log.records``)
handed to its ``Recorder``, the one write path: it goes to the log store,
when the memory has one, and then to every listener (``add_listener``). The
state changes themselves live in ``_apply_*`` methods that a restore calls
with the records of a log, so a restored memory is built by the same code as
the live one.

Text enters clean: every string of a message, the system prompt and every
record is freed of lone surrogates on the way in (``memory.json_values``), so
a UTF-8 log holds exactly the live context. Tool calls without ids get
deterministic ones when they enter the context (``memory.call_ids``).
"""

from __future__ import annotations

import copy
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, Self

from .call_ids import with_call_ids
from .clients.base import Usage
from .json_values import clean_text
from .log.recorder import Listener, Recorder
from .log.records import (
    RESET_SCOPE_MESSAGES,
    MessageRecord,
    Reset,
    SessionMeta,
    SystemPromptChange,
    now_iso,
)
from .messages import INSTRUCTION_ROLES, ChatMessage, InstructionRole, InvalidMessageError
from .session_state import SessionState
from .tokens import REPLY_PRIMING_TOKENS, TokenCounter
from .tokens.calibration import TokenCalibration
from .tokens.truncation import Truncation, fit_tool_result
from .trace import Trace
from .units import Classification, TurnTracker, Unit, placeholder_results


class EntryMeta(NamedTuple):
    """Where a context message came from: its log ``seq`` (``None`` for derived
    messages such as a placeholder result) and its turn unit."""

    seq: int | None
    unit: Unit | None
    unit_index: int | None


@dataclass(frozen=True, slots=True)
class Ingested:
    """The outcome of adding one message: what the log and the trace need."""

    seq: int
    message: ChatMessage
    context_message: ChatMessage
    tokens: int
    classification: Classification
    truncation: Truncation | None
    ts: str  # when it was added (ISO-8601 UTC): its trace event's and its record's time


class BaseMemory(ABC):
    """Working memory with token accounting. Subclasses implement ``compact`` and ``reset``.

    ``add_message`` accepts a ``ChatMessage`` or an OpenAI chat-format dict and
    raises ``InvalidMessageError`` (a ``ValueError``) for a malformed one or for
    a ``system`` or ``developer`` message (use ``set_system_prompt``). Token figures are
    estimates in tokens of the model's tokenizer (see ``memory.tokens``).

    ``enable_memory_tools``: whether ``build_tools()`` offers the memory's
    tools to the agent (a memory with a conversation log has two; see
    ``CompactionMemory``). ``calibration`` learns, per model, how far the
    estimate is from what the provider reports (``add_message(usage=...)``);
    a compacting memory applies it to its threshold check. Give several
    memories one ``TokenCalibration`` to share what they learn.
    """

    memory_type: ClassVar[str] = "base"  # session_meta's memory_type

    def __init__(
        self,
        *,
        model_name: str | None = None,
        system_prompt: str = "",
        max_tool_result_tokens: int = 50_000,
        trace_max_events: int = 1000,
        enable_memory_tools: bool = True,
    ) -> None:
        self._model_name = model_name
        self._enable_memory_tools = enable_memory_tools
        self._tool_schemas: list[dict[str, Any]] = []
        self._tools_tokens = 0
        self.calibration = TokenCalibration()
        self._system_prompt = clean_text(system_prompt)
        self._system_role: InstructionRole = "system"
        self._system_tokens: int | None = None
        self._max_tool_result_tokens = max_tool_result_tokens
        self._messages: list[ChatMessage] = []
        self._tokens: list[int] = []
        self._meta: list[EntryMeta] = []
        self._tokens_total = 0
        self._tracker = TurnTracker()
        self._next_seq = 0
        self._trace = Trace(trace_max_events)
        self._recorder = Recorder("", None, self._session_meta)

    # -- context ---------------------------------------------------------------

    @property
    def model_name(self) -> str | None:
        return self._model_name

    def set_model(self, *, client: Any = None, model_name: str | None = None) -> None:
        """Fill the model name if none was given (the agent calls this). Token
        counts of messages added later use that model's tokenizer."""
        if self._model_name is None:
            self._model_name = model_name
            if self._tool_schemas:  # counted with the default tokenizer until now
                self.set_tools(self._tool_schemas)

    @property
    def token_counter(self) -> TokenCounter:
        """The counter for the current model; the dashboard counts with the same one."""
        return TokenCounter.for_model(self._model_name)

    @property
    def system_prompt(self) -> str:
        return self._system_prompt

    @property
    def system_role(self) -> InstructionRole:
        """The role the system prompt is sent with: ``"system"`` or ``"developer"``."""
        return self._system_role

    def set_system_prompt(self, prompt: str, *, role: InstructionRole | None = None) -> None:
        """Set the instructions; ``get_context()`` returns them first.

        ``role`` is ``"system"`` or ``"developer"`` (OpenAI's name for
        instructions to its reasoning models), kept so the instructions are
        sent and exported as they came; ``None`` keeps the current role
        (``"system"`` at first). Lone surrogates in ``prompt`` become U+FFFD
        (see ``memory.json_values``). Once the session has records, a change
        is recorded (``system_prompt``). Raises ``InvalidMessageError`` for a
        prompt that is not a string or another role.
        """
        if not isinstance(prompt, str):
            raise InvalidMessageError("the system prompt must be a string")
        role = self._system_role if role is None else role
        if role not in INSTRUCTION_ROLES:
            raise InvalidMessageError(
                f"instructions take the role 'system' or 'developer', not {role!r}"
            )
        prompt = clean_text(prompt)
        changed = prompt != self._system_prompt or role != self._system_role
        self._apply_system_prompt(prompt, role)
        if changed and self._recorder.started:
            self._recorder.record(
                SystemPromptChange(
                    ts=now_iso(),
                    system_prompt=prompt,
                    through_seq=self._next_seq - 1,
                    system_role=None if role == "system" else role,
                )
            )

    def _apply_system_prompt(self, prompt: str, role: str | None = "system") -> None:
        """Set the prompt and its role (a log's ``system_role``: ``None`` is ``"system"``)."""
        if role not in (None, *INSTRUCTION_ROLES):
            raise InvalidMessageError(f"unknown instruction role {role!r}")
        self._system_prompt = clean_text(prompt)
        self._system_role = "developer" if role == "developer" else "system"
        self._system_tokens = None

    def _instructions(self) -> ChatMessage:
        return ChatMessage(role=self._system_role, content=self._system_prompt)

    # -- records and listeners -------------------------------------------------

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(record)`` for every record this memory logs from now on.

        ``listener`` is a function or a coroutine function taking one
        ``memory.log.records.LogRecord``. It hears a record after the log store
        has it; async listeners are awaited before ``add_message()`` and
        ``compact()`` return. A listener that raises is logged, never fatal.
        """
        self._recorder.add_listener(listener)

    def remove_listener(self, listener: Listener) -> None:
        """Stop calling ``listener``. Raises ``ValueError`` if it was not added."""
        self._recorder.remove_listener(listener)

    def _session_meta(self) -> SessionMeta:
        return SessionMeta(
            ts=now_iso(),
            system_prompt=self._system_prompt,
            system_role=None if self._system_role == "system" else self._system_role,
            memory_type=self.memory_type,
            model_name=self._model_name,
        )

    @property
    def messages(self) -> list[ChatMessage]:
        """The context after the system prompt (a copy)."""
        return list(self._messages)

    def get_context(self) -> list[ChatMessage]:
        """The messages to send to the model: the instructions first (a ``system``
        or ``developer`` message, see ``system_role``), then the context."""
        return [self._instructions(), *self._messages]

    @property
    def at_boundary(self) -> bool:
        """True when no tool call is waiting for its result (a clean turn boundary)."""
        return self._tracker.at_boundary

    @property
    def next_seq(self) -> int:
        """The ``seq`` the next added message will get (= messages added so far)."""
        return self._next_seq

    # -- tokens ----------------------------------------------------------------

    def estimate_message_tokens(
        self, message: ChatMessage, *, content_tokens: int | None = None
    ) -> int:
        """Tokens one message costs in a chat request, format overhead included
        (``content_tokens``: the content's count, when already known)."""
        return self.token_counter.message_tokens(message, content_tokens=content_tokens)

    def estimate_context_tokens(self) -> int:
        """Estimated tokens of a request: ``get_context()`` plus the tool schemas
        the agent sends with it (``set_tools``). O(1), nothing is re-tokenised."""
        self._check_in_sync()
        if self._system_tokens is None:
            self._system_tokens = self.estimate_message_tokens(self._instructions())
        return self._system_tokens + self._tools_tokens + self._tokens_total + REPLY_PRIMING_TOKENS

    # -- tools -----------------------------------------------------------------

    def set_tools(self, schemas: Sequence[Mapping[str, Any]]) -> None:
        """Tell the memory which tool schemas go with every request (the agent
        calls this with its tools, memory tools included), so that the
        threshold check guards the request as sent, not only its messages.

        ``schemas`` are OpenAI function-tool dicts; their tokens are counted
        once, as their JSON, with ``token_counter``. Replaces earlier schemas;
        ``[]`` clears them. Raises ``TypeError`` for schemas JSON cannot hold.
        """
        self._tool_schemas = [dict(schema) for schema in schemas]
        self._tools_tokens = (
            self.token_counter.count(json.dumps(self._tool_schemas, ensure_ascii=False))
            if self._tool_schemas
            else 0
        )

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        """The schemas given to ``set_tools`` (a copy)."""
        return list(self._tool_schemas)

    @property
    def tool_schema_tokens(self) -> int:
        """Tokens of the tool schemas, included in ``estimate_context_tokens()``."""
        return self._tools_tokens

    def build_tools(self) -> list[Callable[..., Any]]:
        """The memory's own tools, for the agent to merge into its tools: plain
        functions whose schemas the agent derives from their signatures. None
        here; ``CompactionMemory`` with a log offers two. Empty when the memory
        was built with ``enable_memory_tools=False``."""
        return []

    def _check_in_sync(self) -> None:
        # A subclass may edit ``_messages`` directly (the design's custom-memory
        # example calls ``self._messages.clear()``); recount when that happened.
        if len(self._tokens) != len(self._messages) or len(self._meta) != len(self._messages):
            self._tokens = [self.estimate_message_tokens(m) for m in self._messages]
            self._meta = [EntryMeta(None, None, None) for _ in self._messages]
            self._tokens_total = sum(self._tokens)

    # -- adding messages -------------------------------------------------------

    async def add_message(
        self, message: ChatMessage | Mapping[str, Any], *, usage: Usage | None = None
    ) -> ChatMessage:
        """Add one message, then let the strategy react (e.g. auto-compaction).

        Returns the message as it entered the context: a tool result cut to
        ``max_tool_result_tokens``, empty tool-call ids given ids
        (``memory.call_ids``); the caller answers calls by these ids.

        ``usage`` is the provider's report for the request that produced this
        message (an assistant reply): its ``input_tokens`` go into the log
        record (``provider_tokens``) beside the estimate, and teach
        ``calibration`` how the estimate of that request (the context before
        this message, tools included) compares for this model. Raises
        ``InvalidMessageError`` for ``usage`` on a message that is not an
        assistant reply.
        """
        message = ChatMessage.coerce(message)
        reported = None
        if usage is not None:
            if message.role != "assistant":
                raise InvalidMessageError("usage belongs to an assistant message")
            reported = usage.input_tokens
            if self._model_name is not None:
                self.calibration.observe(self._model_name, self.estimate_context_tokens(), reported)
        ingested = self._ingest(message)
        self._record_message(ingested, provider_tokens=reported)
        await self.flush()
        await self._after_add(ingested)
        await self.flush()
        return ingested.context_message

    async def flush(self) -> None:
        """Write out what a memory with an asynchronous log store has queued and
        await the asynchronous listeners (see ``memory.log.recorder``)."""
        await self._recorder.flush()

    def _record_message(self, ingested: Ingested, *, provider_tokens: int | None = None) -> None:
        if self._recorder.active:
            self._recorder.record(self._message_record(ingested, provider_tokens=provider_tokens))

    def _message_record(
        self, ingested: Ingested, *, provider_tokens: int | None = None
    ) -> MessageRecord:
        truncation = ingested.truncation
        c = ingested.classification
        return MessageRecord(
            ts=ingested.ts,
            seq=ingested.seq,
            message=ingested.message,
            tokens=ingested.tokens,
            unit=c.unit,
            unit_index=c.unit_index,
            context_tokens=self.estimate_context_tokens(),
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
        )

    def _ingest(
        self,
        message: ChatMessage,
        *,
        seq: int | None = None,
        context_message: ChatMessage | None = None,
        tokens: int | None = None,
        trace: bool = True,
    ) -> Ingested:
        """Number, truncate, classify and append one message (no I/O, no compaction).

        ``context_message`` is given on restore (the truncated form recorded in
        the log), so a restore never depends on re-truncating, and so is
        ``tokens`` (the recorded count), so a restore does not re-tokenise.
        A restore also passes ``trace=False``: replaying a long log would
        otherwise rebuild trace events nobody asked for (anomalies are still traced).
        """
        if message.role in INSTRUCTION_ROLES:
            raise InvalidMessageError(
                f"{message.role} messages are not added to the conversation: use "
                f"set_system_prompt(text, role={message.role!r})"
            )
        self._check_in_sync()
        seq = self._next_seq if seq is None else seq
        truncation = None
        content_tokens = None
        if context_message is None:
            tracker = self._tracker
            context_message = with_call_ids(message, seq, tracker.pending, tracker.answered)
            fitted = fit_tool_result(
                context_message, self._max_tool_result_tokens, self.token_counter
            )
            context_message, truncation = fitted.message, fitted.truncation
            content_tokens = fitted.content_tokens
        self._next_seq = seq + 1
        classification = self._tracker.classify(context_message)
        if tokens is None:
            tokens = self.estimate_message_tokens(context_message, content_tokens=content_tokens)
        self._place(classification, seq, context_message, tokens)
        ingested = Ingested(
            seq, message, context_message, tokens, classification, truncation, now_iso()
        )
        if trace:
            self._trace_message(ingested)
        self._trace_anomaly(seq, classification)
        return ingested

    def _trace_anomaly(self, seq: int, classification: Classification) -> None:
        if classification.anomaly:
            self._trace.add(
                "anomaly",
                seq=seq,
                detail=classification.anomaly,
                in_context=classification.in_context,
            )

    def _place(
        self, classification: Classification, seq: int, message: ChatMessage, tokens: int
    ) -> None:
        """Append what a classified message adds to the context: placeholder
        results closing an abandoned batch, then the message unless it is an orphan."""
        if classification.abandoned:
            for placeholder in placeholder_results(classification.abandoned):
                self._push(placeholder, EntryMeta(None, "B", classification.unit_index - 1))
        if classification.in_context:
            meta = EntryMeta(seq, classification.unit, classification.unit_index)
            self._push(message, meta, tokens)

    def _push(self, message: ChatMessage, meta: EntryMeta, tokens: int | None = None) -> None:
        tokens = self.estimate_message_tokens(message) if tokens is None else tokens
        self._messages.append(message)
        self._tokens.append(tokens)
        self._meta.append(meta)
        self._tokens_total += tokens

    def _trace_message(self, ingested: Ingested) -> None:
        c = ingested.classification
        fields: dict[str, Any] = {
            "timestamp": ingested.ts,
            "seq": ingested.seq,
            "role": ingested.message.role,
            "unit": c.unit,
            "unit_index": c.unit_index,
            "tokens": ingested.tokens,
            "context_tokens": self.estimate_context_tokens(),
        }
        if ingested.message.tool_calls:
            fields["tool_calls"] = [
                {"id": t.id, "name": t.name} for t in ingested.message.tool_calls
            ]
        if ingested.message.tool_call_id is not None:
            fields["tool_call_id"] = ingested.message.tool_call_id
        if ingested.message.role == "tool":
            fields["tool_name"] = ingested.message.name
        if ingested.truncation is not None:
            fields["truncated"] = ingested.truncation.as_dict()
        self._trace.add("message", **fields)

    def compaction_due(self) -> int | None:
        """The threshold the context is over when this memory is about to
        compact on its own (see ``CompactionBase``); ``None`` here: never."""
        return None

    async def _after_add(self, ingested: Ingested) -> None:
        """The strategy's reaction to a message added and logged (auto-compaction)."""

    def _replace_context(self, entries: list[tuple[ChatMessage, EntryMeta, int]]) -> None:
        self._messages = [m for m, _, _ in entries]
        self._meta = [meta for _, meta, _ in entries]
        self._tokens = [t for _, _, t in entries]
        self._tokens_total = sum(self._tokens)

    def _entries(self) -> list[tuple[ChatMessage, EntryMeta, int]]:
        self._check_in_sync()
        return list(zip(self._messages, self._meta, self._tokens, strict=True))

    # -- trace, state, lifecycle -----------------------------------------------

    def get_memory_trace(self) -> dict[str, Any]:
        """The bounded trace: ``{"events": [...], "total_events", "total_compactions",
        "failed_compactions", "compaction_warnings", "anomalies", "dropped_events"}``."""
        return self._trace.snapshot()

    def get_session_state(self) -> SessionState:
        """A JSON-serialisable snapshot of the context (``to_dict()`` / ``from_dict()``)."""
        return SessionState(
            system_prompt=self._system_prompt,
            messages=[m.to_dict() for m in self._messages],
            model_name=self._model_name,
            system_role=self._system_role,
        )

    def _clear_context(self) -> dict[str, int]:
        counts = {"messages": len(self._messages), "trace_events": self._trace.clear()}
        self._replace_context([])
        self._tracker = TurnTracker()
        return counts

    def clear_messages(self) -> int:
        """Empty the conversation; keep the system prompt, the trace and the tools.

        Unlike ``reset()``, the trace stays, and a compacting memory keeps its
        compaction numbering (the summary goes with the messages). A memory
        with a log records a ``reset`` with ``scope: "messages"``, so a
        restore starts from the same empty context; the log keeps every
        message. Returns how many messages left the context.
        """
        cleared = self._apply_clear_messages()
        self._trace.add("messages_cleared", messages=cleared, through_seq=self._next_seq - 1)
        if self._recorder.active:
            self._recorder.record(
                Reset(
                    ts=now_iso(),
                    through_seq=self._next_seq - 1,
                    context_tokens=self.estimate_context_tokens(),
                    scope=RESET_SCOPE_MESSAGES,
                )
            )
        return cleared

    def _apply_clear_messages(self) -> int:
        """Empty the context and the turn tracker (live and on restore)."""
        cleared = len(self._messages)
        self._replace_context([])
        self._tracker = TurnTracker()
        return cleared

    def fork(self) -> Self:
        """An independent copy: same context, separate lists and trace."""
        clone = copy.copy(self)
        clone._messages = list(self._messages)
        clone._tokens = list(self._tokens)
        clone._meta = list(self._meta)
        clone._tracker = self._tracker.copy()
        clone._trace = self._trace.copy()
        clone._recorder = Recorder("", None, clone._session_meta)
        return clone

    @abstractmethod
    async def compact(self, **kwargs: Any) -> Any:
        """Reduce the context; what that means is the strategy's."""

    @abstractmethod
    def reset(self) -> dict[str, int]:
        """Clear the working state; returns counts of what was cleared."""
