"""``BaseMemory``: the working memory every strategy shares.

The base class holds a ``ContextState`` (``memory.state``: the instructions,
the tool schemas, the context with each message's tokens counted once, the
open tool batch), truncates oversized tool results, classifies messages into
turn units and records a bounded trace. A subclass implements ``compact()``
and ``reset()``.

Everything a memory does is also a typed log record (``memory.log.records``)
handed to its ``Recorder``, the one write path: it goes to the log store,
when the memory has one, and then to every listener (``add_listener``). The
state changes themselves are the state's methods, which a restore calls with
the records of a log, so a restored memory is built by the same code as the
live one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Self

from .clients.base import Usage
from .json_values import clean_text
from .log.recorder import Listener, Recorder
from .log.records import (
    RESET_SCOPE_MESSAGES,
    Reset,
    SessionMeta,
    SystemPromptChange,
    ToolsChange,
    now_iso,
)
from .messages import INSTRUCTION_ROLES, ChatMessage, InstructionRole, InvalidMessageError
from .session_state import SessionState
from .state import ContextState, Ingested
from .tokens import TokenCounter
from .tokens.calibration import TokenCalibration
from .trace import Trace


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
        self._enable_memory_tools = enable_memory_tools
        self._state = self._new_state(model_name, max_tool_result_tokens)
        self._state.set_system_prompt(system_prompt)
        self._trace = Trace(trace_max_events)
        self._recorder = Recorder("", None, self._session_meta)

    def _new_state(self, model_name: str | None, max_tool_result_tokens: int) -> ContextState:
        return ContextState(model_name=model_name, max_tool_result_tokens=max_tool_result_tokens)

    @property
    def calibration(self) -> TokenCalibration:
        """What the provider's usage reports taught about the estimate, per model."""
        return self._state.calibration

    @calibration.setter
    def calibration(self, calibration: TokenCalibration) -> None:
        self._state.calibration = calibration

    @property
    def _messages(self) -> list[ChatMessage]:
        # The design's custom-memory example edits this list in place
        # (``self._messages.clear()``); the state notices and recounts.
        return self._state.messages

    # -- context ---------------------------------------------------------------

    @property
    def model_name(self) -> str | None:
        return self._state.model_name

    def set_model(self, *, client: Any = None, model_name: str | None = None) -> None:
        """Fill the model name if none was given (the agent calls this). Token
        counts of messages added later use that model's tokenizer."""
        if self._state.model_name is None and model_name is not None:
            self._state.set_model(model_name)

    @property
    def token_counter(self) -> TokenCounter:
        """The counter for the current model; the dashboard counts with the same one."""
        return self._state.counter

    @property
    def system_prompt(self) -> str:
        return self._state.system_prompt

    @property
    def system_role(self) -> InstructionRole:
        """The role the system prompt is sent with: ``"system"`` or ``"developer"``."""
        return self._state.system_role

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
        state = self._state
        role = state.system_role if role is None else role
        if role not in INSTRUCTION_ROLES:
            raise InvalidMessageError(
                f"instructions take the role 'system' or 'developer', not {role!r}"
            )
        prompt = clean_text(prompt)
        changed = prompt != state.system_prompt or role != state.system_role
        state.set_system_prompt(prompt, role)
        if changed and self._recorder.started:
            self._recorder.record(
                SystemPromptChange(
                    ts=now_iso(),
                    system_prompt=prompt,
                    through_seq=state.next_seq - 1,
                    system_role=None if role == "system" else role,
                )
            )

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
        state = self._state
        return SessionMeta(
            ts=now_iso(),
            system_prompt=state.system_prompt,
            system_role=None if state.system_role == "system" else state.system_role,
            memory_type=self.memory_type,
            model_name=state.model_name,
            tools=state.tool_schemas or None,
        )

    @property
    def memory_block(self) -> str:
        """The recalled long-term memories the next request carries after the
        instructions, in the same message (``BackgroundMemory``; a restore of
        its log keeps it); ``""`` for the other memory types."""
        return self._state.memory_block

    @property
    def messages(self) -> list[ChatMessage]:
        """The context after the system prompt (a copy)."""
        return list(self._state.messages)

    def get_context(self) -> list[ChatMessage]:
        """The messages to send to the model: the instructions first (a ``system``
        or ``developer`` message, see ``system_role``; none when the prompt is
        empty, which strict providers refuse), then the context."""
        return self._state.context()

    @property
    def at_boundary(self) -> bool:
        """True when no tool call is waiting for its result (a clean turn boundary)."""
        return self._state.at_boundary

    @property
    def next_seq(self) -> int:
        """The ``seq`` the next added message will get (= messages added so far)."""
        return self._state.next_seq

    # -- tokens ----------------------------------------------------------------

    def estimate_message_tokens(
        self, message: ChatMessage, *, content_tokens: int | None = None
    ) -> int:
        """Tokens one message costs in a chat request, format overhead included
        (``content_tokens``: the content's count, when already known)."""
        return self._state.message_tokens(message, content_tokens=content_tokens)

    def estimate_context_tokens(self) -> int:
        """Estimated tokens of a request: ``get_context()`` plus the tool schemas
        the agent sends with it (``set_tools``). O(1), nothing is re-tokenised."""
        return self._state.context_tokens()

    # -- tools -----------------------------------------------------------------

    def set_tools(self, schemas: Sequence[Mapping[str, Any]]) -> None:
        """Tell the memory which tool schemas go with every request (the agent
        calls this with its tools, memory tools included), so that the
        threshold check guards the request as sent, not only its messages.

        ``schemas`` are OpenAI function-tool dicts; their tokens are counted
        once, as the provider renders them (``TokenCounter.tools_tokens``).
        Replaces earlier schemas; ``[]`` clears them. Schemas set before the
        session's first record go into its ``session_meta``; a later change is
        recorded (``tools``), so a restore and "what the model saw" at any step
        know them. Raises
        ``TypeError`` for schemas JSON cannot hold.
        """
        state = self._state
        before = state.tool_schemas
        state.set_tools(schemas)
        if state.tool_schemas != before and self._recorder.started:
            self._recorder.record(
                ToolsChange(
                    ts=now_iso(),
                    schemas=state.tool_schemas,
                    tokens=state.tools_tokens,
                    through_seq=state.next_seq - 1,
                )
            )

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        """The schemas given to ``set_tools`` (a copy)."""
        return list(self._state.tool_schemas)

    @property
    def tool_schema_tokens(self) -> int:
        """Tokens of the tool schemas, included in ``estimate_context_tokens()``."""
        return self._state.tools_tokens

    def build_tools(self) -> list[Callable[..., Any]]:
        """The memory's own tools, for the agent to merge into its tools: plain
        functions whose schemas the agent derives from their signatures. None
        here; ``CompactionMemory`` with a log offers two. Empty when the memory
        was built with ``enable_memory_tools=False``."""
        return []

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
        this message, tools included) compares for this model; the whole
        report (input, output and cached tokens, with the model) is the
        record's ``usage``, so a reply's cost can be estimated. Raises
        ``InvalidMessageError`` for ``usage`` on a message that is not an
        assistant reply.
        """
        message = ChatMessage.coerce(message)
        reported = None
        if usage is not None:
            if message.role != "assistant":
                raise InvalidMessageError("usage belongs to an assistant message")
            reported = usage.input_tokens
            model = self._state.model_name
            if model is not None:
                self.calibration.observe(model, self.estimate_context_tokens(), reported)
        ingested = self._state.ingest(message)
        self._trace_message(ingested)
        self._trace_anomaly(ingested)
        if self._recorder.active:
            report: dict[str, Any] | None = None
            if usage is not None and (figures := usage.to_dict()):
                report = {**figures, "model": self._state.model_name}
            self._recorder.record(
                self._state.message_record(ingested, provider_tokens=reported, usage=report)
            )
        # A flush that has nothing to do is not awaited: two coroutines less a message.
        if not self._recorder.idle:
            await self.flush()
        await self._after_add(ingested)
        if not self._recorder.idle:
            await self.flush()
        return ingested.context_message

    async def flush(self) -> None:
        """Write out what a memory with an asynchronous log store has queued and
        await the asynchronous listeners (see ``memory.log.recorder``)."""
        await self._recorder.flush()

    def _trace_anomaly(self, ingested: Ingested) -> None:
        c = ingested.classification
        if c.anomaly:
            self._trace.add("anomaly", seq=ingested.seq, detail=c.anomaly, in_context=c.in_context)

    def _trace_message(self, ingested: Ingested) -> None:
        c = ingested.classification
        event: dict[str, Any] = {
            "type": "message",
            "timestamp": ingested.ts,
            "seq": ingested.seq,
            "role": ingested.message.role,
            "unit": c.unit,
            "unit_index": c.unit_index,
            # Read when the trace is, if the memory counts lazily (``memory.lazy_tokens``).
            "tokens": ingested.counted if not ingested.counted.counted else ingested.tokens,
            "context_tokens": (
                ingested.context if ingested.context is not None else self.estimate_context_tokens()
            ),
        }
        if ingested.message.tool_calls:
            event["tool_calls"] = [
                {"id": t.id, "name": t.name} for t in ingested.message.tool_calls
            ]
        if ingested.message.tool_call_id is not None:
            event["tool_call_id"] = ingested.message.tool_call_id
        if ingested.message.role == "tool":
            event["tool_name"] = ingested.message.name
        if ingested.truncation is not None:
            event["truncated"] = ingested.truncation.as_dict()
        self._trace.append(event)

    def compaction_due(self) -> int | None:
        """The threshold the context is over when this memory is about to
        compact on its own (see ``CompactionBase``); ``None`` here: never."""
        return None

    async def _after_add(self, ingested: Ingested) -> None:
        """The strategy's reaction to a message added and logged (auto-compaction)."""

    # -- trace, state, lifecycle -----------------------------------------------

    def get_memory_trace(self) -> dict[str, Any]:
        """The bounded trace: ``{"events": [...], "total_events", "total_compactions",
        "failed_compactions", "compaction_warnings", "anomalies", "dropped_events"}``."""
        return self._trace.snapshot()

    def get_session_state(self) -> SessionState:
        """A JSON-serialisable snapshot of the context (``to_dict()`` / ``from_dict()``)."""
        state = self._state
        return SessionState(
            system_prompt=state.system_prompt,
            messages=[m.to_dict() for m in state.messages],
            model_name=state.model_name,
            system_role=state.system_role,
        )

    def _clear_context(self) -> dict[str, int]:
        trace_events = self._trace.clear()
        return {"messages": self._state.reset(), "trace_events": trace_events}

    def clear_messages(self) -> int:
        """Empty the conversation; keep the system prompt, the trace and the tools.

        Unlike ``reset()``, the trace stays, and a compacting memory keeps its
        compaction numbering (the summary goes with the messages). A memory
        with a log records a ``reset`` with ``scope: "messages"``, so a
        restore starts from the same empty context; the log keeps every
        message. Returns how many messages left the context.
        """
        state = self._state
        cleared = state.clear_messages()
        self._trace.add("messages_cleared", messages=cleared, through_seq=state.next_seq - 1)
        if self._recorder.active:
            self._recorder.record(
                Reset(
                    ts=now_iso(),
                    through_seq=state.next_seq - 1,
                    context_tokens=self.estimate_context_tokens(),
                    scope=RESET_SCOPE_MESSAGES,
                )
            )
        return cleared

    def fork(self) -> Self:
        """An independent copy: same context, separate lists and trace."""
        clone = self._copy()
        clone._recorder = Recorder("", None, clone._session_meta)
        return clone

    def _copy(self) -> Self:
        """A shallow copy with its own state and trace (a fork's start)."""
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone._state = self._state.copy()
        clone._trace = self._trace.copy()
        return clone

    @abstractmethod
    async def compact(self, **kwargs: Any) -> Any:
        """Reduce the context; what that means is the strategy's."""

    @abstractmethod
    def reset(self) -> dict[str, int]:
        """Clear the working state; returns counts of what was cleared."""
