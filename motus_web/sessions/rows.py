"""Log records to rows and back, exactly.

Each record maps onto the columns of its row where the value fits a column.
Then the record is rebuilt from the columns alone and compared with the
original: every key that comes out different or not at all is kept in
``record_extra``, and every key the rebuild invents is listed in
``absent_keys``. Reading applies both, so ``record_of(row) == record`` for any
JSON-compatible record, whatever a newer library adds, while the columns stay
the ones to query.

Only what the store needs to keep its order and totals is required (see
``RecordError``); anything else that is missing or odd goes to ``record_extra``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from django.utils import timezone

from memory.log import records

from .models import CompactionEvent, ContextChange, LogRecord, Message, Session
from .previews import preview_of

Record = dict[str, Any]

EVENT_KINDS: dict[str, str] = {
    records.COMPACTION: CompactionEvent.Kind.OK,
    records.COMPACTION_FAILED: CompactionEvent.Kind.FAILED,
    records.COMPACTION_WARNING: CompactionEvent.Kind.WARNING,
    records.COMPACTION_REVERT: CompactionEvent.Kind.REVERT,
}
_EVENT_TYPES = {kind: record_type for record_type, kind in EVENT_KINDS.items()}

# Record keys stored in a column of the same name (after the ones handled by hand).
_EVENT_INT_KEYS = (
    "through_seq",
    "messages_compacted",
    "messages_replayed",
    "summary_tokens",
    "tokens_before",
    "tokens_after",
    "floor_tokens",
    "threshold",
    "reverts",
)
_EVENT_STR_KEYS = ("trigger", "summary", "model", "error", "reason")
_MESSAGE_DICT_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id", "name"})
_UNITS = frozenset(Message.Unit.values)
_ROLES = frozenset(Message.Role.values)
# The legacy API's tool result: a "tool" row whose extra keeps the role it was written with.
_LEGACY_ROLES = {"function": Message.Role.TOOL}


class RecordError(ValueError):
    """A record the store cannot place: no type, a bad ``ts``, a message without seq or tokens."""


# Integer columns are 64-bit on every database: a number past that stays in
# record_extra (or, where the store needs it, is refused), never half-stored.
INT_MIN, INT_MAX = -(2**63), 2**63 - 1


def _int(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and INT_MIN <= value <= INT_MAX:
        return value
    return None


def nonnegative(value: object) -> int | None:
    number = _int(value)
    return number if number is not None and number >= 0 else None


def _str(value: object) -> str:
    """Text for a column: PostgreSQL stores no NUL, so it shows as U+FFFD there.

    The record's own text, NUL included, then differs from the column's and is
    kept in ``record_extra`` (a ``LosslessJSONField``), so nothing is lost.
    """
    return value.replace("\x00", "\ufffd") if isinstance(value, str) else ""


def _is_call_list(value: object) -> bool:
    return isinstance(value, list) and bool(value)


def _is_text(value: object) -> bool:
    # The columns' max_length; a NUL makes the value ride in the JSON extra instead.
    return isinstance(value, str) and 0 < len(value) <= 255 and "\x00" not in value


def _required_int(record: Mapping[str, Any], key: str) -> int:
    value = record.get(key)
    number = nonnegative(value)
    if number is None:
        if isinstance(value, int) and not isinstance(value, bool) and value > INT_MAX:
            raise RecordError(
                f"{record.get('type')} record's {key!r} is {value}, past the largest "
                f"integer the database stores ({INT_MAX})"
            )
        got = "" if value is None else f", got {repr(value)[:40]}"
        raise RecordError(f"{record.get('type')} record needs a non-negative integer {key!r}{got}")
    return number


def parse_ts(record: Mapping[str, Any]) -> datetime:
    """The record's ``ts`` as an aware datetime; now when it has none."""
    ts = record.get("ts")
    if ts is None:
        return timezone.now()
    try:
        moment = datetime.fromisoformat(ts) if isinstance(ts, str) else None
    except ValueError:
        moment = None
    if moment is None:
        raise RecordError(f"'ts' must be an ISO-8601 timestamp, got {ts!r}")
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _ts(moment: datetime) -> str:
    # The format of memory.log.records.now_iso(), which is what the memory writes.
    return moment.astimezone(UTC).isoformat()


