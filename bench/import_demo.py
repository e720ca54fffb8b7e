"""Import of the tau-bench demo file with replay: messages per second of wall time and of CPU.

Runs ``manage.py import_sessions demo_data/tau-bench/gpt-4o-airline.json
--replay --threshold 3000`` (200 sessions, 5,108 messages) in a child
process into a fresh SQLite database, ``--runs`` times, and prints for each
run the wall time, the child's CPU (user + system, ``getrusage``), its peak
resident memory, and messages per second of wall time (what a user waits
for) and of CPU; then the medians. With ``--against DIR`` (another checkout
of the repository, with its own ``.venv``), the runs of both alternate and
the ratios of their medians are printed: on a shared machine, compare within
one run. The load average is printed before and after. Figures, not assertions.

Usage: ``python bench/import_demo.py [--runs 5] [--against /path/to/other/checkout]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEMO = "demo_data/tau-bench/gpt-4o-airline.json"
MESSAGES = 5_108  # in the demo file, system prompts not counted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--against", type=Path, default=None, help="another checkout to compare")
    args = parser.parse_args()
    checkouts = {"this": REPO}
    if args.against is not None:
        checkouts["against"] = args.against.resolve()
    print(f"load average before: {os.getloadavg()}")
    figures: dict[str, list[tuple[float, float, int]]] = {name: [] for name in checkouts}
    with tempfile.TemporaryDirectory() as folder:
        for number in range(args.runs):
            for name, checkout in checkouts.items():
                wall, cpu, peak = run(checkout, Path(folder) / f"{name}-{number}.sqlite3")
                figures[name].append((wall, cpu, peak))
                print(
                    f"{name:8} run {number + 1}: wall {wall:5.2f} s, CPU {cpu:5.2f} s, "
                    f"peak {peak / 1024:4.0f} MB: {MESSAGES / wall:5.0f} msg/s of wall time, "
                    f"{MESSAGES / cpu:5.0f} of CPU"
                )
    print(f"load average after: {os.getloadavg()}")
    medians = {}
    for name, runs in figures.items():
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        peak = max(r[2] for r in runs)
        medians[name] = (wall, cpu)
        print(
            f"{name:8} median: wall {wall:.2f} s (min {min(r[0] for r in runs):.2f}), "
            f"CPU {cpu:.2f} s (min {min(r[1] for r in runs):.2f}), peak {peak / 1024:.0f} MB: "
            f"{MESSAGES / wall:.0f} msg/s of wall time, {MESSAGES / cpu:.0f} of CPU"
        )
    if "against" in medians:
        (wall, cpu), (their_wall, their_cpu) = medians["this"], medians["against"]
        print(f"against / this: wall {their_wall / wall:.2f}x, CPU {their_cpu / cpu:.2f}x")


def run(checkout: Path, database: Path) -> tuple[float, float, int]:
    """One import into a fresh database: wall seconds, CPU seconds, peak KB of the child."""
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{database}", "REDIS_URL": ""}
    python = str(checkout / ".venv" / "bin" / "python")
    subprocess.run([python, "manage.py", "migrate", "-v", "0"], cwd=checkout, env=env, check=True)
    command = [python, "manage.py", "import_sessions", DEMO, "--replay", "--threshold", "3000"]
    started = time.perf_counter()
    with subprocess.Popen(command, cwd=checkout, env=env, stdout=subprocess.DEVNULL) as child:
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if child.returncode != 0:
        raise SystemExit(f"the import in {checkout} failed ({child.returncode})")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


if __name__ == "__main__":
    main()
