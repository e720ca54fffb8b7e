"""``AnthropicClient``: the Messages API over the official ``anthropic`` SDK.

The library's messages are in the OpenAI shape; this module converts them
(``to_anthropic``) and the replies (``message_from_blocks``):

- system messages become the ``system`` parameter (joined, in order);
- an assistant message becomes its ``thinking_blocks`` (verbatim, signature
  included, which the API checks), then a text block, then one ``tool_use``
  block per call (``input`` is the parsed ``arguments``);
- tool results become ``tool_result`` blocks of a user message; consecutive
  results, and a user message right after them, merge into one user message,
  since the API wants the roles to alternate;
- tools in the OpenAI ``{"type": "function", "function": {...}}`` shape become
  ``{"name", "description", "input_schema"}``; tools already in Anthropic's
  shape are sent as they are.

A reply's thinking comes back twice: verbatim as ``thinking_blocks`` (sent
back unchanged) and as plain text in ``reasoning_content`` (for display).
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import StreamInterruptedError
from ..messages import ChatMessage, ToolCall
from ._provider import (
    DEFAULT_TIMEOUT_S,
    MAX_RETRY_WAIT_S,
    OwnedHttpClient,
    bounded_retry_class,
    default_http_client,
    map_sdk_error,
    resolve_api_key,
)
from .base import (
    ChatStreamEvent,
    Completion,
    CompletionDone,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallStart,
    Usage,
)

if TYPE_CHECKING:
    import anthropic
    import httpx2

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
# The API requires max_tokens on every request.
DEFAULT_MAX_TOKENS = 4096

# Anthropic stop reasons in the OpenAI names ``Completion.finish_reason`` uses.
_FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}
_THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})


class AnthropicClient(OwnedHttpClient):
    """A ``StreamingChatClient`` for the Anthropic Messages API.

    ``api_key``: ``None`` reads ``ANTHROPIC_API_KEY``; required (raises
    ``ConfigurationError`` without one). Never logged nor shown in ``repr``.
    ``base_url``: ``None`` is Anthropic's. ``http_client``, ``timeout_s``,
    ``max_retries``, ``max_retry_wait_s``: as ``OpenAIChatClient`` (the SDK
    also retries 529 "overloaded"). ``max_tokens``: sent when a call gives none (the API needs
    one). ``params``: extra request fields sent every time, e.g.
    ``{"thinking": {"type": "enabled", "budget_tokens": 2048}}``.

    Calls raise ``ProviderError`` subclasses (see ``memory.errors``).
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        http_client: httpx2.AsyncClient | None = None,
        timeout_s: float | None = None,
        max_retries: int = 2,
        max_retry_wait_s: float = MAX_RETRY_WAIT_S,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        params: Mapping[str, Any] | None = None,
    ) -> None:
        self.base_url = (base_url or ANTHROPIC_BASE_URL).rstrip("/")
        self._api_key = resolve_api_key(api_key, "ANTHROPIC_API_KEY", required=True)
        self._http_client = http_client
        self._owns_http_client = http_client is None
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.max_retry_wait_s = max_retry_wait_s
        self.max_tokens = max_tokens
        self.params = dict(params or {})
        self._sdk: anthropic.AsyncAnthropic | None = None

    def __repr__(self) -> str:
        return f"AnthropicClient(base_url={self.base_url!r})"

    def _client(self) -> anthropic.AsyncAnthropic:
        if self._sdk is None:
            import anthropic

            assert self._api_key is not None  # required at construction
            if self._http_client is None:
                self._http_client = default_http_client(self.timeout_s or DEFAULT_TIMEOUT_S)
            # A timeout always goes to the SDK: without one it refuses large
            # non-streaming max_tokens outright.
            timeout = self.timeout_s
            if timeout is None:
                timeout = self._http_client.timeout.read or DEFAULT_TIMEOUT_S
            sdk = bounded_retry_class(anthropic.AsyncAnthropic)(
                api_key=self._api_key.reveal(),
                base_url=self.base_url,
                max_retries=self.max_retries,
                http_client=self._http_client,
                timeout=timeout,
                open_telemetry=False,  # no spans carrying prompts
            )
            sdk.max_retry_wait_s = self.max_retry_wait_s
            self._sdk = sdk
        return self._sdk

    def request_body(
        self,
        *,
        model: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> dict[str, Any]:
        """The request fields this client sends (without ``stream``)."""
        system, converted = to_anthropic(messages)
        body: dict[str, Any] = {
            **self.params,
            "model": model,
            "messages": converted,
            "max_tokens": max_tokens if max_tokens is not None else self.max_tokens,
        }
        if system:
            body["system"] = system
        if tools:
            body["tools"] = [anthropic_tool(t) for t in tools]
        return body

    async def create(
        self,
        *,
        model: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """One reply, whole. Raises ``ProviderError`` subclasses."""
        import anthropic

        body = self.request_body(model=model, messages=messages, tools=tools, max_tokens=max_tokens)
        try:
            reply = await self._client().messages.create(**body)
        except anthropic.AnthropicError as exc:
            raise map_sdk_error(exc, anthropic) from exc
        data = reply.to_dict()
        blocks = data.get("content") or []
        return Completion(
            message=message_from_blocks(
                blocks,
                arguments=[json.dumps(b.get("input", {}), ensure_ascii=False) for b in blocks],
            ),
            usage=_usage(data.get("usage")),
            finish_reason=_finish_reason(data.get("stop_reason")),
            model=data.get("model"),
        )

    async def stream(
        self,
        *,
        model: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> AsyncGenerator[ChatStreamEvent, None]:
        """The reply as it arrives (see ``StreamingChatClient``).

        Raises what ``create`` raises (an ``error`` event inside the stream is
        mapped by its type: ``overloaded_error`` is a ``ServerError``...), and
        ``StreamInterruptedError`` when the stream stops before ``message_stop``.
        """
        import anthropic
        import httpx2

        body = self.request_body(model=model, messages=messages, tools=tools, max_tokens=max_tokens)
        reply = _StreamedReply()
        started = False
        try:
            events = await self._client().messages.create(**body, stream=True)
            started = True
            async with events:
                async for event in events:
                    for out in reply.add(event.to_dict()):
                        yield out
        except (anthropic.AnthropicError, httpx2.TransportError) as exc:
            raise map_sdk_error(exc, anthropic, streaming=started) from exc
        if not reply.stopped:
            raise StreamInterruptedError(
                "the reply stream ended before the model finished (no message_stop)"
            )
        yield CompletionDone(reply.completion())


# -- requests -----------------------------------------------------------------------


def to_anthropic(messages: Sequence[ChatMessage]) -> tuple[str, list[dict[str, Any]]]:
    """``(system, messages)`` for the Messages API from OpenAI-shaped messages."""
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role in ("system", "developer"):
            if message.text:
                system.append(message.text)
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if not blocks:
            continue  # the API refuses empty messages
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return "\n\n".join(system), out


def _blocks(message: ChatMessage) -> list[dict[str, Any]]:
    if message.role == "tool":
        content: Any = message.content
        if isinstance(content, list):
            content = [_part(p) for p in content]
        elif not content:
            content = ""
        return [
            {"type": "tool_result", "tool_use_id": call_id, "content": content}
            for call_id in message.tool_call_ids
        ]
    blocks: list[dict[str, Any]] = []
    if message.role == "assistant":
        blocks.extend(dict(b) for b in message.thinking_blocks or ())
    if isinstance(message.content, str):
        if message.content.strip():  # the API refuses empty and blank text blocks
            blocks.append({"type": "text", "text": message.content})
    elif message.content:
        blocks.extend(_part(p) for p in message.content)
    for call in message.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": _arguments(call)}
        )
    return blocks


def _arguments(call: ToolCall) -> Any:
    if not call.arguments.strip():
        return {}
    try:
        value = json.loads(call.arguments)
    except json.JSONDecodeError:
        value = None
    # The API wants an object; what the model wrote stays visible to it.
    return value if isinstance(value, dict) else {"arguments": call.arguments}


def _part(part: Mapping[str, Any]) -> dict[str, Any]:
    kind = part.get("type")
    if kind in ("text", "input_text"):
        return {"type": "text", "text": part.get("text", "")}
    if kind == "image_url":
        image = part.get("image_url")
        url = image.get("url", "") if isinstance(image, Mapping) else str(image or "")
        if url.startswith("data:") and ";base64," in url:
            media_type, data = url[5:].split(";base64,", 1)
            source: dict[str, Any] = {"type": "base64", "media_type": media_type, "data": data}
        else:
            source = {"type": "url", "url": url}
        return {"type": "image", "source": source}
    return dict(part)  # already an Anthropic block (image, document, tool_result...)


def anthropic_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI function-tool schema as an Anthropic tool (others unchanged)."""
    function = tool.get("function")
    if tool.get("type") != "function" or not isinstance(function, Mapping):
        return dict(tool)
    out: dict[str, Any] = {
        "name": function["name"],
        "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
    }
    if function.get("description"):
        out["description"] = function["description"]
    return out


# -- replies ------------------------------------------------------------------------


def message_from_blocks(
    blocks: Sequence[Mapping[str, Any]], *, arguments: Sequence[str]
) -> ChatMessage:
    """The assistant message of a reply's content ``blocks``; ``arguments[i]``
    is the JSON text of block ``i`` when it is a ``tool_use``."""
    texts: list[str] = []
    thinking: list[dict[str, Any]] = []
    calls: list[ToolCall] = []
    for block, args in zip(blocks, arguments, strict=True):
        kind = block.get("type")
        if kind == "text":
            texts.append(block.get("text", ""))
        elif kind in _THINKING_TYPES:
            thinking.append(dict(block))
        elif kind == "tool_use":
            calls.append(
                ToolCall(id=block.get("id", ""), name=block.get("name", ""), arguments=args)
            )
    reasoning = [b["thinking"] for b in thinking if isinstance(b.get("thinking"), str)]
    return ChatMessage(
        role="assistant",
        content="".join(texts) if texts or not calls else None,
        tool_calls=tuple(calls),
        reasoning_content="\n\n".join(reasoning) if reasoning else None,
        thinking_blocks=tuple(thinking) if thinking else None,
    )


def _finish_reason(stop_reason: str | None) -> str | None:
    return _FINISH_REASONS.get(stop_reason, stop_reason) if stop_reason else None


def _usage(data: Mapping[str, Any] | None) -> Usage:
    if not data:
        return Usage()
    fresh = data.get("input_tokens")
    read = data.get("cache_read_input_tokens")
    written = data.get("cache_creation_input_tokens")
    total = None if fresh is None else fresh + (read or 0) + (written or 0)
    return Usage(
        input_tokens=total,
        output_tokens=data.get("output_tokens"),
        cached_input_tokens=read,
        cache_write_tokens=written,
    )


@dataclass
class _StreamedReply:
    """Raw stream events (as dicts) in, library events out.

    Each ``content_block_start`` opens a block at its ``index``, and the
    deltas of that index go to it (https://docs.anthropic.com/en/docs/build-with-claude/streaming,
    "Event types"). Blocks are kept in the order they opened, so a server
    that reuses an index opens a new block rather than overwriting the first,
    and a ``tool_use`` start whose ``id`` names a call already open continues
    that call.
    """

    blocks: list[dict[str, Any]] = field(default_factory=list)
    json_parts: dict[int, list[str]] = field(default_factory=dict)  # by position in blocks
    # The block each stream index writes to now, and each call's ToolCallStart index.
    open_blocks: dict[int, int] = field(default_factory=dict)
    call_positions: dict[int, int] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    stop_reason: str | None = None
    model: str | None = None
    stopped: bool = False

    def add(self, event: Mapping[str, Any]) -> list[ChatStreamEvent]:
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            self.model = message.get("model")
            self.usage.update(message.get("usage") or {})
        elif kind == "content_block_start":
            return self._start(event["index"], dict(event.get("content_block") or {}))
        elif kind == "content_block_delta":
            return self._delta(event["index"], event.get("delta") or {})
        elif kind == "message_delta":
            self.stop_reason = (event.get("delta") or {}).get("stop_reason") or self.stop_reason
            # message_delta's counts are running totals: they replace, and an
            # absent one keeps message_start's.
            self.usage.update(
                {k: v for k, v in (event.get("usage") or {}).items() if v is not None}
            )
        elif kind == "message_stop":
            self.stopped = True
        return []

    def _start(self, index: int, block: dict[str, Any]) -> list[ChatStreamEvent]:
        kind = block.get("type")
        if kind == "tool_use" and block.get("id"):
            for position, known in enumerate(self.blocks):
                if known.get("type") == "tool_use" and known.get("id") == block["id"]:
                    self.open_blocks[index] = position
                    return []
        position = len(self.blocks)
        self.blocks.append(block)
        self.open_blocks[index] = position
        if kind == "tool_use":
            call = len(self.call_positions)
            self.call_positions[position] = call
            self.json_parts[position] = []
            return [ToolCallStart(index=call, id=block.get("id", ""), name=block.get("name", ""))]
        if kind == "text" and block.get("text"):
            return [TextDelta(block["text"])]
        if kind == "thinking" and block.get("thinking"):
            return [ReasoningDelta(block["thinking"])]
        return []

    def _delta(self, index: int, delta: Mapping[str, Any]) -> list[ChatStreamEvent]:
        position = self.open_blocks.get(index)
        if position is None:
            return []
        block = self.blocks[position]
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta["text"]
            return [TextDelta(delta["text"])]
        if kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta["thinking"]
            return [ReasoningDelta(delta["thinking"])]
        if kind == "signature_delta":
            block["signature"] = delta["signature"]
        elif kind == "input_json_delta" and position in self.json_parts:
            self.json_parts[position].append(delta["partial_json"])
            return [
                ToolCallArgumentsDelta(
                    index=self.call_positions[position], text=delta["partial_json"]
                )
            ]
        return []

    def completion(self) -> Completion:
        arguments = []
        for position, block in enumerate(self.blocks):
            parts = self.json_parts.get(position)
            if parts:
                arguments.append("".join(parts))
            else:  # a call without arguments streams none: its input is complete
                arguments.append(json.dumps(block.get("input", {}), ensure_ascii=False))
        blocks = [
            {k: v for k, v in b.items() if k != "input"} if b.get("type") == "tool_use" else b
            for b in self.blocks
        ]
        return Completion(
            message=message_from_blocks(blocks, arguments=arguments),
            usage=_usage(self.usage),
            finish_reason=_finish_reason(self.stop_reason),
            model=self.model,
        )
