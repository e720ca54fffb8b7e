"""Chat messages in the OpenAI chat-completions shape.

A ``ChatMessage`` converts losslessly to and from the dicts of the OpenAI chat
format (https://platform.openai.com/docs/api-reference/chat/create):
``ChatMessage.from_dict(d).to_dict() == d`` for every well-formed ``d``, and
fields this module does not know (``thought``, ``agent``...) are kept in ``extra``
and written back out.

Reasoning has two fields of its own, named as LiteLLM names them:
``reasoning_content`` (text, as DeepSeek, Kimi and GLM thinking modes return it
and require back on tool-call turns) and ``thinking_blocks`` (Anthropic
``thinking`` / ``redacted_thinking`` blocks, kept verbatim with their
``signature``, which the API checks when they are sent back).

Real logs bend the format; ``from_dict`` accepts these variants:

- ``content: null`` (an assistant message that only calls tools) stays ``None``,
  distinct from ``""``;
- ``content`` as a list of parts (``{"type": "text", "text": ...}``,
  ``{"type": "image_url", ...}``) is kept as given;
- a tool call whose ``arguments`` is a JSON object rather than a string is kept
  as the compact JSON string of that object (the only normalisation);
- ``tool_call_ids: [...]`` (SWE-agent) instead of ``tool_call_id`` is read as
  ``tool_call_id`` when it names exactly one call, and kept in ``extra`` as well
  so that the message writes back out unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from .errors import ConfigurationError

Role = Literal["system", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset({"system", "user", "assistant", "tool"})
Content = str | list[dict[str, Any]] | None

_TOOL_CALL_KEYS = frozenset({"id", "type", "function"})
_FUNCTION_KEYS = frozenset({"name", "arguments"})
_MESSAGE_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id", "name"})


class InvalidMessageError(ConfigurationError):
    """A message dict that cannot be read as a chat message (bad role, bad field types)."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call requested by an assistant message.

    ``arguments`` is the JSON text the model produced (it may be invalid JSON:
    models do that, and the memory keeps it as it was).
    """

    id: str
    name: str
    arguments: str = ""
    type: str = "function"
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCall:
        if not isinstance(data, Mapping):
            raise InvalidMessageError(f"a tool call must be an object, got {type(data).__name__}")
        function = data.get("function") or {}
        if not isinstance(function, Mapping):
            raise InvalidMessageError("tool call 'function' must be an object")
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
        call_id = data.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise InvalidMessageError("tool call without an 'id'")
        name = function.get("name", "")
        if not isinstance(name, str):
            raise InvalidMessageError("tool call function 'name' must be a string")
        extra = {k: v for k, v in data.items() if k not in _TOOL_CALL_KEYS}
        function_extra = {k: v for k, v in function.items() if k not in _FUNCTION_KEYS}
        if function_extra:
            extra["function"] = function_extra
        return cls(
            id=call_id,
            name=name,
            arguments=arguments,
            type=str(data.get("type", "function")),
            extra=extra,
        )

    def to_dict(self) -> dict[str, Any]:
        extra = dict(self.extra)
        function: dict[str, Any] = {"name": self.name, "arguments": self.arguments}
        function.update(extra.pop("function", {}))
        return {"id": self.id, "type": self.type, "function": function, **extra}


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message of a conversation. Immutable: the memory never edits a message.

    ``content`` is text, a list of content parts, or ``None``. ``tool_calls`` is
    set on assistant messages that call tools; ``tool_call_id`` on tool results.
    ``reasoning_content`` and ``thinking_blocks`` carry an assistant's reasoning
    (see the module docstring); ``None`` when the provider returned none.
    """

    role: Role
    content: Content = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    reasoning_content: str | None = None
    thinking_blocks: tuple[Mapping[str, Any], ...] | None = None

    @classmethod
    def system(cls, content: str) -> ChatMessage:
        return cls(role="system", content=content)

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
        raw_calls = data.get("tool_calls") or ()
        if not isinstance(raw_calls, list | tuple):
            raise InvalidMessageError("'tool_calls' must be a list")
        tool_call_id = data.get("tool_call_id")
        extra = {k: v for k, v in data.items() if k not in _MESSAGE_KEYS}
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
            tool_calls=tuple(ToolCall.from_dict(c) for c in raw_calls),
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
        """The OpenAI chat-format dict, with ``extra`` fields written back."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        extra = dict(self.extra)
        if self.tool_calls:
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

    def to_api_dict(self) -> dict[str, Any]:
        """The dict to send to a provider: only the fields of the chat format.

        Source-specific extras (``agent``, ``thought``...) are dropped, and a
        ``tool_call_ids`` list is sent as the ``tool_call_id`` the API expects.
        """
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [
                {"id": c.id, "type": c.type, "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
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
