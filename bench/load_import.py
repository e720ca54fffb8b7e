"""Import throughput through the task worker: messages per second and peak memory.

Writes a JSONL file of ``--megabytes`` MB (chat runs of ``--run-length``
messages of about 500 bytes each), queues it as an upload's import job
(``jobs.create``: saved in the ``motus_imports`` storage, a task enqueued on
the database backend), then runs ``manage.py db_worker --batch`` in a child
process, as a deployment's task worker would, until the job is done. Prints
the job's figures, the worker's wall time, messages and megabytes per second,
and the worker's peak resident memory (``getrusage`` of the child). The
database is a fresh SQLite file under a temporary folder, or the one
``DATABASE_URL`` names. The upload's message cap is lifted for the run.
Figures, not assertions.

Usage: ``python bench/load_import.py [--megabytes 100] [--run-length 200]
[--replay-threshold TOKENS]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--megabytes", type=float, default=100.0)
    parser.add_argument("--run-length", type=int, default=200, help="messages per session")
    parser.add_argument("--replay-threshold", type=int, default=None, help="replay compaction")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        env = {
            "DATABASE_URL": os.environ.get("DATABASE_URL") or f"sqlite:///{folder}/bench.sqlite3",
            "MOTUS_IMPORT_SPOOL_DIR": f"{folder}/spool",
            "MOTUS_IMPORT_THREADS": "0",
            "MOTUS_TASK_BACKEND": "database",
            "MOTUS_UPLOAD_MAX_MESSAGES": str(10**9),
            "MOTUS_IN_MEMORY_LAYER_LOCK": "off",
        }
        os.environ.update(env)
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "motus_web.settings")
        import django

        django.setup()
        source = Path(folder) / "big.jsonl"
        messages = write_runs(source, int(args.megabytes * 1024 * 1024), args.run_length)
        run(source, messages, args.replay_threshold, {**os.environ, **env})


def write_runs(path: Path, size: int, run_length: int) -> int:
    """Chat runs as JSONL until ``path`` holds ``size`` bytes; how many messages."""
    words = (
        "the flight to Lisbon was moved to gate 14 and the refund of 212 EUR is pending "
        "while the customer asks about seat 23C and a vegetarian meal on booking K7XQ2 "
    )
    messages = written = number = 0
    with path.open("w") as out:
        while written < size:
            run = [
                {
                    "role": "user" if turn % 2 == 0 else "assistant",
                    "content": f"run {number} turn {turn}: " + words * 3,
                }
                for turn in range(run_length)
            ]
            line = json.dumps({"messages": run}) + "\n"
            out.write(line)
            written += len(line)
            messages += run_length
            number += 1
    return messages


def run(source: Path, messages: int, threshold: int | None, env: dict[str, str]) -> None:
    from django.contrib.auth import get_user_model
    from django.core.files import File
    from django.core.management import call_command

    from motus_web.sessions import jobs
    from motus_web.sessions.models import ImportJob

    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user("bench", password="bench-pass-1234")
    with source.open("rb") as raw:
        job = jobs.create(File(raw, name=source.name), source.name, owner, threshold)  # type: ignore[arg-type]
    size = source.stat().st_size
    print(f"file: {size / 1e6:,.1f} MB, {messages:,} messages; replay threshold: {threshold}")
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "manage.py", "db_worker", "--batch", "--no-reload",
         "--no-startup-delay", "-v", "0"],
        cwd=REPO, env=env, check=True,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    job = ImportJob.objects.get(pk=job.pk)
    print(
        f"job: {job.status}, {job.sessions_imported:,} sessions, "
        f"{job.messages_imported:,} messages imported, {job.problem_count} refused"
    )
    print(
        f"worker: {seconds:,.1f} s, {job.messages_imported / seconds:,.0f} messages/s, "
        f"{size / 1e6 / seconds:,.2f} MB/s, peak memory {peak_mb:,.0f} MB"
    )


if __name__ == "__main__":
    main()
