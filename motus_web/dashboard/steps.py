"""What the model saw for a reply: the request that produced it, rebuilt from the log.

A reply (an assistant message) was produced by a request made of the
memory's context just before the reply was added: the system prompt, the
summary in force and the messages kept since (truncated tool results as the
context held them), with the tool schemas the agent sent. That context is
the library's restore of the log records before the reply's own record
(``memories.restore_view``, from the nearest checkpoint), so nothing is
stored twice and the cost follows the context, not the session's length or
the reply's place in it.

``between`` compares two such contexts: what entered, what left (folded by
a compaction, cleared by a reset), which tool results became stubs (a
tool-result clearing) and whether the summary was replaced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memory import CompactionMemory, provider_client, provider_names
from motus_web.providers import DEFAULT_PROVIDER, configured_for
from motus_web.sessions.memories import restore_view
from motus_web.sessions.models import CompactionEvent, ContextChange, Message, Session

from . import live_context

# The clients build request bodies without a connection; the URL is never called.
_NOWHERE = "http://127.0.0.1:9/v1"


@dataclass(frozen=True, slots=True)
class Request:
    """The context a request carried, as the step and context pages show it."""

    memory: CompactionMemory
    live: live_context.LiveContext
    seqs: tuple[int | None, ...]  # of the context after the system prompt (None: derived)

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        return self.memory.tool_schemas

    @property
    def tool_tokens(self) -> int:
        return self.memory.tool_schema_tokens


def request_of(session: Session, memory: CompactionMemory) -> Request:
    """``memory``'s context part by part, each logged message with the tokens
    the log states for it (one query over the context's own messages)."""
    seqs = tuple(memory.get_session_state().seqs)
    known = [seq for seq in seqs if seq is not None]
    logged: dict[int, int] = {}
    if known:
        logged = dict(session.messages.filter(seq__in=known).values_list("seq", "tokens"))
    return Request(memory, live_context.of(memory, seqs, logged), seqs)


def before(session: Session, reply: Message) -> Request:
    """The request that produced ``reply``: the log restored up to its record."""
    return request_of(session, restore_view(session, reply.position))


def providers() -> list[tuple[str, str]]:
    """Each registered provider's name and the API it speaks, in registration order."""
    return [(name, provider_client(name).api_name) for name in provider_names()]


def provider_of(session: Session) -> str:
    """The API whose request shape the session's model was sent: the provider
    of a configured chat model with that model id, else the OpenAI chat
    format the library speaks."""
    model = configured_for(session.model_name)
    if model is not None and model.provider in provider_names():
        return model.provider
    return DEFAULT_PROVIDER


def body(request: Request, model_name: str, provider: str) -> dict[str, Any]:
    """The request body the library's client for ``provider`` (a registered
    name) sends for this context (``request_body``; the agent streams it,
    adding ``stream`` and, for OpenAI, ``stream_options``)."""
    client = provider_client(provider)(_NOWHERE, api_key="unused", timeout_s=None)
    return client.request_body(
        model=model_name or "unknown",
        messages=request.memory.get_context(),
        tools=request.tool_schemas or None,
    )


# -- between two replies ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Run:
    """Consecutive logged messages that entered or left the context together."""

    first: int
    last: int
    count: int
    tokens: int

    @property
    def label(self) -> str:
        return f"#{self.first}" if self.first == self.last else f"#{self.first}-#{self.last}"


@dataclass(frozen=True, slots=True)
class Change:
    entered: tuple[Run, ...]
    left: tuple[Run, ...]
    summary_before: str | None
    summary_after: str | None
    events: tuple[CompactionEvent | ContextChange, ...] = field(default=())
    stubbed: tuple[Run, ...] = ()  # results still in the context, as stubs now (tokens before)

    @property
    def summary_replaced(self) -> bool:
        return self.summary_before != self.summary_after

    @property
    def nothing(self) -> bool:
        return not (self.entered or self.left or self.stubbed or self.summary_replaced)


def _tokens_by_seq(request: Request) -> dict[int, int]:
    return {part.seq: part.tokens for part in request.live.parts if part.seq is not None}


def _runs(seqs: Sequence[int], tokens: Mapping[int, int]) -> tuple[Run, ...]:
    runs: list[Run] = []
    for seq in sorted(seqs):
        if runs and runs[-1].last == seq - 1:
            last = runs[-1]
            runs[-1] = Run(last.first, seq, last.count + 1, last.tokens + tokens.get(seq, 0))
        else:
            runs.append(Run(seq, seq, 1, tokens.get(seq, 0)))
    return tuple(runs)


def between(
    session: Session, earlier: Message, later: Message, first: Request, second: Request
) -> Change:
    """What changed in the context from the request of reply ``earlier``
    (``first``) to that of reply ``later`` (``second``), with the events
    logged between them that changed it."""
    was, now = _tokens_by_seq(first), _tokens_by_seq(second)
    window = {"position__gt": earlier.position, "position__lt": later.position}
    events: list[CompactionEvent | ContextChange] = [
        *session.compaction_events.filter(**window).exclude(kind=CompactionEvent.Kind.WARNING),
        *session.context_changes.filter(**window),
    ]
    events.sort(key=lambda row: row.position)
    stubs = second.memory.cleared_seqs - first.memory.cleared_seqs
    return Change(
        entered=_runs([seq for seq in now if seq not in was], now),
        left=_runs([seq for seq in was if seq not in now], was),
        summary_before=first.memory.summary,
        summary_after=second.memory.summary,
        events=tuple(events),
        stubbed=_runs([seq for seq in was if seq in now and seq in stubs], was),
    )
