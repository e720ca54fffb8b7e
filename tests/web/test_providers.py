"""The chat models' configuration (``motus_web.providers``) and the library's
provider registry (``memory.clients.registry``): a provider is usable by name
once its client class is registered, with no other file changed."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from memory import ChatMessage, Completion, ConfigurationError, TokenCounter, register_provider
from memory.clients import registry
from memory.tokens.provider_rules import CountingRules, tools_tokens
from motus_web.dashboard import steps
from motus_web.providers import read_chat_models


def test_chat_models_come_from_the_environment_with_their_keys_kept_out_of_repr() -> None:
    models = read_chat_models(
        {
            "MOTUS_CHAT_MODELS": "local,claude",
            "MOTUS_CHAT_LOCAL_BASE_URL": "http://127.0.0.1:11434/v1",
            "MOTUS_CHAT_LOCAL_MODEL": "llama3.1",
            "MOTUS_CHAT_CLAUDE_PROVIDER": "anthropic",
            "MOTUS_CHAT_CLAUDE_API_KEY": "sk-ant-secret",
            "MOTUS_CHAT_CLAUDE_MODEL": "claude-sonnet-4",
            "MOTUS_CHAT_CLAUDE_COMPACT_MODEL": "claude-haiku-4",
        }
    )
    assert [(m.name, m.provider, m.model, m.compact_model) for m in models] == [
        ("local", "openai", "llama3.1", ""),
        ("claude", "anthropic", "claude-sonnet-4", "claude-haiku-4"),
    ]
    assert "sk-ant-secret" not in repr(models)
    assert models[1].label == "claude (claude-sonnet-4)"


@pytest.mark.parametrize(
    ("environ", "wording"),
    [
        ({"MOTUS_CHAT_MODELS": "a b"}, "letters, digits"),
        ({"MOTUS_CHAT_MODELS": "x"}, "MOTUS_CHAT_X_MODEL is required"),
        ({"MOTUS_CHAT_MODELS": "x", "MOTUS_CHAT_X_MODEL": "m"}, "MOTUS_CHAT_X_API_KEY is required"),
        (
            {"MOTUS_CHAT_MODELS": "x", "MOTUS_CHAT_X_MODEL": "m", "MOTUS_CHAT_X_PROVIDER": "oai"},
            "MOTUS_CHAT_X_PROVIDER must be one of",
        ),
        (
            {
                "MOTUS_CHAT_MODELS": "x",
                "MOTUS_CHAT_X_MODEL": "m",
                "MOTUS_CHAT_X_BASE_URL": "ftp://h",
            },
            "MOTUS_CHAT_X_BASE_URL must start with",
        ),
    ],
)
def test_nonsense_in_the_chat_model_variables_stops_the_process(
    environ: dict[str, str], wording: str
) -> None:
    with pytest.raises(ImproperlyConfigured, match=wording):
        read_chat_models(environ)


class EchoClient:
    """A provider's whole client module, in small: it declares its rules and
    answers with the last message's text."""

    api_name = "Echo API"
    key_required_with_base_url = True
    TOOL_PROMPT_TOKENS = 77

    def __init__(
        self, base_url: str | None = None, api_key: str | None = None, *, timeout_s: float | None
    ) -> None:
        self.base_url = base_url
        self.api_key = api_key
        self.timeout_s = timeout_s

    @staticmethod
    def counting_rules(model: str | None, encoding_name: str) -> CountingRules:
        # Counted like an Anthropic request, with its own tool-use prompt.
        return CountingRules("anthropic", True, EchoClient.TOOL_PROMPT_TOKENS, 0)

    def request_body(
        self,
        *,
        model: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> dict[str, Any]:
        return {"model": model, "input": [m.content for m in messages]}

    async def create(
        self,
        *,
        model: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        return Completion(message=ChatMessage("assistant", f"echo: {messages[-1].content}"))


@pytest.fixture
def echo_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    # The registry as it was comes back after the test.
    monkeypatch.setattr(registry, "_PROVIDERS", dict(registry._PROVIDERS))
    register_provider("echo", EchoClient)


ECHO = {
    "MOTUS_CHAT_MODELS": "mine",
    "MOTUS_CHAT_MINE_PROVIDER": "echo",
    "MOTUS_CHAT_MINE_MODEL": "echo-1",
    "MOTUS_CHAT_MINE_BASE_URL": "http://127.0.0.1:19601/v1",
    "MOTUS_CHAT_MINE_API_KEY": "echo-key",
}


@pytest.mark.usefixtures("echo_registered")
def test_a_registered_provider_is_usable_by_name_from_config_to_client_to_counting() -> None:
    (model,) = read_chat_models(ECHO)
    assert (model.provider, model.model) == ("echo", "echo-1")

    client = model.client()
    assert isinstance(client, EchoClient)
    assert (client.base_url, client.api_key) == ("http://127.0.0.1:19601/v1", "echo-key")
    reply = asyncio.run(client.create(model=model.model, messages=[ChatMessage("user", "hi")]))
    assert reply.message.content == "echo: hi"

    counter = TokenCounter.for_model(model.model)
    rules = model.counting_rules(counter.encoding_name)
    assert rules.tool_prompt_tokens == EchoClient.TOOL_PROMPT_TOKENS
    schema = {"type": "function", "function": {"name": "add", "description": "Add."}}
    with_prompt = tools_tokens([schema], rules, counter.count)
    assert with_prompt > EchoClient.TOOL_PROMPT_TOKENS  # the prompt and the schema's JSON

    assert ("echo", "Echo API") in steps.providers()


@pytest.mark.usefixtures("echo_registered")
def test_a_registered_providers_own_request_rule_is_enforced_at_startup() -> None:
    without_key = {k: v for k, v in ECHO.items() if k != "MOTUS_CHAT_MINE_API_KEY"}
    with pytest.raises(ImproperlyConfigured, match="MOTUS_CHAT_MINE_API_KEY is required"):
        read_chat_models(without_key)


def test_an_unregistered_provider_is_refused_with_the_registered_names() -> None:
    with pytest.raises(ImproperlyConfigured, match="must be one of anthropic, openai; got 'echo'"):
        read_chat_models(ECHO)
    with pytest.raises(ConfigurationError, match="unknown provider 'echo'"):
        registry.provider_client("echo")
