"""The security probe's bounds: what a small compressed upload may cost."""

from __future__ import annotations

import gzip
import io

import pytest

from motus_web.sessions.importers import ImportOptions, import_stream
from motus_web.sessions.models import Session


def gzipped(*parts: bytes, repeat: int = 1) -> bytes:
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb") as stream:
        for _ in range(repeat):
            for part in parts:
                stream.write(part)
    return out.getvalue()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "data",
    [
        # Many tiny messages: a JSON list far bigger than its gzip.
        gzipped(b"[", b'{"role": "user", "content": "x"},' * 100_000, b'{"role": "user"}]'),
        # One endless JSONL line.
        gzipped(b'{"messages": [{"role": "user", "content": "', b"x" * 1_000_000, repeat=8),
        # Whitespace.
        gzipped(b"[" + b" " * 1_000_000, repeat=8),
    ],
    ids=["tiny messages", "one endless line", "whitespace"],
)
def test_a_gzip_that_expands_past_the_bound_stops_there_and_says_why(data: bytes) -> None:
    assert len(data) < 200_000  # a small upload

    report = import_stream(
        io.BytesIO(data), "big.json.gz", ImportOptions(max_plain_bytes=1_000_000)
    )

    assert report.stopped
    [problem] = report.problems
    assert "expands past 1,000,000 bytes when decompressed" in problem.message
    assert not Session.objects.exists()


@pytest.mark.django_db
def test_a_gzip_within_the_bound_imports() -> None:
    data = gzipped(b'[{"role": "user", "content": "hi"}]')
    report = import_stream(io.BytesIO(data), "ok.json.gz", ImportOptions(max_plain_bytes=1_000))
    assert report.problems == []
    assert len(report.imported) == 1


def test_the_message_cap_of_a_motus_log_is_counted_while_reading() -> None:
    from motus_web.sessions.importers.parsers import parse_motus_log
    from motus_web.sessions.importers.sources import MotusLog

    lines = [b'{"type": "session_meta", "session_id": "big", "system_prompt": ""}\n']
    lines += [b'{"type": "message", "message": {"role": "user", "content": "x"}}\n'] * 5_000

    [log] = list(parse_motus_log(io.BytesIO(b"".join(lines)), "big.jsonl", max_messages=100))

    assert isinstance(log, MotusLog)
    assert len(log.records) == 1 + 101  # read up to the first message past the cap, no more


@pytest.mark.django_db
def test_an_upload_of_a_motus_log_past_the_cap_stops_at_the_cap() -> None:
    lines = [b'{"type": "session_meta", "session_id": "big", "system_prompt": ""}\n']
    lines += [b'{"type": "message", "message": {"role": "user", "content": "x"}}\n'] * 500

    report = import_stream(
        io.BytesIO(b"".join(lines)), "big.jsonl", ImportOptions(max_messages=100)
    )

    assert report.stopped
    assert "more than 100 messages" in report.problems[0].message
    assert not Session.objects.exists()


def test_a_large_document_with_a_lone_surrogate_is_refused_without_reading_it_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from motus_web.sessions.importers import parsers

    monkeypatch.setattr(parsers, "WHOLE_DOCUMENT_MAX_BYTES", 1_000)
    data = b'[{"role": "user", "content": "\\ud83d' + b"x" * 5_000 + b'"}]'

    found = list(parsers.parse_json(io.BytesIO(data), "big.json", "big"))

    [problem] = found
    assert "larger than 1,000 bytes" in str(problem)
