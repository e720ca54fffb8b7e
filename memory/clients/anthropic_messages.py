"""``AnthropicClient``: the Messages API over the official ``anthropic`` SDK.

The library's messages are in the OpenAI shape; this module converts them
(``to_anthropic``) and the replies (``message_from_blocks``). A request obeys
the rules ``memory.testing.strict`` checks, each from the API's documents:

- system messages become the ``system`` parameter (joined, in order), left
  out when there is no text;
- an assistant message becomes its ``thinking_blocks`` (verbatim, signature
  included, which the API checks), then a text block, then one ``tool_use``
  block per call (``input`` is the arguments as an object: ``call_input``);
  a call id the API would refuse (it takes ``[a-zA-Z0-9_-]+``) is sent in a
  safe form, the same in its ``tool_use`` and its ``tool_result``;
- tool results become ``tool_result`` blocks of a user message; consecutive
  results, and a user message right after them, merge into one user message,
  the results first;
- the roles alternate and the first is ``user``: consecutive messages of one
  role merge into one (the API would combine them anyway, but refuses some
  of the results: thinking blocks must lead an assistant turn, so those of a
  later message of the run are left out); a conversation that starts with
  the assistant gets a short user turn first (``FIRST_USER_TURN``);
- a reply kept with a ``finish_reason`` (cut off, filtered, interrupted, or
  failed: see ``memory.messages``) that no user message follows is left out:
  it was answered again, or the request would ask the model to continue it
  (a prefill, refused with extended thinking);
- empty and blank text is never sent (the API refuses empty text blocks),
  nor an assistant message holding nothing but thinking;
- tools in the OpenAI ``{"type": "function", "function": {...}}`` shape become
  ``{"name", "description", "input_schema"}``; tools already in Anthropic's
  shape are sent as they are.

A reply's thinking comes back twice: verbatim as ``thinking_blocks`` (sent
back unchanged) and as plain text in ``reasoning_content`` (for display).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError, StreamInterruptedError
from ..messages import INSTRUCTION_ROLES, ChatMessage, InvalidMessageError, ToolCall
from ..tokens.images import TEXT_PART_TYPES
from ..tokens.model_limits import get_model_limits
from ..tokens.provider_rules import CountingRules, anthropic_rules
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
    call_input,
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

    With extended thinking, ``max_tokens`` counts the thinking too and must
    exceed ``budget_tokens``: a call that gives its own ``max_tokens`` (the
    room its answer needs, as the compactor does) gets ``budget_tokens`` more,
    within the model's output limit (``memory.tokens.model_limits``).

    Raises ``ConfigurationError`` at construction for a parameter combination
    the API refuses with thinking on (see ``check_thinking_params``); calls
    raise ``ProviderError`` subclasses (see ``memory.errors``).
    """

    # The provider's rules (``memory.clients.registry``): the API's name, how it counts a request
    # (``memory.tokens.provider_rules``), and that it needs a key at any
    # ``base_url`` (the client sends ``x-api-key`` on every request).
    api_name = "Anthropic Messages"
    key_required_with_base_url = True

    @staticmethod
    def counting_rules(model: str | None, encoding_name: str) -> CountingRules:
        """How the Anthropic Messages API counts a request to ``model``
        (``provider_rules.anthropic_rules``)."""
        return anthropic_rules(model, encoding_name)

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
        self.thinking_budget = check_thinking_params(self.params, max_tokens)
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
            "max_tokens": self._max_tokens(model, max_tokens),
        }
        if system:
            body["system"] = system
        if tools:
            body["tools"] = [anthropic_tool(t) for t in tools]
        return body

    def _max_tokens(self, model: str, asked: int | None) -> int:
        if asked is None:
            return self.max_tokens  # above any thinking budget: checked at construction
        budget = self.thinking_budget
        if budget is None:
            return asked
        # "max_tokens ... includes your thinking budget" and "budget_tokens must be
        # set to a value less than max_tokens" (extended-thinking docs, "How to use
        # extended thinking" and "Max tokens and context window size").
        total = asked + budget
        limits = get_model_limits(model)
        if limits.known:
            total = min(total, limits.max_output_tokens)
        if total <= budget:
            raise ConfigurationError(
                f"thinking.budget_tokens {budget} leaves no room for an answer within "
                f"{model}'s output limit of {limits.max_output_tokens} tokens"
            )
        return total

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

