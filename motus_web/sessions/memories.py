"""A stored session's memory as the library builds it: its config, its
threshold, and restores of its whole log or of a prefix of it.

Every page and action that needs a session's memory or its compaction
threshold asks here, so the list, the session page, the context page, the
chat and the confirmations all compute them the same way: through
``CompactionMemory`` itself, within the limits an imported file shows the
agent ran with (``within_file_limits``).

Whose long-term memories a "remember across chats" session reads and
writes is said here too, once (``scope_of``): its owner's, under the memory
name the owner chose, whatever its log, a file or a form names. Every
restore of a session (the chat, undo, rewind, fork, restore, the step pages)
goes through ``restore_from``, which passes that scope to the library; every
new session's ``session_meta`` is rewritten to it (``owned_meta``) before it
is stored, so that its log and its export say what is true.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from memory import (
    BackgroundMemory,
    CompactionMemory,
    CompactionMemoryConfig,
    ConfigurationError,
    InMemoryLogStore,
    LogProblem,
    LogStore,
    Scope,
)
from memory.log import LogRecord

from .log_store import DatabaseLogStore
from .long_term_store import DjangoLongTermStore, owner_scope
from .models import Session

# The user id of the scope of a session nobody owns (one that ``sync_sessions``
# imported for staff): no dashboard user owns it, so only staff see its memories.
UNOWNED = "unowned"
LONG_TERM = "long_term"  # the session_meta field of a background memory's scope

# Fields of a logged config that name where a memory ran, not how it compacts.
_WHERE = ("session_id", "log_base_path")


def config_of(logged: Mapping[str, Any] | None, **changes: Any) -> CompactionMemoryConfig:
    """The ``CompactionMemoryConfig`` of a session's logged ``config`` (its
    ``session_meta``'s), with ``changes``. Raises ``ConfigurationError`` (or
    ``TypeError``) for a logged config the library refuses."""
    stored = {k: v for k, v in (logged or {}).items() if k not in _WHERE}
    return CompactionMemoryConfig.from_dict({**stored, **changes})


def file_limits(record_extra: object) -> Mapping[str, object] | None:
    """The window and threshold an imported session's file shows (``{"window",
    "threshold", "source"}``, tokens: Claude Code's trigger point, Codex's
    window), from its session_meta's extra (``importers`` keep them in
    ``source_extra``), or ``None``."""
    extra = record_extra.get("source_extra") if isinstance(record_extra, dict) else None
    limits = extra.get("context_limits") if isinstance(extra, dict) else None
    return limits if isinstance(limits, dict) else None


def within_file_limits(
    threshold: int, config: CompactionMemoryConfig, limits: Mapping[str, object] | None
) -> int:
    """``threshold`` (tokens), lowered to where an imported file shows the agent
    compacting (Claude Code: its window less its autocompact buffer) or, when
    the file shows only its window (Codex), to ``config.safety_ratio`` of that
    window: a session continued here never runs past the window it ran in,
    whatever window the library's table gives its model."""
    if not limits:
        return threshold
    shown_threshold, shown_window = limits.get("threshold"), limits.get("window")
    if isinstance(shown_threshold, int) and shown_threshold > 0:
        return min(threshold, shown_threshold)
    if isinstance(shown_window, int) and shown_window > 0:
        return min(threshold, max(1, math.floor(shown_window * config.safety_ratio)))
    return threshold


def threshold_for(
    logged: Mapping[str, Any] | None,
    model_name: str,
    limits: Mapping[str, object] | None = None,
) -> int | None:
    """The context size, in tokens, at which a memory with this logged config
    and model compacts (``CompactionMemoryConfig.threshold_for``, the rule of
    ``CompactionMemory.token_threshold``), within an
    imported file's ``limits`` (``within_file_limits``); ``None`` for a config
    the library refuses."""
    try:
        config = config_of(logged)
    except (ConfigurationError, TypeError):
        return None
    threshold = config.threshold_for(model_name or None)
    return within_file_limits(threshold, config, limits)


def threshold_of(session: Session) -> int | None:
    """``threshold_for`` the session's logged config, model and file limits."""
    return threshold_for(session.config, session.model_name, file_limits(session.record_extra))


