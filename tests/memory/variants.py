"""Real-world message variants (issue 7), as providers and other tools produce them.

Each is a chat-format dict as it arrives; ``REAL_WORLD`` strings them into one
valid conversation that the library, every log store and the importer must
keep, count and restore. ``CLEAN`` gives the text each lone-surrogate string
becomes (U+FFFD, see ``memory.json_values``).
"""

from __future__ import annotations

from typing import Any

LONE = "Is the smiley mug \ud83d in stock?"  # a model cut mid-emoji
LONE_CLEAN = "Is the smiley mug \ufffd in stock?"
SPLIT_PAIR = "Here you go \ud83d\ude00"  # a UTF-16 pair as two code points
SPLIT_PAIR_CLEAN = "Here you go \U0001f600"

PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"

USER_WITH_SURROGATE: dict[str, Any] = {"role": "user", "content": LONE, "name": "mia_li"}

CALL_WITH_SURROGATE: dict[str, Any] = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_s\udc00",
            "type": "function",
            "function": {"name": "search\ud800", "arguments": '{"q": "mug \ud83d"}'},
            "provider": {"trace\udfff": ["x\ud83d"]},
        }
    ],
    "reasoning_content": "look it up \ud83d",
}
CALL_WITH_SURROGATE_CLEAN: dict[str, Any] = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_s\ufffd",
            "type": "function",
            "function": {"name": "search\ufffd", "arguments": '{"q": "mug \ufffd"}'},
            "provider": {"trace\ufffd": ["x\ufffd"]},
        }
    ],
    "reasoning_content": "look it up \ufffd",
}
RESULT_WITH_SURROGATE: dict[str, Any] = {
    "role": "tool",
    "tool_call_id": "call_s\udc00",
    "content": [{"type": "text", "text": "3 in stock \ud83d"}],
}

CUSTOM_CALL: dict[str, Any] = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_p1",
            "type": "custom",
            "custom": {
                "name": "apply_patch",
                "input": "*** Begin Patch\n*** Update File: shop.py\n-stock = 2\n+stock = 3\n"
                "*** End Patch",
            },
        }
    ],
}
CUSTOM_RESULT: dict[str, Any] = {"role": "tool", "tool_call_id": "call_p1", "content": "Done."}

EMPTY_ID_CALLS: dict[str, Any] = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "", "type": "function", "function": {"name": "stock", "arguments": '{"sku": 1}'}},
        {"id": "", "type": "function", "function": {"name": "stock", "arguments": '{"sku": 2}'}},
    ],
}
EMPTY_ID_RESULTS: list[dict[str, Any]] = [
    {"role": "tool", "tool_call_id": "", "content": "sku 1: 4 left"},
    {"role": "tool", "tool_call_id": "", "content": "sku 2: sold out"},
]

THINKING_ANSWER: dict[str, Any] = {
    "role": "assistant",
    "content": "Both checked.",
    "reasoning_content": "sku 2 is sold out, say so",
    "thinking_blocks": [
        {"type": "thinking", "thinking": "sku 2 is sold out, say so", "signature": "EqQBCgIYAh"},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
    ],
}

# What the Anthropic importer yields for tool_use / tool_result blocks with cache_control.
ANTHROPIC_CALL: dict[str, Any] = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "toolu_01",
            "type": "function",
            "function": {"name": "photo", "arguments": '{"sku":1}'},
            "cache_control": {"type": "ephemeral"},
        }
    ],
}
ANTHROPIC_RESULT: dict[str, Any] = {
    "role": "tool",
    "tool_call_id": "toolu_01",
    "content": [
        {"type": "text", "text": "the photo"},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
        },
    ],
    "cache_control": {"type": "ephemeral"},
}
IMAGE_RESULT_CALL: dict[str, Any] = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_img",
            "type": "function",
            "function": {"name": "screenshot", "arguments": "{}"},
        }
    ],
}
IMAGE_RESULT: dict[str, Any] = {
    "role": "tool",
    "tool_call_id": "call_img",
    "content": [
        {"type": "text", "text": "screenshot attached"},
        {"type": "image_url", "image_url": {"url": PNG, "detail": "low"}},
        {"type": "file", "file": {"filename": "receipt.pdf", "file_id": "file-abc123"}},
    ],
}

REFUSAL: dict[str, Any] = {
    "role": "assistant",
    "content": None,
    "refusal": "I can't help with that.",
}
AUDIO_ANSWER: dict[str, Any] = {
    "role": "assistant",
    "content": None,
    "audio": {
        "id": "audio_abc123",
        "data": "UklGRiQAAABXQVZFZm10",
        "expires_at": 1729018505,
        "transcript": "Sku 2 is sold out.",
    },
}
LEGACY_CALL: dict[str, Any] = {
    "role": "assistant",
    "content": None,
    "function_call": {"name": "stock", "arguments": '{"sku": 3}'},
}
LEGACY_RESULT: dict[str, Any] = {"role": "function", "name": "stock", "content": "sku 3: 1 left"}
FINAL: dict[str, Any] = {"role": "assistant", "content": SPLIT_PAIR}

REAL_WORLD: list[dict[str, Any]] = [
    USER_WITH_SURROGATE,
    CALL_WITH_SURROGATE,
    RESULT_WITH_SURROGATE,
    CUSTOM_CALL,
    CUSTOM_RESULT,
    EMPTY_ID_CALLS,
    *EMPTY_ID_RESULTS,
    THINKING_ANSWER,
    {"role": "user", "content": "Show me sku 1 and the receipt."},
    ANTHROPIC_CALL,
    ANTHROPIC_RESULT,
    IMAGE_RESULT_CALL,
    IMAGE_RESULT,
    REFUSAL,
    {"role": "user", "content": "And sku 3?"},
    LEGACY_CALL,
    LEGACY_RESULT,
    AUDIO_ANSWER,
    FINAL,
]
"""A valid conversation of every variant; no message of it may be lost or left out."""
