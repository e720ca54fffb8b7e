"""Configuration of compacting memories."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from .errors import ConfigurationError
from .log.store import validate_session_id
from .tokens.model_limits import compaction_threshold


@dataclass(frozen=True, slots=True)
class CompactionMemoryConfig:
    """Tuning of ``CompactionMemory``; every field is checked at construction.

    compact_model_name
        Model used for the summarisation call. ``None``: the agent's model;
        ``"offline"``: no model, the built-in offline summariser.
    token_threshold
        Estimated context tokens above which auto-compaction fires. ``None``:
        the model's context window x ``safety_ratio``.
    safety_ratio
        Fraction of the context window, in (0, 1], used when ``token_threshold``
        is ``None``.
    session_id
        Identifier of the session and of its log file. ``None``: a new UUID.
        Letters, digits, ``-``, ``_`` and ``.`` only (it names a file).
    log_base_path
        Folder of the JSONL conversation logs. ``None``: no log.
    max_tool_result_tokens
        Tool results longer than this are cut (with a marker stating the
        original size) before they enter the context; ``0``: no limit.
    auto_compact
        ``False`` turns auto-compaction off; ``compact()`` still works.
    summary_max_tokens
        Upper bound of a summary, in tokens (the summariser's output budget).
    summary_budget_ratio
        Share of ``token_threshold``, in (0, 1], that the context may hold
        right after a compaction: the summary gets that many tokens minus what
        stays beside it (system prompt, kept messages, the continuation
        template), at least 64 and at most ``summary_max_tokens``. Higher keeps
        more of the past; lower leaves more room before the next compaction.
    clear_tool_results
        When the threshold is reached, first replace tool results older than
        the newest ``clear_keep_tool_results`` with a one-line stub (the call,
        its size, and that the full result is in the log), and summarise only
        when that does not bring the context under the threshold
        (``memory.compaction.clearing``; Anthropic's ``clear_tool_uses``
        context edit). Off by default.
    clear_keep_tool_results
        Tool results left whole, newest first (Anthropic's ``keep``; default 3).
    clear_at_least_tokens
        A clearing that would free fewer tokens than this is not made, and the
        memory summarises instead (Anthropic's ``clear_at_least``; ``0``: any).
    clear_exclude_tools
        Names of tools whose results are never cleared (``exclude_tools``).
    fsync
        Call ``os.fsync`` after every log write (durable across power loss,
        slower). Without it a record survives a process crash, not an OS crash.

    Raises ``ConfigurationError`` (a ``ValueError``) for a ratio outside
    (0, 1], a negative or non-integer count, or an invalid session id.
    """

    compact_model_name: str | None = None
    token_threshold: int | None = None
    safety_ratio: float = 0.75
    session_id: str | None = None
    log_base_path: str | Path | None = None
    max_tool_result_tokens: int = 50_000
    auto_compact: bool = True
    summary_max_tokens: int = 8_000
    summary_budget_ratio: float = 0.75
    fsync: bool = False
    clear_tool_results: bool = False
    clear_keep_tool_results: int = 3
    clear_at_least_tokens: int = 0
    clear_exclude_tools: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_ratio("safety_ratio", self.safety_ratio)
        _check_ratio("summary_budget_ratio", self.summary_budget_ratio)
        if self.token_threshold is not None:
            _check_count("token_threshold", self.token_threshold, minimum=1)
        _check_count("max_tool_result_tokens", self.max_tool_result_tokens, minimum=0)
        _check_count("summary_max_tokens", self.summary_max_tokens, minimum=16)
        if self.session_id is not None:
            validate_session_id(self.session_id)
        _check_count("clear_keep_tool_results", self.clear_keep_tool_results, minimum=0)
        _check_count("clear_at_least_tokens", self.clear_at_least_tokens, minimum=0)
        if not isinstance(self.clear_tool_results, bool):
            raise ConfigurationError("clear_tool_results must be True or False")
        excluded = self.clear_exclude_tools
        if not isinstance(excluded, list | tuple) or not all(isinstance(n, str) for n in excluded):
            raise ConfigurationError("clear_exclude_tools must be a list of tool names")
        object.__setattr__(self, "clear_exclude_tools", tuple(excluded))
        if self.compact_model_name is not None and not isinstance(self.compact_model_name, str):
            raise ConfigurationError("compact_model_name must be a string or None")

    def threshold_for(self, model_name: str | None) -> int:
        """The context size, in tokens, above which a memory of this config on
        ``model_name`` compacts: ``token_threshold`` when set, else
        ``safety_ratio`` of the model's context window
        (``tokens.model_limits.compaction_threshold``; a default window for an
        unknown or ``None`` model)."""
        if self.token_threshold is not None:
            return self.token_threshold
        return compaction_threshold(model_name, self.safety_ratio)

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible dict (``log_base_path`` as a string)."""
        data = asdict(self)
        if data["log_base_path"] is not None:
            data["log_base_path"] = str(data["log_base_path"])
        data["clear_exclude_tools"] = list(self.clear_exclude_tools)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompactionMemoryConfig:
        """Build from ``to_dict()`` output; unknown keys are ignored (newer logs)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def _check_ratio(name: str, ratio: object) -> None:
    if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not math.isfinite(ratio):
        raise ConfigurationError(f"{name} must be a number in (0, 1], got {ratio!r}")
    if not 0 < ratio <= 1:
        raise ConfigurationError(f"{name} must be in (0, 1], got {ratio!r}")


def _check_count(name: str, value: object, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{name} must be an integer >= {minimum}, got {value!r}")
