"""A strict check of request bodies: what the strictest provider of each API refuses.

``openai_chat_problems(body)`` checks a chat-completions request body and
``anthropic_messages_problems(body)`` a Messages API one; each returns the
problems found, as sentences naming the place (``"messages[3]: ..."``), and
``[]`` for a body a strict provider accepts. ``request_problems(api, body)``
picks the check by API, and ``assert_accepted(api, body)`` raises
``AssertionError`` listing them (for tests). The scripted server runs the same
check when started with ``strict=True`` and answers 400 as the provider would.

Each rule names its source. The documented ones:

- OpenAI chat completions, https://platform.openai.com/docs/api-reference/chat/create:
  roles; an assistant message has ``content`` unless it has ``tool_calls``;
  ``tool_calls`` and ``tools`` are non-empty lists; a tool message answers
  a call of the assistant message right before its batch; a tool message's
  content is text (``ChatCompletionToolMessageParam``: a string or text
  parts); a function name is ``[a-zA-Z0-9_-]{1,64}``; ``stream_options`` only
  with ``stream``; ``tool_choice`` only with ``tools``. And from the
  function-calling guide (https://platform.openai.com/docs/guides/function-calling):
  every call gets a result before the next message ("An assistant message
  with 'tool_calls' must be followed by tool messages responding to each
  'tool_call_id'", the API's error).
- Anthropic Messages, https://docs.anthropic.com/en/api/messages: ``model``,
  ``max_tokens`` and non-empty ``messages``; roles ``user`` and ``assistant``
  that alternate, the first ``user`` (the API's errors: "roles must alternate
  between "user" and "assistant"", "first message must use the "user" role");
  text blocks are not empty or blank ("text content blocks must contain
  non-whitespace text"); a ``tool_use`` id is ``[a-zA-Z0-9_-]+`` and its
  ``input`` an object. Tool use
  (https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use,
  "Handling tool use and tool results"): the ``tool_result`` blocks of every
  ``tool_use`` come in the next user message, first in its content.
  Extended thinking (https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking):
  ``budget_tokens`` at least 1,024 and below ``max_tokens``; no
  ``temperature`` (other than 1), ``top_k``, ``top_p`` below 0.95 or forced
  ``tool_choice``; no assistant prefill; during tool use the last assistant
  message starts with its thinking block ("Preserving thinking blocks").

Beyond the documents, what strict OpenAI-compatible servers (vLLM's chat
templates, Gemini's compatibility layer) refuse and OpenAI tolerates: a
tool call's ``arguments`` that are not JSON (an empty text counts as ``{}``),
an empty system message (a system prompt that is not there is sent as none),
and an assistant message with neither text nor calls.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ..json_values import loads as load_json

Api = Literal["openai", "anthropic"]

OPENAI_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
OPENAI_USER_PARTS = frozenset({"text", "image_url", "input_audio", "file"})
OPENAI_ASSISTANT_PARTS = frozenset({"text", "refusal"})
FUNCTION_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
ANTHROPIC_USER_BLOCKS = frozenset({"text", "image", "document", "tool_result", "search_result"})
ANTHROPIC_ASSISTANT_BLOCKS = frozenset({"text", "thinking", "redacted_thinking", "tool_use"})
ANTHROPIC_TOOL_RESULT_BLOCKS = frozenset({"text", "image", "document", "search_result"})
TOOL_USE_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
IMAGE_MEDIA_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
MIN_THINKING_BUDGET = 1024
MIN_THINKING_TOP_P = 0.95


class StrictRequestError(AssertionError):
    """A request body a strict provider refuses; ``problems`` lists why."""

    def __init__(self, api: Api, problems: Sequence[str]) -> None:
        self.api = api
        self.problems = list(problems)
        super().__init__(f"{api} request refused: " + "; ".join(self.problems))


def request_problems(api: Api, body: object) -> list[str]:
    """The problems of ``body`` as a request to ``api`` (``[]``: none)."""
    if api == "openai":
        return openai_chat_problems(body)
    return anthropic_messages_problems(body)


def assert_accepted(api: Api, body: object) -> None:
    """Raise ``StrictRequestError`` (an ``AssertionError``) unless a strict
    provider of ``api`` accepts ``body``."""
    problems = request_problems(api, body)
    if problems:
        raise StrictRequestError(api, problems)


def _text_problem(value: object) -> str | None:
    if not isinstance(value, str):
        return f"text must be a string, not {type(value).__name__}"
    return None if value.strip() else "text is empty"


def _json_problem(arguments: object) -> str | None:
    if not isinstance(arguments, str):
        return f"arguments must be a JSON string, not {type(arguments).__name__}"
    if not arguments.strip():
        return None  # providers send a call without arguments so; read as {}
    try:
        load_json(arguments)
    except ValueError as error:
        return f"arguments are not valid JSON ({error})"
    return None


# -- OpenAI chat completions ----------------------------------------------------------


def openai_chat_problems(body: object) -> list[str]:
    """The problems of a chat-completions request body (see the module docstring)."""
    if not isinstance(body, Mapping):
        return ["the body is not a JSON object"]
    problems: list[str] = []
    if not isinstance(body.get("model"), str) or not body["model"]:
        problems.append("model: required")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        problems.append("messages: a non-empty list is required")
        messages = []
    problems += _openai_sequence(messages)
    problems += _openai_tools(body)
    limits = [k for k in ("max_tokens", "max_completion_tokens") if k in body]
    if len(limits) == 2:
        problems.append("max_tokens and max_completion_tokens: give one, not both")
    for key in limits:
        value = body[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            problems.append(f"{key}: must be a positive integer")
    if "stream_options" in body and body.get("stream") is not True:
        problems.append("stream_options: only allowed with stream: true")
    return problems


def _openai_tools(body: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    tools = body.get("tools")
    if "tool_choice" in body and not tools:
        problems.append("tool_choice: only allowed when tools are given")
    if tools is None:
        return problems
    if not isinstance(tools, list) or not tools:
        return [*problems, "tools: must be a non-empty list"]
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        kind = tool.get("type") if isinstance(tool, Mapping) else None
        payload = tool.get(kind) if isinstance(tool, Mapping) and isinstance(kind, str) else None
        if kind not in ("function", "custom") or not isinstance(payload, Mapping):
            problems.append(f"{where}: must be a function or custom tool")
            continue
        name = payload.get("name")
        if not isinstance(name, str) or not FUNCTION_NAME.match(name):
            problems.append(f"{where}: name must match [a-zA-Z0-9_-]{{1,64}}")
        parameters = payload.get("parameters")
        if kind == "function" and parameters is not None and not isinstance(parameters, Mapping):
            problems.append(f"{where}: parameters must be a JSON Schema object")
    return problems


def _openai_sequence(messages: list[Any]) -> list[str]:
    problems: list[str] = []
    open_ids: list[str] = []  # calls of the batch in progress still without a result
    batch: set[str] = set()  # every id of the batch in progress
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping):
            problems.append(f"{where}: not an object")
            continue
        role = message.get("role")
        if role not in OPENAI_ROLES:
            problems.append(f"{where}: unknown role {role!r}")
            continue
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                problems.append(f"{where}: tool message without tool_call_id")
            elif call_id not in batch:
                problems.append(
                    f"{where}: a tool message must answer a call of the assistant message "
                    f"before it; {call_id!r} is not one"
                )
            elif call_id not in open_ids:
                problems.append(f"{where}: a second result for tool call {call_id!r}")
            else:
                open_ids.remove(call_id)
            problems += _openai_content(where, message.get("content"), {"text"}, required=True)
            continue
        if open_ids:
            problems.append(
                f"{where}: the assistant message's tool calls {', '.join(open_ids)} "
                "have no tool message before it"
            )
        open_ids, batch = [], set()
        if role in ("system", "developer"):
            problems += _instructions_problems(where, message.get("content"))
        elif role == "user":
            problems += _openai_content(
                where, message.get("content"), OPENAI_USER_PARTS, required=True
            )
        else:
            ids, found = _openai_assistant(where, message)
            problems += found
            open_ids, batch = list(ids), set(ids)
    if open_ids:
        problems.append(f"the tool calls {', '.join(open_ids)} have no tool message")
    return problems


def _instructions_problems(where: str, content: object) -> list[str]:
    if isinstance(content, str):
        return [] if content.strip() else [f"{where}: an empty system message"]
    if isinstance(content, list) and content:
        return _openai_content(where, content, {"text"}, required=True)
    return [f"{where}: an empty system message"]


def _openai_content(
    where: str, content: object, part_types: set[str] | frozenset[str], *, required: bool
) -> list[str]:
    if content is None:
        return [f"{where}: content is required"] if required else []
    if isinstance(content, str):
        return []
    if not isinstance(content, list):
        return [f"{where}: content must be a string or a list of parts"]
    problems = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind not in part_types:
            problems.append(f"{where}.content[{j}]: a {kind!r} part is not allowed here")
        elif kind == "text" and not isinstance(part.get("text"), str):
            problems.append(f"{where}.content[{j}]: a text part needs its text")
        elif kind == "image_url":
            image = part.get("image_url")
            if not isinstance(image, Mapping) or not isinstance(image.get("url"), str):
                problems.append(f"{where}.content[{j}]: an image_url part needs image_url.url")
    return problems


def _openai_assistant(where: str, message: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The ids of an assistant message's calls, and its problems."""
    problems = _openai_content(
        where, message.get("content"), OPENAI_ASSISTANT_PARTS, required=False
    )
    calls = message.get("tool_calls")
    ids: list[str] = []
    if calls is not None:
        if not isinstance(calls, list) or not calls:
            problems.append(f"{where}: tool_calls must be a non-empty list when given")
            calls = []
        for j, call in enumerate(calls):
            call_where = f"{where}.tool_calls[{j}]"
            if not isinstance(call, Mapping):
                problems.append(f"{call_where}: not an object")
                continue
            call_id = call.get("id")
            if not isinstance(call_id, str) or not call_id:
                problems.append(f"{call_where}: a call needs an id")
            elif call_id in ids:
                problems.append(f"{call_where}: two calls of one message share the id {call_id!r}")
            else:
                ids.append(call_id)
            problems += [f"{call_where}: {p}" for p in _openai_call(call)]
    text = message.get("content")
    empty = text is None or text == "" or text == []
    if empty and not ids and not message.get("refusal") and not message.get("audio"):
        problems.append(f"{where}: an assistant message needs content or tool_calls")
    return ids, problems


