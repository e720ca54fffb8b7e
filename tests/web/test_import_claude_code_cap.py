"""An upload's message cap on a Claude Code transcript is applied while the file is
read (issue 30): the lines past it are never read, the conversation before it is
imported, and the stop is reported with its line and byte offset; a gzip that
expands past the upload's bound keeps what came before it too. The bench
(bench/import_line_cap.py) measures the memory of the 2,000,000-line file."""

from __future__ import annotations

import gzip
import io

import pytest
from django.contrib.auth.models import User

from motus_web.sessions.importers import ImportOptions, import_stream
from motus_web.sessions.models import Session

from .test_import_updates import transcript

# A line no parser accepts: were it read, the file would be refused with it.
POISON = b'{"type": 5, "uuid": "x"}\n'


@pytest.mark.django_db
def test_an_upload_past_the_cap_imports_the_messages_before_it_and_reads_no_further(
    owner: User,
) -> None:
    texts = [f"message {n}" for n in range(30)]
    data = transcript(*texts)
    lines = data.splitlines(keepends=True)

    report = import_stream(
        io.BytesIO(data + POISON), "cc.jsonl", ImportOptions(owner=owner, max_messages=10)
    )

    [problem] = report.problems
    assert problem.location == "line 11"
    assert f"stopped at byte {sum(map(len, lines[:10])):,}" in problem.message
    assert "more than 10 messages" in problem.message
    assert "expected a string" not in " ".join(p.message for p in report.problems)
    session = Session.objects.get()
    assert [m.content for m in session.messages.order_by("seq")] == texts[:10]
    assert report.messages == 10


@pytest.mark.django_db
def test_a_gzip_past_the_bound_imports_the_conversation_read_before_it(owner: User) -> None:
    data = transcript("q1", "a1", "q2", "a2")
    packed = io.BytesIO()
    with gzip.GzipFile(fileobj=packed, mode="wb") as out:
        out.write(data)
        out.write(b"\x00" * 2_000_000)  # a crash's padding, far past the bound

    report = import_stream(
        io.BytesIO(packed.getvalue()),
        "cc.jsonl.gz",
        ImportOptions(owner=owner, max_plain_bytes=len(data) + 100_000),
    )

    assert report.stopped
    [problem] = report.problems
    assert f"expands past {len(data) + 100_000:,} bytes" in problem.message
    session = Session.objects.get()
    assert [m.content for m in session.messages.order_by("seq")] == ["q1", "a1", "q2", "a2"]


@pytest.mark.django_db
def test_a_gzip_past_the_bound_before_any_message_is_refused_as_before(owner: User) -> None:
    packed = io.BytesIO()
    with gzip.GzipFile(fileobj=packed, mode="wb") as out:
        out.write(b'{"type": "summary", "summary": "t", "leafUuid": "x"}\n')
        out.write(b"\x00" * 2_000_000)

    report = import_stream(
        io.BytesIO(packed.getvalue()),
        "cc.jsonl.gz",
        ImportOptions(owner=owner, max_plain_bytes=200_000),
    )

    assert report.stopped
    [problem] = report.problems
    assert "expands past 200,000 bytes" in problem.message
    assert not Session.objects.exists()
