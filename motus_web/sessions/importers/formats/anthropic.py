"""Anthropic Messages API requests and responses, and Claude.ai data exports.

A request (``{"model", "system", "messages": [...], "tools", ...}``), a response
(``{"type": "message", "role": "assistant", "content": [...], "usage"}``), a
``{"request": ..., "response": ...}`` pair as proxies log them, or a bare list of
messages. ``system`` is a string or a list of text blocks; content blocks map as
for Claude Code (``tool_use`` -> tool call, ``tool_result`` -> tool message,
``thinking`` kept under ``thinking_blocks``). The request's other fields (model,
tools, sampling) are kept under ``extra["request"]``.

Claude.ai exports (``conversations.json``: a list of ``{uuid, name, chat_messages}``)
use the same blocks; their tool calls run on the server, so a ``tool_result``
sits inside the assistant's own message (it splits it in two) and may carry no
``tool_use_id`` (it answers the oldest open call). The list is read one
conversation at a time.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, BinaryIO

from ._blocks import BlockMapper, usage_input_tokens
from ._io import kind, shown
from ._json import conversations, load
from .chatgpt import _shared
from .model import FormatError, FormatProblem, ParsedSession, named_model

FORMAT = "anthropic-messages"
CLAUDE_AI = "claude-ai"
# A current model of the tool's provider: it counts a session whose file names none.
ESTIMATE_MODEL = "claude-sonnet-4-5"
SENDERS = {"human": "user", "assistant": "assistant"}


def parse(stream: BinaryIO, source: str) -> Iterator[ParsedSession | FormatProblem]:
    """Yield the one session of a request, response or pair, or the problem that refuses it."""
    try:
        yield _messages_session(load(stream), source)
    except FormatError as error:
        yield error.problem(source)


def parse_claude_ai(stream: BinaryIO, source: str) -> Iterator[ParsedSession | FormatProblem]:
    """Yield each conversation of a Claude.ai export; a bad one is reported, the rest parse."""
    return conversations(stream, source, _claude_ai_one)


# -- Messages API -------------------------------------------------------------


def _messages_session(document: object, source: str) -> ParsedSession:
    request: object
    response: object = None
    if isinstance(document, list):
        request = {"messages": document}
    elif (
        isinstance(document, dict)
        and document.get("type") == "message"
        and "messages" not in document
    ):
        request, response = {"messages": []}, document
    elif isinstance(document, dict) and isinstance(document.get("request"), dict):
        request, response = document["request"], document.get("response")
    else:
        request = document
    if not isinstance(request, dict):
        raise FormatError("", f"expected an object, got {kind(request)}")
    raw = request.get("messages")
    if not isinstance(raw, list):
        raise FormatError("", f"expected a list, got {kind(raw)}", "messages")
    mapper = BlockMapper()
    messages: list[dict[str, Any]] = []
    for number, message in enumerate(raw, start=1):
        where = f"message {number}"
        if not isinstance(message, dict):
            raise FormatError(where, f"expected an object, got {kind(message)}")
        rest = {k: v for k, v in message.items() if k not in ("role", "content")}
        messages += mapper.message(message.get("role"), message.get("content", ""), rest, where, "")
    tokens: dict[int, int] = {}
    if response is not None:
        if not isinstance(response, dict):
            raise FormatError("", f"expected an object, got {kind(response)}", "response")
        rest = {k: v for k, v in response.items() if k not in ("role", "content")}
        reported = usage_input_tokens(response.get("usage"))
        if reported is not None:
            tokens[len(messages)] = reported
        messages += mapper.message(
            response.get("role"), response.get("content", ""), rest, "response", ""
        )
    system, blocks = _system(request.get("system"))
    extra: dict[str, Any] = {}
    settings = {k: v for k, v in request.items() if k not in ("messages", "system")}
    if settings:
        extra["request"] = settings
    if blocks is not None:
        extra["system_blocks"] = blocks
    if isinstance(document, dict) and "request" in document:
        extra.update({k: v for k, v in document.items() if k not in ("request", "response")})
    _counts(extra, mapper)
    model = request.get("model") or (response.get("model") if isinstance(response, dict) else None)
    tools = function_tools(request.get("tools"))
    original = response.get("id") if isinstance(response, dict) else None
    return ParsedSession(
        source_format=FORMAT,
        source_tool=f"Anthropic Messages API ({model})"
        if isinstance(model, str)
        else "Anthropic Messages API",
        original_id=original if isinstance(original, str) else None,
        title=None,
        created_at=None,
        system_prompt=system,
        messages=messages,
        provider_input_tokens=tokens,
        extra=extra,
        # The response names the model that answered; the request, the one asked for.
        model=named_model(
            [request.get("model"), response.get("model") if isinstance(response, dict) else None]
        ),
        tools=tools,
    )


def _system(system: object) -> tuple[str | None, list[Any] | None]:
    """The system prompt as text, and its blocks when text alone would lose something."""
    if system is None or isinstance(system, str):
        return system, None
    if not isinstance(system, list):
        raise FormatError(
            "", f"expected a string or a list of text blocks, got {kind(system)}", "system"
        )
    texts = []
    for index, block in enumerate(system):
        if not isinstance(block, dict) or not isinstance(block.get("text"), str):
            raise FormatError("", "expected a text block", f"system[{index}]")
        texts.append(block["text"])
    plain = all(block.keys() == {"type", "text"} for block in system)
    return "\n\n".join(texts), None if plain else system


def _counts(extra: dict[str, Any], mapper: BlockMapper) -> None:
    if mapper.unpaired_results:
        extra["unpaired_results"] = mapper.unpaired_results
    if mapper.pending:
        extra["unanswered_calls"] = len(mapper.pending)
    if mapper.made_up_ids:
        extra["made_up_call_ids"] = mapper.made_up_ids


# -- Claude.ai ----------------------------------------------------------------


def function_tools(tools: object) -> list[dict[str, Any]] | None:
    """A request's custom tools (``name``, ``description``, ``input_schema``) as OpenAI
    function tools, which the memory counts; server tools (``web_search_...``) are
    the provider's own and stay in ``extra["request"]`` only."""
    if not isinstance(tools, list):
        return None
    found = [
        {
            "type": "function",
            "function": {
                "name": tool.get("name"),
                "description": tool.get("description", ""),
                "parameters": tool["input_schema"],
            },
        }
        for tool in tools
        if isinstance(tool, dict) and isinstance(tool.get("input_schema"), dict)
    ]
    return found or None