# Extended thinking, https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking:
# "The minimum budget is 1,024 tokens" ("How to use extended thinking"), and
# "When thinking is enabled, you can set top_p to values between 1 and 0.95"
# ("Feature compatibility").
MIN_THINKING_BUDGET = 1024
MIN_THINKING_TOP_P = 0.95


def check_thinking_params(params: Mapping[str, Any], max_tokens: int) -> int | None:
    """The thinking budget of ``params`` (``None``: no ``"enabled"`` thinking).

    Raises ``ConfigurationError`` for what the extended-thinking docs say the
    API refuses with thinking on ("Feature compatibility"): a ``temperature``
    other than 1, ``top_k``, ``top_p`` below 0.95, a forced ``tool_choice``
    (``any`` or ``tool``); and for ``"enabled"`` thinking a ``budget_tokens``
    under 1,024 or not below ``max_tokens``.
    """
    thinking = params.get("thinking")
    if not isinstance(thinking, Mapping) or thinking.get("type") not in ("enabled", "adaptive"):
        return None
    problems = []
    if params.get("temperature", 1) != 1:
        problems.append("temperature must be 1 or unset")
    if "top_k" in params:
        problems.append("top_k must be unset")
    top_p = params.get("top_p", 1)
    if not isinstance(top_p, int | float) or not MIN_THINKING_TOP_P <= top_p <= 1:
        problems.append(f"top_p must be between {MIN_THINKING_TOP_P} and 1")
    choice = params.get("tool_choice")
    if isinstance(choice, Mapping) and choice.get("type") not in ("auto", "none"):
        problems.append("tool_choice must be auto or none (forced tool use is refused)")
    budget = thinking.get("budget_tokens")
    if thinking.get("type") == "enabled":
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < MIN_THINKING_BUDGET:
            problems.append(f"budget_tokens must be an integer of at least {MIN_THINKING_BUDGET}")
            budget = None
        elif budget >= max_tokens:
            problems.append(f"max_tokens ({max_tokens}) must be above budget_tokens ({budget})")
    if problems:
        raise ConfigurationError("with extended thinking, " + "; ".join(problems))
    return budget if thinking.get("type") == "enabled" else None


# The user turn put first when a conversation starts with the assistant: the
# API refuses a first message of another role ("first message must use the
# "user" role"), and its text must not be blank.
FIRST_USER_TURN = "(The conversation so far begins with the assistant.)"
# A call id the API takes (the Messages API's pattern for tool_use.id).
_SAFE_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_UNSAFE_ID_CHARS = re.compile(r"[^a-zA-Z0-9_-]")
# Block types the API takes in a user message and in a tool result.
_USER_BLOCKS = frozenset({"text", "image", "document", "tool_result", "search_result"})
_RESULT_BLOCKS = frozenset({"text", "image", "document", "search_result"})
_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


