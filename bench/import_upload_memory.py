"""Memory of an upload's import, the security probe's cases: peak and after, in MB.

Runs each case in a fresh interpreter (so one case's heap does not carry into
the next) against a new SQLite database, imports the file as an upload job
does (``max_messages`` = MOTUS_UPLOAD_MAX_MESSAGES, ``max_plain_bytes`` =
MOTUS_UPLOAD_MAX_PLAIN_BYTES) and prints the resident memory before (after one
small import has loaded the tokenizers), its peak (sampled every 5 ms) and after
(once the import returned and the garbage was collected)::

    .venv/bin/python bench/import_upload_memory.py

The target (issue 19): any upload within the limits peaks under 500 MB and
returns to its starting memory.
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


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def make_files(folder: Path) -> dict[str, Path]:
    log = folder / "motus-290k.jsonl"
    with log.open("w") as out:
        out.write(json.dumps({"type": "session_meta", "session_id": "big", "system_prompt": ""}))
        out.write("\n")
        for n in range(290_000):
            role = "user" if n % 2 == 0 else "assistant"
            out.write(json.dumps({"type": "message", "message": {"role": role, "content": "hi"}}))
            out.write("\n")
    tiny = folder / "tiny-messages.json.gz"
    with gzip.open(tiny, "wb", compresslevel=9) as out:
        out.write(b"[")
        out.write(b'{"role": "user", "content": "x"},' * 36_000_000)  # 1.2 GB plain
        out.write(b'{"role": "user", "content": "x"}]')
    line = folder / "one-line.jsonl.gz"
    with gzip.open(line, "wb", compresslevel=9) as out:
        out.write(b'{"messages": [{"role": "user", "content": "')
        for _ in range(1200):
            out.write(b"x" * 1_000_000)  # one 1.2 GB line
    return {
        "20.8 MB Motus log, 290,000 records": log,
        "gzip of tiny messages": tiny,
        "gzip of one 1.2 GB line": line,
    }


def run_case(path: Path) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "motus_web.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    import gc

    from motus_web.sessions.importers import ImportOptions, import_path

    # One small import first: the tokenizers and Django's caches load once per
    # process, and are not what an upload costs.
    warm = path.parent / f"warm-{path.name}.json"
    warm.write_text('[{"role": "user", "content": "hi"}]')
    import_path(warm, ImportOptions())
    gc.collect()
    before = rss_mb()
    peak = [before]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss_mb())
            time.sleep(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    options = ImportOptions(
        max_messages=settings.MOTUS_UPLOAD_MAX_MESSAGES,
        max_plain_bytes=settings.MOTUS_UPLOAD_MAX_PLAIN_BYTES,
    )
    report = import_path(path, options)
    seconds = time.perf_counter() - started
    done.set()
    sampler.join()
    del report
    gc.collect()
    after = rss_mb()
    print(json.dumps({"before": before, "peak": peak[0], "after": after, "seconds": seconds}))


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        files = make_files(folder)
        print(f"{'case':<40} {'file':>9} {'before':>8} {'peak':>8} {'after':>8} {'time':>7}")
        for number, (label, path) in enumerate(files.items()):
            env = {
                **os.environ,
                "DATABASE_URL": f"sqlite:///{folder}/bench-{number}.sqlite3",
                "PYTHONPATH": str(REPO),
            }
            result = subprocess.run(
                [sys.executable, __file__, "--case", str(path)],
                env=env,
                cwd=REPO,
                capture_output=True,
                text=True,
                check=True,
            )
            figures = json.loads(result.stdout.strip().splitlines()[-1])
            size = path.stat().st_size / 1e6
            print(
                f"{label:<40} {size:>7.1f}MB {figures['before']:>6.0f}MB {figures['peak']:>6.0f}MB "
                f"{figures['after']:>6.0f}MB {figures['seconds']:>6.1f}s"
            )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--case":
        run_case(Path(sys.argv[2]))
    else:
        main()