def _openai_call(call: Mapping[str, Any]) -> list[str]:
    kind = call.get("type", "function")
    if kind == "custom":
        custom = call.get("custom")
        if not isinstance(custom, Mapping) or not isinstance(custom.get("input"), str):
            return ["a custom call needs custom.name and custom.input"]
        return []
    if kind != "function":
        return [f"unknown call type {kind!r}"]
    function = call.get("function")
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        return ["a function call needs function.name and function.arguments"]
    problem = _json_problem(function.get("arguments"))
    return [problem] if problem else []


# -- Anthropic Messages ---------------------------------------------------------------


def anthropic_messages_problems(body: object) -> list[str]:
    """The problems of a Messages API request body (see the module docstring)."""
    if not isinstance(body, Mapping):
        return ["the body is not a JSON object"]
    problems: list[str] = []
    if not isinstance(body.get("model"), str) or not body["model"]:
        problems.append("model: required")
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        problems.append("max_tokens: a positive integer is required")
        max_tokens = None
    if "system" in body:
        problems += _anthropic_system(body["system"])
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        problems.append("messages: a non-empty list is required")
        messages = []
    problems += _anthropic_sequence(messages)
    problems += _anthropic_tools(body.get("tools"))
    problems += _thinking_problems(body, messages, max_tokens)
    return problems


