"""``OpenAIChatClient``: chat completions over the official ``openai`` SDK.

Works with OpenAI and with any server of the same API (vLLM, Ollama,
llama.cpp's server, OpenRouter, LM Studio): give its ``base_url``. The SDK
does the HTTP, the SSE parsing and the retries (bounded by ``max_retries``,
honouring ``retry-after``; 408, 409, 429, 5xx and connection failures only,
never another 4xx); this module converts messages and replies and maps errors
onto the library's ``ProviderError`` tree.

The streamed reply is assembled here rather than by the SDK's
``ChatCompletionStreamState``: compatible servers bend the chunk format (a
tool call without an ``index``, several calls on index 0 told apart by their
ids, their fragments interleaved, ``reasoning`` instead of
``reasoning_content``), and the SDK's accumulator raises on the first and
glues the second's fragments into one call.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from ..errors import StreamInterruptedError
from ..messages import ChatMessage, ToolCall
from ..tokens.images import TEXT_PART_TYPES
from ..tokens.provider_rules import CountingRules, openai_rules
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
    import httpx2
    import openai

OPENAI_BASE_URL = "https://api.openai.com/v1"
# A local server (Ollama, vLLM, llama.cpp) ignores the key, but the SDK needs one.
LOCAL_PLACEHOLDER_KEY = "no-key"

ReasoningPolicy = Literal["tool_calls", "always", "never"]


class OpenAIChatClient(OwnedHttpClient):
    """A ``StreamingChatClient`` for the OpenAI chat-completions API.

    ``base_url``: the API root (``"http://127.0.0.1:11434/v1"`` for Ollama);
    ``None`` is OpenAI's. ``api_key``: ``None`` reads ``OPENAI_API_KEY``; it is
    required for OpenAI itself and optional for another ``base_url``. It is
    never logged nor shown in ``repr``.

    ``http_client``: your ``httpx2.AsyncClient`` (timeouts, limits, a test
    transport); it stays yours to close. Without one the client builds its own
    on first use (``timeout_s`` per read, default 120 s; 10 s to connect; 20
    connections), closed by ``aclose()``. ``timeout_s`` given with your client
    overrides that client's timeout.

    ``max_retries``: retries the SDK makes after a 408, 409, 429, 5xx, timeout
    or dropped connection, waiting what ``retry-after`` asks or backing off
    from 0.5 s. A provider asking to wait more than ``max_retry_wait_s``
    (default 60 s) is not retried: its ``RateLimitError`` (or ``ServerError``)
    comes at once, with ``retry_after`` set. ``params``: extra request fields sent every time
    (``temperature``, ``reasoning_effort``, ``extra_body``...).

    ``send_reasoning_content``: when an assistant message's ``reasoning_content``
    goes back to the provider. DeepSeek, Kimi and GLM thinking modes require it
    on tool-call turns (``"tool_calls"``, the default); ``"always"`` or
    ``"never"`` for providers that want all or none of it.

    Raises ``ConfigurationError`` at construction when OpenAI's own API is
    meant and there is no key; calls raise ``ProviderError`` subclasses.
    """

    # The provider's rules (``memory.clients.registry``): the API's name, how it counts a request
    # (``memory.tokens.provider_rules``), and that a key is needed only for
    # OpenAI's own API: a server at another ``base_url`` may take none.
    api_name = "OpenAI chat completions"
    key_required_with_base_url = False

    @staticmethod
    def counting_rules(model: str | None, encoding_name: str) -> CountingRules:
        """How OpenAI's chat completions count a request to ``model``
        (``provider_rules.openai_rules``)."""
        return openai_rules(model, encoding_name)

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        http_client: httpx2.AsyncClient | None = None,
        timeout_s: float | None = None,
        max_retries: int = 2,
        max_retry_wait_s: float = MAX_RETRY_WAIT_S,
        params: Mapping[str, Any] | None = None,
        send_reasoning_content: ReasoningPolicy = "tool_calls",
        stream_usage: bool = True,
    ) -> None:
        self.base_url = (base_url or OPENAI_BASE_URL).rstrip("/")
        self._api_key = resolve_api_key(api_key, "OPENAI_API_KEY", required=base_url is None)
        self._http_client = http_client
        self._owns_http_client = http_client is None
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.max_retry_wait_s = max_retry_wait_s
        self.params = dict(params or {})
        self.send_reasoning_content = send_reasoning_content
        self.stream_usage = stream_usage
        self._sdk: openai.AsyncOpenAI | None = None

    def __repr__(self) -> str:
        return f"OpenAIChatClient(base_url={self.base_url!r})"

    def _client(self) -> openai.AsyncOpenAI:
        if self._sdk is None:
            import openai

            if self._http_client is None:
                self._http_client = default_http_client(self.timeout_s or DEFAULT_TIMEOUT_S)
            extra: dict[str, Any] = {}
            if self.timeout_s is not None:
                extra["timeout"] = self.timeout_s
            sdk = bounded_retry_class(openai.AsyncOpenAI)(
                api_key=self._api_key.reveal() if self._api_key else LOCAL_PLACEHOLDER_KEY,
                base_url=self.base_url,
                organization=None,
                project=None,
                max_retries=self.max_retries,
                http_client=self._http_client,
                **extra,
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
        body: dict[str, Any] = {
            **self.params,
            "model": model,
            "messages": to_openai(messages, send_reasoning_content=self.send_reasoning_content),
        }
        if tools:
            body["tools"] = list(tools)
        if max_tokens is not None:
            # max_tokens "is now deprecated in favor of max_completion_tokens, and
            # is not compatible with o-series models" (API reference, chat/create);
            # compatible servers may not know max_completion_tokens.
            key = "max_completion_tokens" if self.base_url == OPENAI_BASE_URL else "max_tokens"
            body[key] = max_tokens
        return body

    async def create(
        self,
        *,
        model: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """One reply, whole. Raises ``ProviderError`` subclasses (see ``memory.errors``)."""
        import openai

        body = self.request_body(model=model, messages=messages, tools=tools, max_tokens=max_tokens)
        try:
            response = await self._client().chat.completions.create(**body)
        except openai.OpenAIError as exc:
            raise map_sdk_error(exc, openai) from exc
        return _completion(response.to_dict())

    async def stream(
        self,
        *,
        model: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> AsyncGenerator[ChatStreamEvent, None]:
        """The reply as it arrives: ``ReasoningDelta``, ``TextDelta``,
        ``ToolCallStart``, ``ToolCallArgumentsDelta``, then ``CompletionDone``.

        Raises what ``create`` raises, and ``StreamInterruptedError`` when the
        stream stops before a ``finish_reason``.
        """
        import httpx2
        import openai

        body = self.request_body(model=model, messages=messages, tools=tools, max_tokens=max_tokens)
        if self.stream_usage:
            body["stream_options"] = {"include_usage": True}
        reply = _StreamedReply()
        started = False
        try:
            chunks = await self._client().chat.completions.create(**body, stream=True)
            started = True
            async with chunks:
                async for chunk in chunks:
                    for event in reply.add(chunk.to_dict()):
                        yield event
        except (openai.OpenAIError, httpx2.TransportError) as exc:
            raise map_sdk_error(exc, openai, streaming=started) from exc
        if reply.finish_reason is None:
            raise StreamInterruptedError(
                "the reply stream ended before the model finished (no finish_reason)"
            )
        yield CompletionDone(reply.completion())


# -- requests -----------------------------------------------------------------------

# Said in a tool message whose images or files had to move to the next message.
MEDIA_MOVED = "(this result's images and files are in the next message)"
# The content parts a user message takes (ChatCompletionContentPartParam).
USER_PART_TYPES = frozenset({"text", "image_url", "input_audio", "file"})


def to_openai(
    messages: Sequence[ChatMessage], *, send_reasoning_content: ReasoningPolicy = "tool_calls"
) -> list[dict[str, Any]]:
    """The ``messages`` of a chat-completions request.

    Each message goes as ``ChatMessage.to_api_dict`` gives it, with what the
    API and strict compatible servers require (see ``memory.testing.strict``):

    - instructions with no text are not sent: a memory without a system
      prompt sends no empty system message;
    - an assistant message with neither text nor calls (a failed reply that
      only held invalid calls) is not sent, since the API requires ``content``
      unless there are ``tool_calls``;
    - tool-call ``arguments`` go as the model wrote them when they are JSON;
      empty ones as ``{}`` and invalid ones (kept in older logs) as
      ``{"arguments": text}`` (``call_input``);
    - a tool message's content is text only (``ChatCompletionToolMessageParam``):
      the images and files of a batch's results go in one user message right
      after the batch's last result;
    - ``reasoning_content`` goes back on assistant messages as
      ``send_reasoning_content`` says (see ``OpenAIChatClient``).
    """
    out: list[dict[str, Any]] = []
    media: list[dict[str, Any]] = []  # of the tool batch in progress
    for message in messages:
        if message.role != "tool" and media:
            out.append({"role": "user", "content": media})
            media = []
        if message.role in ("system", "developer") and not message.text.strip():
            continue
        if message.role == "assistant" and not _has_payload(message):
            continue
        api = message.to_api_dict()
        if message.role == "user":
            content = api["content"]
            parts = isinstance(content, list)
            api["content"] = [_user_part(p) for p in content] if parts else content or ""
        elif message.role == "tool":
            api["content"], moved = _tool_content(message)
            if moved:
                heading = f"Returned by tool call {message.tool_call_id}:"
                media += [{"type": "text", "text": heading}, *map(_user_part, moved)]
        elif message.role == "assistant":
            if message.tool_calls:
                api["tool_calls"] = [_api_call(c) for c in message.tool_calls]
            policy = send_reasoning_content
            sends = policy == "always" or (policy == "tool_calls" and bool(message.tool_calls))
            if message.reasoning_content is not None and sends:
                api["reasoning_content"] = message.reasoning_content
        out.append(api)
    if media:
        out.append({"role": "user", "content": media})
    return out


def _has_payload(message: ChatMessage) -> bool:
    content = message.content
    has_content = bool(content.strip()) if isinstance(content, str) else bool(content)
    return has_content or bool(message.tool_calls) or message.refusal is not None


def _api_call(call: ToolCall) -> dict[str, Any]:
    out = call.to_api_dict()
    if call.type == "function" and (not call.arguments.strip() or call.arguments_error()):
        out["function"]["arguments"] = json.dumps(call_input(call), ensure_ascii=False)
    return out


def _tool_content(message: ChatMessage) -> tuple[str | list[dict[str, Any]], list[dict[str, Any]]]:
    """A tool message's text content, and the parts that must move out of it."""
    content = message.content
    if not isinstance(content, list):
        return content or "", []
    texts = [_text_part(p) for p in content if p.get("type") in TEXT_PART_TYPES]
    moved = [p for p in content if p.get("type") not in TEXT_PART_TYPES]
    if moved and not texts:
        return MEDIA_MOVED, moved
    return texts or "", moved


