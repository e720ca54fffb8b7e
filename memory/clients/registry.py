"""Providers by name: a name maps to its client class, which declares the
provider's rules; adding a provider is its client module and one line here
(or one ``register_provider`` call from your own code).

The shape follows mem0's ``utils/factory.py`` (``provider_to_class``: a
provider name to the class that serves it, one line each). Here the class
itself carries what differs between providers, so no other module lists them:

- ``counting_rules(model, encoding_name)``: how the provider counts a request
  beyond its text (``memory.tokens.provider_rules``: the request format its
  requests are counted in, tool schemas, earlier reasoning);
- ``api_name``: the API it speaks, as a page names it ("OpenAI chat completions");
- ``request_body(model=, messages=, tools=, max_tokens=)``: the JSON body it
  would send, built without a connection (the dashboard shows it);
- ``key_required_with_base_url``: whether a server at your own ``base_url``
  still needs an API key (without a ``base_url`` every provider's own API
  needs one);
- ``__init__(base_url, api_key, *, timeout_s)``: ``None`` for the provider's
  own URL, the key from the provider's environment variable, the default
  timeout.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ..errors import ConfigurationError
from ..messages import ChatMessage
from ..tokens.provider_rules import CountingRules
from .anthropic_messages import AnthropicClient
from .base import ChatClient
from .openai_chat import OpenAIChatClient


class ProviderClient(ChatClient, Protocol):
    """A client class a provider name can map to (see the module docstring)."""

    api_name: str
    key_required_with_base_url: bool

    def __init__(
        self, base_url: str | None = None, api_key: str | None = None, *, timeout_s: float | None
    ) -> None: ...

    @staticmethod
    def counting_rules(model: str | None, encoding_name: str) -> CountingRules: ...

    def request_body(
        self,
        *,
        model: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> dict[str, Any]: ...


_PROVIDERS: dict[str, type[ProviderClient]] = {
    "openai": OpenAIChatClient,  # any OpenAI-compatible server: vLLM, Ollama, llama.cpp, ...
    "anthropic": AnthropicClient,
}


def register_provider(name: str, client_class: type[ProviderClient]) -> None:
    """Make ``name`` (as ``MOTUS_CHAT_N_PROVIDER`` and the dashboard say it)
    mean ``client_class``. Registering a name again replaces its class; call
    it before the settings read the chat models. Raises ``ValueError`` for
    an empty name."""
    if not name:
        raise ValueError("a provider needs a name")
    _PROVIDERS[name] = client_class


def provider_names() -> tuple[str, ...]:
    """The registered provider names, in the order they were registered."""
    return tuple(_PROVIDERS)


def provider_client(name: str) -> type[ProviderClient]:
    """The client class registered for ``name``. Raises ``ConfigurationError``
    naming the registered providers when ``name`` is not one."""
    client_class = _PROVIDERS.get(name)
    if client_class is None:
        known = ", ".join(provider_names())
        raise ConfigurationError(f"unknown provider {name!r}: the providers are {known}")
    return client_class
