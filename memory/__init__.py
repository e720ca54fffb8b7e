"""Motus Memory: keeps an LLM agent's conversation inside its context window.

The public API is what ``__all__`` lists; every other module is internal and
may change.
"""

from .agent import MaxStepsExceeded, ReActAgent
from .base import BaseMemory
from .basic import BasicMemory
from .clients import ChatClient, Completion, Usage
from .compaction.base import CompactionBase
from .compaction.memory import CompactionMemory
from .compaction.replay import upgrade_records
from .config import CompactionMemoryConfig
from .errors import (
    AuthenticationError,
    CompactionError,
    ConfigurationError,
    LogCorruptError,
    LogError,
    MotusMemoryError,
    ProviderConnectionError,
    ProviderError,
    ProviderStatusError,
    ProviderTimeoutError,
    RateLimitError,
    SessionExistsError,
    SessionNotFoundError,
    UnsupportedMemoryTypeError,
)
from .factory import create_memory
from .log import InMemoryLogStore, JSONLLogStore, LogProblem, LogStore
from .messages import ChatMessage, InvalidMessageError, ToolCall, answered_call_ids
from .offline_compactor import offline_summary
from .session_state import CompactionSessionState, SessionState
from .tokens import TokenCounter, count_tokens
from .tokens.model_limits import ModelLimits, get_model_limits

__all__ = [
    "AuthenticationError",
    "BaseMemory",
    "BasicMemory",
    "ChatClient",
    "ChatMessage",
    "CompactionBase",
    "CompactionError",
    "CompactionMemory",
    "CompactionMemoryConfig",
    "CompactionSessionState",
    "Completion",
    "ConfigurationError",
    "InMemoryLogStore",
    "InvalidMessageError",
    "JSONLLogStore",
    "LogCorruptError",
    "LogError",
    "LogProblem",
    "LogStore",
    "MaxStepsExceeded",
    "ModelLimits",
    "MotusMemoryError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderStatusError",
    "ProviderTimeoutError",
    "RateLimitError",
    "ReActAgent",
    "SessionExistsError",
    "SessionNotFoundError",
    "SessionState",
    "TokenCounter",
    "ToolCall",
    "UnsupportedMemoryTypeError",
    "Usage",
    "answered_call_ids",
    "count_tokens",
    "create_memory",
    "get_model_limits",
    "offline_summary",
    "upgrade_records",
]
