"""Model-provider clients: the ``ChatClient`` protocol, its stream events, and
clients for OpenAI-compatible chat completions and the Anthropic Messages API.

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

__all__ = [
    "AnthropicClient",
    "ChatClient",
    "ChatStreamEvent",
    "Completion",
    "CompletionDone",
    "OpenAIChatClient",
    "ReasoningDelta",
    "StreamingChatClient",
    "TextDelta",
    "ToolCallArgumentsDelta",
    "ToolCallStart",
    "Usage",
    "stream_completion",
]
