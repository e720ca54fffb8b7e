"""Two people send the same confirmation at the same instant: the race, run for real.

``race(kind)`` opens a confirmation as its owner, then sends its form from two
threads at once, each with its own client and database connection, and
returns the two status codes. The tests run it in process on PostgreSQL; on
SQLite they run ``main`` in a fresh interpreter over a file database (the
test database is in memory, where SQLite cannot make a writer wait).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

CONFIRMATIONS = {
    "undo": "undo_confirm",
    "fork": "fork_confirm",
    "delete": "delete_confirm",
    "rewind": "rewind_confirm",
    "undo-rewind": "undo_rewind_confirm",
}
# Forms that sit on a page of their own rather than on a confirmation: page, action, fields.
ON_PAGE = {
    "correct": ("compaction_detail", "correct_summary", {"summary": "Corrected by a racer."}),
    "compact": ("session_detail", "compact_now", {"instructions": "keep B3"}),
}


def race(kind: str) -> tuple[list[int], str]:
    """The two status codes, sorted, and the raced session's public id."""
    from django.contrib.auth.models import User
    from django.db import connections
    from django.test import Client
    from django.urls import reverse

    from .helpers import confirmation_form, logged_in, make_session

    owner = User.objects.create_user(f"racer-{kind}", password="racer-pass-1234")
    session = make_session(owner, turns=6, filler=80, threshold=600)
    if kind in ON_PAGE:
        page_name, action_name, typed = ON_PAGE[kind]
        compaction = session.compaction_events.filter(kind="ok").order_by("-position")[0]
        args = [session.public_id, *([compaction.position] if kind == "correct" else [])]
        page = logged_in(owner).get(reverse(f"dashboard:{page_name}", args=args))
        wanted = reverse(f"dashboard:{action_name}", args=args)
        action, form = confirmation_form(page.content.decode(), wanted)
        form.update(typed)
    else:
        if kind == "undo-rewind":
            from memory import LogPoint
            from motus_web.sessions import context_edits

            context_edits.rewind(
                session, LogPoint("after_message", 7), "", as_of=session.record_count
            )
        number = {"fork": [3], "rewind": [3], "undo-rewind": [1]}.get(kind, [])
        args = [session.public_id, *number]
        page = logged_in(owner).get(reverse(f"dashboard:{CONFIRMATIONS[kind]}", args=args))
        action, form = confirmation_form(page.content.decode())
    start = threading.Barrier(2)
    statuses: list[int] = []

    def send() -> None:
        client = Client()
        client.force_login(owner)
        try:
            start.wait()
            statuses.append(client.post(action, form).status_code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(statuses), session.public_id


def outcome(kind: str, public_id: str) -> dict[str, int]:
    """What the two submissions left: reverts appended, forks made, sessions
    left, rewinds, summary corrections and manual compactions appended."""
    from motus_web.sessions.models import CompactionEvent, ContextChange, Session

    changes = ContextChange.objects.filter(session__public_id=public_id)
    return {
        "reverts": CompactionEvent.objects.filter(
            session__public_id=public_id, kind=CompactionEvent.Kind.REVERT
        ).count(),
        "forks": Session.objects.filter(parent__public_id=public_id).count(),
        "sessions": Session.objects.filter(public_id=public_id).count(),
        "rewinds": changes.filter(kind="rewind").count(),
        "corrections": changes.filter(kind="summary_correction").count(),
        "manual": CompactionEvent.objects.filter(
            session__public_id=public_id, trigger="manual"
        ).count(),
    }


def main() -> None:
    """``python -m tests.web.race KIND`` with ``DATABASE_URL`` naming a new SQLite file."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "motus_web.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    settings.ALLOWED_HOSTS = ["testserver"]
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    call_command("migrate", verbosity=0)
    kind = sys.argv[1]
    statuses, public_id = race(kind)
    print(json.dumps({"statuses": statuses, **outcome(kind, public_id)}))


if __name__ == "__main__":
    main()
