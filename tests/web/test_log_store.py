"""What ``DatabaseLogStore`` adds to the contract: exact rows, totals, atomic appends."""

from __future__ import annotations

import importlib
import uuid
from typing import Any

import pytest
from django.apps import apps
from django.db import DataError
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.errors import LogCorruptError, LogError
from motus_web.sessions.fields import ESC
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import CompactionEvent, ContextChange, Message, Session
from tests.test_log_store_contract import TS, a_log, message, meta

pytestmark = pytest.mark.django_db


def stored(log: list[dict[str, Any]], session_id: str = "s1") -> Session:
    DatabaseLogStore().extend(session_id, log)
    return Session.objects.get(public_id=session_id)


def test_it_puts_each_record_in_the_columns_meant_for_it() -> None:
    session = stored(a_log("s1"))

    first = session.messages.get(seq=0)
    assert (first.role, first.content, first.tokens, first.unit) == (
        "user",
        "Where is booking B1?",
        7,
        "A",
    )
    assert session.messages.get(seq=1).extra == {"reasoning_content": "looked it up"}
    compaction = session.compaction_events.get(kind=CompactionEvent.Kind.OK)
    assert (compaction.number, compaction.through_seq) == (1, 1)
    assert (compaction.summarized_first_seq, compaction.summarized_last_seq) == (0, 1)
    assert compaction.record_extra == {"chunks": 1}
    assert list(session.compaction_events.values_list("kind", flat=True)) == [
        "ok",
        "failed",
        "warning",
        "revert",
    ]
    assert list(session.context_changes.values_list("kind", flat=True)) == [
        ContextChange.Kind.SYSTEM_PROMPT,
        ContextChange.Kind.RESET,
    ]


def test_it_keeps_the_totals_with_the_rows() -> None:
    session = stored(a_log("s1"))

    assert session.message_count == 3
    assert session.total_tokens == 7 + 8 + 9
    assert session.context_tokens == 40  # the last message's; the compaction came before it
    assert session.compaction_count == 1
    assert session.record_count == 10


def test_the_context_tokens_follow_a_compaction() -> None:
    session = stored(a_log("s1")[:4])

    assert session.context_tokens == 25


def test_a_record_that_states_the_context_size_sets_it() -> None:
    session = stored(
        [*a_log("s1"), {"type": "reset", "ts": TS, "through_seq": 2, "context_tokens": 12}]
    )

    assert session.context_tokens == 12


def test_null_content_stays_distinct_from_empty_text() -> None:
    log = [meta("s1"), message(0, "user", ""), message(1, "assistant", None, tool_calls=None)]
    DatabaseLogStore().append("s1", log[0])
    for record in log[1:]:
        DatabaseLogStore().append("s1", record)

    contents = list(Message.objects.order_by("seq").values_list("content", flat=True))
    assert contents == ["", None]
    assert list(DatabaseLogStore().read("s1")) == log


def test_timestamps_in_another_format_come_back_unchanged() -> None:
    log = [
        {**meta("s1"), "ts": "2025-11-02T12:00:00+02:00"},
        {**message(0, "user", "hi"), "ts": "2025-11-02T10:00:01"},
    ]

    session = stored(log)

    assert list(DatabaseLogStore().read("s1")) == log
    assert session.messages.get().created_at.isoformat() == "2025-11-02T10:00:01+00:00"


def test_a_session_starts_with_its_session_meta() -> None:
    with pytest.raises(LogCorruptError, match="must be session_meta"):
        DatabaseLogStore().append("s1", message(0, "user", "hi"))

    assert not Session.objects.exists()


def test_a_refused_record_leaves_nothing_of_its_batch() -> None:
    DatabaseLogStore().extend("s1", [meta("s1"), message(0, "user", "hi")])

    with pytest.raises(LogCorruptError, match="seq 0 does not follow seq 1") as caught:
        DatabaseLogStore().extend(
            "s1", [message(1, "assistant", "yes"), message(0, "user", "again")]
        )

    assert caught.value.line == 2
    session = Session.objects.get()
    assert (session.message_count, session.total_tokens, session.record_count) == (1, 7, 2)
    assert session.messages.count() == 1


def test_a_message_without_its_token_count_is_refused() -> None:
    DatabaseLogStore().append("s1", meta("s1"))
    record = message(0, "user", "hi")
    del record["tokens"]

    with pytest.raises(LogCorruptError, match="'tokens'"):
        DatabaseLogStore().append("s1", record)


