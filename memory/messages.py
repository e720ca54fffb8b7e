"""Chat messages in the OpenAI chat-completions shape.

A ``ChatMessage`` converts losslessly to and from the dicts of the OpenAI chat
format (https://platform.openai.com/docs/api-reference/chat/create):
``ChatMessage.from_dict(d).to_dict() == d`` for every well-formed ``d`` (one
a JSON log can hold: see below), and fields this module does not know
(``thought``, ``agent``, ``refusal``, ``audio``...) are kept in ``extra`` and
written back out.

Roles: ``system`` and ``developer`` (OpenAI's current name for instructions,
used by its reasoning models) are instructions; a memory holds them as its
system prompt, with their role (``set_system_prompt(text, role=...)``).
``user``, ``assistant`` and ``tool`` make the conversation.

Reasoning has two fields of its own, named as LiteLLM names them:
``reasoning_content`` (text, as DeepSeek, Kimi and GLM thinking modes return it
and require back on tool-call turns) and ``thinking_blocks`` (Anthropic
``thinking`` / ``redacted_thinking`` blocks, kept verbatim with their
``signature``, which the API checks when they are sent back).
``reasoning_text`` gives either as plain text (what a summary reads).

Tool calls are ``function`` calls (``{"id", "type": "function", "function":
{"name", "arguments"}}``) or ``custom`` (freeform) calls (``{"id", "type":
"custom", "custom": {"name", "input"}}``, GPT-5); a ``ToolCall`` keeps its type
and shape, and holds a custom call's ``input`` in ``arguments``.

Text the log cannot encode. Every string in a message, at any depth, goes
through ``memory.json_values.clean_text`` when the message is built (lone
surrogates become U+FFFD), so what is counted, kept and logged is the same
text, and a message holds JSON values only: anything else (a set, a datetime,
NaN, an integer past 64 bits) raises ``InvalidMessageError`` at once, never
later when the log is written.

Real logs bend the format; ``from_dict`` accepts these variants:

- ``content: null`` (an assistant message that only calls tools) stays ``None``,
  distinct from ``""``;
- ``content`` as a list of parts (``{"type": "text", "text": ...}``,
  ``{"type": "image_url", ...}``), on any role (tool results included), is
  kept as given;
- a tool call whose ``arguments`` is a JSON object rather than a string is kept
  as the compact JSON string of that object (the only normalisation);
- a tool call with ``"id": ""`` (Gemini's compatibility layer, LM Studio,
  some gateways) is kept as it is; a memory gives it an id when it enters
  the context (see ``memory.base``);
- ``tool_call_ids: [...]`` (SWE-agent) instead of ``tool_call_id`` is read as
  ``tool_call_id`` when it names exactly one call, and kept in ``extra`` as well
  so that the message writes back out unchanged;
- the legacy function-calling API: an assistant message's ``function_call``
  is read as its one tool call (with an empty id), and a ``role: "function"``
  message as a tool result without an id (``role`` is ``"tool"``); both write
  back out in their legacy form, and are sent in the current one.

How a reply ended. The library adds three fields of its own to an assistant
message it stores, kept in ``extra`` (so they round-trip and are logged) and
never sent to a provider (``to_api_dict`` leaves them out):

- ``"finish_reason"``, only when the reply did not end normally (``"stop"`` or
  ``"tool_calls"``): the provider's reason (``"length"``: cut at the output
  limit; ``"content_filter"``: stopped by the provider's filter, or an
  Anthropic refusal; other values as the provider sent them), or the
  library's own ``"interrupted"`` (the stream was stopped) and
  ``"invalid_tool_calls"`` (a call's arguments were not JSON);
- ``"interrupted": true`` on a partial answer kept when the turn was stopped
  (older logs carry only this one);
- ``"invalid_tool_calls"``: the calls of a reply that could not be made, as
  ``{"id", "name", "arguments", "error"}`` objects. A reply holding a call
  whose arguments are not JSON keeps none of its calls as ``tool_calls``:
  none was run, and a provider refuses such a call sent back.

``ChatMessage.finish_reason`` reads the first two.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from .errors import ConfigurationError
from .json_values import NotJSONError, clean_json, clean_text
from .json_values import loads as load_json

Role = Literal["system", "developer", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset({"system", "developer", "user", "assistant", "tool"})
InstructionRole = Literal["system", "developer"]
INSTRUCTION_ROLES: frozenset[str] = frozenset({"system", "developer"})
Content = str | list[dict[str, Any]] | None

_TOOL_CALL_KEYS = frozenset({"id", "type"})
_MESSAGE_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id", "name"})
# The library's own fields of a stored reply (see the module docstring).
FINISH_REASON = "finish_reason"
INTERRUPTED = "interrupted"
INVALID_TOOL_CALLS = "invalid_tool_calls"
# Normal endings, in the OpenAI names and (as imported logs may hold them) Anthropic's.
NORMAL_FINISH_REASONS = frozenset(
    {"stop", "tool_calls", "function_call", "end_turn", "stop_sequence", "tool_use"}
)
# Markers in ``extra`` that say how a legacy message was written, so it writes back so.
_FUNCTION_ROLE = "_function_role"
_FUNCTION_CALL = "_function_call"
LEGACY_MARKERS = frozenset({_FUNCTION_ROLE, _FUNCTION_CALL})


class InvalidMessageError(ConfigurationError):
    """A message dict that cannot be read as a chat message (bad role, bad field types)."""


def _payload_keys(call_type: str) -> tuple[str, str]:
    """Where a call of ``call_type`` keeps its name and text: (object key, text key)."""
    return ("custom", "input") if call_type == "custom" else ("function", "arguments")


def _cleaned(value: Any, where: str) -> Any:
    try:
        return clean_json(value, strict=True, where=where)
    except NotJSONError as error:
        raise InvalidMessageError(str(error)) from None


def _text(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise InvalidMessageError(f"{where} must be a string, got {type(value).__name__}")
    return clean_text(value)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call requested by an assistant message.

    ``type`` is ``"function"`` (``arguments`` is the JSON text the model
    produced; it may be invalid JSON: models do that, and the memory keeps it
    as it was) or ``"custom"`` (a freeform call: ``arguments`` holds its
    ``input`` text, also readable as ``input``). ``id`` may be ``""`` as some
    servers send it. Raises ``InvalidMessageError`` for a field that is not
    text or an ``extra`` that is not JSON.
    """

    id: str
    name: str
    arguments: str = ""
    type: str = "function"
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("id", "name", "arguments", "type"):
            object.__setattr__(self, name, _text(getattr(self, name), f"tool call {name!r}"))
        object.__setattr__(self, "extra", _cleaned(self.extra, "tool call extra"))

    @property
    def input(self) -> str:
        """A custom call's freeform input (the same text as ``arguments``)."""
        return self.arguments

    def arguments_error(self) -> str | None:
        """Why a function call's ``arguments`` are not JSON, or ``None`` when they are.

        An empty (or blank) text counts as ``{}``, as providers send a call
        without arguments; a custom call's input is free text, never an error.
        JSON is read strictly (RFC 8259: no ``NaN``, no trailing text).
        """
        if self.type == "custom" or not self.arguments.strip():
            return None
        try:
            load_json(self.arguments)
        except ValueError as error:  # orjson's JSONDecodeError is a ValueError
            return f"the arguments of {self.name or 'a call'} are not valid JSON ({error})"
        return None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCall:
        if not isinstance(data, Mapping):
            raise InvalidMessageError(f"a tool call must be an object, got {type(data).__name__}")
        call_type = data.get("type", "function")
        if not isinstance(call_type, str):
            raise InvalidMessageError("tool call 'type' must be a string")
        key, text_key = _payload_keys(call_type)
        payload = data.get(key) or {}
        if not isinstance(payload, Mapping):
            raise InvalidMessageError(f"tool call {key!r} must be an object")
        arguments = payload.get(text_key, "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
        call_id = data.get("id")
        if not isinstance(call_id, str):
            raise InvalidMessageError("tool call without an 'id'")
        name = payload.get("name", "")
        if not isinstance(name, str):
            raise InvalidMessageError(f"tool call {key} 'name' must be a string")
        extra = {k: v for k, v in data.items() if k not in _TOOL_CALL_KEYS and k != key}
        payload_extra = {k: v for k, v in payload.items() if k not in ("name", text_key)}
        if payload_extra:
            extra[key] = payload_extra
        return cls(id=call_id, name=name, arguments=arguments, type=call_type, extra=extra)

    def to_dict(self) -> dict[str, Any]:
        key, text_key = _payload_keys(self.type)
        payload: dict[str, Any] = {"name": self.name, text_key: self.arguments}
        if not self.extra:  # the common call: no copy of an empty mapping to make
            return {"id": self.id, "type": self.type, key: payload}
        extra = dict(self.extra)
        payload.update(extra.pop(key, {}))
        return {"id": self.id, "type": self.type, key: payload, **extra}

    def to_api_dict(self) -> dict[str, Any]:
        """The call as a provider takes it: its id, type, name and text only."""
        key, text_key = _payload_keys(self.type)
        payload = {"name": self.name, text_key: self.arguments}
        return {"id": self.id, "type": self.type, key: payload}


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message of a conversation. Immutable: the memory never edits a message.

    ``content`` is text, a list of content parts, or ``None``. ``tool_calls`` is
    set on assistant messages that call tools; ``tool_call_id`` on tool results.
    ``reasoning_content`` and ``thinking_blocks`` carry an assistant's reasoning
    (see the module docstring); ``None`` when the provider returned none.
    Every string is cleaned of lone surrogates when the message is built;
    raises ``InvalidMessageError`` for an unknown role or a value that is not JSON.
    """

    role: Role
    content: Content = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    reasoning_content: str | None = None
    thinking_blocks: tuple[Mapping[str, Any], ...] | None = None

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise InvalidMessageError(f"unknown message role {self.role!r}")
        if self.content is not None and not isinstance(self.content, str | list | tuple):
            raise InvalidMessageError(
                f"message content must be a string, a list of parts or null, "
                f"got {type(self.content).__name__}"
            )
        set_ = object.__setattr__
        set_(self, "content", _cleaned(self.content, "content"))
        for name in ("tool_call_id", "name", "reasoning_content"):
            value = getattr(self, name)
            if value is not None:
                set_(self, name, _text(value, repr(name)))
        if not all(isinstance(c, ToolCall) for c in self.tool_calls):
            raise InvalidMessageError("'tool_calls' must hold ToolCall objects")
        set_(self, "tool_calls", tuple(self.tool_calls))
        set_(self, "extra", _cleaned(self.extra, "extra"))
        if self.thinking_blocks is not None:
            set_(
                self,
                "thinking_blocks",
                tuple(_cleaned(b, "thinking block") for b in self.thinking_blocks),
            )

    @classmethod
    def system(cls, content: str) -> ChatMessage:
        return cls(role="system", content=content)

    @classmethod
    def developer(cls, content: str) -> ChatMessage:
        return cls(role="developer", content=content)

    @classmethod
    def user(cls, content: Content) -> ChatMessage:
        return cls(role="user", content=content)

    @classmethod
    def assistant(
        cls, content: Content = None, tool_calls: list[ToolCall] | tuple[ToolCall, ...] = ()
    ) -> ChatMessage:
        return cls(role="assistant", content=content, tool_calls=tuple(tool_calls))

    @classmethod
    def tool(cls, content: Content, tool_call_id: str, name: str | None = None) -> ChatMessage:
        return cls(role="tool", content=content, tool_call_id=tool_call_id, name=name)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChatMessage:
        """Read an OpenAI chat-format dict. Raises ``InvalidMessageError``."""
        if not isinstance(data, Mapping):
            raise InvalidMessageError(f"a message must be an object, got {type(data).__name__}")
        role = data.get("role")
        extra = {k: v for k, v in data.items() if k not in _MESSAGE_KEYS}
        if role == "function":  # the legacy API's tool result
            role = "tool"
            extra[_FUNCTION_ROLE] = True
        if role not in ROLES:
            raise InvalidMessageError(f"unknown message role {role!r}")
        content = data.get("content")
        if content is not None and not isinstance(content, str | list):
            raise InvalidMessageError(
                f"message content must be a string, a list of parts or null, "
                f"got {type(content).__name__}"
            )
        if isinstance(content, list) and not all(isinstance(p, Mapping) for p in content):
            raise InvalidMessageError("every content part must be an object")
        if isinstance(content, list) and not all(_typed_part(p) for p in content):
            raise InvalidMessageError("a content part's 'type' must be a string")
        raw_calls = data.get("tool_calls") or ()
        if not isinstance(raw_calls, list | tuple):
            raise InvalidMessageError("'tool_calls' must be a list")
        calls = tuple(ToolCall.from_dict(c) for c in raw_calls)
        function_call = data.get("function_call")
        if not calls and "tool_calls" not in data and isinstance(function_call, Mapping):
            calls = (ToolCall.from_dict({"id": "", "function": function_call}),)
            del extra["function_call"]
            extra[_FUNCTION_CALL] = True
        tool_call_id = data.get("tool_call_id")
        if tool_call_id is None and role == "tool":
            ids = data.get("tool_call_ids")
            if isinstance(ids, list) and len(ids) == 1 and isinstance(ids[0], str):
                tool_call_id = ids[0]
                extra["_tool_call_id_from_list"] = True
        if tool_call_id is not None and not isinstance(tool_call_id, str):
            raise InvalidMessageError("'tool_call_id' must be a string")
        name = data.get("name")
        if name is not None and not isinstance(name, str):
            raise InvalidMessageError("'name' must be a string")
        # Only well-formed values become fields; anything else (a null, a
        # string where a list belongs) stays in ``extra`` so it writes back unchanged.
        reasoning = data.get("reasoning_content")
        if isinstance(reasoning, str):
            extra.pop("reasoning_content")
        else:
            reasoning = None
        blocks = data.get("thinking_blocks")
        if isinstance(blocks, list) and all(isinstance(b, Mapping) for b in blocks):
            extra.pop("thinking_blocks")
            thinking_blocks: tuple[Mapping[str, Any], ...] | None = tuple(dict(b) for b in blocks)
        else:
            thinking_blocks = None
        if "tool_calls" in data and data["tool_calls"] is None:
            extra["_tool_calls_null"] = True
        elif "tool_calls" in data and not raw_calls:
            extra["_tool_calls_empty"] = True
        return cls(
            role=cast(Role, role),
            content=content,
            tool_calls=calls,
            tool_call_id=tool_call_id,
            name=name,
            extra=extra,
            reasoning_content=reasoning,
            thinking_blocks=thinking_blocks,
        )

    @classmethod
    def coerce(cls, message: ChatMessage | Mapping[str, Any]) -> ChatMessage:
        """Return ``message`` as a ``ChatMessage`` (dicts go through ``from_dict``)."""
        return message if isinstance(message, ChatMessage) else cls.from_dict(message)

    def to_dict(self) -> dict[str, Any]:
        """The OpenAI chat-format dict, with ``extra`` fields written back.

        Each call builds a new dict, with new tool-call, payload and thinking
        block containers: a caller may edit it without changing the message.
        ``content`` parts and ``extra`` values are the message's own (read them only).
        Nothing is kept: a copy of a kept form would allocate as many
        containers as a build, and a long context's first session state would
        pay for both (and for the garbage collection of twice the dicts).
        """
        if not self.extra:
            return self._build_plain_dict()
        return self._build_dict()

    def _build_dict(self) -> dict[str, Any]:
        extra = dict(self.extra)
        role = "function" if extra.pop(_FUNCTION_ROLE, False) else self.role
        out: dict[str, Any] = {"role": role, "content": self.content}
        if extra.pop(_FUNCTION_CALL, False) and len(self.tool_calls) == 1:
            out["function_call"] = self.tool_calls[0].to_dict()["function"]
        elif self.tool_calls:
            out["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        elif extra.pop("_tool_calls_null", False):
            out["tool_calls"] = None
        elif extra.pop("_tool_calls_empty", False):
            out["tool_calls"] = []
        if self.tool_call_id is not None and not extra.pop("_tool_call_id_from_list", False):
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        if self.reasoning_content is not None:
            out["reasoning_content"] = self.reasoning_content
        if self.thinking_blocks is not None:
            out["thinking_blocks"] = [dict(b) for b in self.thinking_blocks]
        out.update(extra)
        return out

    def _build_plain_dict(self) -> dict[str, Any]:
        """``_build_dict`` of a message without ``extra`` fields (most of a
        context): no copy of the empty mapping, no markers to look for. The
        dicts a long context's first session state builds are what its
        garbage collection walks, so each one not made counts."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        if self.reasoning_content is not None:
            out["reasoning_content"] = self.reasoning_content
        if self.thinking_blocks is not None:
            out["thinking_blocks"] = [dict(b) for b in self.thinking_blocks]
        return out

    def to_api_dict(self) -> dict[str, Any]:
        """The dict to send to a provider: only the fields of the chat format.

        Source-specific extras (``agent``, ``thought``...) are dropped, a
        ``tool_call_ids`` list is sent as the ``tool_call_id`` the API expects,
        tool calls go out in their own shape (``function`` or ``custom``), and
        legacy function calls and results in the current form. An assistant's
        ``refusal`` text and its ``audio`` reference (``{"id"}``, the form a
        request takes) are sent: the API accepts them back on assistant messages.
        Reasoning is the client's to send (it knows what its provider wants).
        """
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [c.to_api_dict() for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        if self.role == "assistant":
            if self.refusal is not None:
                out["refusal"] = self.refusal
            audio = self.extra.get("audio")
            if isinstance(audio, Mapping) and isinstance(audio.get("id"), str):
                out["audio"] = {"id": audio["id"]}
        return out

    @property
    def text(self) -> str:
        """The message's text: ``content`` if a string, its text parts joined, or ``""``."""
        if isinstance(self.content, str):
            return self.content
        if not self.content:
            return ""
        return "\n".join(
            str(p.get("text", "")) for p in self.content if p.get("type") in ("text", "input_text")
        )

    @property
    def finish_reason(self) -> str | None:
        """Why a stored reply ended, when not normally (``"length"``,
        ``"content_filter"``, ``"interrupted"``, ``"invalid_tool_calls"``...;
        see the module docstring); ``None`` for a reply that ended normally
        and for every other message."""
        if self.role != "assistant":
            return None
        value = self.extra.get(FINISH_REASON)
        if isinstance(value, str):
            return None if value in NORMAL_FINISH_REASONS else value
        return INTERRUPTED if self.extra.get(INTERRUPTED) is True else None

    @property
    def refusal(self) -> str | None:
        """An assistant's refusal text (``refusal``, kept in ``extra``), if any."""
        value = self.extra.get("refusal")
        return value if isinstance(value, str) else None

    @property
    def reasoning_text(self) -> str:
        """The assistant's reasoning as plain text, ``""`` when it has none.

        The text of its ``thinking`` blocks joined by blank lines when it has
        any (a ``redacted_thinking`` block has no readable text), else
        ``reasoning_content``. This is what a summary reads and a page shows.
        """
        if self.thinking_blocks:
            texts = [b.get("thinking") for b in self.thinking_blocks]
            return "\n\n".join(t for t in texts if isinstance(t, str) and t)
        return self.reasoning_content or ""

    @property
    def tool_call_ids(self) -> tuple[str, ...]:
        """Ids of the calls this tool message answers (several for SWE-agent style results)."""
        return answered_call_ids(self.role, self.tool_call_id, self.extra.get("tool_call_ids"))


def answered_call_ids(role: object, tool_call_id: object, tool_call_ids: object) -> tuple[str, ...]:
    """The ids a tool message answers: its ``tool_call_ids`` list when it has
    one (SWE-agent), else its ``tool_call_id``; ``()`` for other roles."""
    if role != "tool":
        return ()
    if isinstance(tool_call_ids, list) and tool_call_ids:
        return tuple(str(i) for i in tool_call_ids)
    return (tool_call_id,) if isinstance(tool_call_id, str) else ()


def _typed_part(part: Mapping[str, Any]) -> bool:
    kind = part.get("type")
    return kind is None or isinstance(kind, str)
