"""The records of a conversation log: one frozen dataclass per record type.

A log is a stream of records, one JSON object per line in a JSONL file (or one
row per record in the dashboard's database). Every record has a ``type`` (the
discriminator) and an ISO-8601 UTC timestamp ``ts``. The first three types are
the Motus log format (``session_meta``, ``message``, ``compaction``) and stay
readable by Motus; everything this library adds is an optional field or a new
record type. A log written by Motus (no ``seq``, no ``through_seq``) loads:
see ``memory.compaction.restore``.

Each class below lists its fields; a field is ``None`` when the record does
not have it. ``extra`` holds every key the class does not know (fields a newer
library adds) and every known key whose value does not fit the field (an
explicit ``null``, a string where a number belongs), so
``record_from_dict(d).to_dict() == d`` for any JSON object ``d`` with a
``type``: old and future logs round-trip exactly. ``to_json`` / ``record_from_json``
are the one serializer pair (orjson).

Every string in a record (fields, ``extra``, at any depth) is cleaned of lone
surrogates when the record is built (``memory.json_values``), and so is every
record a store is given as a dict (``as_dict``, ``serialise``): a UTF-8 log can
hold whatever the memory writes.

``session_meta`` (``SessionMeta``)
    ``session_id``, ``system_prompt``, ``config`` (``safety_ratio``,
    ``token_threshold``, ``compact_model_name``, ``max_tool_result_tokens``...),
    ``parent_session_id``; added: ``format_version``, ``memory_type``,
    ``model_name``, ``parent_seq`` (the last parent message a fork or restore
    was taken from), ``title``, ``system_role`` (``"developer"`` when the
    instructions are a developer message; absent for ``"system"``), ``tools``
    (the tool schemas set before the first record; absent: none).
``system_prompt`` (``SystemPromptChange``)
    ``system_prompt``, ``through_seq``, ``system_role`` (as in
    ``session_meta``): the prompt changed mid-session.
``message`` (``MessageRecord``)
    ``message``: the message exactly as it was added (OpenAI chat dict). Added:
    ``seq`` (0-based, strictly increasing), ``tokens`` (estimated tokens of the
    message as it sits in the context), ``unit`` (``A``/``B``/``C``),
    ``unit_index``, ``context_tokens`` (the context's size after it),
    ``context_message`` (only when a tool result was truncated: the message as
    it entered the context), ``truncation`` (``original_tokens``,
    ``original_bytes``, ``kept_tokens``), ``anomaly``, ``usage`` (the
    provider's whole report for the request that produced a reply:
    ``input_tokens``, ``output_tokens``, ``cached_input_tokens``,
    ``cache_write_tokens``, ``reasoning_tokens`` as reported, and ``model``),
    ``provider_tokens``
    (input tokens the provider reported for the request that produced it).
``compaction`` (``Compaction``)
    ``compaction_number``, ``messages_compacted``, ``summary``. Added:
    ``status`` (``"ok"``), ``trigger`` (``auto``/``manual``/``fork``),
    ``through_seq`` (the last message seq the boundary covers),
    ``summarized_seqs`` (``[first, last]`` of the folded messages, or null),
    ``replayed_seqs`` (messages kept verbatim after the summary),
    ``messages_replayed``, ``tokens_before``, ``tokens_after``,
    ``summary_tokens``, ``model``, ``duration_s``, ``chunks``, ``continuation``
    (the exact text of the continuation message when it is not this library's
    template around ``summary``: logs of the reference implementation and of
    other tools), ``checkpoint`` (what a restore needs to start at this
    record instead of at the log's first: ``memory.compaction.checkpoint``),
    ``instructions`` (what the caller of ``compact(instructions=...)`` asked
    the summary to keep), ``usage`` (the summarising requests' own
    ``{"input_tokens", "output_tokens", "model"}``, when a model wrote it),
    ``ledger`` (what the summary carries verbatim to the next compaction:
    ``memory.compaction.ledger``) and ``ledger_given_way`` (the entries that
    did not fit its budget and were dropped, recorded rather than lost silently),
    ``warning`` (a manual compaction whose summary did not make the context
    smaller: done as asked, and said here).
``compaction_failed`` (``CompactionFailure``)
    ``trigger``, ``through_seq``, ``error``, ``tokens_before``, ``model``,
    ``duration_s``. The context did not change.
``compaction_warning`` (``CompactionWarning``)
    ``through_seq``, ``reason``, ``floor_tokens``, ``threshold``: compaction
    could not bring the context under the threshold.
``compaction_revert`` (``CompactionRevert``)
    ``reverts`` (a ``compaction_number``), ``through_seq``, ``reason``,
    ``context_tokens``: the context goes back to what it was before that
    compaction, plus every message added since.
``reset`` (``Reset``)
    ``through_seq``, ``context_tokens``: the context starts empty again.
    Added: ``scope``: ``"messages"`` for ``clear_messages()``, which empties
    the conversation but keeps the compaction numbering (and the trace);
    absent for ``reset()``, which starts everything again. A reader that does
    not know ``scope`` still empties the context, which is what both did.
``tools`` (``ToolsChange``)
    ``schemas`` (the OpenAI function-tool dicts sent with every request from
    now on; ``[]``: none), ``tokens`` (their estimated tokens),
    ``through_seq``. Tools set before the first record are the
    ``session_meta``'s ``tools`` instead.
``rewind`` (``Rewind``)
    ``rewind_number`` (1, 2, ... in the log), ``target`` (a log point,
    ``memory.log.prefix``: ``{"after_message": 41}``, ``{"before_compaction":
    3}`` or ``{"before_rewind": 2}``), ``reason``, ``context_tokens``, and
    what stays counted across it: ``through_seq`` (the last seq given out;
    the next message gets the one after), ``unit_index`` (the last turn unit
    numbered), ``compaction_number`` (the last compaction numbered), and
    ``clearing_number`` (the last tool-result clearing numbered). The
    session continues in place from the target: the context becomes what a
    restore of the log up to the target gives (instructions and tools
    included). Nothing is deleted; the records between the target and the
    rewind stay in the log, no longer in force. Undoing a rewind is a rewind
    to ``{"before_rewind": n}``. A reader older than this record type skips it
    (with a note) and shows the context as it was before the rewind.
``summary_correction`` (``SummaryCorrection``)
    ``compaction_number`` (the compaction in force whose summary is
    corrected), ``summary`` (the corrected text; the compaction record keeps
    the original), ``reason``, ``through_seq``, ``context_tokens``: the
    continuation message carries the corrected summary from now on. Added:
    ``ledger`` (the compaction's ledger as the correction left it:
    ``memory.compaction.pins``; absent in older logs, where a restore works
    it out the same way).
``unpin`` (``Unpin``)
    ``compaction_number`` (the compaction in force), ``values`` (the pinned
    values the operator let go), ``ledger`` (the ledger after), ``reason``,
    ``through_seq``, ``context_tokens``. The context does not change; later
    compactions no longer have to keep those values. A reader older than this
    type skips it (with a note) and keeps the pins.

``tool_results_cleared`` (``ToolResultsCleared``)
    Old tool results replaced by a short stub (``memory.compaction.clearing``):
    ``clearing_number`` (1, 2, ... in the log), ``trigger`` (``auto`` /
    ``manual``), ``through_seq``, ``keep`` (the newest tool results left
    whole), ``cleared`` (one ``{"seq", "tool_call_id", "name", "tokens",
    "bytes", "stub", "stub_tokens"}`` per result: the message's seq, the call
    it answers, the tool's name, the result's size in the context in tokens
    and UTF-8 bytes, the exact stub text that replaced it and its tokens),
    ``tokens_before``, ``tokens_after``. The message records keep the full
    results; only the context holds the stubs, until a compaction folds them
    or a ``tool_results_restored`` puts them back. A reader older than this
    type skips it (with a note) and shows the results whole.
``tool_results_restored`` (``ToolResultsRestored``)
    ``reverts`` (a ``clearing_number``), ``through_seq``, ``reason``,
    ``context_tokens``: the results that clearing stubbed and that are still in
    the context are whole again (its undo).

``memory_recall`` (``MemoryRecall``)
    ``BackgroundMemory`` only: the block of long-term memories placed in the
    context from now on (after the instructions, in the same system message),
    until the next ``memory_recall``. ``block`` (the exact text; ``""``: none),
    ``memory_ids`` (the memories in it, best first), ``query`` (what they were
    searched for), ``tokens`` (the block's), ``budget_tokens``, ``through_seq``.
    A reader older than this type skips it and shows the context without the block.
``memory_extraction`` (``MemoryExtraction``)
    ``BackgroundMemory`` only: what was written to the long-term store from
    the messages ``first_seq``..``through_seq``: ``trigger`` (``turn``,
    ``compaction``, ``tool``), ``extractor`` (``offline``, ``model:<name>``,
    ``agent``), ``written`` (``[{"memory_id", "action", "kind", "text"}]``;
    ``action`` is ``add``, ``update``, ``supersede``, ``forget`` or ``linked``:
    a statement already remembered, which got a provenance link), ``error``
    (why nothing was written), ``duration_s``. Written when the background
    extraction ends, so it may follow records of later messages.

``checkpoint`` (``CheckpointRecord``)
    Written every ``memory.compaction.checkpoint.CHECKPOINT_EVERY`` messages
    while no compaction is in force (a compaction record carries its own
    checkpoint), so a restore of a log without compactions starts here too:
    ``checkpoint`` (the state a compaction's ``checkpoint`` holds: next seq,
    instructions, tools, calibration, open tool batch), ``context_seqs``
    (the seqs of the messages in the context, as ``[first, last]`` runs),
    ``compaction_number`` (the last compaction numbered), ``through_seq``,
    ``context_tokens``. It changes nothing: a reader older than this type
    skips it (with a note) and loses nothing.

Any other ``type`` reads as an ``UnknownRecord`` that keeps all its fields.
"""

