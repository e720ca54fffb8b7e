"""The chat models, read from the environment, and their clients: below both
UIs (settings, ``sessions``, ``dashboard`` and ``chat`` import it).

``MOTUS_CHAT_MODELS`` names the models a chat may use, comma-separated (letters,
digits and ``_``); each name ``N`` is then described by:

- ``MOTUS_CHAT_N_PROVIDER``: a registered provider (``memory.provider_names()``:
  ``openai``, any OpenAI-compatible server: OpenAI, vLLM, Ollama, llama.cpp,
  OpenRouter; ``anthropic``; and any added with ``memory.register_provider``);
  default ``openai``;
- ``MOTUS_CHAT_N_BASE_URL``: the API's base URL (``http`` or ``https``); unset
  means the provider's own;
- ``MOTUS_CHAT_N_API_KEY``: the key (a provider's own API needs one; a server
  at your own ``BASE_URL`` may go without unless its client class says
  ``key_required_with_base_url``, as Anthropic's does); it is never logged,
  rendered or sent to a browser;
- ``MOTUS_CHAT_N_MODEL``: the model id sent to the API (required);
- ``MOTUS_CHAT_N_COMPACT_MODEL``: the model that writes compaction summaries;
  unset means the chat model itself.

This module reads the environment only in ``read_chat_models`` (settings
calls it once) and imports no app, so settings may import it. What differs
between providers (the client, how it counts, whether it needs a key) is
declared by the provider's client class in the library's registry
(``memory.clients.registry``); nothing here names a provider but the default.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from memory import ChatClient, ProviderClient, provider_client, provider_names
from memory.tokens import CountingRules
from motus_web.env import env_choice, env_list, env_str, env_url

DEFAULT_PROVIDER = "openai"
_NAME = re.compile(r"[A-Za-z0-9_]{1,40}")
REQUEST_TIMEOUT_S = 120.0


@dataclass(frozen=True, slots=True)
class ChatModel:
    """One configured model. ``api_key`` stays out of ``repr`` and of every page."""

    name: str
    provider: str
    model: str
    base_url: str = ""
    compact_model: str = ""
    api_key: str = field(default="", repr=False)

    @property
    def label(self) -> str:
        """What a page shows: the name and the model id, never the key or URL."""
        return self.name if self.name == self.model else f"{self.name} ({self.model})"

    @property
    def client_class(self) -> type[ProviderClient]:
        """The provider's client class (``memory.clients.registry``). Raises
        ``memory.ConfigurationError`` when the provider is not registered."""
        return provider_client(self.provider)

    def client(self) -> ChatClient:
        """A new client for this model (close it with ``aclose()`` when done)."""
        return self.client_class(
            self.base_url or None, api_key=self.api_key or None, timeout_s=REQUEST_TIMEOUT_S
        )

    def counting_rules(self, encoding_name: str) -> CountingRules:
        """How this model's provider counts a request, its text counted with
        the tiktoken encoding ``encoding_name``."""
        return self.client_class.counting_rules(self.model, encoding_name)


def read_chat_models(environ: Mapping[str, str] | None = None) -> tuple[ChatModel, ...]:
    """The models ``MOTUS_CHAT_MODELS`` lists, in its order. Raises
    ``ImproperlyConfigured`` for a bad name, provider, URL, or a missing model id."""
    models: list[ChatModel] = []
    for name in env_list("MOTUS_CHAT_MODELS", default=[], environ=environ):
        if not _NAME.fullmatch(name):
            raise ImproperlyConfigured(
                f"MOTUS_CHAT_MODELS: {name!r} is not a name of letters, digits and '_'"
            )
        if any(m.name == name for m in models):
            raise ImproperlyConfigured(f"MOTUS_CHAT_MODELS names {name!r} twice")
        prefix = f"MOTUS_CHAT_{name.upper()}_"
        model = env_str(prefix + "MODEL", environ=environ)
        if not model:
            raise ImproperlyConfigured(f"{prefix}MODEL is required for the chat model {name!r}")
        provider = env_choice(
            prefix + "PROVIDER", frozenset(provider_names()), DEFAULT_PROVIDER, environ=environ
        )
        base_url = env_url(prefix + "BASE_URL", frozenset({"http", "https"}), environ=environ)
        api_key = env_str(prefix + "API_KEY", environ=environ)
        if not api_key and (provider_client(provider).key_required_with_base_url or not base_url):
            raise ImproperlyConfigured(
                f"{prefix}API_KEY is required: {provider}'s own API needs a key "
                "(only a server at your own BASE_URL may go without)"
            )
        models.append(
            ChatModel(
                name=name,
                provider=provider,
                model=model,
                base_url=base_url,
                compact_model=env_str(prefix + "COMPACT_MODEL", environ=environ),
                api_key=api_key,
            )
        )
    return tuple(models)


def configured_models() -> tuple[ChatModel, ...]:
    """The chat models the settings read (``settings.MOTUS_CHAT_MODELS``), in order."""
    models: tuple[ChatModel, ...] = tuple(getattr(settings, "MOTUS_CHAT_MODELS", ()))
    return models


def configured_for(model_id: str) -> ChatModel | None:
    """The first configured chat model sending the model id ``model_id``, if any."""
    return next((m for m in configured_models() if m.model == model_id), None)
