"""The model-limits table: families, dated and prefixed names, unknown models."""

from __future__ import annotations

import logging
import uuid

import pytest

from memory.errors import ConfigurationError
from memory.tokens import model_limits
from memory.tokens.model_limits import (
    MODEL_LIMITS,
    UNKNOWN_MODEL_LIMITS,
    ModelLimits,
    compaction_threshold,
    get_model_limits,
)


@pytest.mark.parametrize(
    ("model", "context_window", "max_output_tokens"),
    [
        ("gpt-4o", 128_000, 16_384),
        ("gpt-4o-2024-08-06", 128_000, 16_384),
        ("gpt-4o-2024-05-13", 128_000, 4_096),
        ("gpt-4o-mini-2024-07-18", 128_000, 16_384),
        ("openai/gpt-4.1-mini", 1_047_576, 32_768),
        ("gpt-4.1-nano-2025-04-14", 1_047_576, 32_768),
        ("o1", 200_000, 100_000),
        ("o1-mini", 128_000, 65_536),
        ("o3-mini-2025-01-31", 200_000, 100_000),
        ("o4-mini", 200_000, 100_000),
        ("gpt-5", 400_000, 128_000),
        ("gpt-5-mini-2025-08-07", 400_000, 128_000),
        ("gpt-5-chat-latest", 128_000, 16_384),
        ("gpt-4", 8_192, 8_192),
        ("gpt-4-turbo-2024-04-09", 128_000, 4_096),
        ("gpt-3.5-turbo-0125", 16_385, 4_096),
        ("claude-haiku-4-5-20251001", 200_000, 64_000),
        ("claude-sonnet-4-5", 200_000, 64_000),
        ("claude-sonnet-4-20250514", 200_000, 64_000),
        ("anthropic/claude-opus-4-1-20250805", 200_000, 32_000),
        ("claude-opus-4-20250514", 200_000, 32_000),
        ("claude-3-7-sonnet-latest", 200_000, 64_000),
        ("claude-3-5-sonnet@20240620", 200_000, 8_192),
        ("us.anthropic.claude-sonnet-4-20250514-v1:0", 200_000, 64_000),
        ("claude-3-haiku-20240307", 200_000, 4_096),
        ("claude-opus-4-6", 1_000_000, 128_000),
        ("claude-sonnet-4-6", 1_000_000, 128_000),
        ("claude-opus-5-5", 1_000_000, 128_000),
        ("claude-haiku-5-5", 1_000_000, 128_000),
        ("claude-opus-4-7", 200_000, 32_000),
        ("gpt-5.2", 400_000, 128_000),
        ("gpt-5.3-codex", 400_000, 128_000),
        ("gpt-5.4-mini", 400_000, 128_000),
        ("gpt-5.1-codex-max", 400_000, 128_000),
        ("gemini-3-pro-preview", 1_048_576, 65_536),
        ("gemini-3-flash-preview", 1_048_576, 65_536),
        ("gemini-3.1-pro-preview", 1_048_576, 65_536),
        ("gemini-2.5-pro", 1_048_576, 65_536),
        ("google/gemini-2.5-flash-preview-05-20", 1_048_576, 65_536),
        ("gemini-2.5-flash-lite", 1_048_576, 65_536),
        ("gemini-2.0-flash-001", 1_048_576, 8_192),
        ("gemini-1.5-pro-002", 2_097_152, 8_192),
        ("GPT-4o", 128_000, 16_384),
        ("ft:gpt-4o-mini-2024-07-18:acme::9abc", 128_000, 16_384),
        ("anthropic/claude-3.5-sonnet", 200_000, 8_192),
        ("openrouter/anthropic/claude-sonnet-4.5", 200_000, 64_000),
        ("bedrock/anthropic.claude-3-5-haiku-20241022-v1:0", 200_000, 8_192),
    ],
)
def test_it_resolves_a_model_to_its_family(
    model: str, context_window: int, max_output_tokens: int
) -> None:
    assert get_model_limits(model) == ModelLimits(context_window, max_output_tokens, known=True)


def test_a_prefix_only_matches_at_a_separator() -> None:
    # "gpt-4" must not swallow "gpt-4o..." or a future "gpt-4.9".
    assert get_model_limits("gpt-4o-audio-preview").max_output_tokens == 16_384
    assert get_model_limits(f"gpt-4.9-{uuid.uuid4().hex}").known is False
    assert get_model_limits(f"o1x-{uuid.uuid4().hex}").known is False
    # Point releases inherit their generation's numbers from GPT-5 and Gemini 3 on only.
    assert get_model_limits(f"gemini-2.7-pro-{uuid.uuid4().hex}").known is False
    assert get_model_limits(f"gpt-5.9x-{uuid.uuid4().hex}").known is False


def test_every_entry_leaves_room_for_input() -> None:
    for name, limits in MODEL_LIMITS.items():
        assert limits.known, name
        assert 0 < limits.max_output_tokens <= limits.context_window, name


def test_an_unknown_model_gets_the_default_and_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = f"my-local-model-{uuid.uuid4().hex}"
    with caplog.at_level(logging.WARNING, logger="memory.tokens.model_limits"):
        first = get_model_limits(model)
        second = get_model_limits(model)
    assert first == second == UNKNOWN_MODEL_LIMITS
    assert (first.context_window, first.max_output_tokens, first.known) == (128_000, 4_096, False)
    warnings = [r for r in caplog.records if model in r.getMessage()]
    assert len(warnings) == 1
    assert "128,000" in warnings[0].getMessage()


def test_the_names_warned_about_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    warned: set[str] = set()
    monkeypatch.setattr(model_limits, "_warned", warned)
    for number in range(model_limits._WARNED_MAX + 10):
        get_model_limits(f"unknown-{number}")
        assert len(warned) <= model_limits._WARNED_MAX


def test_no_model_gets_the_default() -> None:
    assert get_model_limits(None) == UNKNOWN_MODEL_LIMITS


def test_model_limits_are_frozen() -> None:
    limits = get_model_limits("gpt-4o")
    with pytest.raises(AttributeError):
        limits.context_window = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("model", "ratio", "threshold"),
    [
        ("gpt-4o", 0.75, 96_000),
        ("gpt-4.1", 0.5, 523_788),
        # Capped so that the largest reply still fits in the window.
        ("claude-sonnet-4-5", 0.75, 136_000),
        ("gpt-5", 0.75, 272_000),
        # gpt-4's output limit is its whole window: no cap.
        ("gpt-4", 0.75, 6_144),
        ("gpt-4o", 1, 111_616),
    ],
)
def test_the_compaction_threshold_is_a_share_of_the_window(
    model: str, ratio: float, threshold: int
) -> None:
    assert compaction_threshold(model, ratio) == threshold


@pytest.mark.parametrize("ratio", [0, -0.5, 1.5, float("nan"), True])
def test_the_compaction_threshold_refuses_a_bad_ratio(ratio: float) -> None:
    with pytest.raises(ConfigurationError, match="safety_ratio"):
        compaction_threshold("gpt-4o", ratio)