def _anthropic_system(system: object) -> list[str]:
    if isinstance(system, str):
        return [] if system.strip() else ["system: an empty system prompt"]
    if isinstance(system, list) and system:
        return [
            f"system[{i}]: {p}"
            for i, block in enumerate(system)
            if (p := _anthropic_block(block, {"text"}))
        ]
    return ["system: an empty system prompt"]


def _anthropic_tools(tools: object) -> list[str]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        return ["tools: must be a list"]
    problems = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            problems.append(f"tools[{i}]: not an object")
        elif tool.get("type") not in (None, "custom"):
            continue  # a server tool (web_search_..., bash_...): the provider's own shape
        elif not isinstance(tool.get("name"), str) or not FUNCTION_NAME.match(tool["name"]):
            problems.append(f"tools[{i}]: name must match [a-zA-Z0-9_-]{{1,64}}")
        elif not isinstance(tool.get("input_schema"), Mapping) or (
            tool["input_schema"].get("type") != "object"
        ):
            problems.append(f"tools[{i}]: input_schema must be a JSON Schema of type object")
    return problems


def _blocks_of(where: str, message: Mapping[str, Any]) -> tuple[list[Any], list[str]]:
    content = message.get("content")
    if isinstance(content, str):
        problem = _text_problem(content)
        return [{"type": "text", "text": content}], [f"{where}: {problem}"] if problem else []
    if not isinstance(content, list) or not content:
        return [], [f"{where}: content must be a non-empty string or list of blocks"]
    return content, []