def test_a_second_session_meta_is_refused() -> None:
    DatabaseLogStore().append("s1", meta("s1"))

    with pytest.raises(LogCorruptError, match="already has"):
        DatabaseLogStore().append("s1", meta("s1"))


def test_a_fork_points_at_its_parent() -> None:
    stored([meta("parent"), message(0, "user", "hi")], "parent")

    child = stored([{**meta("child"), "parent_session_id": "parent", "parent_seq": 0}], "child")

    assert child.parent is not None
    assert (child.parent.public_id, child.parent_seq) == ("parent", 0)
    assert next(DatabaseLogStore().read("child"))["parent_session_id"] == "parent"


def test_a_parent_can_go_and_its_forks_keep_their_logs_whole() -> None:
    parent = stored([meta("parent"), message(0, "user", "hi")], "parent")
    log = [{**meta("child"), "parent_session_id": "parent", "parent_seq": 0}]
    child = stored(log, "child")

    parent.delete()  # the dashboard never deletes; an admin or a cleanup job may

    child.refresh_from_db()
    assert child.parent is None
    assert list(DatabaseLogStore().read("child")) == log


def test_the_migration_keeps_the_parent_ids_the_link_used_to_give() -> None:
    migration = importlib.import_module(
        "motus_web.sessions.migrations.0003_session_parent_set_null"
    )
    stored([meta("parent")], "parent")
    child = stored([{**meta("child"), "parent_session_id": "parent"}], "child")
    # A row written before 0003: the id came from the link, not from record_extra.
    Session.objects.filter(pk=child.pk).update(record_extra={})

    migration.keep_parent_ids_in_the_record(apps, None)

    assert next(DatabaseLogStore().read("child"))["parent_session_id"] == "parent"


# -- the same on SQLite and PostgreSQL ------------------------------------------

NUL_TEXT = "before\x00after"


def test_nul_characters_anywhere_in_a_log_come_back_exactly() -> None:
    tool = message(1, "tool", None, tool_call_id="c\x001", x_nul={"k\x00": NUL_TEXT})
    tool["message"]["content"] = [{"type": "text", "text": NUL_TEXT}]
    log = [
        {**meta("s1"), "title": "A\x00title", "system_prompt": NUL_TEXT, "x\x00key": "v"},
        message(0, "user", NUL_TEXT, name="n\x00me"),
        tool,
        {"type": "compaction", "ts": TS, "through_seq": 1, "summary": NUL_TEXT, "model": "m\x00"},
        {"type": "system_prompt", "ts": TS, "system_prompt": NUL_TEXT, "through_seq": 1},
        {"type": "new\x00kind", "ts": TS, "error": NUL_TEXT},
    ]

    session = stored(log)

    assert list(DatabaseLogStore().read("s1")) == log
    assert session.messages.get(seq=0).content == NUL_TEXT  # the column, for the pages
    assert session.title == "A\ufffdtitle"  # text columns show U+FFFD; the log keeps NUL


def test_text_that_looks_escaped_comes_back_as_it_was() -> None:
    tricky = [ESC, ESC + "0", ESC + "e", "\x00" + ESC + "0\x00", "\\udbff\\udfff"]
    log = [meta("s1"), *(message(seq, "user", text) for seq, text in enumerate(tricky))]

    stored(log)

    assert list(DatabaseLogStore().read("s1")) == log


def test_token_counts_past_32_bits_are_stored_as_they_are() -> None:
    big = {**message(0, "user", "hi"), "tokens": 10**15, "context_tokens": 2**63 - 1}
    compaction = {"type": "compaction", "ts": TS, "through_seq": 0, "tokens_before": 10**15}
    log = [meta("s1"), big, compaction]

    session = stored(log)

    assert list(DatabaseLogStore().read("s1")) == log
    assert (session.total_tokens, session.context_tokens) == (10**15, 2**63 - 1)


def test_an_integer_past_64_bits_where_the_store_needs_one_is_refused_clearly() -> None:
    log = [meta("s1"), message(0, "user", "hi"), {**message(1, "user", "hi"), "tokens": 10**20}]

    with pytest.raises(LogCorruptError, match=r"'tokens' is 1(0)+, past the largest") as refused:
        DatabaseLogStore().extend("s1", log)

    assert refused.value.line == 3
    assert not Session.objects.exists()