def _keep_differences(row: LogRecord | Session, record: Mapping[str, Any], rebuilt: Record) -> None:
    row.record_extra = {
        key: value
        for key, value in record.items()
        if key not in rebuilt or type(rebuilt[key]) is not type(value) or rebuilt[key] != value
    }
    row.absent_keys = [key for key in rebuilt if key not in record]


def _restore(row: LogRecord | Session, rebuilt: Record) -> Record:
    for key in row.absent_keys:
        rebuilt.pop(key, None)
    rebuilt.update(row.record_extra)
    return rebuilt


def _optional(out: Record, key: str, value: object) -> None:
    if value is not None and value != "":
        out[key] = value


# session_meta <-> Session
#
# ``parent_session_id`` has no column: it always rides in ``record_extra``. The
# ``parent`` link is for navigation only; it may point at the importer's copy of
# the parent, or be emptied when the parent goes, and the log still says what it said.


def session_from_meta(record: Mapping[str, Any], parent: Session | None) -> Session:
    config = record.get("config")
    session = Session(
        public_id=_str(record.get("session_id")),
        title=_str(record.get("title"))[:200],
        parent=parent,
        parent_seq=_int(record.get("parent_seq")),
        # Values longer than their column are cut there and kept whole in record_extra.
        memory_type=_str(record.get("memory_type"))[:32],
        model_name=_str(record.get("model_name"))[:100],
        system_prompt=_str(record.get("system_prompt")),
        config=config if isinstance(config, dict) else {},
        created_at=parse_ts(record),
    )
    session.compact_model_name = _str(session.config.get("compact_model_name"))[:100]
    session.updated_at = session.created_at
    _keep_differences(session, record, _meta_columns(session))
    return session


def _meta_columns(session: Session) -> Record:
    out: Record = {"type": records.SESSION_META, "ts": _ts(session.created_at)}
    out["session_id"] = session.public_id
    _optional(out, "system_prompt", session.system_prompt)
    if session.config:
        out["config"] = session.config
    _optional(out, "parent_seq", session.parent_seq)
    _optional(out, "memory_type", session.memory_type)
    _optional(out, "model_name", session.model_name)
    _optional(out, "title", session.title)
    return out


def named_by_content(session: Session, title: str) -> None:
    """Show ``session`` (whose log names no title) as ``title``, keeping its
    log as it was: the session_meta read back still has no title, so an export
    imports back unchanged."""
    session.title = title[:200]
    if "title" not in session.absent_keys:
        session.absent_keys = [*session.absent_keys, "title"]
    session.save(update_fields=["title", "absent_keys"])


def meta_of(session: Session) -> Record:
    return _restore(session, _meta_columns(session))


# message <-> Message


def message_row(session: Session, position: int, record: Mapping[str, Any]) -> Message:
    message = record.get("message")
    if not isinstance(message, Mapping):
        raise RecordError("message record needs a 'message' object with a chat role")
    raw_role = message.get("role")
    role = _LEGACY_ROLES.get(raw_role, raw_role) if isinstance(raw_role, str) else None
    if role not in _ROLES:
        raise RecordError("message record needs a 'message' object with a chat role")
    extra = {k: v for k, v in message.items() if k not in _MESSAGE_DICT_KEYS}
    if role != message["role"]:
        extra["role"] = message["role"]
    # A known key whose value no column holds (tool_calls: null, name: "") rides in extra.
    fitting: dict[str, Any] = {}
    for key, fits in (
        ("tool_calls", _is_call_list),
        ("tool_call_id", _is_text),
        ("name", _is_text),
    ):
        if key in message:
            (fitting if fits(message[key]) else extra)[key] = message[key]
    unit = record.get("unit")
    if unit not in _UNITS:
        raise RecordError(f"message record needs a 'unit' of A, B or C, got {unit!r}")
    row = Message(
        session=session,
        position=position,
        created_at=parse_ts(record),
        seq=_required_int(record, "seq"),
        role=role,
        content=message.get("content"),
        preview=preview_of(role, message.get("content")),
        tool_calls=fitting.get("tool_calls"),
        tool_call_id=fitting.get("tool_call_id", ""),
        name=fitting.get("name", ""),
        extra=extra,
        tokens=_required_int(record, "tokens"),
        provider_tokens=nonnegative(record.get("provider_tokens")),
        unit=unit,
        unit_index=_required_int(record, "unit_index"),
        context_tokens=_required_int(record, "context_tokens"),
        context_message=record.get("context_message"),
        truncation=record.get("truncation"),
    )
    _keep_differences(row, record, _message_columns(row))
    return row


