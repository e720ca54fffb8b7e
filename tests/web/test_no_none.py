"""No page shows None or #None, whatever a log leaves out."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import CompactionEvent
from tests.test_log_store_contract import TS, message, meta

from .helpers import logged_in

pytestmark = pytest.mark.django_db

# "None" as a page shows it: a word on its own, not inside "Nonesuch" or an id.
NONE = re.compile(r"(?<![\w-])#?None(?![\w-])")


def test_pages_of_a_log_without_numbers_seqs_or_reasons_show_no_none(owner: User) -> None:
    log = [
        meta("sparse"),
        message(0, "user", "Hello there, book HAT123."),
        message(1, "assistant", "Booked."),
        # A compaction without its number or range, and a revert that names nothing.
        {"type": "compaction", "ts": TS, "summary": "Booked HAT123.", "tokens_after": 40},
        {"type": "compaction_revert", "ts": TS},
        message(2, "user", "Thanks."),
        message(3, "assistant", "You are welcome."),
    ]
    DatabaseLogStore(owner=owner).extend("sparse", log)
    client = logged_in(owner)
    events = CompactionEvent.objects.filter(session__public_id="sparse").order_by("position")
    pages = [
        reverse("dashboard:session_detail", args=["sparse"]),
        reverse("dashboard:session_trace", args=["sparse"]),
        reverse("dashboard:session_context", args=["sparse"]),
        reverse("dashboard:step_detail", args=["sparse", 3]),
        reverse("dashboard:message_detail", args=["sparse", 1]),
        *(reverse("dashboard:compaction_detail", args=["sparse", e.position]) for e in events),
        *(reverse("dashboard:restore_confirm", args=["sparse", e.position]) for e in events),
    ]

    assert len(pages) == 9
    for page in pages:
        response = client.get(page)
        assert response.status_code == 200, page
        text = re.sub(r"<[^>]+>", " ", response.content.decode())
        found = NONE.search(text)
        assert found is None, (page, text[max(0, found.start() - 120) : found.end() + 40])
