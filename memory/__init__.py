"""Motus Memory: keeps an LLM agent's conversation inside its context window.

The public API is what ``__all__`` lists; every other module is internal and
may change.
"""

from .agent import MaxStepsExceeded, ReActAgent
from .base import BaseMemory
from .basic import BasicMemory
from .clients import ChatClient, Completion, Usage
from .compaction.offline import offline_summary
from .compaction_base import CompactionBase
from .compaction_memory import CompactionMemory, upgrade_records
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
from .messages import ChatMessage, InvalidMessageError, ToolCall
from .model_limits import ModelLimits, get_model_limits
from .session_state import CompactionSessionState, SessionState
from .tokens import TokenCounter, count_tokens

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
    "count_tokens",
    "create_memory",
    "get_model_limits",
    "offline_summary",
    "upgrade_records",
]
