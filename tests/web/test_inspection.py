"""The inspection pages: session detail (gauge, chart, units), what the model sees,
compaction events, the memory trace and the exports."""

from __future__ import annotations

import io
import json
import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from pytest_django import DjangoAssertNumQueries

from memory import CompactionMemory
from memory.log import records
from motus_web.dashboard.charts import MAX_POINTS
from motus_web.dashboard.views import COMPACTIONS_LISTED
from motus_web.sessions.importers import ImportOptions, import_stream
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import CompactionEvent, Session
from tests.test_log_store_contract import message, meta

from .helpers import logged_in, make_session

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


@pytest.fixture
def compacted(owner: User) -> Session:
    return make_session(owner, turns=8, filler=60, threshold=600, title="Rebook Mia")


def first_compaction(session: Session) -> CompactionEvent:
    event = session.compaction_events.filter(kind="ok").order_by("position").first()
    assert event is not None
    return event


def add_failed_compaction(session: Session, error: str = "provider said 503") -> CompactionEvent:
    last = session.messages.order_by("-seq").first()
    assert last is not None
    DatabaseLogStore().append(
        session.public_id,
        {
            "type": records.COMPACTION_FAILED,
            "ts": records.now_iso(),
            "trigger": "auto",
            "through_seq": last.seq,
            "error": error,
            "tokens_before": last.context_tokens,
            "model": "gpt-4o-mini",
            "duration_s": 1.5,
        },
    )
    return session.compaction_events.get(kind="failed")


def owner_of(session: Session) -> User:
    assert session.owner is not None
    return session.owner


def owner_client(session: Session) -> Client:
    return logged_in(owner_of(session))


def url(name: str, *args: Any) -> str:
    return reverse(f"dashboard:{name}", args=args)


def streamed(response: Any) -> bytes:
    return b"".join(response.streaming_content)


def restored(session_id: str) -> CompactionMemory:
    return CompactionMemory.restore_from_log(session_id, log_store=DatabaseLogStore())


# -- session detail ---------------------------------------------------------------


def test_the_gauge_shows_tokens_threshold_and_window_to_scale(compacted: Session) -> None:
    html = owner_client(compacted).get(url("session_detail", compacted.public_id)).content
    text = html.decode()

    assert f"{compacted.context_tokens:,} tokens" in text
    assert "Compacts at</dt><dd>600</dd>" in text
    assert "Model window</dt><dd>128,000</dd>" in text
    used = re.search(r'class="gauge-used" x="0" y="0" width="([\d.]+)"', text)
    assert used is not None
    assert float(used.group(1)) == pytest.approx(100 * compacted.context_tokens / 128_000, abs=0.01)


def test_the_chart_covers_the_whole_session_and_links_every_compaction(
    compacted: Session,
) -> None:
    failed = add_failed_compaction(compacted)
    html = owner_client(compacted).get(url("session_detail", compacted.public_id)).content.decode()

    chart = html[
        html.index('<svg class="token-chart"') : html.index("</svg>", html.index("token-chart"))
    ]
    points = re.search(r'points="([^"]*)"', chart)
    assert points is not None
    drops = compacted.compaction_events.filter(kind="ok").count()
    assert len(points.group(1).split()) == compacted.message_count + 2 * drops
    for event in compacted.compaction_events.filter(kind="ok"):
        link = url("compaction_detail", compacted.public_id, event.position)
        assert f'href="{link}" class="marker marker-ok"' in chart
    link = url("compaction_detail", compacted.public_id, failed.position)
    assert f'href="{link}" class="marker marker-failed"' in chart
    assert 'class="threshold"' in chart


def test_a_long_sessions_chart_stays_under_the_point_limit(owner: User) -> None:
    log = [meta("long")] + [message(seq, "user", "x") for seq in range(3000)]
    DatabaseLogStore().extend("long", log)
    Session.objects.filter(public_id="long").update(owner=owner)

    html = logged_in(owner).get(url("session_detail", "long")).content.decode()

    points = re.search(r'class="context-line" points="([^"]*)"', html.replace("\n", " "))
    points = points or re.search(r'points="([^"]*)"', html)
    assert points is not None
    assert 0 < len(points.group(1).split()) <= MAX_POINTS