def _text_part(part: Mapping[str, Any]) -> dict[str, Any]:
    text = part.get("text")
    return {"type": "text", "text": text if isinstance(text, str) else ""}


def _user_part(part: Mapping[str, Any]) -> dict[str, Any]:
    """A content part in a shape chat completions takes: text parts of other
    APIs as ``text``, Anthropic image blocks as ``image_url``; a part it
    cannot take at all is named in a text part instead."""
    kind = part.get("type")
    if kind in TEXT_PART_TYPES:
        return _text_part(part)
    if kind in USER_PART_TYPES:
        return dict(part)
    source = part.get("source")
    if kind == "image" and isinstance(source, Mapping):
        if source.get("type") == "base64":
            url = f"data:{source.get('media_type')};base64,{source.get('data')}"
            return {"type": "image_url", "image_url": {"url": url}}
        if source.get("type") == "url":
            return {"type": "image_url", "image_url": {"url": str(source.get("url"))}}
    return {"type": "text", "text": f"[a {kind} part left out: chat completions do not take it]"}


# -- replies ------------------------------------------------------------------------


def _completion(data: Mapping[str, Any]) -> Completion:
    choices = data.get("choices") or [{}]
    choice = choices[0]
    message = choice.get("message") or {}
    calls = tuple(_tool_call(c) for c in message.get("tool_calls") or ())
    extra = {"refusal": message["refusal"]} if message.get("refusal") else {}
    return Completion(
        message=ChatMessage(
            role="assistant",
            content=message.get("content"),
            tool_calls=calls,
            reasoning_content=_reasoning(message),
            extra=extra,
        ),
        usage=_usage(data.get("usage")),
        finish_reason=choice.get("finish_reason"),
        model=data.get("model"),
    )


