"""``ReActAgent``: a small ReAct loop over a ``ChatClient`` and a memory.

Each step sends ``memory.get_context()`` to the model and adds the reply to
the memory. When the reply calls tools, they run concurrently and their
results are added in call order; the loop ends at the first reply without
tool calls. Tools are plain Python functions (sync or async); their schemas
are derived from the signature and the docstring.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import types
from collections.abc import Callable, Sequence
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from .base import BaseMemory
from .clients.base import ChatClient
from .errors import ConfigurationError, MotusMemoryError
from .factory import create_memory
from .messages import ChatMessage, ToolCall

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


class ReActAgent:
    """Answers a user message by calling the model and its tools in a loop.

    ``memory`` is used as given; otherwise ``create_memory(memory_type)`` builds
    one (``None``: a ``BasicMemory``). A non-empty ``system_prompt`` replaces
    the memory's; an empty one keeps it (a restored memory keeps its own).
    The memory gets the client and model it was not given (``set_model``).

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
        self.tools: dict[str, Callable[..., Any]] = {}
        self.tool_schemas: list[dict[str, Any]] = []
        for fn in tools or ():
            schema = tool_schema(fn)
            name = schema["function"]["name"]
            if name in self.tools:
                raise ConfigurationError(f"two tools are named {name!r}")
            self.tools[name] = fn
            self.tool_schemas.append(schema)
        self.client = client
        self.model_name = model_name
        self.max_steps = max_steps
        self.memory = memory if memory is not None else create_memory(memory_type)
        if system_prompt:
            self.memory.set_system_prompt(system_prompt)
        self.memory.set_model(client=client, model_name=model_name)

    async def run(self, user_message: str | ChatMessage | list[dict[str, Any]]) -> str:
        """Add ``user_message`` (text, a message, or content parts) and return the
        text of the model's first reply without tool calls.

        A tool that is unknown, gets arguments that are not a JSON object of its
        parameters, or raises, answers ``"Error: ..."`` so the model can recover.
        Raises ``MaxStepsExceeded`` after ``max_steps`` model calls; errors of the
        client (``ProviderError``) and of the memory (``LogError``) propagate, and
        so does cancellation, with every message received so far in the memory.
        """
        if not isinstance(user_message, ChatMessage):
            user_message = ChatMessage.user(user_message)
        await self.memory.add_message(user_message)
        for _ in range(self.max_steps):
            completion = await self.client.create(
                model=self.model_name,
                messages=self.memory.get_context(),
                tools=self.tool_schemas or None,
            )
            reply = completion.message
            await self.memory.add_message(reply)
            if not reply.tool_calls:
                return reply.text
            results = await asyncio.gather(*(self._call(call) for call in reply.tool_calls))
            for call, text in zip(reply.tool_calls, results, strict=True):
                await self.memory.add_message(ChatMessage.tool(text, call.id, name=call.name))
        raise MaxStepsExceeded(self.max_steps)

    async def _call(self, call: ToolCall) -> str:
        fn = self.tools.get(call.name)
        if fn is None:
            return f"Error: unknown tool {call.name!r}; the tools are {sorted(self.tools)}"
        try:
            args = json.loads(call.arguments or "{}")
        except json.JSONDecodeError as exc:
            return f"Error: the arguments of {call.name} are not valid JSON ({exc})"
        try:
            if not isinstance(args, dict):
                raise TypeError("the arguments must be a JSON object")
            inspect.signature(fn).bind(**args)
        except TypeError as exc:
            return f"Error: bad arguments for {call.name}: {exc}"
        try:
            if inspect.iscoroutinefunction(fn):
                result = await fn(**args)
            else:  # a thread, so a blocking tool does not stall the others
                result = await asyncio.to_thread(fn, **args)
                if inspect.isawaitable(result):
                    result = await result
        except Exception as exc:  # any tool failure goes back to the model, which may recover
            return f"Error: {call.name} raised {type(exc).__name__}: {exc}"
        if isinstance(result, str):
            return result
        return json.dumps(result, ensure_ascii=False, default=str)


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
