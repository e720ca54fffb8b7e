"""``BackgroundMemory``: compaction plus long-term memory kept across sessions.

The design's third memory type. On top of ``CompactionMemory`` (compaction,
the conversation log, restore, rewind, fork) it keeps memories of one
``Scope`` (a user and/or an agent) in a ``LongTermStore``, without putting
that work on the agent's critical path:

- **Extraction, in the background.** After each completed turn (a final
  answer, unit C) and before each compaction, the messages said since the
  extractor's last position are handed to a background task (one at a time,
  in order) that runs the extractor and writes to the store. ``add_message``
  never awaits it; a slow or failing extractor only delays or fails its own
  task, which is recorded (``memory_extraction`` with ``error``), never the
  turn; what it failed to read is read again with the next turn, while it is
  still in the context. ``await memory.drain()`` waits for what is queued.
- **Recall, before each request.** When a user message arrives, and when a
  tool batch is complete (the points where the agent asks the model), the
  memories most relevant to the newest user request are placed after the
  instructions as one delimited block (``<long_term_memory>``) of at most
  ``recall_budget_tokens`` (default 2,000). The block is part of the
  instructions' tokens, so the threshold counts it; each change of it is a
  ``memory_recall`` record, so a restore, a fork and "what the model saw at
  step N" (``state_at``) show the block that request carried.
- **Tools.** ``build_tools()`` adds ``recall``, ``remember`` and ``forget``
  (``memory.background.tools``) to the log tools of ``CompactionMemory``.

A crash while an extraction is queued loses nothing said: the log keeps the
messages and the position only advances with a ``memory_extraction`` record,
so a restored memory extracts them again (the store's dedupe makes that a
provenance link, not a duplicate).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Self

from ..compaction.base import Trigger
from ..compaction.memory import CompactionMemory
from ..compaction.summariser import OFFLINE
from ..errors import ConfigurationError, LongTermMemoryError
from ..log.records import MemoryExtraction, MemoryRecall, SessionMeta, now_iso
from ..messages import ChatMessage
from ..state import Ingested
from .changes import related_terms
from .extract import Candidate, Excerpt, Extractor, ModelExtractor, OfflineExtractor
from .recall import render_block
from .scoring import Parts, recall_ranking
from .sqlite import SQLiteLongTermStore
from .store import Filters, LongTermStore
from .tools import build_long_term_tools
from .types import Hit, Memory, Provenance, Scope, dedupe_key

logger = logging.getLogger("memory.background")

DEFAULT_RECALL_BUDGET = 2_000
RECALL_CANDIDATES = 200  # memories searched per request; the budget decides how many are placed
RECENT_CANDIDATES = 60  # the newest memories weighed for recency beside the matches
RELATED = 10  # existing memories shown to an extractor
MAX_PER_SESSION = 100  # new memories one session may give (facts, not payloads)
STORE_FILE = "long_term_memory.sqlite3"
ERROR_CHARS = 200  # of an extractor's error message kept in its record
DEFAULT_SCOPE = Scope(agent_id="default")
# The store ``restore_from_log`` was given, for the constructor it calls.
_RESTORING_INTO: ContextVar[LongTermStore | None] = ContextVar("restoring_into", default=None)


class BackgroundMemory(CompactionMemory):
    """A ``CompactionMemory`` (so a ``CompactionBase``) with cross-session memory.

    ``store``: the ``LongTermStore`` (default: ``default_store``: a
    ``SQLiteLongTermStore`` beside the conversation logs, in
    ``config.log_base_path/long_term_memory.sqlite3``; without a log folder one
    in memory, with a warning at construction that its memories end with the
    process). ``scope`` (or ``user_id``/``agent_id``): whose memories
    (default ``Scope(agent_id="default")``). ``extractor``: who decides what
    to remember (default: ``ModelExtractor`` over the memory's client and
    ``extract_model_name``, else the compaction model, once a client is set;
    ``OfflineExtractor`` without one, or when that model is ``"offline"``).
    ``recall_budget_tokens``: the recalled block's budget, in tokens (0
    turns recall off). ``said_on``: the date the conversation took place,
    for an import or a replay (default: the UTC day each excerpt is read); a
    memory's time is that day unless its sentence names an absolute date.
    Other arguments are ``CompactionMemory``'s. Raises ``ConfigurationError``
    for a scope that is not a ``Scope`` (or bad ids), a store that is not a
    ``LongTermStore``, or a bad budget.
    """

    memory_type = "background"

    def __init__(
        self,
        *,
        store: LongTermStore | None = None,
        scope: Scope | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        extractor: Extractor | None = None,
        extract_model_name: str | None = None,
        recall_budget_tokens: int = DEFAULT_RECALL_BUDGET,
        extraction_timeout_s: float = 120.0,
        said_on: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if scope is None:
            scope = Scope(user_id, agent_id) if user_id or agent_id else DEFAULT_SCOPE
        elif not isinstance(scope, Scope):
            raise ConfigurationError(
                f"scope must be a memory.Scope (Scope(user_id=..., agent_id=...)), "
                f"not {type(scope).__name__} {scope!r}"
            )
        if store is not None and not isinstance(store, LongTermStore):
            raise ConfigurationError(f"store must be a LongTermStore, not {type(store).__name__}")
        if isinstance(recall_budget_tokens, bool) or not isinstance(recall_budget_tokens, int):
            raise ConfigurationError("recall_budget_tokens must be an integer >= 0")
        if recall_budget_tokens < 0:
            raise ConfigurationError("recall_budget_tokens must be an integer >= 0")
        if store is None:
            store = _RESTORING_INTO.get() or default_store(self.config.log_base_path, scope)
        self.store = store
        self.scope = scope
        self._extractor = extractor
        self._extract_model_name = extract_model_name
        self.recall_budget_tokens = recall_budget_tokens
        self.extraction_timeout_s = extraction_timeout_s
        self.said_on = said_on
        self._position = self._state.extracted_through
        self._extraction: asyncio.Future[None] | None = None

    # -- configuration -------------------------------------------------------------

    @property
    def extractor(self) -> Extractor:
        """Who extracts the next excerpt (see the class docstring)."""
        if self._extractor is not None:
            return self._extractor
        model = self._extract_model_name or self._compact_model_name or self.model_name
        # The summariser's rule (``CompactionBase.summariser``): a model named
        # "offline" is none, so a chat model that cannot write summaries (an
        # echo) is not asked to extract either.
        if model == OFFLINE:
            return OfflineExtractor()
        if self._client is not None and model is not None:
            return ModelExtractor(self._client, model, timeout_s=self.extraction_timeout_s)
        return OfflineExtractor()

    def _session_meta(self) -> SessionMeta:
        meta = super()._session_meta()
        long_term = {
            "scope": self.scope.to_dict(),
            "recall_budget_tokens": self.recall_budget_tokens,
        }
        return dataclasses.replace(meta, extra={**meta.extra, "long_term": long_term})

    def build_tools(self) -> list[Callable[..., Any]]:
        """The log tools of ``CompactionMemory`` plus ``recall``, ``remember``
        and ``forget`` (``memory.background.tools``); none with
        ``enable_memory_tools=False``."""
        if not self._enable_memory_tools:
            return []
        return [*super().build_tools(), *build_long_term_tools(self)]

    # -- recall --------------------------------------------------------------------

    def search(self, query: str, *, limit: int = 10) -> list[Hit]:
        """The scope's active memories best matching ``query`` (the store's search)."""
        return self.store.search(self.scope, query, limit=limit)

    def recall(self, query: str | None = None) -> MemoryRecall | None:
        """Place the memories most relevant to ``query`` (default: the newest
        user request in the context) as the block, within
        ``recall_budget_tokens``. Returns the ``memory_recall`` record when
        the block changed (it is logged), ``None`` when it did not. A store
        that fails to answer keeps the block as it was (logged as a warning)."""
        if self.recall_budget_tokens == 0:
            return None
        query = self._request_text() if query is None else query
        try:
            ranked = self.ranked(query) if query else []
        except Exception:
            logger.exception("long-term recall failed; the block is unchanged")
            return None
        hits = [hit for hit, _ in ranked]
        block, ids, tokens = render_block(hits, self.recall_budget_tokens, self.token_counter)
        state = self._state
        if block == state.memory_block:
            return None
        state.set_memory_block(block)
        parts = {hit.memory.id: p for hit, p in ranked}
        record = MemoryRecall(
            ts=now_iso(),
            block=block,
            memory_ids=ids,
            query=query,
            tokens=tokens,
            budget_tokens=self.recall_budget_tokens,
            through_seq=state.next_seq - 1,
            scores=[{"memory_id": i, **parts[i].to_dict()} for i in ids],
        )
        self._trace.add("memory_recall", memory_ids=ids, tokens=tokens, scores=record.scores)
        if self._recorder.active:
            self._recorder.record(record)
        return record

    def ranked(self, query: str) -> list[tuple[Hit, Parts]]:
        """The recall block's candidates for ``query``, best first, with the
        parts of their scores (``scoring.recall_ranking`` over the store's
        ``RECALL_CANDIDATES`` best matches and its ``RECENT_CANDIDATES`` newest
        active memories). Raises what the store raises."""
        matched = self.store.search(self.scope, query, limit=RECALL_CANDIDATES)
        newest = self.store.memories(self.scope, Filters(status="active"), limit=RECENT_CANDIDATES)
        return recall_ranking(query, matched, newest)

    def _request_text(self) -> str:
        for message in reversed(self._state.messages):
            if message.role == "user" and message.text.strip():
                return message.text
        return ""

    # -- the hooks -----------------------------------------------------------------

    async def _after_add(self, ingested: Ingested) -> None:
        role = ingested.context_message.role
        if ingested.classification.in_context and (
            role == "user" or (role == "tool" and self.at_boundary)
        ):
            self.recall()
        if ingested.classification.unit == "C" and self.at_boundary:
            self._schedule("turn")
        await super()._after_add(ingested)

    async def _compact(
        self, trigger: Trigger, instructions: str | None = None, clear: bool | None = None
    ) -> str | None:
        # What is about to be folded is read first, verbatim.
        self._schedule("compaction")
        return await super()._compact(trigger, instructions, clear)

    # -- extraction ----------------------------------------------------------------

    def _schedule(self, trigger: str) -> None:
        """Queue the messages after the extractor's position (never awaited here)."""
        state = self._state
        state.sync()
        start = self._position + 1
        said: list[tuple[int, ChatMessage]] = []
        # From the newest back to the position: the cost follows what is new,
        # not the length of the context.
        for index in range(len(state.messages) - 1, -1, -1):
            seq, message = state.meta[index].seq, state.messages[index]
            if seq is None:
                continue
            if seq < start:
                break
            if message.role in ("user", "assistant") and message.text.strip():
                said.append((seq, message))
        said.reverse()
        # The message before the excerpt: a question it may answer.
        before = None
        for index in range(len(state.messages) - 1, -1, -1):
            seq, message = state.meta[index].seq, state.messages[index]
            if seq is not None and seq < start and message.role in ("user", "assistant"):
                before = message
                break
        through = state.next_seq - 1
        if not said or through < start:
            return
        self._position = through
        excerpt = Excerpt(
            self.session_id, said, said_on=self.said_on or now_iso()[:10], before=before
        )
        previous = self._extraction
        self._extraction = asyncio.ensure_future(
            self._extract_after(previous, excerpt, trigger, through)
        )

    async def drain(self) -> None:
        """Wait until every queued extraction has been written (or has failed)."""
        while self._extraction is not None:
            current = self._extraction
            await asyncio.wait([current])
            if self._extraction is current:
                self._extraction = None

    @property
    def extracting(self) -> bool:
        """Whether an extraction is queued or running."""
        return self._extraction is not None and not self._extraction.done()

    async def _extract_after(
        self,
        previous: asyncio.Future[None] | None,
        excerpt: Excerpt,
        trigger: str,
        through: int,
    ) -> None:
        if previous is not None:
            await asyncio.wait([previous])
        extractor = self.extractor
        started = time.monotonic()
        written: list[dict[str, Any]] = []
        error = None
        try:
            excerpt = dataclasses.replace(excerpt, existing=self._related(excerpt))
            candidates = await asyncio.wait_for(
                extractor.extract(excerpt), timeout=self.extraction_timeout_s
            )
            written = self.write(candidates, actor=extractor.name)
        except TimeoutError:
            error = f"the extractor did not finish within {self.extraction_timeout_s:g} s"
        except Exception as exc:  # a failing extractor is recorded; the session goes on
            error = bounded_error(exc)
        if error is not None:
            logger.warning("memory extraction failed (%s); the turn is unaffected", error)
            # Read again with the next turn (what is still in the context).
            if excerpt.first_seq is not None:
                self._position = min(self._position, excerpt.first_seq - 1)
        record = MemoryExtraction(
            ts=now_iso(),
            trigger=trigger,
            extractor=extractor.name,
            first_seq=excerpt.first_seq,
            through_seq=through,
            written=written,
            error=error,
            duration_s=round(time.monotonic() - started, 4),
        )
        self._note_extraction(record)

    def _related(self, excerpt: Excerpt) -> list[Memory]:
        """What an extractor is shown as existing: the best matches of what was
        said, topped up with the newest active memories (a statement that
        replaces another need not share a word with it: Porto, then Lisbon)."""
        said = " ".join(m.text for _, m in excerpt.messages)[:4000]
        related = [hit.memory for hit in self.store.search(self.scope, said, limit=RELATED)]
        # What a statement may replace need not share its words (Porto, then
        # Lisbon): its attribute's words find it ("live", "moved").
        attributes = related_terms(said)
        if attributes:
            shown = {m.id for m in related}
            for hit in self.store.search(self.scope, attributes, limit=RELATED):
                if hit.memory.id not in shown:
                    related.append(hit.memory)
                    shown.add(hit.memory.id)
        if len(related) < RELATED:
            shown = {m.id for m in related}
            newest = self.store.memories(self.scope, Filters(status="active"), limit=RELATED)
            related.extend(m for m in newest if m.id not in shown)
        return related[: 2 * RELATED]

    def _note_extraction(self, record: MemoryExtraction) -> None:
        if record.error is None and record.through_seq is not None:
            state = self._state
            state.extracted_through = max(state.extracted_through, record.through_seq)
        fields = {k: v for k, v in record.to_dict().items() if k not in ("type", "ts")}
        self._trace.add(record.type, **fields)
        if not self._recorder.active:
            return
        try:
            self._recorder.record(record)
        except Exception:
            logger.exception("the memory_extraction record could not be written")

    def write(self, candidates: Sequence[Candidate], *, actor: str) -> list[dict[str, Any]]:
        """Apply ``candidates`` to the store for this session; returns what was
        written (``memory_extraction``'s ``written``). A candidate whose target
        is no longer active is refused and listed with its ``error``, and so is
        a new memory once this session has given ``MAX_PER_SESSION`` (facts,
        not payloads: a session that pastes material turn after turn still
        adds a bounded handful; what it says again of known memories is linked)."""
        out: list[dict[str, Any]] = []
        given: int | None = None
        for c in candidates:
            provenance = Provenance(self.session_id, c.first_seq, c.last_seq, actor, now_iso())
            new = c.action in ("add", "supersede")
            if new and given is None:
                mine = Filters(session_id=self.session_id)
                given = len(self.store.memories(self.scope, mine, limit=MAX_PER_SESSION))
            try:
                full = new and given is not None and given >= MAX_PER_SESSION
                known = self._said_before(c) if full and c.action == "add" else None
                if full and known is None:
                    raise LongTermMemoryError(
                        f"this session has given {MAX_PER_SESSION} memories, the most one may"
                    )
                if known is not None:
                    self.store.link(self.scope, known.id, provenance)
                    memory, action = known, "linked"
                else:
                    memory, action = self._apply(c, provenance, actor)
            except LongTermMemoryError as exc:
                out.append({"action": "refused", "kind": c.kind, "text": c.text, "error": str(exc)})
                continue
            if given is not None and action in ("add", "supersede"):
                given += 1
            out.append(
                {"memory_id": memory.id, "action": action, "kind": c.kind, "text": memory.text}
            )
        return out

    def _said_before(self, c: Candidate) -> Memory | None:
        """The active memory that already says what ``c`` says, if one does."""
        for hit in self.store.search(self.scope, c.text, limit=3):
            if dedupe_key(hit.memory.text) == dedupe_key(c.text):
                return hit.memory
        return None

    def _apply(self, c: Candidate, provenance: Provenance, actor: str) -> tuple[Memory, str]:
        store, scope = self.store, self.scope
        if c.action == "update" and c.target is not None:
            memory = store.update(
                scope,
                c.target,
                text=c.text,
                kind=c.kind,
                actor=actor,
                reason="extractor update",
                provenance=provenance,
            )
            return memory, "update"
        if c.action == "supersede" and c.target is not None:
            memory = store.supersede(
                scope,
                c.target,
                text=c.text,
                kind=c.kind,
                provenance=provenance,
                importance=c.importance,
                when=c.when,
            )
            return memory, "supersede"
        if c.action == "none" and c.target is not None:
            store.link(scope, c.target, provenance)
            return store.get(scope, c.target), "linked"
        memory, new = store.add(
            scope,
            text=c.text,
            kind=c.kind,
            provenance=provenance,
            importance=c.importance,
            when=c.when,
        )
        return memory, "add" if new else "linked"

    def record_tool_write(self, written: list[dict[str, Any]]) -> None:
        """Log what the agent's own ``remember``/``forget`` wrote."""
        seq = self.next_seq - 1
        self._note_extraction(
            MemoryExtraction(
                ts=now_iso(),
                trigger="tool",
                extractor="agent",
                first_seq=seq,
                through_seq=None,
                written=written,
                duration_s=0.0,
            )
        )

    # -- restore and fork ----------------------------------------------------------

    @classmethod
    def restore_from_log(
        cls,
        session_id: str,
        *,
        store: LongTermStore | None = None,
        scope: Scope | None = None,
        extractor: Extractor | None = None,
        **kwargs: Any,
    ) -> Self:
        """``CompactionMemory.restore_from_log``, with the long-term side: the
        scope and recall budget the log's ``session_meta`` names (unless
        given), the block the log last placed, and the extractor's position
        (messages after it are extracted at the next turn). ``store`` must be
        the store the session used (default: the same default as a new memory)."""
        # The store given is the one constructed with (no default made, no warning).
        token = _RESTORING_INTO.set(store)
        try:
            memory = super().restore_from_log(session_id, **kwargs)
        finally:
            _RESTORING_INTO.reset(token)
        long_term = _long_term_meta(memory)
        memory.scope = scope or (
            Scope.from_dict(long_term["scope"])
            if isinstance(long_term.get("scope"), dict)
            else memory.scope
        )
        budget = long_term.get("recall_budget_tokens")
        if isinstance(budget, int) and not isinstance(budget, bool) and budget >= 0:
            memory.recall_budget_tokens = budget
        memory._extractor = extractor
        memory._position = memory._state.extracted_through
        return memory

    def _fork_options(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "scope": self.scope,
            "extractor": self._extractor,
            "extract_model_name": self._extract_model_name,
            "recall_budget_tokens": self.recall_budget_tokens,
            "extraction_timeout_s": self.extraction_timeout_s,
            "said_on": self.said_on,
        }

    def fork(self, *, session_id: str | None = None) -> Self:
        """``CompactionMemory.fork`` in the same store and scope, carrying the
        block in force (logged as the fork's first ``memory_recall``)."""
        child = super().fork(session_id=session_id)
        # The parent extracts what it said; the fork starts after it.
        child._state.extracted_through = child._position = child._state.next_seq - 1
        block = self._state.memory_block
        if block:
            child._state.set_memory_block(block)
            if child._recorder.active:
                child._recorder.record(
                    MemoryRecall(
                        ts=now_iso(),
                        block=block,
                        query="(fork)",
                        tokens=self.token_counter.count(block),
                        budget_tokens=self.recall_budget_tokens,
                        through_seq=child.next_seq - 1,
                    )
                )
        return child


