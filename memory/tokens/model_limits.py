"""Context windows and output limits of current models.

``get_model_limits(model)`` looks the model up by the longest known prefix
that ends at a separator, after dropping a provider prefix, so dated and
aliased names resolve to their family: ``gpt-4o-2024-08-06`` -> ``gpt-4o``,
``claude-haiku-4-5-20251001`` -> ``claude-haiku-4-5``, ``openai/gpt-4.1-mini``
-> ``gpt-4.1-mini``; so do Vertex (``claude-3-5-sonnet@20240620``), Bedrock
(``us.anthropic.claude-sonnet-4-20250514-v1:0``), fine-tuned
(``ft:gpt-4o-mini-2024-07-18:org::id``) and OpenRouter
(``anthropic/claude-3.5-sonnet``) names. A model not in the table gets
``UNKNOWN_MODEL_LIMITS`` (128,000 / 4,096, ``known=False``) and one logged
warning per name.

The numbers are the providers' published defaults (the OpenAI, Anthropic and
Google model pages): opt-in extensions such as a 1M-context beta header are
not assumed. A newer version of a listed family that is not listed itself
(``claude-opus-4-7``) resolves to the family's oldest numbers, which are the
smaller ones; so does a point release from GPT-5 and Gemini 3 on that is not
listed (``gpt-5.3-codex`` -> ``gpt-5-codex``, ``gemini-3.1-pro-preview`` ->
``gemini-3-pro``). Older generations are not stretched that way: ``gpt-4.1``
has 128 times the window of ``gpt-4``.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from dataclasses import dataclass

from ..errors import ConfigurationError
from .encodings import normalize_model_name

__all__ = [
    "MODEL_LIMITS",
    "UNKNOWN_MODEL_LIMITS",
    "ModelLimits",
    "compaction_threshold",
    "get_model_limits",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ModelLimits:
    """``context_window``: tokens of input and output together; ``max_output_tokens``:
    the most one reply may hold; ``known``: found in the table (else a default)."""

    context_window: int
    max_output_tokens: int
    known: bool


def _k(context_window: int, max_output_tokens: int) -> ModelLimits:
    return ModelLimits(context_window, max_output_tokens, True)


MODEL_LIMITS: dict[str, ModelLimits] = {
    # OpenAI
    "gpt-5": _k(400_000, 128_000),
    "gpt-5-mini": _k(400_000, 128_000),
    "gpt-5-nano": _k(400_000, 128_000),
    "gpt-5-codex": _k(400_000, 128_000),
    "gpt-5-pro": _k(400_000, 272_000),
    "gpt-5-chat": _k(128_000, 16_384),
    "gpt-5.1": _k(400_000, 128_000),
    "gpt-5.1-codex": _k(400_000, 128_000),
    "gpt-5.1-chat": _k(128_000, 16_384),
    "gpt-5.2": _k(400_000, 128_000),
    "gpt-4.1": _k(1_047_576, 32_768),
    "gpt-4.1-mini": _k(1_047_576, 32_768),
    "gpt-4.1-nano": _k(1_047_576, 32_768),
    "gpt-4.5-preview": _k(128_000, 16_384),
    "gpt-4o": _k(128_000, 16_384),
    "gpt-4o-2024-05-13": _k(128_000, 4_096),
    "gpt-4o-mini": _k(128_000, 16_384),
    "chatgpt-4o": _k(128_000, 16_384),
    "gpt-4-turbo": _k(128_000, 4_096),
    "gpt-4-1106-preview": _k(128_000, 4_096),
    "gpt-4-0125-preview": _k(128_000, 4_096),
    "gpt-4": _k(8_192, 8_192),
    "gpt-4-32k": _k(32_768, 32_768),
    "gpt-3.5-turbo": _k(16_385, 4_096),
    "gpt-35-turbo": _k(16_385, 4_096),  # the Azure spelling
    "o1": _k(200_000, 100_000),
    "o1-pro": _k(200_000, 100_000),
    "o1-preview": _k(128_000, 32_768),
    "o1-mini": _k(128_000, 65_536),
    "o3": _k(200_000, 100_000),
    "o3-pro": _k(200_000, 100_000),
    "o3-mini": _k(200_000, 100_000),
    "o4-mini": _k(200_000, 100_000),
    "codex-mini": _k(200_000, 100_000),
    "gpt-oss-120b": _k(131_072, 131_072),
    "gpt-oss-20b": _k(131_072, 131_072),
    # Anthropic
    "claude-fable-5": _k(1_000_000, 128_000),
    "claude-opus-5": _k(1_000_000, 128_000),
    "claude-sonnet-5": _k(1_000_000, 128_000),
    "claude-haiku-5": _k(1_000_000, 128_000),
    "claude-opus-4-8": _k(1_000_000, 128_000),
    "claude-opus-4-6": _k(1_000_000, 128_000),
    "claude-sonnet-4-6": _k(1_000_000, 128_000),
    "claude-opus-4-5": _k(200_000, 64_000),
    "claude-opus-4-1": _k(200_000, 32_000),
    "claude-opus-4": _k(200_000, 32_000),
    "claude-sonnet-4-5": _k(200_000, 64_000),
    "claude-sonnet-4": _k(200_000, 64_000),
    "claude-haiku-4-5": _k(200_000, 64_000),
    "claude-3-7-sonnet": _k(200_000, 64_000),
    "claude-3-5-sonnet": _k(200_000, 8_192),
    "claude-3-5-haiku": _k(200_000, 8_192),
    "claude-3-opus": _k(200_000, 4_096),
    "claude-3-sonnet": _k(200_000, 4_096),
    "claude-3-haiku": _k(200_000, 4_096),
    # Google
    "gemini-3-pro": _k(1_048_576, 65_536),
    "gemini-3-flash": _k(1_048_576, 65_536),
    "gemini-2.5-pro": _k(1_048_576, 65_536),
    "gemini-2.5-flash": _k(1_048_576, 65_536),
    "gemini-2.5-flash-lite": _k(1_048_576, 65_536),
    "gemini-2.5-flash-image": _k(32_768, 32_768),
    "gemini-2.0-flash": _k(1_048_576, 8_192),
    "gemini-2.0-flash-lite": _k(1_048_576, 8_192),
    "gemini-1.5-pro": _k(2_097_152, 8_192),
    "gemini-1.5-flash": _k(1_048_576, 8_192),
}

UNKNOWN_MODEL_LIMITS = ModelLimits(context_window=128_000, max_output_tokens=4_096, known=False)

# What may follow a known name: a date or variant ("-2024-08-06", "-latest",
# "-preview-05-06"), a Bedrock version (":0"), a Vertex date ("@20240620").
_SEPARATORS = ("-", ":", "@")
_VERSION_DOT = re.compile(r"(?<=\d)\.(?=\d)")
# A point release of GPT-5 or later, or Gemini 3 or later: "gpt-5.3-codex", "gemini-3.1-pro".
_POINT_RELEASE = re.compile(r"^(gpt-(?:[5-9]|\d\d+)|gemini-(?:[3-9]|\d\d+))\.\d+(?=$|-)")

# The unknown names already warned about; forgotten all at once when full (an
# importer reads model names from users' files: there is no fixed set of them).
_WARNED_MAX = 1024
_warned: set[str] = set()
_warned_lock = threading.Lock()


def _lookup(name: str) -> ModelLimits | None:
    best: str | None = None
    for key in MODEL_LIMITS:
        matches = name == key or (name.startswith(key) and name[len(key)] in _SEPARATORS)
        if matches and (best is None or len(key) > len(best)):
            best = key
    return MODEL_LIMITS[best] if best is not None else None


def _resolve(model: str) -> ModelLimits | None:
    name = normalize_model_name(model)
    if name.startswith("ft:"):  # fine-tuned: "ft:gpt-4o-mini-2024-07-18:org::id"
        name = name[3:]
    limits = _lookup(name)
    if limits is None and name.startswith("claude"):
        # OpenRouter spells versions with dots: "claude-3.5-sonnet", "claude-sonnet-4.5".
        limits = _lookup(_VERSION_DOT.sub("-", name))
    if limits is None and _POINT_RELEASE.match(name):
        limits = _lookup(_POINT_RELEASE.sub(r"\1", name))
    return limits


def get_model_limits(model: str | None) -> ModelLimits:
    """The limits of ``model``; ``UNKNOWN_MODEL_LIMITS`` (and a warning, once) when unknown."""
    limits = _resolve(model) if model else None
    if limits is not None:
        return limits
    key = model or ""
    with _warned_lock:
        first = key not in _warned
        if first and len(_warned) >= _WARNED_MAX:
            _warned.clear()
        _warned.add(key)
    if first:
        logger.warning(
            "unknown model %r: assuming a %s-token context window and %s output tokens",
            model,
            f"{UNKNOWN_MODEL_LIMITS.context_window:,}",
            f"{UNKNOWN_MODEL_LIMITS.max_output_tokens:,}",
        )
    return UNKNOWN_MODEL_LIMITS


def compaction_threshold(model: str | None, safety_ratio: float) -> int:
    """The context size, in tokens, at which a memory should compact.

    ``context_window * safety_ratio``, but never more than ``context_window -
    max_output_tokens``, so that a reply of the largest size still fits (the
    cap is skipped for the few old models whose output limit is their whole
    window). Raises ``ConfigurationError`` unless ``0 < safety_ratio <= 1``.
    """
    if isinstance(safety_ratio, bool) or not isinstance(safety_ratio, int | float):
        raise ConfigurationError(f"safety_ratio must be a number in (0, 1], got {safety_ratio!r}")
    if not (math.isfinite(safety_ratio) and 0 < safety_ratio <= 1):
        raise ConfigurationError(f"safety_ratio must be in (0, 1], got {safety_ratio!r}")
    limits = get_model_limits(model)
    threshold = math.floor(limits.context_window * safety_ratio)
    room = limits.context_window - limits.max_output_tokens
    if room > 0:
        threshold = min(threshold, room)
    return max(threshold, 1)