def test_the_timeline_groups_units_and_marks_folded_messages(compacted: Session) -> None:
    event = first_compaction(compacted)
    html = owner_client(compacted).get(url("session_detail", compacted.public_id)).content.decode()

    assert 'title="A: user message">A0</span>' in html
    assert 'title="B: tool calls and results">B1</span>' in html
    folded = event.summarized_first_seq
    item = html[html.index(f'id="m{folded}"') :]
    item = item[: item.index("</header>")]
    assert "folded" in item
    assert url("compaction_detail", compacted.public_id, event.position) in item
    latest = compacted.messages.order_by("-seq").first()
    assert latest is not None
    last_item = html[html.index(f'id="m{latest.seq}"') :]
    assert "folded by" not in last_item[: last_item.index("</header>")]


def test_a_call_and_its_result_sit_together(compacted: Session) -> None:
    html = owner_client(compacted).get(url("session_detail", compacted.public_id)).content.decode()

    call_at = html.index('<span class="muted">call_0</span>')
    result_at = html.index('id="m2"')
    assert call_at < result_at < html.index('id="m3"')
    assert html.count('id="m2"') == 1


def test_htmx_gets_the_timeline_only_and_a_history_restore_gets_the_page(
    compacted: Session,
) -> None:
    client = owner_client(compacted)
    detail = url("session_detail", compacted.public_id)

    fragment = client.get(detail, headers=HTMX)
    full = client.get(detail, HTTP_HX_REQUEST="true", HTTP_HX_HISTORY_RESTORE_REQUEST="true")

    assert fragment.content.decode().lstrip().startswith('<section id="timeline">')
    assert "token-chart" not in fragment.content.decode()
    assert b"<html" in full.content
    assert b"token-chart" in full.content
    assert "HX-Request" in fragment["Vary"]
    assert "HX-Request" in full["Vary"]


@pytest.mark.parametrize(
    "name",
    [
        "session_detail",
        "session_context",
        "session_trace",
        "compaction_detail",
        "undo_confirm",
        "fork_confirm",
        "delete_confirm",
        "message_detail",
    ],
)
def test_every_page_takes_the_same_number_of_queries_whatever_the_length(
    owner: User, django_assert_num_queries: DjangoAssertNumQueries, name: str
) -> None:
    short = make_session(owner, turns=6, filler=60, threshold=600)
    long = make_session(owner, turns=24, filler=60, threshold=600)
    client = logged_in(owner)

    def page(session: Session) -> str:
        args: list[object] = [session.public_id]
        if name == "compaction_detail":
            args.append(first_compaction(session).position)
        elif name in ("fork_confirm", "message_detail"):
            args.append(3)
        return url(name, *args)

    with CaptureQueriesContext(connection) as short_queries:
        assert client.get(page(short)).status_code == 200
    assert long.message_count > 3 * short.message_count
    with django_assert_num_queries(len(short_queries.captured_queries)):
        assert client.get(page(long)).status_code == 200


# -- what the model sees now --------------------------------------------------------


def test_the_context_page_is_exactly_what_the_library_restores(compacted: Session) -> None:
    response = owner_client(compacted).get(url("session_context", compacted.public_id))

    assert response.status_code == 200
    expected = restored(compacted.public_id).get_context()
    assert response.context["live"].messages == expected
    html = response.content.decode()
    assert "continuation summary" in html.lower() or "Summary" in html
    assert html.count('class="message part ') == len(expected)


def test_the_context_breakdown_adds_up_to_the_whole(compacted: Session) -> None:
    response = owner_client(compacted).get(url("session_context", compacted.public_id))

    live = response.context["live"]
    bar = response.context["bar"]
    assert sum(segment.tokens for segment in bar) == live.tokens
    assert {segment.kind for segment in bar} >= {"system", "summary", "user", "tool_results"}
    assert sum(segment.width for segment in bar) == pytest.approx(100, abs=0.01)


def test_the_context_panel_comes_alone_for_htmx(compacted: Session) -> None:
    client = owner_client(compacted)
    page = url("session_context", compacted.public_id)

    fragment = client.get(page, headers=HTMX).content.decode()
    full = client.get(page).content.decode()

    assert fragment.lstrip().startswith('<section class="card live-context"')
    assert "<html" in full
    assert 'id="live-context"' in full


# -- compaction events ------------------------------------------------------------


def test_a_compaction_page_shows_before_and_after(compacted: Session) -> None:
    event = first_compaction(compacted)
    response = owner_client(compacted).get(
        url("compaction_detail", compacted.public_id, event.position)
    )

    html = response.content.decode()
    assert response.status_code == 200
    assert f"{event.tokens_before:,} &rarr; {event.tokens_after:,}" in html
    assert "offline summariser" in html
    before = html[html.index('class="card before"') : html.index('class="card after"')]
    after = html[html.index('class="card after"') :]
    assert event.messages_compacted is not None
    assert before.count('class="message-line ') == event.messages_compacted  # a line each
    for seq in event.replayed_seqs or []:
        assert f'id="m{seq}"' in after
    assert "Identifiers:" in html


