"""Odd and hostile files: each gets a clear problem naming where and what, never a crash."""

from __future__ import annotations

import gzip
import io
import json
import tracemalloc
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from pytest_django import Settings

from motus_web.sessions.importers import ImportOptions, ImportReport, import_stream
from motus_web.sessions.models import ContextChange, Session

from .helpers import import_upload, logged_in

pytestmark = pytest.mark.django_db

HI = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


def run(data: bytes, name: str = "f.json", **options: Any) -> ImportReport:
    return import_stream(io.BytesIO(data), name, ImportOptions(**options))


def motus_log(config: object, session_id: str = "log-1") -> bytes:
    lines = [
        {"type": "session_meta", "session_id": session_id, "system_prompt": "", "config": config},
        {"type": "message", "message": {"role": "user", "content": "hi"}},
    ]
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


@pytest.mark.parametrize(
    ("data", "location", "message"),
    [
        (b'[{"role": ["user"], "content": "x"}]', "message 1", "field 'role': expected a string"),
        (b'[{"role": "user"}, 7]', "message 2", "expected a message object, got int"),
        (b'{"type": []}\n', "", "Unrecognised format"),
        (motus_log("abc"), "line 1", "field 'config': expected an object, got a string"),
        (motus_log({"safety_ratio": 5}), "line 1", "field 'config': safety_ratio"),
        (motus_log({"token_threshold": "many"}), "line 1", "field 'config': token_threshold"),
        (b'[{"role": "user", "content": "hi"},', "line 1 column 36", "invalid JSON"),
        (b"", "", "The file is empty"),
    ],
)
def test_a_malformed_file_is_a_problem_naming_the_place_and_the_field(
    data: bytes, location: str, message: str
) -> None:
    report = run(data)

    [problem] = report.problems
    assert problem.source == "f.json"
    assert problem.location == location
    assert message in problem.message
    assert not Session.objects.exists()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ('[{"role": "user", "content": "café"}]'.encode("latin-1"), "not UTF-8 text"),
        (json.dumps(HI).encode("utf-16"), "the file is UTF-16 text: save it as UTF-8"),
        (bytes(range(256)) * 4, "the file is binary, not UTF-8 text"),
        (
            b"\n".join([json.dumps({"messages": HI}).encode()] * 2 + [b'{"messages": "\xe9"}']),
            "not UTF-8 text",
        ),
    ],
)
def test_text_that_is_not_utf8_is_reported_as_such(data: bytes, message: str) -> None:
    report = run(data)

    assert message in str(report.problems[-1])
    assert "surrogates" not in str(report.problems[-1])


def test_a_bad_value_is_not_echoed_in_full() -> None:
    report = run(json.dumps([{"role": "x" * 5000, "content": "hi"}]).encode())

    [problem] = report.problems
    assert len(str(problem)) < 1100
    assert str(problem).endswith("…")


def test_a_very_long_file_name_is_shortened_in_problems_and_pages(owner: User) -> None:
    name = "n" * 995 + ".json"
    report = run(b"[1]", name)
    assert len(report.problems[0].source) <= 120

    import_upload(logged_in(owner), name, json.dumps(HI).encode())

    session = Session.objects.get()
    assert len(session.source) <= 120
    assert session.source.endswith(".json")


def test_unknown_record_types_are_kept() -> None:
    data = motus_log({}) + b'{"type": "future_thing", "through_seq": 0, "x": 1}\n'

    report = run(data, "log.jsonl")

    assert report.problems == []
    [change] = ContextChange.objects.all()
    assert change.kind == "future_thing"
    assert change.record_extra == {"x": 1}


@pytest.mark.parametrize(
    "data",
    [
        b"\xef\xbb\xbf" + json.dumps(HI).encode(),
        json.dumps(HI, indent=2).replace("\n", "\r\n").encode(),
        json.dumps(HI).encode() + b"\n\n",
        gzip.compress(json.dumps(HI).encode()),
        b"\xef\xbb\xbf" + json.dumps({"messages": HI}).encode() + b"\r\n\r\n",
        gzip.compress(b"\xef\xbb\xbf" + motus_log({}).replace(b"\n", b"\r\n") + b"\n"),
        motus_log({}).rstrip(b"\n"),
    ],
    ids=["bom", "crlf", "blank-lines", "gzip", "jsonl-bom-crlf", "motus-gzip-bom-crlf", "no-eol"],
)
def test_what_real_exports_carry_imports_as_the_plain_file(data: bytes) -> None:
    report = run(data, "export.dat")

    assert report.problems == []
    [public_id] = report.imported
    assert Session.objects.get(public_id=public_id).message_count in (1, 2)


def test_each_run_of_a_multi_run_file_is_imported_or_refused_on_its_own(owner: User) -> None:
    runs = [{"messages": HI}, {"messages": [{"role": ["user"]}]}, {"messages": HI[:1]}]

    html = import_upload(logged_in(owner), "runs.json", json.dumps(runs).encode()).content.decode()

    assert "2 sessions imported" in html
    assert "runs.json: record 2, message 1: field &#x27;role&#x27;: expected a string" in html
    for session in Session.objects.all():
        assert reverse("dashboard:session_detail", args=[session.public_id]) in html
    assert Session.objects.count() == 2