def _tool_call(data: Mapping[str, Any]) -> ToolCall:
    # Some servers (Gemini's compatibility layer, LM Studio) send "id": "".
    # The reply is kept as sent; giving such calls ids is the memory's job.
    call_id = data.get("id") or ""
    return replace(ToolCall.from_dict({**data, "id": call_id or "-"}), id=call_id)


def _reasoning(fields: Mapping[str, Any]) -> str | None:
    # DeepSeek, Kimi, GLM and llama.cpp say reasoning_content; OpenRouter and
    # recent vLLM say reasoning.
    for key in ("reasoning_content", "reasoning"):
        value = fields.get(key)
        if isinstance(value, str):
            return value
    return None


def _usage(data: Mapping[str, Any] | None) -> Usage:
    if not data:
        return Usage()
    prompt_details = data.get("prompt_tokens_details") or {}
    completion_details = data.get("completion_tokens_details") or {}
    return Usage(
        input_tokens=data.get("prompt_tokens"),
        output_tokens=data.get("completion_tokens"),
        cached_input_tokens=prompt_details.get("cached_tokens"),
        reasoning_tokens=completion_details.get("reasoning_tokens"),
    )


@dataclass
class _CallParts:
    id: str
    name: str
    index: int | None  # the provider's index of the call (None: it sent none)
    arguments: list[str] = field(default_factory=list)
    type: str = "function"