def _anthropic_sequence(messages: list[Any]) -> list[str]:
    problems: list[str] = []
    previous_role: str | None = None
    calls: list[str] = []  # the tool_use ids of the previous assistant message
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping):
            problems.append(f"{where}: not an object")
            continue
        role = message.get("role")
        if role not in ("user", "assistant"):
            problems.append(f"{where}: role must be user or assistant, not {role!r}")
            continue
        if i == 0 and role != "user":
            problems.append(f'{where}: the first message must use the "user" role')
        if role == previous_role:
            problems.append(f"{where}: roles must alternate, but two {role} messages are in a row")
        blocks, found = _blocks_of(where, message)
        problems += found
        allowed = ANTHROPIC_USER_BLOCKS if role == "user" else ANTHROPIC_ASSISTANT_BLOCKS
        for j, block in enumerate(blocks):
            if problem := _anthropic_block(block, allowed):
                problems.append(f"{where}.content[{j}]: {problem}")
        if role == "user":
            problems += _answers(where, blocks, calls)
            calls = []
        else:
            if calls:
                problems.append(f"{where}: the tool uses {', '.join(calls)} have no tool_result")
            calls = [b["id"] for b in blocks if _is(b, "tool_use") and isinstance(b.get("id"), str)]
        previous_role = role
    if calls:
        problems.append(f"the tool uses {', '.join(calls)} have no tool_result")
    return problems


def _is(block: object, kind: str) -> bool:
    return isinstance(block, Mapping) and block.get("type") == kind


def _answers(where: str, blocks: list[Any], calls: list[str]) -> list[str]:
    """The problems of a user message's ``tool_result`` blocks, ``calls`` being
    the ``tool_use`` ids of the assistant message before it."""
    problems = []
    results = [b for b in blocks if _is(b, "tool_result")]
    leading = 0
    while leading < len(blocks) and _is(blocks[leading], "tool_result"):
        leading += 1
    if leading < len(results):
        problems.append(f"{where}: tool_result blocks must come first in the content")
    answered = [b.get("tool_use_id") for b in results]
    for call_id in answered:
        if call_id not in calls:
            problems.append(
                f"{where}: tool_result {call_id!r} answers no tool_use of the message before it"
            )
    if len(set(answered)) != len(answered):
        problems.append(f"{where}: two tool_result blocks answer one tool_use")
    missing = [c for c in calls if c not in answered]
    if missing:
        problems.append(f"{where}: the tool uses {', '.join(missing)} have no tool_result")
    return problems


