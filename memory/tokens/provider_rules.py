"""What each provider counts of a request, beyond its text: the documented rules.

The estimate is of what the provider will receive and count, which is not
everything a message holds. ``counting_rules(model)`` says which request
shape a model is sent in (``"anthropic"`` for Claude models, sent by
``AnthropicClient``; ``"openai"`` for every other, sent by
``OpenAIChatClient``) and, for that shape:

- **Reasoning of earlier replies.**
  Anthropic (https://docs.anthropic.com/en/docs/build-with-claude/context-windows,
  "The context window with extended thinking"): thinking blocks of previous
  assistant turns are stripped by the API and not counted; only the current
  turn's thinking is, that is the thinking of a tool-use reply whose results
  the next request carries. Models with preserved thinking keep every earlier
  block in context, billed as input
  (https://docs.anthropic.com/en/docs/build-with-claude/preserved-thinking):
  Claude Opus 4.5 ("automatically preserves all previous thinking blocks",
  https://docs.anthropic.com/en/docs/about-claude/models/whats-new-claude-4-5)
  and later Opus models, Sonnet 4.6 and later, every model of generation 5
  on, and the Fable and Mythos models; ``counts_earlier_thinking`` says which.
  So a reply's thinking counts when the model keeps earlier thinking, or when
  the reply calls tools; a final answer's thinking is past by the next request.
  OpenAI chat completions: a reasoning model's reasoning is never returned in
  the chat format, and "the reasoning tokens are discarded" after each turn
  (https://platform.openai.com/docs/guides/reasoning, "Managing the context
  window"); servers that return ``reasoning_content`` (DeepSeek, Kimi, GLM)
  take it back on tool-call turns only, which is what ``OpenAIChatClient``
  sends by default (https://api-docs.deepseek.com/guides/thinking_mode). So
  ``reasoning_content`` counts on a reply that calls tools, and Anthropic
  ``thinking_blocks`` never (the chat format has no field for them).
- **Tool schemas.** OpenAI renders the functions into the prompt; the OpenAI
  cookbook "How to count tokens with tiktoken", section 7 ("Counting tokens
  for chat completions with tool calls") gives the rule: per function 7
  tokens (10 for the ``cl100k_base`` models gpt-3.5-turbo and gpt-4) plus
  ``name:description``; 3 for the properties, 3 and ``name:type:description``
  per property, -3 and 3 per item for an enum plus the item; 12 at the end.
  What that rule does not cover (nested ``items``, ``properties``, ``anyOf``)
  is counted as its JSON. Anthropic counts "the tools parameter ... (tool
  names, descriptions, and schemas)" plus a tool-use system prompt of a fixed
  size per model (https://docs.anthropic.com/en/docs/tool-use-pricing-and-tokens):
  530, 159 and 264 tokens for Claude 3 Opus, Sonnet and Haiku with
  ``tool_choice`` auto, 346 for the later models (the figure of the Claude 4
  models and Claude 3.7 Sonnet; an estimate for those the table omits).
  Schemas are counted as the JSON of each tool's name, description and
  parameters.
- **Images** follow each provider's rule (``memory.tokens.images``).
- **Instructions** with no text are not sent (neither client sends an empty
  system message), so they count nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .encodings import normalize_model_name

# The request formats this module can count, not the providers: a provider's
# client sends one of them (a new provider speaking either needs no change here).
Shape = Literal["openai", "anthropic"]

# OpenAI cookbook, "How to count tokens with tiktoken", section 7.
FUNCTION_INIT_TOKENS = 7
FUNCTION_INIT_TOKENS_CL100K = 10
PROPERTIES_INIT_TOKENS = 3
PROPERTY_KEY_TOKENS = 3
ENUM_INIT_TOKENS = -3
ENUM_ITEM_TOKENS = 3
FUNCTIONS_END_TOKENS = 12
# Anthropic, "Tool use pricing and tokens": the tool-use system prompt (tool_choice auto).
CLAUDE_3_TOOL_PROMPT_TOKENS = {"opus": 530, "sonnet": 159, "haiku": 264}
CLAUDE_TOOL_PROMPT_TOKENS = 346

_RULE_KEYS = frozenset({"type", "description", "enum"})
# "claude-sonnet-4-5-20250929", "claude-opus-4-20250514", "claude-3-7-sonnet", "claude-fable-5-1".
_FAMILY_FIRST = re.compile(r"claude-([a-z]+)-(\d+)(?:-(\d)(?!\d))?")
_VERSION_FIRST = re.compile(r"claude-(\d+)(?:-(\d)(?!\d))?-([a-z]+)")
_VERSION_DOT = re.compile(r"(?<=\d)\.(?=\d)")


@dataclass(frozen=True, slots=True)
class CountingRules:
    """How a model's provider counts a request (see the module docstring).

    ``shape``: the request shape it is sent in. ``counts_earlier_thinking``:
    Anthropic thinking blocks of earlier turns stay in context and count.
    ``tool_prompt_tokens``: what tools add to an Anthropic request besides
    their schemas. ``function_init_tokens``: OpenAI's tokens per function.
    """

    shape: Shape
    counts_earlier_thinking: bool
    tool_prompt_tokens: int
    function_init_tokens: int


def counting_rules(model: str | None, encoding_name: str) -> CountingRules:
    """The rules for ``model`` counted with ``encoding_name`` when its provider
    is not known, read from its name: a Claude model is sent by
    ``AnthropicClient`` (``anthropic_rules``), every other model (and ``None``)
    by ``OpenAIChatClient`` (``openai_rules``). A client declares its own
    provider's rules as its ``counting_rules`` (``memory.clients.registry``)."""
    name = _VERSION_DOT.sub("-", normalize_model_name(model)) if model else ""
    if "claude" not in name:
        return openai_rules(model, encoding_name)
    return anthropic_rules(model, encoding_name)


