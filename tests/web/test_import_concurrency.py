"""Imports that meet: the same session id written by two imports at once."""

from __future__ import annotations

import io
import json
import threading

import pytest
from django.db import connection, connections

from motus_web.sessions.importers import ImportOptions, ImportReport, import_stream
from motus_web.sessions.importers.writer import Writer
from motus_web.sessions.models import Session

from .test_import_hostile import motus_log
from .test_import_updates import transcript

CHAT_REPLY = {"role": "assistant", "content": "Hello!"}


def test_an_id_taken_between_the_check_and_the_write_is_retried_under_a_new_id(
    db: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import_stream(io.BytesIO(motus_log({})), "first.jsonl", ImportOptions())
    # As if the other import committed just after this one found the id free.
    checks = iter([False])
    monkeypatch.setattr(Writer, "_taken", staticmethod(lambda public_id: next(checks, True)))

    report = import_stream(io.BytesIO(motus_log({"note": 2})), "second.jsonl", ImportOptions())

    assert report.problems == []
    [public_id] = report.imported
    assert public_id != "log-1"
    assert report.renamed == {"log-1": public_id}
    assert Session.objects.get(public_id=public_id).original_id == "log-1"


@pytest.mark.django_db(transaction=True)
def test_four_concurrent_imports_of_one_session_id_all_land() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("concurrent writers need PostgreSQL (DATABASE_URL)")
    reports: list[ImportReport] = []
    start = threading.Barrier(4)

    def run(number: int) -> None:
        try:
            start.wait()
            data = motus_log({"note": number})
            reports.append(import_stream(io.BytesIO(data), f"{number}.jsonl", ImportOptions()))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert [r.problems for r in reports] == [[]] * 4
    assert sorted(len(r.imported) for r in reports) == [1, 1, 1, 1]
    assert Session.objects.count() == 4
    assert Session.objects.filter(public_id="log-1").count() == 1
    assert sum(len(r.renamed) for r in reports) == 3


@pytest.mark.parametrize("name", ["chat.json", "s.jsonl", "log.jsonl"])
def test_a_file_another_import_stored_meanwhile_is_already_there(
    db: None, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """Two uploads of one new file: the second found nothing stored, then lost
    the race to write it; compared again, it is the same: unchanged."""
    data = {
        "chat.json": json.dumps([{"role": "user", "content": "hi"}, CHAT_REPLY]).encode(),
        "s.jsonl": transcript("q1", "a1", "q2", "a2"),
        "log.jsonl": motus_log({}),
    }[name]
    first = import_stream(io.BytesIO(data), name, ImportOptions())
    stored = Writer._stored
    misses = iter([None])  # as if the first had not committed yet at the check
    monkeypatch.setattr(Writer, "_stored", lambda self, key: next(misses, stored(self, key)))

    again = import_stream(io.BytesIO(data), name, ImportOptions())

    assert again.problems == []
    assert [o.kind for o in again.outcomes] == ["unchanged"]
    assert [s.public_id for s in again.skipped] == first.imported
    assert Session.objects.count() == 1
