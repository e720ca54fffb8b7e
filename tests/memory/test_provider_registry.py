"""The provider registry (``memory.clients.registry``): each built-in name
maps to its client, whose declared counting rules are the documented rules
``counting_rules`` reads from a model's name."""

from __future__ import annotations

import pytest

from memory import (
    AnthropicClient,
    ConfigurationError,
    OpenAIChatClient,
    provider_client,
    provider_names,
)
from memory.tokens.provider_rules import counting_rules

MODELS = [
    "gpt-4o",
    "gpt-4",
    "llama3.1",
    None,
    "claude-3-opus-20240229",
    "claude-3-haiku",
    "claude-sonnet-4-5-20250929",
    "claude-opus-4-5",
    "claude-sonnet-4.6",
    "claude-fable-5-1",
    "claude-latest",
]


def test_the_built_in_providers_are_registered_in_order() -> None:
    assert provider_names()[:2] == ("openai", "anthropic")
    assert provider_client("openai") is OpenAIChatClient
    assert provider_client("anthropic") is AnthropicClient


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_each_client_declares_the_rules_its_models_are_counted_by(
    model: str | None, encoding: str
) -> None:
    by_name = counting_rules(model, encoding)
    client = provider_client(by_name.shape)
    assert client.counting_rules(model, encoding) == by_name


def test_only_anthropic_needs_a_key_at_your_own_base_url() -> None:
    assert AnthropicClient.key_required_with_base_url
    assert not OpenAIChatClient.key_required_with_base_url


def test_an_unknown_provider_names_the_registered_ones() -> None:
    with pytest.raises(ConfigurationError, match="the providers are openai, anthropic"):
        provider_client("gemini")
