"""``ReActAgent``: a small ReAct loop over a ``ChatClient`` and a memory.

Each step streams a reply to ``memory.get_context()`` from the model (with
``stream_completion``, so any client works) and adds it to the memory. When
the reply calls tools, they run concurrently and their results are added in
call order; the loop ends at the first reply without tool calls. Tools are
plain Python functions (sync or async); their schemas are derived from the
signature and the docstring.

``stream()`` yields what happens as typed events (``memory.agent.events``);
``run()`` and ``await agent(text)`` consume the same stream. A turn that is
interrupted (``interrupt()``, or the task iterating the stream cancelled)
leaves a valid context: calls without a result get one saying they were
cancelled, and the partial answer is kept as an assistant message marked
``"interrupted": true`` and ``"finish_reason": "interrupted"`` (extra fields,
never sent to the provider).

A reply is stored as ``Completion.stored_message`` gives it: with its finish
reason when it did not end normally (cut at the output limit, filtered), and,
when one of its tool calls has arguments that are not JSON, without its calls:
none is run, the turn ends with ``InvalidReplyError``, and the history stays
one a provider accepts.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import time
import types
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from ..base import BaseMemory
from ..clients.base import (
    ChatClient,
    Completion,
    CompletionDone,
    ReasoningDelta,
    TextDelta,
    Usage,
    stream_completion,
)
from ..errors import (
    ConfigurationError,
    InvalidReplyError,
    MotusMemoryError,
    StreamInterruptedError,
)
from ..factory import create_memory
from ..log import records
from ..messages import FINISH_REASON, INTERRUPTED, ChatMessage, ToolCall
from ..run_to_end import cancel_and_wait, run_to_end
from .events import (
    AgentEvent,
    AnswerDelta,
    CompactionFailed,
    CompactionFinished,
    CompactionStarted,
    MessageAdded,
    StopReason,
    ThinkingDelta,
    ToolCallRequested,
    ToolResultReady,
    TurnError,
    TurnFinished,
    TurnStarted,
    UsageReported,
)

_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ARG_LINE = re.compile(r"^\s*(\w+)\s*(?:\([^)]*\))?\s*:\s*(.+)$")


class MaxStepsExceeded(MotusMemoryError):
    """The model was still calling tools after ``max_steps`` model calls.

    The memory holds every message up to that point, so calling ``run`` again
    continues from there.
    """

    def __init__(self, max_steps: int) -> None:
        self.max_steps = max_steps
        super().__init__(f"no final answer after {max_steps} model calls")


class AgentBusyError(MotusMemoryError):
    """``stream()`` was called while a turn of the same agent was still running."""


_CANCELLED_RESULT = "Cancelled: the turn was stopped before this call finished."
_DONE = object()


@dataclass
class _Turn:
    """What a running turn has done so far, for the clean-up of an interruption."""

    steps: int = 0
    partial: str = ""  # text of the reply being streamed, not yet in the memory
    open_calls: tuple[ToolCall, ...] = ()  # calls of the last reply still without a result
    results: dict[str, str] = field(default_factory=dict)  # finished, not yet added
    compaction_open: CompactionStarted | None = None
    finish_reason: str | None = None  # of the last reply


class ReActAgent:
    """Answers a user message by calling the model and its tools in a loop.

    ``memory`` is used as given; otherwise ``create_memory(memory_type)`` builds
    one (``None``: a ``BasicMemory``). A non-empty ``system_prompt`` replaces
    the memory's; an empty one keeps it (a restored memory keeps its own).
    The memory gets the client and model it was not given (``set_model``).
    A memory that offers tools of its own (``build_tools()``: searching its
    log, reading a summary) lends them to the agent, and a memory that
    counts tool schemas (``set_tools()``) learns their size, since every
    request carries them.

    Raises ``ConfigurationError`` when both ``memory`` and ``memory_type`` are
    given, for an unknown ``memory_type``, ``max_steps < 1``, or a tool whose
    name or parameter types cannot be described to the model.
    """

    def __init__(
        self,
        *,
        client: ChatClient,
        model_name: str,
        system_prompt: str = "",
        tools: Sequence[Callable[..., Any]] | None = None,
        memory: BaseMemory | None = None,
        memory_type: str | None = None,
        max_steps: int = 20,
    ) -> None:
        if memory is not None and memory_type is not None:
            raise ConfigurationError("give either memory or memory_type, not both")
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise ConfigurationError(f"max_steps must be an integer >= 1, got {max_steps!r}")
        self.client = client
        self.model_name = model_name
        self.max_steps = max_steps
        self.memory = memory if memory is not None else create_memory(memory_type)
        if system_prompt:
            self.memory.set_system_prompt(system_prompt)
        self.memory.set_model(client=client, model_name=model_name)
        self.tools: dict[str, Callable[..., Any]] = {}
        self.tool_schemas: list[dict[str, Any]] = []
        for fn in [*(tools or ()), *self.memory.build_tools()]:
            schema = tool_schema(fn)
            name = schema["function"]["name"]
            if name in self.tools:
                raise ConfigurationError(f"two tools are named {name!r}")
            self.tools[name] = fn
            self.tool_schemas.append(schema)
        self.memory.set_tools(self.tool_schemas)
        self._running: asyncio.Task[None] | None = None

    # -- running a turn ----------------------------------------------------------

    async def run(self, user_message: UserInput | None = None) -> str:
        """Add ``user_message`` (text, a message, or content parts) and return the
        text of the model's first reply without tool calls.

        ``None`` continues from the memory's context as it is (a retry after
        an error). A tool that is unknown, gets arguments that are not a JSON
        object of its parameters, or raises, answers ``"Error: ..."`` so the
        model can recover. Raises ``MaxStepsExceeded`` after ``max_steps``
        model calls; errors of the client (``ProviderError``) and of the
        memory (``LogError``) propagate, with every message received so far in
        the memory. When the turn is interrupted (``interrupt()``) it returns
        the partial answer; when the task running it is cancelled,
        ``CancelledError`` propagates after the context was made valid.
        """
        finished: TurnFinished | None = None
        async with aclosing(self.stream(user_message)) as events:
            async for event in events:
                if isinstance(event, TurnError):
                    raise event.error
                if isinstance(event, TurnFinished):
                    finished = event
        assert finished is not None  # the stream always ends with TurnFinished
        return finished.text

    async def __call__(self, user_message: UserInput | None = None) -> str:
        """``await agent(text)`` is ``await agent.run(text)``."""
        return await self.run(user_message)

    @property
    def running(self) -> bool:
        """Whether a turn is running now."""
        return self._running is not None and not self._running.done()

    def interrupt(self) -> bool:
        """Stop the running turn (the stream then ends with ``TurnFinished``
        ``reason="interrupted"``). Returns ``False`` when no turn runs.

        A message being written to the memory is finished first: stopping
        never leaves a record half stored."""
        if not self.running:
            return False
        assert self._running is not None
        self._running.cancel()
        return True

    async def stream(
        self, user_message: UserInput | None = None
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run one turn and yield its events as they happen (``memory.agent.events``).

        ``user_message`` as for ``run()``. The stream never raises for a failed
        turn: it yields ``TurnError`` and then ``TurnFinished``. Closing it
        early (``aclose()``, or cancelling the task that iterates it)
        interrupts the turn and waits for its clean-up. Raises
        ``AgentBusyError`` when a turn of this agent is already running, and
        ``InvalidMessageError`` for a malformed ``user_message``.
        """
        if self.running:
            raise AgentBusyError("a turn of this agent is already running")
        message = None if user_message is None else _as_user_message(user_message)
        queue: asyncio.Queue[Any] = asyncio.Queue()
        turn = _Turn()
        listener = self._listener(turn, queue.put_nowait)
        self.memory.add_listener(listener)
        task = asyncio.create_task(self._turn(message, turn, queue.put_nowait))
        task.add_done_callback(lambda _: queue.put_nowait(_DONE))
        self._running = task
        try:
            while (event := await queue.get()) is not _DONE:
                yield event
        finally:
            if not task.done():
                # The turn writes its clean-up (cancelled results, the partial
                # answer) before it ends, within a bounded time.
                await cancel_and_wait(task)
            self.memory.remove_listener(listener)
            self._running = None

    async def _turn(self, message: ChatMessage | None, turn: _Turn, emit: Emit) -> None:
        emit(TurnStarted(message))
        try:
            if message is not None:
                await self._add(message, turn, emit)
            while turn.steps < self.max_steps:
                reply = await self._step(turn, emit)
                if not reply.tool_calls:
                    emit(TurnFinished("answer", reply.text, turn.steps, turn.finish_reason))
                    return
                await self._run_tools(reply.tool_calls, turn, emit)
            raise MaxStepsExceeded(self.max_steps)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()  # this turn ends here, cleanly: nothing else to cancel
            partial = turn.partial
            await self._close_interrupted(turn, emit)
            emit(TurnFinished("interrupted", partial, turn.steps, INTERRUPTED))
        except Exception as error:  # the turn's failure is an event; run() re-raises it
            emit(TurnError(error))
            reason: StopReason = "max_steps" if isinstance(error, MaxStepsExceeded) else "error"
            emit(TurnFinished(reason, "", turn.steps, turn.finish_reason))

    async def _step(self, turn: _Turn, emit: Emit) -> ChatMessage:
        """One model call: stream the reply, add it to the memory, return it."""
        step = turn.steps
        turn.steps += 1
        completion: Completion | None = None
        stream = stream_completion(
            self.client,
            model=self.model_name,
            messages=self.memory.get_context(),
            tools=self.tool_schemas or None,
        )
        async with aclosing(stream) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    turn.partial += event.text
                    emit(AnswerDelta(event.text, step))
                elif isinstance(event, ReasoningDelta):
                    emit(ThinkingDelta(event.text, step))
                elif isinstance(event, CompletionDone):
                    completion = event.completion
        if completion is None:
            raise StreamInterruptedError("the model's stream ended without its reply")
        turn.finish_reason = completion.finish_reason
        emit(UsageReported(completion.usage, completion.model, step, completion.finish_reason))
        reply = completion.stored_message
        turn.partial = ""
        if reply.tool_calls:
            turn.open_calls = reply.tool_calls
        # The calls are answered by the ids the memory holds them under (it names
        # calls a provider sent with empty ids).
        held = await self._add(reply, turn, emit, usage=completion.usage)
        if invalid := completion.invalid_tool_calls:
            errors = [error for _, error in invalid]
            cut = (
                " (the reply was cut at the output limit)" if turn.finish_reason == "length" else ""
            )
            raise InvalidReplyError(
                f"the model's reply was stored as failed and none of its tool calls was run: "
                f"{'; '.join(errors)}{cut}",
                finish_reason=completion.finish_reason,
                errors=errors,
            )
        if held is not None and held.tool_calls:
            turn.open_calls = held.tool_calls
            return held
        return reply

    async def _run_tools(self, calls: Sequence[ToolCall], turn: _Turn, emit: Emit) -> None:
        for call in calls:
            emit(ToolCallRequested(call.id, call.name, call.arguments))
        await asyncio.gather(*(self._timed_call(call, turn, emit) for call in calls))
        for call in calls:
            content = turn.results.pop(call.id)
            await self._add(ChatMessage.tool(content, call.id, name=call.name), turn, emit)
            turn.open_calls = tuple(c for c in turn.open_calls if c.id != call.id)

    async def _timed_call(self, call: ToolCall, turn: _Turn, emit: Emit) -> None:
        started = time.monotonic()
        content, is_error = await self._call(call)
        turn.results[call.id] = content
        emit(ToolResultReady(call.id, call.name, content, is_error, time.monotonic() - started))

    async def _close_interrupted(self, turn: _Turn, emit: Emit) -> None:
        """Leave a valid context: the partial answer, marked, and a result for every call."""
        if turn.partial:
            partial = ChatMessage(
                role="assistant",
                content=turn.partial,
                extra={INTERRUPTED: True, FINISH_REASON: INTERRUPTED},
            )
            turn.partial = ""
            await self._add(partial, turn, emit)
        for call in turn.open_calls:
            content = turn.results.pop(call.id, None)
            if content is None:
                content = _CANCELLED_RESULT
                emit(ToolResultReady(call.id, call.name, content, True, 0.0))
            await self._add(ChatMessage.tool(content, call.id, name=call.name), turn, emit)
        turn.open_calls = ()

    async def _add(
        self,
        message: ChatMessage,
        turn: _Turn,
        emit: Emit,
        *,
        usage: Usage | None = None,
    ) -> ChatMessage | None:
        """Add one message; an interruption waits until the memory has it.
        Returns the message as the memory holds it.

        A record half written to an asynchronous store would be written again
        by the next flush, so the write is never abandoned midway.
        """
        adding, cancelled = await run_to_end(self.memory.add_message(message, usage=usage))
        error = adding.exception()
        if error is not None:
            raise error
        self._close_compaction(turn, emit)
        if cancelled:
            raise asyncio.CancelledError
        return adding.result()

    # -- memory records as events --------------------------------------------------

    def _listener(self, turn: _Turn, emit: Emit) -> Callable[[records.LogRecord], None]:
        memory = self.memory

        def listen(record: records.LogRecord) -> None:
            if isinstance(record, records.MessageRecord) and record.message is not None:
                emit(
                    MessageAdded(
                        seq=record.seq if record.seq is not None else memory.next_seq - 1,
                        message=record.message,
                        tokens=record.tokens or 0,
                        unit=record.unit,
                        unit_index=record.unit_index,
                        context_tokens=record.context_tokens,
                    )
                )
                # Heard after the store has the message and before the memory
                # reacts to it: what it is about to do is what compaction_due says.
                threshold = memory.compaction_due()
                if threshold is not None:
                    started = CompactionStarted(
                        tokens_before=memory.estimate_context_tokens(), threshold=threshold
                    )
                    turn.compaction_open = started
                    emit(started)
            elif isinstance(record, records.Compaction):
                turn.compaction_open = None
                emit(
                    CompactionFinished(
                        number=record.compaction_number or 0,
                        tokens_before=record.tokens_before,
                        tokens_after=record.tokens_after,
                        messages_compacted=record.messages_compacted,
                        messages_replayed=record.messages_replayed,
                        model=record.model,
                    )
                )
            elif isinstance(record, records.CompactionFailure):
                turn.compaction_open = None
                emit(CompactionFailed(record.error or "failed", record.tokens_before))
            elif isinstance(record, records.CompactionWarning) and turn.compaction_open:
                before = turn.compaction_open.tokens_before
                turn.compaction_open = None
                emit(CompactionFailed(record.reason or "skipped", before, skipped=True))

        return listen

    @staticmethod
    def _close_compaction(turn: _Turn, emit: Emit) -> None:
        """A compaction announced but neither done nor failed found nothing to fold."""
        if turn.compaction_open is not None:
            before = turn.compaction_open.tokens_before
            turn.compaction_open = None
            emit(CompactionFailed("nothing to fold yet", before, skipped=True))

    # -- tools ----------------------------------------------------------------------

    async def _call(self, call: ToolCall) -> tuple[str, bool]:
        """The tool's result as text, and whether it is an error."""
        fn = self.tools.get(call.name)
        if fn is None:
            return f"Error: unknown tool {call.name!r}; the tools are {sorted(self.tools)}", True
        try:
            args = json.loads(call.arguments or "{}")
        except json.JSONDecodeError as exc:
            return f"Error: the arguments of {call.name} are not valid JSON ({exc})", True
        try:
            if not isinstance(args, dict):
                raise TypeError("the arguments must be a JSON object")
            inspect.signature(fn).bind(**args)
        except TypeError as exc:
            return f"Error: bad arguments for {call.name}: {exc}", True
        try:
            if inspect.iscoroutinefunction(fn):
                result = await fn(**args)
            else:  # a thread, so a blocking tool does not stall the others
                result = await asyncio.to_thread(fn, **args)
                if inspect.isawaitable(result):
                    result = await result
        except Exception as exc:  # any tool failure goes back to the model, which may recover
            return f"Error: {call.name} raised {type(exc).__name__}: {exc}", True
        if isinstance(result, str):
            return result, False
        return json.dumps(result, ensure_ascii=False, default=str), False