def openai_rules(model: str | None, encoding_name: str) -> CountingRules:
    """The OpenAI chat-completions rules: tools rendered as functions, earlier
    reasoning not counted. Only ``encoding_name`` matters (``cl100k_base``
    models take 10 tokens per function, the others 7)."""
    init = FUNCTION_INIT_TOKENS_CL100K if encoding_name == "cl100k_base" else FUNCTION_INIT_TOKENS
    return CountingRules("openai", False, 0, init)


def anthropic_rules(model: str | None, encoding_name: str) -> CountingRules:
    """The Anthropic Messages rules for ``model``: whether earlier thinking
    stays in context and the tool-use system prompt's size, by the model's
    family and version (a name without a version gets the newer behaviour,
    which counts more)."""
    name = _VERSION_DOT.sub("-", normalize_model_name(model)) if model else ""
    family, version = _claude_version(name)
    if family is None:
        return CountingRules("anthropic", True, CLAUDE_TOOL_PROMPT_TOKENS, 0)
    keeps = (
        family in ("fable", "mythos")
        or version >= (5, 0)
        or (family == "opus" and version >= (4, 5))
        or (family == "sonnet" and version >= (4, 6))
    )
    prompt = CLAUDE_TOOL_PROMPT_TOKENS
    if version == (3, 0):
        prompt = CLAUDE_3_TOOL_PROMPT_TOKENS.get(family, CLAUDE_TOOL_PROMPT_TOKENS)
    return CountingRules("anthropic", keeps, prompt, 0)


def _claude_version(name: str) -> tuple[str | None, tuple[int, int]]:
    match = _FAMILY_FIRST.search(name)
    if match is not None:
        return match[1], (int(match[2]), int(match[3] or 0))
    match = _VERSION_FIRST.search(name)
    if match is not None:
        return match[3], (int(match[1]), int(match[2] or 0))
    if "mythos" in name or "fable" in name:
        return "mythos", (0, 0)
    return None, (0, 0)


def tools_tokens(
    schemas: Sequence[Mapping[str, Any]], rules: CountingRules, count: Callable[[str], int]
) -> int:
    """Tokens the tool ``schemas`` (OpenAI function-tool dicts, or tools
    already in Anthropic's shape) add to a request under ``rules``, counting
    text with ``count``."""
    if not schemas:
        return 0
    if rules.shape == "anthropic":
        return rules.tool_prompt_tokens + sum(count(_anthropic_text(s)) for s in schemas)
    total = FUNCTIONS_END_TOKENS
    for schema in schemas:
        function = schema.get("function")
        if schema.get("type") != "function" or not isinstance(function, Mapping):
            total += count(json.dumps(schema, ensure_ascii=False))  # a custom tool: its JSON
            continue
        total += rules.function_init_tokens + _function_tokens(function, count)
    return total


def _function_tokens(function: Mapping[str, Any], count: Callable[[str], int]) -> int:
    description = str(function.get("description") or "").removesuffix(".")
    tokens = count(f"{function.get('name', '')}:{description}")
    parameters = function.get("parameters")
    properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
    if not isinstance(properties, Mapping) or not properties:
        return tokens
    tokens += PROPERTIES_INIT_TOKENS
    for key, prop in properties.items():
        prop = prop if isinstance(prop, Mapping) else {}
        tokens += PROPERTY_KEY_TOKENS
        enum = prop.get("enum")
        if isinstance(enum, list):
            tokens += ENUM_INIT_TOKENS
            tokens += sum(ENUM_ITEM_TOKENS + count(str(item)) for item in enum)
        kind = prop.get("type", "")
        described = str(prop.get("description") or "").removesuffix(".")
        tokens += count(f"{key}:{kind if isinstance(kind, str) else json.dumps(kind)}:{described}")
        rest = {k: v for k, v in prop.items() if k not in _RULE_KEYS}
        if rest:  # beyond the cookbook's rule: nested schemas, counted as their JSON
            tokens += count(json.dumps(rest, ensure_ascii=False))
    return tokens


def _anthropic_text(schema: Mapping[str, Any]) -> str:
    function = schema.get("function")
    if schema.get("type") == "function" and isinstance(function, Mapping):
        parts = {k: function.get(k) for k in ("name", "description", "parameters")}
        return json.dumps({k: v for k, v in parts.items() if v is not None}, ensure_ascii=False)
    return json.dumps(schema, ensure_ascii=False)
