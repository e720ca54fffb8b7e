"""Exactly once, for real: the same form sent from two threads at the same instant."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from .race import outcome, race

ROOT = Path(__file__).resolve().parents[2]
NOTHING = {"reverts": 0, "forks": 0, "sessions": 1, "rewinds": 0, "corrections": 0, "manual": 0}
EXPECTED = {
    "undo": {**NOTHING, "reverts": 1},
    "fork": {**NOTHING, "forks": 1},
    "delete": {**NOTHING, "sessions": 0},
    "rewind": {**NOTHING, "rewinds": 1},
    "undo-rewind": {**NOTHING, "rewinds": 2},  # the rewind undone, and its undo
    "correct": {**NOTHING, "corrections": 1},
    "compact": {**NOTHING, "manual": 1},
}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_two_threads_sending_one_form_on_postgresql_act_once(kind: str) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("this one runs on PostgreSQL (DATABASE_URL); SQLite's runs in a subprocess")

    statuses, public_id = race(kind)

    assert statuses == [303, 409]
    assert outcome(kind, public_id) == EXPECTED[kind]


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_two_threads_sending_one_form_on_a_sqlite_file_act_once(kind: str, tmp_path: Path) -> None:
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'race.sqlite3'}"}
    env.pop("REDIS_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "tests.web.race", kind],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result.pop("statuses") == [303, 409]
    assert result == EXPECTED[kind]
