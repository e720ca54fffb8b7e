"""Files as today's tools write them, read from faithfully re-created fixtures kept with
the tests (each fixture folder's README names the tool's source it follows)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from motus_web.sessions.importers import ImportOptions, import_stream
from motus_web.sessions.importers.formats import FormatProblem, ParsedSession, parse, parse_path
from motus_web.sessions.models import Session

FIXTURES = Path(__file__).parent / "fixtures"
GEMINI_JSONL = FIXTURES / "gemini-cli" / "session-2026-11-30T09-12-7d3c1f0e.jsonl"


def test_a_current_gemini_cli_jsonl_session_reads_as_the_cli_loads_it() -> None:
    [session] = list(parse_path(GEMINI_JSONL))

    assert isinstance(session, ParsedSession)
    assert session.source_format == "gemini-cli"
    assert session.original_id == "7d3c1f0e-5b2a-4e8d-9c61-2f4a8b9e0d13"
    assert session.title == "Replace yaml with tomllib in src/config.py"
    assert session.created_at == "2026-11-30T09:12:04.117Z"
    # m2 written twice (the second with its result) is one message; m4 was rewound.
    assert [(m["role"], m["content"]) for m in session.messages] == [
        ("user", "Which files in src/ import yaml?"),
        ("assistant", None),
        ("tool", "src/config.py:3:import yaml"),
        ("assistant", "Only `src/config.py` imports yaml (line 3)."),
        ("user", "Replace it with tomllib."),
        ("assistant", "Done: src/config.py now reads TOML with tomllib."),
    ]
    assert session.provider_input_tokens == {1: 8412, 3: 8530, 5: 8700}
    assert session.model == "gemini-2.5-pro"
    assert session.extra["lastUpdated"] == "2026-11-30T09:12:16.530Z"


def test_a_gemini_cli_jsonl_session_skips_a_damaged_line_and_keeps_the_rest() -> None:
    lines = GEMINI_JSONL.read_bytes().splitlines(keepends=True)
    data = b"".join([*lines[:3], b'{"id": "m9", "type": "us\n', *lines[3:]])

    found = list(parse(io.BytesIO(data), "session-x.jsonl"))

    [session] = [f for f in found if isinstance(f, ParsedSession)]
    assert len(session.messages) == 6
    [warning] = [f for f in found if isinstance(f, FormatProblem)]
    assert warning.warning
    assert warning.location == "line 4"


@pytest.mark.django_db
def test_a_motus_log_without_a_title_is_named_by_its_first_request(owner: User) -> None:
    meta = {"type": "session_meta", "session_id": "raw-id-7f3a", "created_at": "2026-01-01"}
    records = [meta] + [
        {"type": "message", "message": {"role": role, "content": text}}
        for role, text in (("user", "  Why does\nthe build fail?"), ("assistant", "A race."))
    ]
    data = b"".join(json.dumps(r).encode() + b"\n" for r in records)

    import_stream(io.BytesIO(data), "log.jsonl", ImportOptions(owner=owner))
    again = import_stream(io.BytesIO(data), "log.jsonl", ImportOptions(owner=owner))

    session = Session.objects.get()
    assert session.title == "Why does the build fail?"
    assert [o.kind for o in again.outcomes] == ["unchanged"]
