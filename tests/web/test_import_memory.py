"""Memory of a big import: a constant plus the live context of one session.

Each import runs in a fresh interpreter that reports its peak resident memory
(``ru_maxrss``). The default run imports 50,000 messages; with
``MOTUS_SLOW_TESTS=1`` the 1,000,000-message file of issue 8 (16 MB, figures in
the README) is imported too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# What the live context keeps per message, with room to spare (measured: about 315 bytes
# for a ChatMessage, its meta and token count); before streaming an import held 5,700.
BYTES_PER_MESSAGE = 500
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
    _, baseline, _ = import_in_a_fresh_interpreter(
        minimal_messages(tmp_path / "one.json", 1), tmp_path
    )
    imported, peak, seconds = import_in_a_fresh_interpreter(
        minimal_messages(tmp_path / "many.json", count), tmp_path
    )

    assert imported == count
    grown = peak - baseline
    print(f"{count} messages: peak {peak / 2**20:.0f} MB, +{grown / 2**20:.0f} MB, {seconds} s")
    assert grown < count * BYTES_PER_MESSAGE


def test_a_big_file_of_minimal_messages_imports_within_the_memory_bound(tmp_path: Path) -> None:
    assert_bounded(50_000, tmp_path)


@pytest.mark.skipif(not os.environ.get("MOTUS_SLOW_TESTS"), reason="MOTUS_SLOW_TESTS=1 runs it")
def test_the_million_message_file_imports_within_the_memory_bound(tmp_path: Path) -> None:
    assert_bounded(1_000_000, tmp_path)
