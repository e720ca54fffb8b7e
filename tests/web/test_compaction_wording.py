"""Warnings name each figure once, grouped, wherever a page shows them; the session
page numbers no warning or failure as if it were a compaction."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User

from memory.log import records
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import CompactionEvent, Session
from motus_web.ui.wording import grouped, warning_text

from .helpers import logged_in, make_session
from .test_inspection import add_failed_compaction, url

pytestmark = pytest.mark.django_db

LIBRARY_REASON = "the summary and the kept messages alone need about 3501 tokens"


def add_warning(session: Session, reason: str = LIBRARY_REASON) -> CompactionEvent:
    last = session.messages.order_by("-seq").first()
    assert last is not None
    DatabaseLogStore().append(
        session.public_id,
        {
            "type": records.COMPACTION_WARNING,
            "ts": records.now_iso(),
            "through_seq": last.seq,
            "reason": reason,
            "floor_tokens": 3501,
            "threshold": 3000,
        },
    )
    return session.compaction_events.get(kind="warning")


@pytest.mark.parametrize(
    ("reason", "floor", "threshold", "shown"),
    [
        (
            LIBRARY_REASON,
            3501,
            3000,
            "The summary and the kept messages alone need about 3,501 tokens, "
            "against a threshold of 3,000.",
        ),
        (
            "still too big",
            12000,
            None,
            "Still too big; the part that cannot be compacted takes 12,000 tokens.",
        ),
        ("over: 3501 of 3000 tokens.", 3501, 3000, "Over: 3,501 of 3,000 tokens."),
        ("", None, None, "Still over the threshold."),
    ],
)
def test_a_warning_names_each_figure_once(
    reason: str, floor: int | None, threshold: int | None, shown: str
) -> None:
    assert warning_text(reason, floor, threshold) == shown


def test_grouping_leaves_ids_decimals_and_short_numbers_alone() -> None:
    assert grouped("call_12345 took 1.5000 s for 999 of 1234567 tokens") == (
        "call_12345 took 1.5000 s for 999 of 1,234,567 tokens"
    )


def test_every_page_shows_the_warning_once_and_numbers_only_compactions(owner: User) -> None:
    session = make_session(owner, turns=8, filler=60, threshold=600, title="Warned")
    add_failed_compaction(session)
    warning = add_warning(session)
    client = logged_in(owner)
    pages = [
        client.get(url("session_detail", session.public_id)).content.decode(),
        client.get(url("compaction_detail", session.public_id, warning.position)).content.decode(),
        client.get(url("session_trace", session.public_id)).content.decode(),
    ]

    for html in pages:
        assert "3,501 tokens" in html
        assert "3501" not in html
        assert not re.search(r"3,501 tokens.{0,80}3,501 tokens", html, re.S)
    compaction_list = pages[0].split('class="compaction-list"')[1].split("</section>")[0]
    assert compaction_list.startswith(">")
    assert "<ol" not in pages[0].split('class="compaction-list"')[0][-10:]  # a <ul>: no numbers
    assert "Still over threshold" in compaction_list
    assert "Compaction 1" in compaction_list
