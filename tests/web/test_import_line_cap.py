"""No line is held past the cap of a line, on the command line's path too (issue 30):
a crash's NUL padding or a runaway line is skipped with its byte offset, and what
comes before and after it is imported. The cap is made small here; the bench
(bench/import_line_cap.py) runs the gigabyte files."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from motus_web.sessions.importers import ImportOptions, import_path, import_stream
from motus_web.sessions.importers.formats import FormatProblem, _io, _json, parse
from motus_web.sessions.models import Session

from .test_import_updates import transcript

CAP = 64 * 1024


@pytest.fixture(autouse=True)
def small_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_io, "LINE_MAX_BYTES", CAP, raising=False)


class Recording(io.BytesIO):
    """A file that remembers the longest piece any read handed out (bytes)."""

    longest = 0

    def _seen(self, data: bytes) -> bytes:
        self.longest = max(self.longest, len(data))
        return data

    def read(self, size: int | None = -1) -> bytes:
        return self._seen(super().read(size))

    def readline(self, size: int | None = -1) -> bytes:
        return self._seen(super().readline(size))

    def __next__(self) -> bytes:
        return self._seen(super().__next__())


@pytest.mark.django_db
def test_a_transcript_followed_by_nul_padding_imports_and_the_padding_is_never_held(
    owner: User,
) -> None:
    lines = transcript("q1", "a1", "q2", "a2").splitlines(keepends=True)
    # A crash's padding with no line end, then what Claude Code wrote on restart.
    padding = b"\x00" * (40 * CAP)
    stream = Recording(lines[0] + lines[1] + padding + lines[2] + lines[3])

    report = import_stream(stream, "s.jsonl", ImportOptions(owner=owner))

    assert report.problems == []
    [warning] = [w for w in report.warnings if "cap of a line" in w.message]
    assert warning.location == "line 3"
    assert f"from byte {len(lines[0]) + len(lines[1]):,}" in warning.message
    assert f"{len(padding):,} of them NUL bytes" in warning.message
    session = Session.objects.get()
    assert [m.content for m in session.messages.order_by("seq")][::2] == ["q1", "q2"]
    assert stream.longest <= max(1 << 20, CAP + 1)  # the digest reads 1 MB at a time
    assert stream.longest < len(padding)


def openai_line(text: str) -> bytes:
    message: dict[str, Any] = {"role": "user", "content": text}
    return json.dumps({"messages": [message]}).encode() + b"\n"


@pytest.mark.django_db
def test_a_line_past_the_cap_is_reported_at_its_offset_and_the_lines_around_it_import(
    owner: User, tmp_path: Path
) -> None:
    first, huge, last = openai_line("before"), openai_line("x" * (3 * CAP)), openai_line("after")
    path = tmp_path / "runs.jsonl"
    path.write_bytes(first + huge + last)

    report = import_path(path, ImportOptions(owner=owner))

    [problem] = report.problems
    assert problem.location == "line 2"
    assert f"{len(huge):,} bytes from byte {len(first):,}" in problem.message
    contents = Session.objects.values_list("messages__content", flat=True)
    assert sorted(str(c) for c in contents) == ["after", "before"]


@pytest.mark.django_db
def test_a_motus_log_with_a_line_past_the_cap_keeps_the_records_around_it(owner: User) -> None:
    meta = {"type": "session_meta", "session_id": "m1", "created_at": "2026-01-01T00:00:00Z"}
    records = [meta] + [
        {"type": "message", "message": {"role": "user", "content": text}}
        for text in ("one", "x" * (2 * CAP), "three")
    ]
    data = b"".join(json.dumps(r).encode() + b"\n" for r in records)

    report = import_stream(io.BytesIO(data), "log.jsonl", ImportOptions(owner=owner))

    assert report.problems == []
    [warning] = report.warnings
    assert warning.location == "line 3"
    assert "cap of a line" in warning.message
    session = Session.objects.get()
    assert list(session.messages.order_by("seq").values_list("content", flat=True)) == [
        "one",
        "three",
    ]


def gemini_document(*contents: object) -> dict[str, Any]:
    messages = [{"id": str(n), "type": "user", "content": c} for n, c in enumerate(contents)]
    return {"sessionId": "g1", "projectHash": "p", "messages": messages}


def test_a_document_past_its_cap_is_refused_without_being_read_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_json, "DOCUMENT_MAX_BYTES", CAP, raising=False)
    stream = Recording(json.dumps(gemini_document("a" * CAP)).encode())

    [problem] = parse(stream, "session-1.json")

    assert isinstance(problem, FormatProblem)
    assert f"larger than {CAP:,} bytes" in problem.message
    assert stream.longest <= CAP + 1 + len(_io.BOM)


def test_a_document_nested_past_the_depth_limit_beyond_its_head_is_refused() -> None:
    deep: object = "x"
    for _ in range(_json.MAX_DEPTH + 10):
        deep = [deep]
    # Past the 64 KB head, so the format is still told from the first message.
    data = json.dumps(gemini_document("a" * (2 * _io.HEAD_SIZE), deep)).encode()

    [problem] = parse(io.BytesIO(data), "session-1.json")

    assert isinstance(problem, FormatProblem)
    assert problem.message == _json.TOO_DEEP