def test_message_tokens_that_would_add_up_past_64_bits_are_refused() -> None:
    log = [meta("s1"), *({**message(seq, "user", "hi"), "tokens": 2**62} for seq in range(2))]

    with pytest.raises(LogCorruptError, match="would add up past"):
        DatabaseLogStore().extend("s1", log)


def test_an_integer_past_64_bits_the_store_does_not_need_is_kept_in_the_log() -> None:
    event = {"type": "compaction", "ts": TS, "through_seq": 10**30, "tokens_after": 10**30}
    log = [meta("s1"), {**message(0, "user", "hi"), "provider_tokens": 10**30}, event]

    session = stored(log)

    assert list(DatabaseLogStore().read("s1")) == log
    assert session.compaction_events.get().tokens_after is None


def test_a_database_failure_is_reported_without_the_drivers_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise DataError('INSERT INTO "dashboard_message" VALUES (...): value out of range')

    monkeypatch.setattr(Message.objects, "bulk_create", refuse)

    with pytest.raises(LogError) as failed:
        DatabaseLogStore().extend("s1", [meta("s1"), message(0, "user", "hi")])

    assert str(failed.value) == (
        "the database could not store session 's1' (the server log has the details)"
    )
    assert not Session.objects.exists()


# Any text that is UTF-8 (no lone surrogates), NUL and the escape character made
# likely; integers of any size; floats in a range that jsonb gives back as the same float.
_text = st.text(st.characters(codec="utf-8") | st.sampled_from(["\x00", ESC]), max_size=12)
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**200), 2**200)
    | st.floats(-1e6, 1e6, allow_nan=False)
    | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_fields = st.dictionaries(_text.map(lambda key: f"x_{key}"), _json, max_size=3)


@settings(max_examples=40, deadline=None)
@given(
    meta_fields=_fields,
    record_fields=_fields,
    message_fields=_fields,
    content=st.none() | _text | st.just([{"type": "text", "text": "part"}]),
    tool_call_id=st.none() | _text,
)
def test_any_json_a_record_carries_comes_back_exactly(
    meta_fields: dict[str, Any],
    record_fields: dict[str, Any],
    message_fields: dict[str, Any],
    content: Any,
    tool_call_id: str | None,
) -> None:
    session_id = uuid.uuid4().hex
    first = message(0, "tool", content, tool_call_id=tool_call_id, **message_fields)
    log = [{**meta(session_id), **meta_fields}, {**first, **record_fields}]

    DatabaseLogStore().extend(session_id, log)

    assert list(DatabaseLogStore().read(session_id)) == log


def test_committed_records_are_announced_once_the_transaction_commits(
    django_capture_on_commit_callbacks: Any,
) -> None:
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    from motus_web.sessions.signals import records_committed, session_group

    heard: list[tuple[str, list[str]]] = []

    def receiver(sender: object, session_id: str, records: list[dict[str, Any]], **_: Any) -> None:
        heard.append((session_id, [r["type"] for r in records]))

    layer = get_channel_layer()
    assert layer is not None
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(session_group("s1"), channel)
    records_committed.connect(receiver)
    try:
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            DatabaseLogStore().extend("s1", a_log("s1")[:3])
            assert heard == []  # nothing is announced before the commit
        assert len(callbacks) == 1
    finally:
        records_committed.disconnect(receiver)
        async_to_sync(layer.group_discard)(session_group("s1"), channel)
    assert heard == [("s1", ["session_meta", "message", "message"])]
    notice = async_to_sync(layer.receive)(channel)
    assert (notice["type"], notice["session_id"], notice["count"]) == ("log.records", "s1", 3)


def test_a_refused_batch_is_never_announced(django_capture_on_commit_callbacks: Any) -> None:
    with django_capture_on_commit_callbacks() as callbacks, pytest.raises(LogCorruptError):
        DatabaseLogStore().extend("s1", [meta("s1"), {"type": "message", "seq": 0}])
    assert callbacks == []


def test_a_long_session_id_still_gets_a_valid_group_name() -> None:
    from motus_web.sessions.signals import session_group

    assert len(session_group("x" * 128)) < 100
    assert session_group("x" * 128) != session_group("x" * 127 + "y")
