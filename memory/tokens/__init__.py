"""Token accounting: counting, media rules, tokenizer files, model limits, truncation.

- ``counter``: ``TokenCounter`` (text, messages, whole requests) and ``count_tokens``;
- ``images``: what images, audio and files cost, by the providers' rules;
- ``encodings``: the offline tiktoken encodings and which model uses which;
- ``model_limits``: context windows and output limits per model;
- ``truncation``: cutting an oversized tool result to a token budget.
"""

from .counter import (
    LONG_RUN_CHARS,
    REPLY_PRIMING_TOKENS,
    RUN_CHUNK_CHARS,
    TOKENS_PER_MESSAGE,
    TOKENS_PER_NAME,
    TOKENS_PER_TOOL_CALL,
    TokenCounter,
    TruncatedText,
    count_tokens,
)
from .encodings import encoding_for_model
from .images import anthropic_image_tokens, image_size, openai_image_tokens
from .provider_rules import CountingRules

__all__ = [
    "LONG_RUN_CHARS",
    "REPLY_PRIMING_TOKENS",
    "RUN_CHUNK_CHARS",
    "TOKENS_PER_MESSAGE",
    "TOKENS_PER_NAME",
    "TOKENS_PER_TOOL_CALL",
    "CountingRules",
    "TokenCounter",
    "TruncatedText",
    "anthropic_image_tokens",
    "count_tokens",
    "encoding_for_model",
    "image_size",
    "openai_image_tokens",
]
