"""Imports that meet: the same session id written by two imports at once."""

from __future__ import annotations

import io
import threading

import pytest
from django.db import connection, connections

from motus_web.sessions.importers import ImportOptions, ImportReport, import_stream
from motus_web.sessions.importers.writer import Writer
from motus_web.sessions.models import Session

from .test_import_hostile import motus_log


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
