"""The summariser interface: one shape for the offline summary, a model and a user's function.

A compaction asks a ``Summariser`` for the text that will stand for the
messages it folds: ``await summariser.summarise(request)`` with a
``SummaryRequest`` (the messages, the previous summary, the token budget, the
counter that measures it, the system prompt and the caller's instructions),
and gets a ``Summary`` (the text and how it was made). Three implement it:

- ``OfflineSummariser``: the extractive summary of ``memory.compaction.offline``
  (no model; the fallback of the other two);
- ``ModelSummariser``: a model asked through a ``ChatClient``
  (``memory.compaction.summariser.with_model``);
- ``FunctionSummariser``: a user's ``compact_fn(messages, system_prompt)``,
  sync or async, adapted: it also receives ``budget_tokens`` and
  ``instructions`` as keyword arguments when its signature accepts them (a
  parameter of that name or ``**kwargs``), and its ``messages`` start with the
  current continuation message when the context holds a summary, so a new
  summary can fold the old one in. It owns its summary, but for the
  operator's pins (``memory.compaction.pins``): the compaction appends those
  its text lacks.

Every one raises ``CompactionError`` when it cannot give a whole summary; the
compaction then leaves the context as it was.

A name in ``compact_model_name`` that is registered (``register_summariser``)
names a summariser, not a model: ``"offline"`` (``OFFLINE``) is the offline one.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ...clients.base import ChatClient
from ...errors import CompactionError
from ...messages import ChatMessage
from ...tokens import TokenCounter
from ...tokens.model_limits import get_model_limits
from ..offline import offline_summary
from .with_model import CompactFn, Summary, checked_summary, summarize_with_model

OFFLINE = "offline"
"""``Summary.model`` of the offline summary, and its name in ``compact_model_name``."""


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    """What a summariser is asked.

    ``messages`` are the messages folded, in order; ``previous_summary`` the
    summary they follow (to be folded in), with ``previous_message`` the
    continuation message that carried it; ``budget_tokens`` the most the
    summary may take, in ``counter``'s tokens; ``instructions`` what the
    caller of ``compact(instructions=...)`` asked to keep.
    """

    messages: Sequence[ChatMessage]
    previous_summary: str | None
    previous_message: ChatMessage | None
    budget_tokens: int
    counter: TokenCounter
    system_prompt: str
    instructions: str | None = None


class Summariser(Protocol):
    """Writes the summary of a compaction (see the module)."""

    @property
    def uses_model(self) -> bool:
        """Whether it calls a model (failures of such a summariser fall back
        to the offline one after ``policy.FALLBACK_AFTER_FAILURES``)."""
        ...

    @property
    def name(self) -> str:
        """What the compaction records as its ``model``: the model's name,
        ``"offline"`` or ``"compact_fn"`` (a failure too, so its page says
        which summariser failed)."""
        ...

    @property
    def carries_ledger(self) -> bool:
        """Whether the compaction adds its ledger (``memory.compaction.ledger``)
        to this summariser's text: the library's own do; a user's function
        owns its summary."""
        ...

    async def summarise(self, request: SummaryRequest) -> Summary: ...


class OfflineSummariser:
    """The extractive summary (``memory.compaction.offline.offline_summary``)."""

    uses_model = False
    carries_ledger = True
    name = OFFLINE

    async def summarise(self, request: SummaryRequest) -> Summary:
        text = offline_summary(
            request.messages,
            budget_tokens=request.budget_tokens,
            counter=request.counter,
            previous_summary=request.previous_summary,
            instructions=request.instructions,
        )
        return Summary(text, OFFLINE)


class ModelSummariser:
    """A model's summary through ``client`` (``memory.compaction.summariser.with_model``).

    Each request gets ``timeout_s`` seconds; the output budget is the
    request's, within the model's own output limit.
    """

    uses_model = True
    carries_ledger = True

    def __init__(self, client: ChatClient, model: str, *, timeout_s: float) -> None:
        self.client = client
        self.model = model
        self.timeout_s = timeout_s

    @property
    def name(self) -> str:
        return self.model

    async def summarise(self, request: SummaryRequest) -> Summary:
        limits = get_model_limits(self.model)
        return await summarize_with_model(
            self.client,
            model=self.model,
            messages=request.messages,
            previous_summary=request.previous_summary,
            counter=request.counter,
            context_window=limits.context_window,
            max_output_tokens=min(request.budget_tokens, limits.max_output_tokens),
            timeout_s=self.timeout_s,
            instructions=request.instructions,
            output_limit=limits.max_output_tokens,
        )


class FunctionSummariser:
    """A user's ``compact_fn``, adapted (see the module). An async function
    gets ``timeout_s`` seconds; whatever it raises becomes a ``CompactionError``."""

    uses_model = False
    carries_ledger = False
    name = "compact_fn"

    def __init__(self, fn: CompactFn, *, timeout_s: float) -> None:
        self.fn = fn
        self.timeout_s = timeout_s
        self._keywords = _accepted_keywords(fn, ("budget_tokens", "instructions"))

    async def summarise(self, request: SummaryRequest) -> Summary:
        head = [request.previous_message] if request.previous_message is not None else []
        offered = {"budget_tokens": request.budget_tokens, "instructions": request.instructions}
        keywords = {name: offered[name] for name in self._keywords}
        try:
            result = self.fn([*head, *request.messages], request.system_prompt, **keywords)
            if inspect.isawaitable(result):
                result = await asyncio.wait_for(result, timeout=self.timeout_s)
        except TimeoutError as exc:
            raise CompactionError(f"compact_fn did not return within {self.timeout_s:g} s") from exc
        except CompactionError:
            raise
        # A user callback may raise anything: record it and keep the context.
        except Exception as exc:
            raise CompactionError(f"compact_fn raised {type(exc).__name__}: {exc}") from exc
        return Summary(checked_summary(result, self.name), self.name)


def _accepted_keywords(fn: object, names: Sequence[str]) -> tuple[str, ...]:
    """Which of ``names`` ``fn`` takes as keyword arguments."""
    try:
        parameters = inspect.signature(fn).parameters.values()  # type: ignore[arg-type]
    except (TypeError, ValueError):  # a builtin or a C callable: offer nothing
        return ()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return tuple(names)
    takes = {
        p.name
        for p in parameters
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    return tuple(name for name in names if name in takes)


_NAMED: dict[str, Callable[[], Summariser]] = {}


def register_summariser(name: str, make: Callable[[], Summariser]) -> None:
    """Make ``compact_model_name=name`` mean ``make()``'s summariser, not a model.

    Raises ``ValueError`` when ``name`` is registered already (two summarisers
    under one name would make the choice depend on import order).
    """
    if name in _NAMED:
        raise ValueError(f"a summariser is registered as {name!r} already")
    _NAMED[name] = make


def named_summariser(name: str | None) -> Summariser | None:
    """A new summariser registered as ``name``; ``None`` when none is (a model's name)."""
    make = _NAMED.get(name) if name is not None else None
    return make() if make is not None else None


register_summariser(OFFLINE, OfflineSummariser)