def test_a_failed_compaction_shows_its_error_and_that_nothing_changed(compacted: Session) -> None:
    failed = add_failed_compaction(compacted, error="provider said <b>503</b>")

    html = (
        owner_client(compacted)
        .get(url("compaction_detail", compacted.public_id, failed.position))
        .content.decode()
    )

    assert "provider said &lt;b&gt;503&lt;/b&gt;" in html
    assert "Nothing changed" in html


def test_lost_identifiers_are_counted_and_a_lost_user_name_is_flagged(owner: User) -> None:
    call = {
        "id": "call_Xy12Ab",
        "type": "function",
        "function": {"name": "rebook", "arguments": '{"flight": "LH-4411"}'},
    }
    log = [
        meta("lossy"),
        message(0, "user", "Rebook Mia Chen on flight LH-4411 to /srv/bookings/mia.json"),
        message(1, "assistant", None, tool_calls=[call]),
        message(2, "tool", "rebooked", tool_call_id="call_Xy12Ab"),
        message(3, "assistant", "Done."),
        {
            "type": records.COMPACTION,
            "ts": records.now_iso(),
            "compaction_number": 1,
            "status": "ok",
            "trigger": "manual",
            "through_seq": 3,
            "summarized_seqs": [0, 3],
            "replayed_seqs": [],
            "messages_compacted": 4,
            "messages_replayed": 0,
            "summary": "Mia Chen asked for a rebooking; it was done.",
            "tokens_before": 50,
            "tokens_after": 20,
            "model": "offline",
        },
    ]
    DatabaseLogStore().extend("lossy", log)
    Session.objects.filter(public_id="lossy").update(owner=owner)
    event = Session.objects.get(public_id="lossy").compaction_events.get()
    client = logged_in(owner)

    page = client.get(url("compaction_detail", "lossy", event.position)).content.decode()
    detail = client.get(url("session_detail", "lossy")).content.decode()

    assert "Identifiers: 1 of 3 kept" in page  # the call's own id is not one of them
    assert "call_Xy12Ab</code>" not in page.split("Before:")[0]
    assert '<li class="kept"><span class="mark">kept</span> <code>Mia Chen</code>' in page
    assert '<li class="lost"><span class="mark">lost</span> <code>LH-4411</code>' in page
    assert "lost 2 user-named identifiers: LH-4411, /srv/bookings/mia.json" in detail


# -- trace and exports ----------------------------------------------------------------


def test_the_trace_lists_and_filters_the_log_in_order(compacted: Session) -> None:
    client = owner_client(compacted)
    trace = url("session_trace", compacted.public_id)

    everything = client.get(trace)
    compactions = client.get(trace, {"kind": "compaction"})

    positions = [entry.position for entry in everything.context["entries"]]
    assert positions == sorted(positions)
    assert positions[0] == 1
    assert everything.context["page"].paginator.count == compacted.record_count - 1
    kinds = {entry.kind for entry in compactions.context["entries"]}
    assert kinds == {"compaction"}


def test_the_traces_pages_keep_the_filter(owner: User) -> None:
    session = make_session(owner, turns=15)  # 60 messages

    html = logged_in(owner).get(url("session_trace", session.public_id), {"kind": "message"})

    assert 'href="?kind=message&page=2"' in html.content.decode()


def test_the_trace_table_comes_alone_for_htmx(compacted: Session) -> None:
    fragment = owner_client(compacted).get(url("session_trace", compacted.public_id), headers=HTMX)

    assert fragment.content.decode().lstrip().startswith('<section id="trace-table">')


def test_the_trace_downloads_as_json_with_every_record(compacted: Session) -> None:
    response = owner_client(compacted).get(url("session_trace_json", compacted.public_id))

    data = json.loads(streamed(response))
    assert "attachment" in response["Content-Disposition"]
    assert len(data) == compacted.record_count - 1
    logged = list(DatabaseLogStore().read(compacted.public_id))[1:]
    assert [{k: v for k, v in d.items() if k != "position"} for d in data] == logged