def _anthropic_block(block: object, allowed: frozenset[str] | set[str]) -> str | None:
    if not isinstance(block, Mapping):
        return "a content block must be an object"
    kind = block.get("type")
    if kind not in allowed:
        return f"a {kind!r} block is not allowed here"
    if kind == "text":
        return _text_problem(block.get("text"))
    if kind == "image":
        return _image_problem(block.get("source"))
    if kind == "tool_use":
        if not isinstance(block.get("id"), str) or not TOOL_USE_ID.match(block["id"]):
            return "a tool_use id must match [a-zA-Z0-9_-]+"
        if not isinstance(block.get("name"), str) or not block["name"]:
            return "a tool_use needs its name"
        if not isinstance(block.get("input"), Mapping):
            return "a tool_use input must be an object"
        return None
    if kind == "tool_result":
        return _tool_result_problem(block)
    signed = isinstance(block.get("thinking"), str) and isinstance(block.get("signature"), str)
    if kind == "thinking" and not signed:
        return "a thinking block needs its thinking and signature"
    if kind == "redacted_thinking" and not isinstance(block.get("data"), str):
        return "a redacted_thinking block needs its data"
    return None


def _image_problem(source: object) -> str | None:
    if not isinstance(source, Mapping):
        return "an image needs its source"
    kind = source.get("type")
    if kind == "base64":
        if source.get("media_type") not in IMAGE_MEDIA_TYPES:
            return f"an image's media_type must be one of {sorted(IMAGE_MEDIA_TYPES)}"
        return None if isinstance(source.get("data"), str) else "a base64 image needs its data"
    if kind == "url":
        return None if isinstance(source.get("url"), str) else "a url image needs its url"
    if kind == "file":
        return None if isinstance(source.get("file_id"), str) else "a file image needs file_id"
    return f"unknown image source type {kind!r}"


def _tool_result_problem(block: Mapping[str, Any]) -> str | None:
    if not isinstance(block.get("tool_use_id"), str):
        return "a tool_result needs its tool_use_id"
    content = block.get("content")
    if content is None or isinstance(content, str):
        return None
    if not isinstance(content, list):
        return "a tool_result's content must be a string or a list of blocks"
    for part in content:
        if problem := _anthropic_block(part, ANTHROPIC_TOOL_RESULT_BLOCKS):
            return f"in a tool_result: {problem}"
    return None


def _thinking_problems(
    body: Mapping[str, Any], messages: list[Any], max_tokens: int | None
) -> list[str]:
    thinking = body.get("thinking")
    if not isinstance(thinking, Mapping) or thinking.get("type") not in ("enabled", "adaptive"):
        return []
    problems = []
    if thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens")
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < MIN_THINKING_BUDGET:
            problems.append(f"thinking.budget_tokens: must be at least {MIN_THINKING_BUDGET}")
        elif max_tokens is not None and budget >= max_tokens:
            problems.append("thinking.budget_tokens: must be less than max_tokens")
    if body.get("temperature", 1) != 1:
        problems.append("temperature: may only be 1 (or unset) with thinking")
    if "top_k" in body:
        problems.append("top_k: not allowed with thinking")
    top_p = body.get("top_p", 1)
    if not isinstance(top_p, int | float) or not MIN_THINKING_TOP_P <= top_p <= 1:
        problems.append(f"top_p: must be between {MIN_THINKING_TOP_P} and 1 with thinking")
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping) and choice.get("type") not in ("auto", "none"):
        problems.append("tool_choice: only auto or none with thinking (no forced tool use)")
    last = messages[-1] if messages and isinstance(messages[-1], Mapping) else {}
    if last.get("role") == "assistant":
        problems.append("messages: an assistant message cannot come last (prefill) with thinking")
    elif thinking.get("type") == "enabled" and len(messages) >= 2:
        # In a tool-use loop, the assistant turn being continued starts with its thinking.
        calling = messages[-2] if isinstance(messages[-2], Mapping) else {}
        content = calling.get("content") if calling.get("role") == "assistant" else None
        blocks: list[Any] = content if isinstance(content, list) else []
        if any(_is(b, "tool_use") for b in blocks) and not any(
            _is(blocks[0], kind) for kind in THINKING_BLOCKS
        ):
            problems.append(
                "messages: with thinking enabled, the last assistant message of a tool-use "
                "loop must start with its thinking block"
            )
    return problems