def default_store(log_base_path: str | Path | None, scope: Scope) -> LongTermStore:
    """The store of a ``BackgroundMemory`` given none: SQLite beside the logs
    (``log_base_path/long_term_memory.sqlite3``), so a later session or process
    with the same log folder recalls what this one remembered. Without a log
    folder, an in-memory store that no other instance shares, said once per
    construction as a warning of the ``memory.background`` logger: silently
    forgetting everything at exit is the surprise this default must not hide."""
    if log_base_path:
        return SQLiteLongTermStore(Path(log_base_path) / STORE_FILE)
    logger.warning(
        "BackgroundMemory has no store and no log_base_path: the memories of scope %s are "
        "kept in this process only and are lost when it ends (no other instance recalls "
        "them); pass store=SQLiteLongTermStore(path) or configure log_base_path",
        scope.key,
    )
    return SQLiteLongTermStore(":memory:")


def bounded_error(exc: Exception) -> str:
    """``exc`` as a ``memory_extraction`` record's ``error``: its type and at most
    ``ERROR_CHARS`` characters of its message (an extractor of any make may
    quote the excerpt it failed on; the record is shown to operators)."""
    text = str(exc)
    if len(text) > ERROR_CHARS:
        text = f"{text[:ERROR_CHARS]}... ({len(text):,} characters)"
    return f"{type(exc).__name__}: {text}"


def _long_term_meta(memory: CompactionMemory) -> dict[str, Any]:
    store = memory.log_store
    if store is None:
        return {}
    records = store.read(memory.session_id, [])
    first = next(iter(records), None)
    getattr(records, "close", lambda: None)()
    if not isinstance(first, dict) or first.get("type") != "session_meta":
        return {}
    long_term = first.get("long_term")
    return long_term if isinstance(long_term, dict) else {}