def test_the_jsonl_export_restores_to_the_same_context(compacted: Session, tmp_path: Any) -> None:
    response = owner_client(compacted).get(url("export_jsonl", compacted.public_id))

    (tmp_path / "copy.jsonl").write_bytes(
        streamed(response).replace(compacted.public_id.encode(), b"copy")
    )
    copy = CompactionMemory.restore_from_log("copy", log_base_path=tmp_path)
    assert copy.get_context() == restored(compacted.public_id).get_context()


def test_the_openai_export_is_the_system_prompt_then_every_message(compacted: Session) -> None:
    response = owner_client(compacted).get(url("export_openai", compacted.public_id))

    data = json.loads(streamed(response))
    assert data[0] == {"role": "system", "content": "You are a booking assistant."}
    assert len(data) == compacted.message_count + 1
    assert data[2]["tool_calls"][0]["id"] == "call_0"


# -- every page answers HEAD and never fails on hostile stored content ---------------------


def test_pages_answer_head_as_they_answer_get(compacted: Session) -> None:
    client = owner_client(compacted)
    for page in (
        url("session_list"),
        url("session_detail", compacted.public_id),
        url("session_context", compacted.public_id),
        url("session_trace", compacted.public_id),
    ):
        assert client.head(page).status_code == 200, page


HOSTILE = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "javascript:alert(1)",
    "\u202etxt.exe",
    "lone \ud800 surrogate",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_content_is_escaped_on_every_page(owner: User, text: str) -> None:
    deep = "[" * 1000 + "]" * 1000
    # Text columns cannot hold a lone surrogate (the database refuses it); JSON ones can.
    column = text.encode("utf-8", "replace").decode()
    call = {"id": column, "type": "function", "function": {"name": column, "arguments": deep}}
    surrogate_args = {
        "id": "c2",
        "type": "function",
        "function": {"name": "f", "arguments": '{"a": "\ud800"}'},
    }
    log = [
        {**meta("hostile"), "title": column},
        message(0, "user", text),
        message(1, "assistant", None, tool_calls=[call, surrogate_args]),
        message(2, "tool", text, tool_call_id=column, name=column),
        message(3, "tool", "ok", tool_call_id="c2"),
        {
            "type": records.COMPACTION,
            "ts": records.now_iso(),
            "compaction_number": 1,
            "status": "ok",
            "trigger": "manual",
            "through_seq": 3,
            "summarized_seqs": [0, 3],
            "replayed_seqs": [],
            "messages_compacted": 4,
            "messages_replayed": 0,
            "summary": column,
            "tokens_before": 50,
            "tokens_after": 20,
            "model": column,
        },
    ]
    DatabaseLogStore().extend("hostile", log)
    Session.objects.filter(public_id="hostile").update(owner=owner)
    event = Session.objects.get(public_id="hostile").compaction_events.get()
    client = logged_in(owner)

    for page in (
        url("session_list"),
        url("session_detail", "hostile"),
        url("session_context", "hostile"),
        url("compaction_detail", "hostile", event.position),
        url("session_trace", "hostile"),
        url("message_detail", "hostile", 1),
    ):
        response = client.get(page)
        assert response.status_code == 200, page
        html = response.content.decode()
        assert "<script>alert" not in html, page
        assert "<img src=x" not in html, page
        assert 'href="javascript:' not in html, page
        # A right-to-left override cannot reorder the page: it is written out.
        assert "\u202e" not in html, page
        if text.startswith("\u202e"):
            assert "⟨U+202E⟩txt.exe" in html, page


def test_an_offline_summary_right_after_a_failure_is_named_the_fallback(owner: User) -> None:
    failed = {
        "type": records.COMPACTION_FAILED,
        "ts": records.now_iso(),
        "trigger": "auto",
        "through_seq": 1,
        "error": "timed out",
        "tokens_before": 50,
    }
    compaction = {
        "type": records.COMPACTION,
        "ts": records.now_iso(),
        "compaction_number": 1,
        "status": "ok",
        "trigger": "auto",
        "through_seq": 1,
        "summarized_seqs": [0, 0],
        "replayed_seqs": [1],
        "messages_compacted": 1,
        "messages_replayed": 1,
        "summary": "A question.",
        "tokens_before": 50,
        "tokens_after": 30,
        "model": "offline",
    }
    log = [
        meta("fell"),
        message(0, "user", "Q?"),
        message(1, "assistant", "A."),
        failed,
        compaction,
    ]
    DatabaseLogStore().extend("fell", log)
    Session.objects.filter(public_id="fell").update(owner=owner)
    event = Session.objects.get(public_id="fell").compaction_events.get(kind="ok")

    html = logged_in(owner).get(url("compaction_detail", "fell", event.position)).content.decode()

    assert "offline fallback</a> after a failed attempt" in html
    assert "unit C1" in html


