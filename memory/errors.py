"""The exceptions raised by the memory library.

Every error derives from ``MotusMemoryError``. A developer's mistake, found
when something is constructed, is a ``ConfigurationError``; everything else
happens at run time::

    MotusMemoryError
    ├── ConfigurationError           bad config value, unknown memory_type, bad session id
    │   └── UnsupportedMemoryTypeError   a type the design names that is not built yet
    ├── EncodingDataError            a shipped tokenizer file is missing or fails its sha256
    ├── LogError                     conversation-log I/O
    │   ├── SessionNotFoundError         no log (or no records) for a session id
    │   ├── SessionExistsError           a new memory given the id of a session with a log
    │   └── LogCorruptError              an unusable record (strict reads); a log of damage only
    ├── CompactionError              a compaction attempt failed; the context is left unchanged
    ├── MaxStepsExceeded             the agent made max_steps model calls without a final answer
    └── ProviderError                a model provider call failed
        ├── InvalidReplyError            a reply that cannot be used (tool-call arguments not JSON)
        ├── ProviderTimeoutError         connect/read timeout, after retries
        ├── ProviderConnectionError      the connection could not be made, after retries
        │   └── StreamInterruptedError       a streamed reply ended before it was complete
        └── ProviderStatusError          the provider answered with an error status
            ├── AuthenticationError          401 / 403: missing, wrong or unauthorised key
            ├── RateLimitError               429 after retries (``retry_after`` seconds)
            ├── BadRequestError              other 4xx: the request itself is wrong; never retried
            │   └── ContextLengthExceededError   the prompt does not fit the model's window
            └── ServerError                  5xx (and 529 overloaded), after retries

``ConfigurationError`` is also a ``ValueError`` (so ``except ValueError`` keeps
working for invalid arguments). ``SessionNotFoundError`` is also a
``LookupError``, and a ``ValueError`` because the reference implementation
raises ``ValueError`` for an unknown session: code written for it keeps working.
"""

from __future__ import annotations


class MotusMemoryError(Exception):
    """Root of every error raised by ``memory``."""


class ConfigurationError(MotusMemoryError, ValueError):
    """An invalid argument or configuration value, raised at construction."""


class UnsupportedMemoryTypeError(ConfigurationError):
    """A memory type named by the design that this version does not provide."""


class EncodingDataError(MotusMemoryError):
    """A BPE file shipped for offline token counting is missing, corrupt or not
    the published one: counting with it would give silently wrong numbers."""


class LogError(MotusMemoryError):
    """Reading or writing a conversation log failed."""


class SessionNotFoundError(LogError, LookupError, ValueError):
    """No conversation log exists for the requested session id."""

    def __init__(self, session_id: str, where: str = "") -> None:
        self.session_id = session_id
        suffix = f" in {where}" if where else ""
        super().__init__(f"no conversation log for session {session_id!r}{suffix}")


class SessionExistsError(LogError):
    """A new memory was given the id of a session that already has a log.

    Continue that session with ``CompactionMemory.restore_from_log`` instead:
    two memories writing one log would interleave two conversations.
    """

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(
            f"session {session_id!r} already has a log; continue it with "
            "CompactionMemory.restore_from_log() or choose another session_id"
        )


class LogCorruptError(LogError):
    """A log record that cannot be parsed or does not have the required fields."""

    def __init__(self, message: str, *, line: int | None = None) -> None:
        self.line = line
        super().__init__(f"line {line}: {message}" if line is not None else message)


class CompactionError(MotusMemoryError):
    """A compaction attempt failed (the summariser raised, timed out or returned nothing)."""


class ProviderError(MotusMemoryError):
    """A call to a model provider failed."""


class InvalidReplyError(ProviderError):
    """The provider's reply came whole but cannot be used as it is: a tool call
    whose arguments are not valid JSON (often one cut at the output limit).

    No call of that reply was run; the reply is stored without them, marked
    failed (``finish_reason``, ``invalid_tool_calls``: see ``memory.messages``),
    so the history stays one a provider accepts. ``finish_reason`` is the
    provider's; ``errors`` says what is wrong with each call.
    """

    def __init__(self, message: str, *, finish_reason: str | None, errors: list[str]) -> None:
        self.finish_reason = finish_reason
        self.errors = errors
        super().__init__(message)


class ProviderTimeoutError(ProviderError):
    """The provider did not answer within the timeout, after all retries."""


class ProviderConnectionError(ProviderError):
    """The connection to the provider could not be made, after all retries."""


class ProviderStatusError(ProviderError):
    """The provider answered with an error status code."""

    def __init__(self, message: str, *, status_code: int, body: str = "") -> None:
        self.status_code = status_code
        self.body = body
        super().__init__(f"{status_code}: {message}")


class StreamInterruptedError(ProviderConnectionError):
    """A streamed reply stopped (connection dropped, or the stream ended) before
    the provider said it was complete. What arrived is not a whole reply, so
    it is not returned; the request can be sent again."""


class AuthenticationError(ProviderStatusError):
    """HTTP 401 or 403: the API key is missing, wrong or lacks permission."""


class RateLimitError(ProviderStatusError):
    """HTTP 429 from the provider, after all retries.

    ``retry_after`` is the wait in seconds the provider asked for (from the
    ``retry-after-ms`` or ``retry-after`` header), or ``None`` when it gave none.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int = 429,
        body: str = "",
        retry_after: float | None = None,
    ) -> None:
        self.retry_after = retry_after
        super().__init__(message, status_code=status_code, body=body)


class BadRequestError(ProviderStatusError):
    """A 4xx other than 401, 403 and 429 (400, 404, 413, 422...): the request
    is wrong as sent (unknown model, bad parameters), so retrying cannot help."""


class ContextLengthExceededError(BadRequestError):
    """The prompt (messages, tools and the requested output) does not fit the
    model's context window. Compact the context, or send less, and try again."""


class ServerError(ProviderStatusError):
    """HTTP 5xx (or Anthropic's 529 "overloaded") after all retries: the
    provider failed, not the request."""


class LongTermMemoryError(MotusMemoryError):
    """A long-term memory operation was refused: an unknown memory, one outside
    the caller's scope, or a change its status does not allow (forgetting a
    forgotten memory). Nothing was written."""


class ExtractionError(MotusMemoryError):
    """An extractor could not read what was said (a model reply that is not the
    JSON asked for, a timeout). The turn it followed is unaffected; the failure
    is recorded as a ``memory_extraction`` record with its ``error``."""
