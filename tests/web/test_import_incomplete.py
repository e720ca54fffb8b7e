"""A long session written in several commits: incomplete, shown nowhere, until its end.

A crash (here: the database failing mid-import) leaves the committed part
``incomplete``; importing the file again writes the session anew, once. A
session another import is still writing is left to it.
"""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import OperationalError
from django.utils import timezone

from motus_web.sessions.importers import ImportOptions, Progress, commits, import_stream, ingest
from motus_web.sessions.models import Session

LENGTH = 300
DATA = json.dumps(
    {"messages": [{"role": "user", "content": f"turn {n}: booking B{n}"} for n in range(LENGTH)]}
).encode()


@pytest.fixture(autouse=True)
def a_commit_per_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ingest, "BATCH", 50)
    monkeypatch.setattr(commits, "COMMIT_MESSAGES", 50)


def crash_mid_session(owner: User) -> Session:
    """Import ``DATA`` until the database fails after 200 messages; the half-written session."""

    def checkpoint(progress: Progress) -> None:
        if progress.messages_read >= 200:
            raise OperationalError("disk I/O error")

    options = ImportOptions(owner=owner, checkpoint=checkpoint)
    with pytest.raises(OperationalError):
        import_stream(io.BytesIO(DATA), "long.json", options)
    return Session.objects.get(owner=owner)


@pytest.mark.django_db(transaction=True)
def test_a_crash_mid_session_leaves_it_incomplete_and_import_again_writes_it_anew(
    owner: User, staff: User
) -> None:
    half = crash_mid_session(owner)

    assert half.incomplete
    assert 0 < half.message_count == half.messages.count() < LENGTH
    assert not Session.objects.visible_to(owner).exists()
    assert not Session.objects.visible_to(staff).exists()
    assert not half.is_visible_to(owner)

    report = import_stream(io.BytesIO(DATA), "long.json", ImportOptions(owner=owner))

    assert report.problems == []
    [public_id] = report.imported
    [session] = Session.objects.filter(owner=owner)
    assert session.public_id == public_id != half.public_id
    assert not session.incomplete
    assert session.message_count == session.messages.count() == LENGTH
    assert list(session.messages.order_by("seq").values_list("seq", flat=True)) == list(
        range(LENGTH)
    )
    assert Session.objects.visible_to(owner).get() == session
    # A third import finds it complete: nothing is added.
    again = import_stream(io.BytesIO(DATA), "long.json", ImportOptions(owner=owner))
    assert (again.imported, [o.kind for o in again.outcomes]) == ([], ["unchanged"])


@pytest.mark.django_db(transaction=True)
def test_a_session_another_running_import_is_writing_is_left_to_it(owner: User) -> None:
    half = crash_mid_session(owner)
    # As if a process on another machine wrote it and said so just now.
    writing = {"runner": "another-host:4242:1:token", "at": timezone.now().isoformat()}
    Session.objects.filter(pk=half.pk).update(source_state={"writing": writing})

    report = import_stream(io.BytesIO(DATA), "long.json", ImportOptions(owner=owner))

    assert report.imported == []
    [problem] = report.problems
    assert "being imported by another import right now" in problem.message
    assert Session.objects.get(owner=owner).pk == half.pk  # untouched

    # That writer has been silent past MOTUS_IMPORT_STALE_SECONDS: it is gone.
    stale = timezone.now() - timedelta(days=1)
    writing["at"] = stale.isoformat()
    Session.objects.filter(pk=half.pk).update(source_state={"writing": writing})
    report = import_stream(io.BytesIO(DATA), "long.json", ImportOptions(owner=owner))

    assert report.problems == []
    [session] = Session.objects.filter(owner=owner)
    assert (session.incomplete, session.message_count) == (False, LENGTH)