def test_a_long_context_lists_its_latest_messages_and_counts_them_all(owner: User) -> None:
    log = [meta("wide"), *(message(seq, "user", f"note {seq}") for seq in range(260))]
    for seq, record in enumerate(log[1:]):
        record.update(unit="A", unit_index=seq)
    DatabaseLogStore().extend("wide", log)
    Session.objects.filter(public_id="wide").update(owner=owner)

    response = logged_in(owner).get(url("session_context", "wide"))

    live = response.context["live"]
    assert len(live.parts) == 261
    assert live.hidden == 60
    html = response.content.decode()
    assert "60 earlier messages of the context are counted above" in html
    assert "note 259" in html
    assert "note 10<" not in html


def test_a_session_with_many_compactions_lists_the_latest_and_links_to_all(owner: User) -> None:
    session = make_session(owner, turns=60, filler=60, threshold=500)
    compactions = list(session.compaction_events.order_by("position"))
    assert len(compactions) > COMPACTIONS_LISTED

    response = logged_in(owner).get(url("session_detail", session.public_id))

    listed = [event for event, _ in response.context["compactions"]]
    assert listed == compactions[-COMPACTIONS_LISTED:]
    html = response.content.decode()
    assert f"The latest {COMPACTIONS_LISTED} of {len(compactions)} compaction events" in html
    assert url("session_trace", session.public_id) + "?kind=compaction" in html
    # The chart still marks every one of them.
    assert len(response.context["chart"].markers) == len(compactions)


def test_a_message_the_memory_found_wrong_shows_what_was_wrong(owner: User) -> None:
    transcript = [
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "call_9", "content": "a result nobody asked for"},
        {"role": "assistant", "content": "hello"},
    ]
    report = import_stream(
        io.BytesIO(json.dumps(transcript).encode()), "odd.json", ImportOptions(owner=owner)
    )
    [session] = Session.objects.filter(public_id__in=report.imported)

    html = logged_in(owner).get(url("session_detail", session.public_id)).content.decode()

    orphan = session.messages.get(seq=1)
    assert orphan.anomaly
    assert 'class="badge bad" title="' in html
    assert f'<p class="anomaly">{orphan.anomaly[:1].upper()}' in html


def test_identifiers_the_user_named_that_a_ledger_let_go_are_flagged(owner: User) -> None:
    """The second compaction folds no user message, but its ledger gave way to
    the user's booking reference: the flag names it; the assistant's is not."""

    def compaction(number: int, through: int, summary: str, **fields: Any) -> dict[str, Any]:
        return {
            "type": records.COMPACTION,
            "ts": records.now_iso(),
            "compaction_number": number,
            "status": "ok",
            "trigger": "auto",
            "through_seq": through,
            "summarized_seqs": [through - 1, through],
            "replayed_seqs": [],
            "messages_compacted": 2,
            "messages_replayed": 0,
            "summary": summary,
            "tokens_before": 50,
            "tokens_after": 20,
            "model": "offline",
            **fields,
        }

    booking = {"kind": "id", "value": "ZX81QP", "label": "booking reference", "seq": 0}
    theirs = {"kind": "id", "value": "HAT081", "seq": 1, "role": "assistant", "rank": 1}
    log = [
        meta("letgo"),
        message(0, "user", "My booking reference is ZX81QP."),
        message(1, "assistant", "Noted, and your hold is HAT081."),
        compaction(1, 1, "Booking ZX81QP noted; hold HAT081.", ledger=[booking]),
        message(2, "user", "Find me a hotel."),
        message(3, "assistant", "Here are three hotels."),
        compaction(
            2,
            3,
            "A booking was noted; hotels were listed.",
            ledger_given_way=[{**booking, "role": "user", "rank": 3}, theirs],
        ),
    ]
    DatabaseLogStore().extend("letgo", log)
    Session.objects.filter(public_id="letgo").update(owner=owner)

    client = logged_in(owner)
    detail = client.get(url("session_detail", "letgo")).content.decode()
    second = Session.objects.get(public_id="letgo").compaction_events.get(number=2)
    page = client.get(url("compaction_detail", "letgo", second.position)).content.decode()

    assert "lost 1 user-named identifier: ZX81QP" in detail
    assert "<code>ZX81QP</code>" in page
    assert "named by the user" in page.split("<code>ZX81QP</code>")[1].split("</li>")[0]
    assert "HAT081" not in detail.split("user-named identifier")[1][:200]