def to_anthropic(messages: Sequence[ChatMessage]) -> tuple[str, list[dict[str, Any]]]:
    """``(system, messages)`` for the Messages API from OpenAI-shaped messages
    (the rules are in the module docstring). Raises ``InvalidMessageError``
    when no message has anything to send (all of them empty)."""
    system: list[str] = []
    out: list[dict[str, Any]] = []
    conversation = [m for m in messages if m.role not in INSTRUCTION_ROLES]
    for message in messages:
        if message.role in INSTRUCTION_ROLES and message.text.strip():
            system.append(message.text)
    for position, message in enumerate(conversation):
        if _superseded(message, conversation[position + 1 : position + 2]):
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if not blocks:
            continue  # the API refuses empty messages
        if not out and role == "assistant":
            out.append({"role": "user", "content": [{"type": "text", "text": FIRST_USER_TURN}]})
        if out and out[-1]["role"] == role:
            # Thinking blocks lead an assistant turn; a later message's cannot.
            kept = [b for b in blocks if b.get("type") not in _THINKING_TYPES]
            out[-1]["content"].extend(kept if role == "assistant" else blocks)
        else:
            out.append({"role": role, "content": blocks})
    if not out:
        raise InvalidMessageError(
            "nothing to send: the Messages API refuses empty messages, and every message "
            "of this conversation is empty"
        )
    return "\n\n".join(system), out


def _superseded(message: ChatMessage, following: Sequence[ChatMessage]) -> bool:
    """A reply kept as cut off, filtered, interrupted or failed, with no user
    message after it."""
    if message.role != "assistant" or message.tool_calls or message.finish_reason is None:
        return False
    return not following or following[0].role != "user"


def tool_use_id(call_id: str) -> str:
    """``call_id`` as the API takes it: itself when it matches ``[a-zA-Z0-9_-]+``,
    else its safe characters and a digest of it (so two ids never become one)."""
    if _SAFE_ID.match(call_id):
        return call_id
    digest = hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{_UNSAFE_ID_CHARS.sub('_', call_id)}_{digest}"


def _blocks(message: ChatMessage) -> list[dict[str, Any]]:
    if message.role == "tool":
        content = _result_content(message.content)
        results = []
        for call_id in message.tool_call_ids:
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id(call_id)}
            if content:
                result["content"] = content
            results.append(result)
        return results
    blocks: list[dict[str, Any]] = []
    if message.role == "assistant":
        blocks.extend(dict(b) for b in message.thinking_blocks or ())
    if isinstance(message.content, str):
        if message.content.strip():  # the API refuses empty and blank text blocks
            blocks.append({"type": "text", "text": message.content})
    elif message.content:
        blocks.extend(p for p in map(_part, message.content) if p is not None)
    for call in message.tool_calls:
        blocks.append(
            {
                "type": "tool_use",
                "id": tool_use_id(call.id),
                "name": call.name,
                "input": call_input(call),
            }
        )
    if all(b.get("type") in _THINKING_TYPES for b in blocks):
        return []  # thinking alone says nothing to the model: the API strips it from past turns
    return blocks


def _result_content(content: Any) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content if content.strip() else ""
    parts = [p for p in map(_part, content or ()) if p is not None]
    return [p if p.get("type") in _RESULT_BLOCKS else _left_out(p) for p in parts]


def _part(part: Mapping[str, Any]) -> dict[str, Any] | None:
    """One content part as an Anthropic block; ``None`` for blank text."""
    kind = part.get("type")
    if kind in TEXT_PART_TYPES:
        text = part.get("text")
        return {"type": "text", "text": text} if isinstance(text, str) and text.strip() else None
    if kind == "image_url":
        image = part.get("image_url")
        url = image.get("url", "") if isinstance(image, Mapping) else str(image or "")
        if url.startswith("data:") and ";base64," in url:
            media_type, data = url[5:].split(";base64,", 1)
            if media_type not in _IMAGE_TYPES:
                return _left_out(part)
            source: dict[str, Any] = {"type": "base64", "media_type": media_type, "data": data}
        else:
            source = {"type": "url", "url": url}
        return {"type": "image", "source": source}
    if kind in _USER_BLOCKS:
        return dict(part)  # already an Anthropic block (image, document, tool_result...)
    return _left_out(part)


def _left_out(part: Mapping[str, Any]) -> dict[str, Any]:
    kind = part.get("type")
    return {"type": "text", "text": f"[a {kind} part left out: the Messages API does not take it]"}


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