def _within_session_limits(session: Session, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` of a restore, with a config whose ``token_threshold`` is
    ``within_file_limits`` when the session's file limits lower it, so that
    the memory acting on the session compacts where its pages say."""
    limits = file_limits(session.record_extra)
    if not limits:
        return options
    config = options.get("config")
    try:
        config = config or config_of(session.config)
    except (ConfigurationError, TypeError):
        return options  # the restore reports the logged config itself
    model_name = options.get("model_name") or session.model_name or None
    threshold = config.threshold_for(model_name)
    bounded = within_file_limits(threshold, config, limits)
    if bounded == threshold:
        return options
    return {**options, "config": dataclasses.replace(config, token_threshold=bounded)}


def memory_name(meta: Mapping[str, Any]) -> str:
    """The memory name (the scope's agent id: "work", "trips") a session_meta
    (a log record, or a ``Session.record_extra``) names, when it is one a
    scope can hold; else ``""`` (the owner's unnamed memory). Only the name
    is taken from it: whose memory it is never is."""
    long_term = meta.get(LONG_TERM)
    named = long_term.get("scope") if isinstance(long_term, Mapping) else None
    name = named.get("agent_id") if isinstance(named, Mapping) else None
    if not isinstance(name, str) or not name:
        return ""
    try:
        owner_scope(0, name)
    except ConfigurationError:
        return ""
    return name


def scope_for(owner_pk: int | None, name: str = "") -> Scope:
    """The long-term scope of a session owned by user ``owner_pk`` (``None``:
    nobody, ``UNOWNED``) under memory ``name``."""
    if owner_pk is None:
        return Scope(user_id=UNOWNED, agent_id=name or None)
    return owner_scope(owner_pk, name)


def scope_of(session: Session) -> Scope:
    """The scope a session's long-term memory reads and writes: its owner's,
    under the memory name its session_meta names (``memory_name``). The one
    answer to that question: see the module docstring."""
    return scope_for(session.owner_id, memory_name(session.record_extra or {}))


def owned_meta(
    meta: Mapping[str, Any], owner_pk: int | None
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A session_meta record as a session owned by ``owner_pk`` stores it:
    its long-term scope (when it names one) replaced by ``scope_for`` the
    owner and its memory name. Returns the record and the scope it named
    that is not the owner's (``None`` when none was dropped), for the
    import's note."""
    long_term = meta.get(LONG_TERM)
    if not isinstance(long_term, Mapping):
        return dict(meta), None
    named = long_term.get("scope")
    own = scope_for(owner_pk, memory_name(meta)).to_dict()
    if named == own:
        return dict(meta), None
    dropped = dict(named) if isinstance(named, Mapping) else {"scope": named}
    return {**meta, LONG_TERM: {**long_term, "scope": own}}, dropped


def dropped_scope_note(dropped: Mapping[str, Any], owner_pk: int | None) -> str:
    """What an import or a restore says of a scope its file named that is not
    the owner's (``owned_meta``)."""
    named = ", ".join(f"{k}={v}" for k, v in dropped.items() if v is not None) or "none"
    own = scope_for(owner_pk).user_id
    return (
        f"the file names the long-term memory scope {named}, which is not yours: it was "
        f"dropped (a session here remembers only in its owner's memories: {own})"
    )


def restore(session: Session) -> CompactionMemory:
    """The session's memory as the library restores it from the database log."""
    return restore_from(session, DatabaseLogStore())


def restore_from(session: Session, log_store: LogStore, **options: Any) -> CompactionMemory:
    """``restore_from_log`` of the session's type: a ``BackgroundMemory`` over
    the dashboard's long-term store for a session made with "remember across
    chats" (so a fork or a restore of it remembers too), else a
    ``CompactionMemory``; ``options`` go to it (config, client, model_name),
    the config's threshold kept within the session's file limits. A
    background memory's scope is ``scope_of`` the session, never its log's."""
    options = _within_session_limits(session, options)
    if session.memory_type == BackgroundMemory.memory_type:
        return BackgroundMemory.restore_from_log(
            session.public_id,
            log_store=log_store,
            store=DjangoLongTermStore(),
            scope=scope_of(session),
            **options,
        )
    return CompactionMemory.restore_from_log(session.public_id, log_store=log_store, **options)


class DatabaseView(InMemoryLogStore):
    """One session's database log, read-only (with ``stop``, only its first
    ``stop`` records, log positions ``0 .. stop - 1``), over an in-memory
    scratch store.

    A memory restored from it can act without touching the database: records
    it appends to the session are dropped (a dry run of an undo, to state its
    result), and a fork's records go to the scratch store under the fork's
    id, to be stored as a new session. Reads go to the database as a restore asks
    (newest first, to its checkpoint), so a restore costs the same wherever
    the prefix ends.
    """

    def __init__(self, session_id: str, stop: int | None = None) -> None:
        super().__init__()
        self.source_id = session_id
        self.stop = stop
        self.database = DatabaseLogStore()

    def append(self, session_id: str, record: LogRecord | Mapping[str, Any]) -> None:
        if session_id != self.source_id:
            super().append(session_id, record)

    def read(
        self, session_id: str, problems: list[LogProblem] | None = None
    ) -> Iterator[dict[str, Any]]:
        if session_id == self.source_id:
            return self.database.read(session_id, problems, before=self.stop)
        return super().read(session_id, problems)

    def read_reversed(
        self, session_id: str, problems: list[LogProblem] | None = None
    ) -> Iterator[dict[str, Any]]:
        if session_id == self.source_id:
            return self.database.read_reversed(session_id, problems, before=self.stop)
        return super().read_reversed(session_id, problems)

    def exists(self, session_id: str) -> bool:
        return session_id == self.source_id or super().exists(session_id)


def restore_view(session: Session, stop: int | None = None) -> CompactionMemory:
    """The memory restored from the first ``stop`` records of the session's log
    (all of them without ``stop``), writing nowhere: see ``DatabaseView``."""
    return restore_from(session, DatabaseView(session.public_id, stop))


@dataclass(frozen=True, slots=True)
class ContextSize:
    """A context as a confirmation describes it before anything is done."""

    messages: int  # what the model is sent: the instructions, the summary and the rest
    tokens: int  # the memory's estimate of a request with this context
    threshold: int
    over: bool  # the next message would compact again

    @classmethod
    def of(cls, memory: CompactionMemory) -> ContextSize:
        tokens = memory.estimate_context_tokens()
        return cls(
            len(memory.get_context()),
            tokens,
            memory.token_threshold,
            tokens > memory.threshold_estimate,
        )
