"""Peak memory of a sync and of an upload's import on files no line cap used to bound (issue 30).

Each case runs in a fresh interpreter against a new SQLite database, and prints
the process's peak resident memory (``VmHWM``, MB) and wall time:

- ``sync_sessions --folder`` on a real Claude Code transcript (the MIT fixture
  kept with the tests) followed by 2 GB of NUL padding (what a crash leaves),
  then one more line written after it;
- an upload job's import (the upload caps) of that file gzip-compressed;
- an upload job's import of a gzip of an N-line Claude Code transcript
  (user and assistant lines taking turns, with their parentUuid chain).

For the upload cases the job runs on a thread, as in the web process
(``MOTUS_IMPORT_THREADS``), while the main thread requests ``/login/`` from
the same process without pause: its p95 while the job runs is printed beside
the p95 of 50 requests before it (the web process staying responsive).

The big files are made in a temporary folder at run time and deleted after::

    .venv/bin/python bench/import_line_cap.py [LINES]   # LINES default 2,000,000

The bound (issue 30): each case peaks under 400 MB.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRANSCRIPT = REPO / "tests" / "web" / "fixtures" / "claude-code" / "spotter-short.jsonl"
PADDING = 2 * 1024**3
CHUNK = 16 * 1024 * 1024


def padded(folder: Path) -> Path:
    path = folder / "project" / "padded.jsonl"
    path.parent.mkdir()
    lines = TRANSCRIPT.read_bytes().splitlines(keepends=True)
    with path.open("wb") as out:
        out.write(b"".join(lines[:-1]))
        zeros = b"\0" * CHUNK
        for _ in range(PADDING // CHUNK):
            out.write(zeros)
        out.write(lines[-1])
    return path


def gzipped(path: Path) -> Path:
    target = path.parent.parent / (path.name + ".gz")
    with path.open("rb") as source, gzip.open(target, "wb", compresslevel=1) as out:
        while chunk := source.read(CHUNK):
            out.write(chunk)
    return target


def transcript(folder: Path, lines: int) -> Path:
    path = folder / f"claude-{lines}.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=6) as out:
        for number in range(lines):
            role = ("user", "assistant")[number % 2]
            message: dict[str, object] = {"role": role, "content": f"message {number}"}
            if role == "assistant":
                message = {
                    "id": f"msg_{number}",
                    "model": "claude-sonnet-4-5",
                    "role": role,
                    "content": [{"type": "text", "text": f"answer {number}"}],
                }
            line = {
                "type": role,
                "uuid": f"u{number}",
                "parentUuid": f"u{number - 1}" if number else None,
                "sessionId": "bench-2m",
                "version": "2.1.39",
                "timestamp": "2026-11-01T10:00:00.000Z",
                "message": message,
            }
            out.write(json.dumps(line).encode() + b"\n")
    return path


def peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def run_case(kind: str, path: Path) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "motus_web.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.test import override_settings

    call_command("migrate", verbosity=0)
    # The page's static files are served by name: no collectstatic manifest needed.
    plain = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}
    override_settings(STORAGES={**settings.STORAGES, "staticfiles": plain}).enable()
    started = time.perf_counter()
    if kind == "sync":
        call_command("sync_sessions", "--folder", str(path.parent), verbosity=0)
        said = ""
    else:
        from motus_web.sessions.importers import ImportOptions, ImportReport, import_path

        options = ImportOptions(
            max_messages=settings.MOTUS_UPLOAD_MAX_MESSAGES,
            max_plain_bytes=settings.MOTUS_UPLOAD_MAX_PLAIN_BYTES,
        )
        idle = login_times(50)
        started = time.perf_counter()
        reports: list[ImportReport] = []
        # An upload job runs on a thread of the web process (MOTUS_IMPORT_THREADS):
        # /login/ is served by the same process meanwhile.
        job = threading.Thread(target=lambda: reports.append(import_path(path, options)))
        job.start()
        busy: list[float] = []
        while job.is_alive():
            busy += login_times(1)
        job.join()
        report = reports[0]
        said = (
            f"{report.messages:,} messages, {len(report.problems)} problems; /login/ p95 "
            f"{p95(idle) * 1000:.0f} ms idle, {p95(busy) * 1000:.0f} ms during the job "
            f"({len(busy)} requests)"
        )
    seconds = time.perf_counter() - started
    print(json.dumps({"peak": peak_mb(), "seconds": seconds, "said": said}))


def login_times(count: int) -> list[float]:
    """Seconds each of ``count`` GETs of /login/ took, served in this process."""
    from django.test import Client

    client = Client(HTTP_HOST="localhost")
    times = []
    for _ in range(count):
        started = time.perf_counter()
        response = client.get("/login/")
        times.append(time.perf_counter() - started)
        assert response.status_code == 200, response.status_code
    return times


def p95(times: list[float]) -> float:
    return sorted(times)[min(len(times) - 1, int(len(times) * 0.95))] if times else 0.0


def main(lines: int) -> None:
    with tempfile.TemporaryDirectory(dir="/tmp") as scratch:
        folder = Path(scratch)
        nul = padded(folder)
        cases = [
            ("sync_sessions, transcript + 2 GB NUL", "sync", nul),
            ("upload job, gzip of the same", "upload", gzipped(nul)),
            (f"upload job, gzip of {lines:,}-line transcript", "upload", transcript(folder, lines)),
        ]
        print(f"{'case':<48} {'file':>10} {'peak':>8} {'time':>8}  said")
        for number, (label, kind, path) in enumerate(cases):
            env = {
                **os.environ,
                "DATABASE_URL": f"sqlite:///{folder}/bench-{number}.sqlite3",
                "PYTHONPATH": str(REPO),
            }
            result = subprocess.run(
                [sys.executable, __file__, "--case", kind, str(path)],
                env=env,
                cwd=REPO,
                capture_output=True,
                text=True,
                check=True,
            )
            figures = json.loads(result.stdout.strip().splitlines()[-1])
            size = path.stat().st_size / 1e6
            print(
                f"{label:<48} {size:>8.1f}MB {figures['peak']:>6.0f}MB "
                f"{figures['seconds']:>7.1f}s  {figures['said']}",
                flush=True,
            )


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--case":
        run_case(sys.argv[2], Path(sys.argv[3]))
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000)
