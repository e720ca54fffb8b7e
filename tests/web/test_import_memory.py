"""Memory of a big import: a constant plus the live context of one session.

Each import runs in a fresh interpreter that reports its peak resident memory
(``ru_maxrss``); the bound is on what a message adds (half the messages
against all of them), so the constant may grow with what an import loads.
The default run imports 50,000 messages; with ``MOTUS_SLOW_TESTS=1`` the
1,000,000-message file of issue 8 (16 MB, figures in the README) is imported
too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# What an import holds per message, with room to spare: the live context (about 315
# bytes for a ChatMessage, its meta and token count) and, since updates in place, the
# chain of unit fingerprints and the rows written per batch; measured 2026-12-01 on the
# 2-core machine: about 1,400 bytes. Before streaming an import held 5,700.
BYTES_PER_MESSAGE = 2_000
_DRIVER = """
import os, resource, sys, time
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from pathlib import Path
from motus_web.sessions.importers import ImportOptions, import_path
from motus_web.sessions.models import Session
started = time.monotonic()
report = import_path(Path(sys.argv[1]), ImportOptions())
assert report.problems == [], report.problems
session = Session.objects.get()
print(session.message_count, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
      round(time.monotonic() - started, 1))
"""


def minimal_messages(path: Path, count: int) -> Path:
    """``[{"role": "user"}, ...]``: 16 bytes a message, the smallest file that holds them."""
    with path.open("wb") as file:
        file.write(b"[" + b", ".join([b'{"role": "user"}'] * count) + b"]")
    return path


def import_in_a_fresh_interpreter(path: Path, tmp_path: Path) -> tuple[int, int, float]:
    """(messages imported, peak resident bytes, seconds) of importing ``path``."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "motus_web.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / path.stem}.sqlite3",
    }
    result = subprocess.run(
        [sys.executable, "-c", _DRIVER, str(path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    count, peak, seconds = result.stdout.split()
    return int(count), int(peak), float(seconds)


def assert_bounded(count: int, tmp_path: Path) -> None:
    """Importing ``count`` messages takes at most ``BYTES_PER_MESSAGE`` more per
    message than importing half as many: the slope, not the constant (the
    modules and caches a real import loads, which a one-message import need not)."""
    half, half_peak, _ = import_in_a_fresh_interpreter(
        minimal_messages(tmp_path / "half.json", count // 2), tmp_path
    )
    imported, peak, seconds = import_in_a_fresh_interpreter(
        minimal_messages(tmp_path / "many.json", count), tmp_path
    )

    assert (half, imported) == (count // 2, count)
    grown = peak - half_peak
    print(f"{count} messages: peak {peak / 2**20:.0f} MB, +{grown / 2**20:.0f} MB, {seconds} s")
    assert grown < (count - half) * BYTES_PER_MESSAGE


def test_a_big_file_of_minimal_messages_imports_within_the_memory_bound(tmp_path: Path) -> None:
    assert_bounded(50_000, tmp_path)


@pytest.mark.skipif(not os.environ.get("MOTUS_SLOW_TESTS"), reason="MOTUS_SLOW_TESTS=1 runs it")
def test_the_million_message_file_imports_within_the_memory_bound(tmp_path: Path) -> None:
    assert_bounded(1_000_000, tmp_path)