@dataclass
class _StreamedReply:
    """Chunks (as dicts) in, events out; ``completion()`` at the end.

    A tool-call fragment belongs to the call its ``id`` names when it has
    one: several calls may share an index (or have none) and be told apart
    only by their ids, their fragments interleaved. A fragment without an id
    continues the latest call of its index; one with neither continues the
    call of the previous fragment. OpenAI itself sends the id on a call's
    first fragment and the index on all of them
    (https://platform.openai.com/docs/api-reference/chat-streaming, ``tool_calls``).
    """

    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: list[_CallParts] = field(default_factory=list)
    # Positions in ``calls``: of each id (in order), of the latest call on each index.
    by_id: dict[str, list[int]] = field(default_factory=dict)
    by_index: dict[int, int] = field(default_factory=dict)
    last: int | None = None
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    model: str | None = None

    def add(self, chunk: Mapping[str, Any]) -> list[ChatStreamEvent]:
        self.model = chunk.get("model") or self.model
        if chunk.get("usage"):
            self.usage = _usage(chunk["usage"])
        events: list[ChatStreamEvent] = []
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue  # n > 1 is not asked for; ignore any other choice
            delta = choice.get("delta") or {}
            reasoning = _reasoning(delta)
            if reasoning:
                self.reasoning.append(reasoning)
                events.append(ReasoningDelta(reasoning))
            content = delta.get("content")
            if isinstance(content, str) and content:
                self.text.append(content)
                events.append(TextDelta(content))
            for call in delta.get("tool_calls") or ():
                events.extend(self._add_call(call))
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return events

    def _position(self, call_id: str, index: int | None) -> int | None:
        """The call a fragment continues; ``None``: it starts a new one."""
        if call_id:
            # The latest call of that id, unless it holds another index (a
            # gateway that repeats one id over distinct calls).
            same = [
                p
                for p in self.by_id.get(call_id, ())
                if index is None or self.calls[p].index in (index, None)
            ]
            return same[-1] if same else None
        if index is not None:
            return self.by_index.get(index)
        return self.last

    def _add_call(self, call: Mapping[str, Any]) -> list[ChatStreamEvent]:
        function = call.get("function") or {}
        call_id = call.get("id") or ""
        index = call.get("index") if isinstance(call.get("index"), int) else None
        position = self._position(call_id, index)
        events: list[ChatStreamEvent] = []
        if position is None:
            position = len(self.calls)
            parts = _CallParts(
                id=call_id,
                name=function.get("name") or "",
                index=index,
                type=call.get("type") or "function",
            )
            self.calls.append(parts)
            if call_id:
                self.by_id.setdefault(call_id, []).append(position)
            events.append(ToolCallStart(index=position, id=parts.id, name=parts.name))
        if index is not None:
            self.by_index[index] = position
        self.last = position
        parts = self.calls[position]
        if not parts.name and function.get("name"):
            parts.name = function["name"]  # a server that sends the name after the id
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            parts.arguments.append(arguments)
            events.append(ToolCallArgumentsDelta(index=position, text=arguments))
        return events

    def completion(self) -> Completion:
        calls = tuple(
            ToolCall(id=c.id, name=c.name, arguments="".join(c.arguments), type=c.type)
            for c in self.calls
        )
        return Completion(
            message=ChatMessage(
                role="assistant",
                content="".join(self.text) if self.text or not calls else None,
                tool_calls=calls,
                reasoning_content="".join(self.reasoning) if self.reasoning else None,
            ),
            usage=self.usage,
            finish_reason=self.finish_reason,
            model=self.model,
        )