UserInput = str | ChatMessage | list[dict[str, Any]]
Emit = Callable[[Any], None]


def _as_user_message(user_message: UserInput) -> ChatMessage:
    if isinstance(user_message, ChatMessage):
        return user_message
    return ChatMessage.user(user_message)


def tool_schema(fn: Callable[..., Any]) -> dict[str, Any]:
    """The OpenAI function-tool schema of ``fn``: its name, the first paragraph of
    its docstring, and its parameters (Google-style ``Args:`` lines describe
    them; those without a default are required). Raises ``ConfigurationError``."""
    name = getattr(fn, "__name__", "")
    if not callable(fn) or not _TOOL_NAME.match(name):
        raise ConfigurationError(f"a tool must be a function named [A-Za-z0-9_-]+, got {fn!r}")
    try:
        hints = get_type_hints(fn)
    except Exception as exc:  # NameError or TypeError from an unresolvable annotation
        raise ConfigurationError(f"tool {name}: cannot read its annotations: {exc}") from exc
    doc = inspect.getdoc(fn) or ""
    args_section = doc.partition("\nArgs:")[2].split("\n\n", 1)[0]
    notes = {m[1]: m[2] for line in args_section.splitlines() if (m := _ARG_LINE.match(line))}
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        try:
            prop = _json_schema(hints.get(param.name, Any))
        except ConfigurationError as exc:
            raise ConfigurationError(f"tool {name}, parameter {param.name}: {exc}") from None
        if param.name in notes:
            prop["description"] = notes[param.name].strip()
        properties[param.name] = prop
        if param.default is param.empty:
            required.append(param.name)
    description = " ".join(doc.split("\n\n", 1)[0].split())
    parameters = {"type": "object", "properties": properties, "required": required}
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def _json_schema(hint: Any) -> dict[str, Any]:
    if hint is Any:
        return {}
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    if hint is type(None):
        return {"type": "null"}
    origin, args = get_origin(hint), get_args(hint)
    if hint is list or origin is list:
        return {"type": "array", **({"items": _json_schema(args[0])} if args else {})}
    if hint is dict or origin is dict:
        extra = {"additionalProperties": _json_schema(args[1])} if args else {}
        return {"type": "object", **extra}
    if origin is Literal:
        return {"enum": list(args)}
    if origin is Union or origin is types.UnionType:
        return {"anyOf": [_json_schema(arg) for arg in args]}
    raise ConfigurationError(f"no JSON schema for the type {hint!r}")