def _message_columns(row: Message) -> Record:
    out: Record = {"type": records.MESSAGE, "ts": _ts(row.created_at), "seq": row.seq}
    out["message"] = row.as_dict()
    out["tokens"] = row.tokens
    _optional(out, "provider_tokens", row.provider_tokens)
    out["unit"] = row.unit
    out["unit_index"] = row.unit_index
    out["context_tokens"] = row.context_tokens
    _optional(out, "context_message", row.context_message)
    _optional(out, "truncation", row.truncation)
    return out


# compaction records <-> CompactionEvent


def event_row(session: Session, position: int, record: Mapping[str, Any]) -> CompactionEvent:
    summarized = record.get("summarized_seqs")
    first, last = (None, None)
    if isinstance(summarized, list) and len(summarized) == 2:
        first, last = _int(summarized[0]), _int(summarized[1])
    replayed = record.get("replayed_seqs")
    row = CompactionEvent(
        session=session,
        position=position,
        created_at=parse_ts(record),
        kind=EVENT_KINDS[record["type"]],
        number=nonnegative(record.get("compaction_number")),
        summarized_first_seq=first,
        summarized_last_seq=last,
        replayed_seqs=replayed if isinstance(replayed, list) else None,
        duration_s=_duration(record.get("duration_s")),
    )
    for key in _EVENT_INT_KEYS:
        number = _int(record.get(key))
        setattr(row, key, number if key == "through_seq" or number is None or number >= 0 else None)
    for key in _EVENT_STR_KEYS:
        setattr(row, key, _str(record.get(key)))
    if row.trigger not in CompactionEvent.Trigger.values:
        row.trigger = ""
    row.model = row.model[:100]
    _keep_differences(row, record, _event_columns(row))
    return row


def _duration(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _event_columns(row: CompactionEvent) -> Record:
    out: Record = {"type": _EVENT_TYPES[row.kind], "ts": _ts(row.created_at)}
    if row.kind == CompactionEvent.Kind.OK:
        out["status"] = "ok"
    _optional(out, "compaction_number", row.number)
    if row.summarized_first_seq is not None and row.summarized_last_seq is not None:
        out["summarized_seqs"] = [row.summarized_first_seq, row.summarized_last_seq]
    _optional(out, "replayed_seqs", row.replayed_seqs)
    _optional(out, "duration_s", row.duration_s)
    for key in (*_EVENT_INT_KEYS, *_EVENT_STR_KEYS):
        _optional(out, key, getattr(row, key))
    return out


# system_prompt, reset and newer record types <-> ContextChange


def change_row(session: Session, position: int, record: Mapping[str, Any]) -> ContextChange:
    kind = record.get("type")
    if not isinstance(kind, str) or not 0 < len(kind) <= 64:
        raise RecordError(f"a record needs a 'type' of 1 to 64 characters, got {kind!r}")
    row = ContextChange(
        session=session,
        position=position,
        created_at=parse_ts(record),
        kind=_str(kind),
        system_prompt=_str(record.get("system_prompt")),
        through_seq=_int(record.get("through_seq")),
        tokens_before=_int(record.get("tokens_before")),
        tokens_after=_int(record.get("tokens_after")),
    )
    _keep_differences(row, record, _change_columns(row))
    return row


def _change_columns(row: ContextChange) -> Record:
    out: Record = {"type": row.kind, "ts": _ts(row.created_at)}
    _optional(out, "system_prompt", row.system_prompt)
    _optional(out, "through_seq", row.through_seq)
    _optional(out, "tokens_before", row.tokens_before)
    _optional(out, "tokens_after", row.tokens_after)
    return out


def record_of(row: Message | CompactionEvent | ContextChange) -> Record:
    """The record ``row`` was made from."""
    if isinstance(row, Message):
        return _restore(row, _message_columns(row))
    if isinstance(row, CompactionEvent):
        return _restore(row, _event_columns(row))
    return _restore(row, _change_columns(row))
