"""The per-model correction factor learned from provider-reported usage."""

from __future__ import annotations

import json

import pytest

from memory import (
    AnthropicClient,
    ChatMessage,
    ConfigurationError,
    TokenCalibration,
    TokenCounter,
)
from memory.testing.scripted_server import ScriptedServer
from memory.tokens.calibration import MIN_TOKENS


def test_a_model_not_seen_yet_is_not_corrected() -> None:
    calibration = TokenCalibration()
    assert calibration.factor("claude-sonnet-4-5") == 1.0
    assert calibration.adjust("claude-sonnet-4-5", 1_000) == 1_000


def test_the_first_report_is_taken_whole_and_later_ones_are_averaged() -> None:
    calibration = TokenCalibration(alpha=0.5)
    assert calibration.observe("m", estimated=1_000, reported=1_200)
    assert calibration.factor("m") == pytest.approx(1.2)
    assert calibration.observe("m", estimated=1_000, reported=1_000)
    assert calibration.factor("m") == pytest.approx(1.1)
    assert calibration.get("m").samples == 2
    assert calibration.adjust("m", 1_000) == 1_100


def test_a_steady_ratio_is_learned_whatever_the_start() -> None:
    calibration = TokenCalibration()
    calibration.observe("m", estimated=1_000, reported=900)
    for estimated in range(1_000, 20_000, 1_000):
        calibration.observe("m", estimated=estimated, reported=round(estimated * 1.15))
    assert calibration.factor("m") == pytest.approx(1.15, abs=0.005)


def test_each_model_learns_its_own_factor() -> None:
    calibration = TokenCalibration()
    calibration.observe("claude", estimated=1_000, reported=1_150)
    calibration.observe("gpt-4o", estimated=1_000, reported=1_000)
    assert calibration.factor("claude") == pytest.approx(1.15)
    assert calibration.factor("gpt-4o") == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("estimated", "reported"),
    [
        (1_000, None),  # the provider reported nothing
        (MIN_TOKENS - 1, 400),  # too small to say anything
        (1_000, 0),
        (1_000, 5_000),  # not the same request (tools left out of the estimate?)
        (1_000, 200),
    ],
)
def test_reports_that_teach_nothing_are_skipped(estimated: int, reported: int | None) -> None:
    calibration = TokenCalibration()
    assert not calibration.observe("m", estimated=estimated, reported=reported)
    assert calibration.get("m").samples == 0


def test_the_factor_stays_within_its_bounds() -> None:
    calibration = TokenCalibration(max_factor=1.5)
    calibration.observe("m", estimated=1_000, reported=3_000)
    assert calibration.factor("m") == 1.5


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="alpha"):
        TokenCalibration(alpha=0)
    with pytest.raises(ConfigurationError, match="min_factor"):
        TokenCalibration(min_factor=1.2)


def test_what_was_learned_survives_a_json_round_trip() -> None:
    calibration = TokenCalibration()
    calibration.observe("claude", estimated=1_000, reported=1_150)
    restored = TokenCalibration()
    restored.load(json.loads(json.dumps(calibration.to_dict())))
    assert restored.get("claude") == calibration.get("claude")
    restored.load({"models": {"bad": {"factor": "x", "samples": 1}, "none": {}}})
    assert restored.get("bad").samples == 0


async def test_a_reported_count_above_the_estimate_moves_a_request_over_the_threshold() -> None:
    # What the threshold check gains: a request the estimate puts under the
    # threshold is over it by the provider's count, and the corrected estimate says so.
    counter = TokenCounter.for_model("claude-sonnet-4-5")
    messages = [ChatMessage.system("You are an airline agent."), ChatMessage.user("word " * 1_700)]
    estimated = counter.context_tokens(messages)
    reported = round(estimated * 1.2)
    calibration = TokenCalibration()
    with ScriptedServer(anthropic=[{"text": "ok", "usage": {"input_tokens": reported}}]) as server:
        async with AnthropicClient(server.anthropic_base_url, api_key="k") as client:
            # A model name the SDK does not know: it warns about deprecated ones.
            done = await client.create(model="claude-test", messages=messages)
    assert calibration.observe("claude-test", estimated, done.usage.input_tokens)

    threshold = estimated + 100
    assert estimated < threshold
    assert calibration.adjust("claude-test", estimated) >= reported > threshold