from __future__ import annotations

import contextvars
import dataclasses
import operator
import time
import types
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar, Union, get_args, get_origin, get_type_hints

import orjson

from ..errors import LogCorruptError
from ..json_values import clean_json, loads
from ..messages import ChatMessage, InvalidMessageError

FORMAT_VERSION = 2

SESSION_META = "session_meta"
SYSTEM_PROMPT = "system_prompt"
MESSAGE = "message"
COMPACTION = "compaction"
COMPACTION_FAILED = "compaction_failed"
COMPACTION_WARNING = "compaction_warning"
COMPACTION_REVERT = "compaction_revert"
RESET = "reset"
TOOLS = "tools"
REWIND = "rewind"
SUMMARY_CORRECTION = "summary_correction"
UNPIN = "unpin"
MEMORY_RECALL = "memory_recall"
MEMORY_EXTRACTION = "memory_extraction"
CHECKPOINT = "checkpoint"
TOOL_RESULTS_CLEARED = "tool_results_cleared"
TOOL_RESULTS_RESTORED = "tool_results_restored"


def now_iso() -> str:
    """The current time as an ISO-8601 UTC string, the ``ts`` of every record:
    ``datetime.now(UTC).isoformat()``'s form, whose date and time up to the
    second are formatted once a second (every message takes one)."""
    global _second_text
    second, micro = divmod(time.time_ns() // 1_000, 1_000_000)
    cached = _second_text
    if cached[0] != second:
        cached = _second_text = (second, datetime.fromtimestamp(second, UTC).isoformat()[:19])
    # isoformat() leaves the fraction out when it is zero.
    return f"{cached[1]}.{micro:06d}+00:00" if micro else f"{cached[1]}+00:00"


_second_text: tuple[int, str] = (-1, "")  # the last second formatted, and its text


Checker = Callable[[Any], Any]
_NOTHING_TO_CLEAN = (int, float, ChatMessage)
_MISSING = object()


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _checker(hint: Any) -> Checker:
    """A function that returns the value when it fits ``hint``, else ``_MISSING``."""
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        inner = [arg for arg in get_args(hint) if arg is not type(None)]
        return _checker(inner[0])
    if hint is int:
        return lambda v: v if _is_int(v) else _MISSING
    if hint is float:
        return lambda v: v if _is_int(v) or isinstance(v, float) else _MISSING
    if hint is str:
        return lambda v: v if isinstance(v, str) else _MISSING
    if hint is ChatMessage:
        return _message
    if origin is list:
        (item,) = get_args(hint)
        check = _checker(item)
        return lambda v: (
            v if isinstance(v, list) and all(check(i) is not _MISSING for i in v) else _MISSING
        )
    if hint is dict or origin is dict:
        return lambda v: v if isinstance(v, dict) else _MISSING
    raise TypeError(f"no record field checker for {hint!r}")


def _message(value: object) -> Any:
    return ChatMessage.from_dict(value) if isinstance(value, Mapping) else _MISSING


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LogRecord:
    """Fields every record has. Subclasses set ``type`` and add their own fields."""

    type: ClassVar[str] = ""
    _fields: ClassVar[tuple[tuple[str, Checker], ...]] = ()
    _cleaned: ClassVar[tuple[str, ...]] = ("ts", "extra")  # every field, set by ``_record``
    # The values of ``_fields`` and of ``_cleaned`` as tuples (``_getter``).
    _field_values: ClassVar[Any]
    _cleaned_values: ClassVar[Any]

    ts: str | None = None
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        # Messages clean themselves; other values may be anything a caller
        # passed, which the store refuses (LogError) if JSON cannot hold it.
        if _PARSED_JSON.get():
            return  # parsed from JSON text: no lone surrogate can be in it
        for name, value in zip(self._cleaned, self._cleaned_values(self), strict=True):
            # Numbers, messages, ASCII text and empty containers hold no lone
            # surrogate: most fields, skipped fast.
            if not value or isinstance(value, _NOTHING_TO_CLEAN):
                continue
            if not (isinstance(value, str) and value.isascii()):
                object.__setattr__(self, name, clean_json(value))

    def to_dict(self) -> dict[str, Any]:
        """The record as a JSON-compatible dict, exactly as it was read or built."""
        out: dict[str, Any] = {"type": self.type_name}
        if self.ts is not None:
            out["ts"] = self.ts
        for (name, _), value in zip(self._fields, self._field_values(self), strict=True):
            if value is not None:
                out[name] = value.to_dict() if isinstance(value, ChatMessage) else value
        out.update(self.extra)
        return out

    def to_json(self) -> bytes:
        """One line of a JSONL log, without the newline. Raises ``TypeError``
        for a value JSON cannot hold (orjson's own error)."""
        return orjson.dumps(self.to_dict())

    @property
    def type_name(self) -> str:
        return self.type

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> LogRecord:
        """The typed record of ``data``; see ``record_from_dict``."""
        return record_from_dict(data)

    @classmethod
    def _parse(cls, data: Mapping[str, Any], exact: bool = True) -> dict[str, Any]:
        """Keyword arguments of ``cls`` from ``data``; what does not fit goes to extra.

        Without ``exact``, a message that would write back otherwise is not
        compared with what was read (a restore only reads records)."""
        kwargs: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        known = dict(cls._fields)
        for key, value in data.items():
            if key == "type":
                continue
            if key == "ts" and isinstance(value, str):
                kwargs["ts"] = value
                continue
            check = known.get(key)
            fitted = check(value) if check is not None and value is not None else _MISSING
            if fitted is _MISSING:
                extra[key] = value
                continue
            kwargs[key] = fitted
            if exact and isinstance(fitted, ChatMessage) and fitted.to_dict() != value:
                # A message that writes back otherwise (no "content" key, arguments
                # given as an object) is typed for use and kept as read for the log.
                extra[key] = value
        kwargs["extra"] = extra
        return kwargs


_RECORD_TYPES: dict[str, type[LogRecord]] = {}


def _getter(names: Sequence[str]) -> Any:
    """A class attribute that gives the tuple of a record's attributes
    ``names`` in one call (``operator.attrgetter``, whose result for one name
    is the value itself, so fewer than two take the slow way)."""
    if len(names) > 1:
        return staticmethod(operator.attrgetter(*names))
    return staticmethod(lambda record: tuple(getattr(record, name) for name in names))


LogRecord._field_values = _getter(())
LogRecord._cleaned_values = _getter(LogRecord._cleaned)


def _record(type_name: str) -> Callable[[type[LogRecord]], type[LogRecord]]:
    def register(cls: type[LogRecord]) -> type[LogRecord]:
        cls.type = type_name
        hints = get_type_hints(cls)
        base = {f.name for f in dataclasses.fields(LogRecord)}
        cls._fields = tuple(
            (f.name, _checker(hints[f.name])) for f in dataclasses.fields(cls) if f.name not in base
        )
        cls._cleaned = ("ts", "extra", *(name for name, _ in cls._fields))
        cls._field_values = _getter([name for name, _ in cls._fields])
        cls._cleaned_values = _getter(cls._cleaned)
        _RECORD_TYPES[type_name] = cls
        return cls

    return register


@_record(SESSION_META)
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SessionMeta(LogRecord):
    session_id: str | None = None
    system_prompt: str | None = None
    config: dict[str, Any] | None = None
    parent_session_id: str | None = None
    format_version: int | None = None
    memory_type: str | None = None
    model_name: str | None = None
    parent_seq: int | None = None
    title: str | None = None
    system_role: str | None = None
    tools: list[dict[str, Any]] | None = None


@_record(SYSTEM_PROMPT)
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SystemPromptChange(LogRecord):
    system_prompt: str | None = None
    through_seq: int | None = None
    system_role: str | None = None


@_record(MESSAGE)
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class MessageRecord(LogRecord):
    seq: int | None = None
    message: ChatMessage | None = None
    tokens: int | None = None
    unit: str | None = None
    unit_index: int | None = None
    context_tokens: int | None = None
    context_message: ChatMessage | None = None
    truncation: dict[str, Any] | None = None
    anomaly: str | None = None
    provider_tokens: int | None = None
    usage: dict[str, Any] | None = None


@_record(COMPACTION)
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Compaction(LogRecord):
    compaction_number: int | None = None
    status: str | None = None
    trigger: str | None = None
    through_seq: int | None = None
    summarized_seqs: list[int] | None = None
    replayed_seqs: list[int] | None = None
    messages_compacted: int | None = None
    messages_replayed: int | None = None
    summary: str | None = None
    summary_tokens: int | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None
    model: str | None = None
    chunks: int | None = None
    duration_s: float | None = None
    continuation: str | None = None
    checkpoint: dict[str, Any] | None = None
    instructions: str | None = None
    usage: dict[str, Any] | None = None
    ledger: list[dict[str, Any]] | None = None
    ledger_given_way: list[dict[str, Any]] | None = None
    warning: str | None = None


@_record(COMPACTION_FAILED)
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CompactionFailure(LogRecord):
    trigger: str | None = None
    through_seq: int | None = None
    error: str | None = None
    tokens_before: int | None = None
    model: str | None = None
    duration_s: float | None = None


@_record(COMPACTION_WARNING)
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CompactionWarning(LogRecord):
    through_seq: int | None = None
    reason: str | None = None
    floor_tokens: int | None = None
    threshold: int | None = None


@_record(COMPACTION_REVERT)
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CompactionRevert(LogRecord):
    reverts: int | None = None
    through_seq: int | None = None
    reason: str | None = None
    context_tokens: int | None = None


@_record(RESET)
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Reset(LogRecord):
    through_seq: int | None = None
    context_tokens: int | None = None
    scope: str | None = None


RESET_SCOPE_MESSAGES = "messages"
"""``Reset.scope`` of ``clear_messages()``."""


@_record(TOOLS)
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ToolsChange(LogRecord):
    schemas: list[dict[str, Any]] | None = None
    tokens: int | None = None
    through_seq: int | None = None


@_record(REWIND)
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Rewind(LogRecord):
    rewind_number: int | None = None
    target: dict[str, Any] | None = None
    through_seq: int | None = None
    unit_index: int | None = None
    compaction_number: int | None = None
    reason: str | None = None
    context_tokens: int | None = None
    clearing_number: int | None = None


@_record(SUMMARY_CORRECTION)
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SummaryCorrection(LogRecord):
    compaction_number: int | None = None
    summary: str | None = None
    reason: str | None = None
    through_seq: int | None = None
    context_tokens: int | None = None
    ledger: list[dict[str, Any]] | None = None


@_record(UNPIN)
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Unpin(LogRecord):
    compaction_number: int | None = None
    values: list[str] | None = None
    ledger: list[dict[str, Any]] | None = None
    reason: str | None = None
    through_seq: int | None = None
    context_tokens: int | None = None


@_record(TOOL_RESULTS_CLEARED)
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultsCleared(LogRecord):
    clearing_number: int | None = None
    trigger: str | None = None
    through_seq: int | None = None
    keep: int | None = None
    cleared: list[dict[str, Any]] | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None


@_record(TOOL_RESULTS_RESTORED)
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultsRestored(LogRecord):
    reverts: int | None = None
    through_seq: int | None = None
    reason: str | None = None
    context_tokens: int | None = None


@_record(MEMORY_RECALL)
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class MemoryRecall(LogRecord):
    block: str | None = None
    memory_ids: list[str] | None = None
    query: str | None = None
    tokens: int | None = None
    budget_tokens: int | None = None
    through_seq: int | None = None
    # Per placed memory, in block order: ``{"memory_id", "text", "entities", "time",
    # "recency", "importance", "total"}`` (``memory.background.scoring.Parts``).
    scores: list[dict[str, Any]] | None = None


@_record(MEMORY_EXTRACTION)
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class MemoryExtraction(LogRecord):
    trigger: str | None = None
    extractor: str | None = None
    first_seq: int | None = None
    through_seq: int | None = None
    written: list[dict[str, Any]] | None = None
    error: str | None = None
    duration_s: float | None = None


@_record(CHECKPOINT)
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointRecord(LogRecord):
    checkpoint: dict[str, Any] | None = None
    context_seqs: list[list[int]] | None = None
    compaction_number: int | None = None
    through_seq: int | None = None
    context_tokens: int | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class UnknownRecord(LogRecord):
    """A record type this library does not know (written by a newer one): kept whole."""

    unknown_type: str = ""

    @property
    def type_name(self) -> str:
        return self.unknown_type


RECORD_TYPES: frozenset[str] = frozenset(_RECORD_TYPES)
"""The record types this library writes and understands."""


# Set while records are built from what a JSON parser gave back: orjson refuses
# lone surrogates and ``memory.json_values.loads`` cleans them, so such values
# need no second cleaning (a restore builds one record per log line).
_PARSED_JSON: contextvars.ContextVar[bool] = contextvars.ContextVar("parsed_json", default=False)


_R = TypeVar("_R", bound="LogRecord")


def built_clean(cls: type[_R], **fields: Any) -> _R:
    """``cls(**fields)`` for fields known to hold no lone surrogate (the
    memory's own values: messages, which clean themselves, numbers, ASCII
    names), so the cleaning walk is skipped."""
    token = _PARSED_JSON.set(True)
    try:
        return cls(**fields)
    finally:
        _PARSED_JSON.reset(token)


def record_from_dict(
    data: Mapping[str, Any], *, exact: bool = True, parsed_json: bool = False
) -> LogRecord:
    """The typed record of a log line's object.

    ``record_from_dict(d).to_dict() == d``; ``exact=False`` gives that up for
    messages that do not write back as read (no ``content`` key...), to read
    a long log faster when nothing will be written back. Raises
    ``LogCorruptError`` when ``data`` is not an object with a string ``type``,
    or when a message record's message is not a chat message. ``parsed_json``:
    ``data`` is a JSON parser's output (a store's ``read``), clean already.
    """
    token = _PARSED_JSON.set(parsed_json)
    try:
        return _record_from_dict(data, exact)
    finally:
        _PARSED_JSON.reset(token)


def _record_from_dict(data: Mapping[str, Any], exact: bool) -> LogRecord:
    if not isinstance(data, Mapping) or not isinstance(data.get("type"), str):
        raise LogCorruptError("not a log record (no 'type')")
    cls = _RECORD_TYPES.get(data["type"])
    try:
        if cls is None:
            return UnknownRecord(unknown_type=data["type"], **LogRecord._parse(data, exact))
        return cls(**cls._parse(data, exact))
    except InvalidMessageError as error:
        raise LogCorruptError(f"{data['type']} record: {error}") from error


def record_from_json(line: bytes | str) -> LogRecord:
    """The typed record of one JSONL line. Raises ``LogCorruptError``."""
    try:
        data = loads(line)
    except orjson.JSONDecodeError as error:
        raise LogCorruptError(f"invalid JSON ({error})") from error
    return record_from_dict(data)


def as_record(record: LogRecord | Mapping[str, Any]) -> LogRecord:
    """``record`` typed: records pass through, dicts go through ``record_from_dict``."""
    return record if isinstance(record, LogRecord) else record_from_dict(record)


def as_dict(record: LogRecord | Mapping[str, Any]) -> dict[str, Any]:
    """``record`` as its JSON-compatible dict: a copy for a dict, its strings
    cleaned of lone surrogates as a typed record's are (``memory.json_values``)."""
    if isinstance(record, LogRecord):
        return record.to_dict()
    return dict(clean_json(record))


def serialise(record: LogRecord | Mapping[str, Any]) -> bytes:
    """One JSONL line for ``record`` (no newline), strings cleaned as in
    ``as_dict``. Raises ``TypeError`` for a value JSON cannot hold."""
    return record.to_json() if isinstance(record, LogRecord) else orjson.dumps(as_dict(record))
