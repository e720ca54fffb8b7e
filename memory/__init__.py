"""Motus Memory: keeps an LLM agent's conversation inside its context window.

The public API is what ``__all__`` lists; every other module is internal and
may change.
"""

from .agent import AgentBusyError, MaxStepsExceeded, ReActAgent
from .agent.events import (
    AgentEvent,
    AnswerDelta,
    CompactionFailed,
    CompactionFinished,
    CompactionStarted,
    MessageAdded,
    ThinkingDelta,
    ToolCallRequested,
    ToolResultReady,
    TurnError,
    TurnFinished,
    TurnStarted,
    UsageReported,
)
from .agent.tools import calculator, current_time
from .background import (
    BackgroundMemory,
    LongTermStore,
    ModelExtractor,
    OfflineExtractor,
    Scope,
    SQLiteLongTermStore,
)
from .base import BaseMemory
from .basic import BasicMemory
from .clients import (
    AnthropicClient,
    ChatClient,
    ChatStreamEvent,
    Completion,
    CompletionDone,
    OpenAIChatClient,
    ReasoningDelta,
    StreamingChatClient,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallStart,
    Usage,
    stream_completion,
)
from .compaction.base import CompactionBase
from .compaction.code import CODE_KINDS, reads_as_code, without_bodies
from .compaction.identifiers import (
    Identifier,
    find_identifiers,
    kept_in,
    lost_identifiers,
    worth_keeping,
)
from .compaction.memory import CompactionMemory
from .compaction.offline import offline_summary
from .compaction.restore import upgrade_records
from .config import CompactionMemoryConfig
from .errors import (
    AuthenticationError,
    BadRequestError,
    CompactionError,
    ConfigurationError,
    ContextLengthExceededError,
    ExtractionError,
    InvalidReplyError,
    LogCorruptError,
    LogError,
    LongTermMemoryError,
    MotusMemoryError,
    ProviderConnectionError,
    ProviderError,
    ProviderStatusError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
    SessionExistsError,
    SessionNotFoundError,
    StreamInterruptedError,
    UnsupportedMemoryTypeError,
)
from .factory import create_memory
from .json_values import clean_text
from .json_values import loads as load_json
from .log import InMemoryLogStore, JSONLLogStore, LogPoint, LogProblem, LogStore, PointNotFoundError
from .messages import (
    INSTRUCTION_ROLES,
    ChatMessage,
    InvalidMessageError,
    ToolCall,
    answered_call_ids,
)
from .session_state import CompactionSessionState, SessionState
from .tokens import TokenCounter, count_tokens
from .tokens.calibration import TokenCalibration
from .tokens.model_limits import ModelLimits, get_model_limits

__all__ = [
    "CODE_KINDS",
    "INSTRUCTION_ROLES",
    "AgentBusyError",
    "AgentEvent",
    "AnswerDelta",
    "AnthropicClient",
    "AuthenticationError",
    "BackgroundMemory",
    "BadRequestError",
    "BaseMemory",
    "BasicMemory",
    "ChatClient",
    "ChatMessage",
    "ChatStreamEvent",
    "CompactionBase",
    "CompactionError",
    "CompactionFailed",
    "CompactionFinished",
    "CompactionMemory",
    "CompactionMemoryConfig",
    "CompactionSessionState",
    "CompactionStarted",
    "Completion",
    "CompletionDone",
    "ConfigurationError",
    "ContextLengthExceededError",
    "ExtractionError",
    "Identifier",
    "InMemoryLogStore",
    "InvalidMessageError",
    "InvalidReplyError",
    "JSONLLogStore",
    "LogCorruptError",
    "LogError",
    "LogPoint",
    "LogProblem",
    "LogStore",
    "LongTermMemoryError",
    "LongTermStore",
    "MaxStepsExceeded",
    "MessageAdded",
    "ModelExtractor",
    "ModelLimits",
    "MotusMemoryError",
    "OfflineExtractor",
    "OpenAIChatClient",
    "PointNotFoundError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderStatusError",
    "ProviderTimeoutError",
    "RateLimitError",
    "ReActAgent",
    "ReasoningDelta",
    "SQLiteLongTermStore",
    "Scope",
    "ServerError",
    "SessionExistsError",
    "SessionNotFoundError",
    "SessionState",
    "StreamInterruptedError",
    "StreamingChatClient",
    "TextDelta",
    "ThinkingDelta",
    "TokenCalibration",
    "TokenCounter",
    "ToolCall",
    "ToolCallArgumentsDelta",
    "ToolCallRequested",
    "ToolCallStart",
    "ToolResultReady",
    "TurnError",
    "TurnFinished",
    "TurnStarted",
    "UnsupportedMemoryTypeError",
    "Usage",
    "UsageReported",
    "answered_call_ids",
    "calculator",
    "clean_text",
    "count_tokens",
    "create_memory",
    "current_time",
    "find_identifiers",
    "get_model_limits",
    "kept_in",
    "load_json",
    "lost_identifiers",
    "offline_summary",
    "reads_as_code",
    "stream_completion",
    "upgrade_records",
    "without_bodies",
    "worth_keeping",
]
