"""Model-provider clients: the ``ChatClient`` protocol, its stream events,
clients for OpenAI-compatible chat completions and the Anthropic Messages API,
and the registry of providers by name (``registry.py``).

The clients import their SDK on first use, so importing this package stays cheap.
"""

from .anthropic_messages import AnthropicClient
from .base import (
    ChatClient,
    ChatStreamEvent,
    Completion,
    CompletionDone,
    ReasoningDelta,
    StreamingChatClient,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallStart,
    Usage,
    stream_completion,
)
from .openai_chat import OpenAIChatClient
from .registry import ProviderClient, provider_client, provider_names, register_provider

__all__ = [
    "AnthropicClient",
    "ChatClient",
    "ChatStreamEvent",
    "Completion",
    "CompletionDone",
    "OpenAIChatClient",
    "ProviderClient",
    "ReasoningDelta",
    "StreamingChatClient",
    "TextDelta",
    "ToolCallArgumentsDelta",
    "ToolCallStart",
    "Usage",
    "provider_client",
    "provider_names",
    "register_provider",
    "stream_completion",
]