def _claude_ai_one(conversation: object, number: int, source: str) -> ParsedSession | FormatProblem:
    where = f"conversation {number}"
    try:
        if not isinstance(conversation, dict):
            raise FormatError(where, f"expected an object, got {kind(conversation)}")
        return _claude_ai(conversation, where)
    except FormatError as error:
        return error.problem(source)


def _claude_ai(conversation: dict[str, Any], where: str) -> ParsedSession:
    raw = conversation.get("chat_messages")
    if not isinstance(raw, list) or not all(isinstance(m, dict) for m in raw):
        raise FormatError(where, "expected a list of message objects", "chat_messages")
    paths = _paths(raw)
    built = [_claude_ai_messages(path, where) for path in paths]
    messages, mapper = built[0]
    branches, forks = [], []
    for branch, _ in built[1:]:
        shared = _shared(branch, messages)
        if len(branch) > shared:
            branches.append(branch)
            forks.append(shared)
    extra = {
        k: v
        for k, v in conversation.items()
        if k not in ("chat_messages", "uuid", "name", "created_at")
    }
    if forks:
        extra["branch_forks"] = forks
    _counts(extra, mapper)
    original, name, created = (conversation.get(k) for k in ("uuid", "name", "created_at"))
    return ParsedSession(
        source_format=CLAUDE_AI,
        source_tool="Claude.ai",
        original_id=original if isinstance(original, str) else None,
        title=name if isinstance(name, str) and name.strip() else None,
        created_at=created if isinstance(created, str) else None,
        system_prompt=None,
        messages=messages,
        branches=branches,
        extra=extra,
    )


def _with_attachments(content: Any, attachments: object) -> Any:
    """``content`` with the text Claude.ai extracted from each attachment before it,
    as the model received it: a document block per file (its name as the source)."""
    documents = (
        [
            {
                "type": "text",
                "text": f"<document>\n<source>{a.get('file_name', '')}</source>\n"
                f"<document_content>{a['extracted_content']}</document_content>\n</document>",
            }
            for a in attachments or ()
            if isinstance(a, dict) and isinstance(a.get("extracted_content"), str)
        ]
        if isinstance(attachments, list)
        else []
    )
    if not documents:
        return content
    blocks = content if isinstance(content, list) else [{"type": "text", "text": str(content)}]
    return [*documents, *blocks]


def _paths(raw: list[dict[str, Any]]) -> list[list[tuple[int, dict[str, Any]]]]:
    """The active path (to the last message) first, then one path per other leaf.

    Exports without ``parent_message_uuid`` are one path in list order.
    """
    numbered = list(enumerate(raw, start=1))
    by_id = {m.get("uuid"): (n, m) for n, m in numbered if isinstance(m.get("uuid"), str)}
    parent_of = {n: p for n, m in numbered if isinstance(p := m.get("parent_message_uuid"), str)}
    if not any(parent in by_id for parent in parent_of.values()):
        return [numbered]
    parents = set(parent_of.values())
    leaves = [(n, m) for n, m in numbered if m.get("uuid") not in parents]
    last = numbered[-1]
    ordered = [last] + [leaf for leaf in leaves if leaf[0] != last[0]]
    paths = []
    for number, message in ordered:
        path, seen = [], set()
        current: tuple[int, dict[str, Any]] | None = (number, message)
        while current is not None and current[0] not in seen:
            seen.add(current[0])
            path.append(current)
            parent = parent_of.get(current[0])
            current = by_id.get(parent) if parent is not None else None
        paths.append(path[::-1])
    return paths


def _claude_ai_messages(
    path: list[tuple[int, dict[str, Any]]], where: str
) -> tuple[list[dict[str, Any]], BlockMapper]:
    mapper = BlockMapper(id_prefix="claude-ai-call-")
    messages: list[dict[str, Any]] = []
    for number, message in path:
        sender = message.get("sender")
        role = SENDERS.get(sender) if isinstance(sender, str) else None
        if role is None:
            raise FormatError(
                where,
                f"expected 'human' or 'assistant', got {shown(sender)}",
                f"chat_messages[{number - 1}].sender",
            )
        blocks = message.get("content")
        content = blocks if isinstance(blocks, list) and blocks else message.get("text", "")
        # ``text`` is the export's flattening of ``content``: used only when there are no blocks.
        content = _with_attachments(content, message.get("attachments"))
        rest = {k: v for k, v in message.items() if k not in ("sender", "content", "text")}
        messages += mapper.message(role, content, rest, where, f"chat_messages[{number - 1}]")
    return messages, mapper