def test_an_upload_past_the_message_cap_is_refused_and_nothing_is_written(
    owner: User, settings: Settings
) -> None:
    settings.MOTUS_UPLOAD_MAX_MESSAGES = 10
    runs = [{"messages": HI * 3}, {"messages": HI * 3}]

    html = import_upload(logged_in(owner), "big.json", json.dumps(runs).encode()).content.decode()

    assert "holds more than 10 messages" in html
    assert "import_sessions" in html
    [kept] = Session.objects.all()
    assert kept.message_count == 6


def test_the_cap_stops_reading_a_long_list_of_messages() -> None:
    report = run(json.dumps([{"role": "user"}] * 100).encode(), max_messages=10)

    [problem] = report.problems
    assert problem.location == "message 11"
    assert report.stopped
    assert not Session.objects.exists()


def test_the_command_line_exits_1_without_a_traceback(tmp_path: Any) -> None:
    import subprocess
    import sys

    from .test_settings import REPO

    bad = tmp_path / "bad.json"
    bad.write_bytes(b'[{"role": ["user"], "content": "x"}]')
    db = tmp_path / "db.sqlite3"
    env = {"DATABASE_URL": f"sqlite:///{db}", "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=REPO, env=env, check=True)

    result = subprocess.run(
        [sys.executable, "manage.py", "import_sessions", str(bad)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )

    assert result.returncode == 1
    assert "field 'role': expected a string" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_upload_whose_file_name_django_cannot_read_gets_the_reason(owner: User) -> None:
    boundary = "XyZ"
    name = "n" * 995 + ".json"
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
        "Content-Type: application/json\r\n\r\n[]\r\n"
        f"--{boundary}--\r\n"
    ).encode()

    response = logged_in(owner).generic(
        "POST",
        reverse("dashboard:import_upload"),
        body,
        content_type=f"multipart/form-data; boundary={boundary}",
    )

    assert response.status_code == 400
    assert "its file name is too long" in response.content.decode()
    assert not Session.objects.exists()


def test_an_imported_session_is_announced_once_after_its_commit(
    django_capture_on_commit_callbacks: Any,
) -> None:
    from motus_web.sessions.signals import records_committed

    heard: list[tuple[str, list[dict[str, Any]]]] = []

    def receiver(session_id: str, records: list[dict[str, Any]], **kwargs: Any) -> None:
        heard.append((session_id, records))

    records_committed.connect(receiver)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            report = run(json.dumps(HI * 600).encode())
    finally:
        records_committed.disconnect(receiver)

    [public_id] = report.imported
    [(session_id, records)] = heard
    assert session_id == public_id
    assert [r["type"] for r in records] == ["session_meta"]
    assert Session.objects.get().message_count == 1200


def test_a_custom_tool_call_imports_as_it_was_sent() -> None:
    call = {"id": "call_p1", "type": "custom", "custom": {"name": "apply_patch", "input": "x"}}
    messages = [
        {"role": "user", "content": "patch it"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
    ]

    report = run(json.dumps(messages).encode())

    assert report.problems == []
    stored = Session.objects.get(public_id=report.imported[0]).messages.get(seq=1)
    assert stored.tool_calls == [call]


def test_each_log_of_a_file_of_concatenated_motus_logs_imports_on_its_own() -> None:
    broken = motus_log({}, "run-2").replace(b'"content": "hi"', b'"content": 7')
    data = motus_log({}, "run-1") + broken + motus_log({}, "run-3")

    report = run(data, "runs.jsonl")

    assert sorted(report.imported) == ["run-1", "run-3"]
    [problem] = report.problems
    assert problem.location == "line 4"
    assert sorted(Session.objects.values_list("public_id", flat=True)) == ["run-1", "run-3"]
    assert run(data, "runs.jsonl").imported == []


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.mark.parametrize(
    "data",
    [
        nested(20_000),  # a list of lists: the file of a user's report took a server to 16 GB
        b'{"messages": ' + nested(20_000) + b"}",
        b'[{"role": "user", "content": "hi", "meta": ' + nested(20_000) + b"}]",
        b'[{"mapping": ' + nested(20_000) + b"}]",  # a ChatGPT-like export
        b'[{"chat_messages": ' + nested(20_000) + b"}]",  # a Claude.ai-like export
    ],
)
def test_a_file_nested_too_deep_is_refused_at_once_with_little_memory(data: bytes) -> None:
    tracemalloc.start()
    try:
        report = run(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    [problem] = report.problems
    assert "nest more than 256 levels deep" in problem.message
    assert not Session.objects.exists()
    # Linear in the file (a few MB); reading it with ijson's paths cost the square of its depth.
    assert peak < 32 * 2**20


def test_a_message_nested_deeper_than_a_log_holds_is_refused_by_name() -> None:
    deep: list[Any] = []
    for _ in range(230):
        deep = [deep]
    data = json.dumps([{"role": "user", "content": "hi", "meta": deep}]).encode()

    report = run(data)

    [problem] = report.problems
    assert "nested more than 200 levels deep" in problem.message
    assert not Session.objects.exists()


def test_a_motus_log_with_a_torn_last_line_imports_the_rest_and_names_the_line() -> None:
    data = motus_log({}) + b'{"type": "message", "seq": 1, "message": {"role": "us'

    report = run(data, name="run.jsonl")

    assert report.problems == []
    [warning] = report.warnings
    assert warning.location == "line 3"
    assert "a torn last line" in warning.message
    assert Session.objects.get().message_count == 1
