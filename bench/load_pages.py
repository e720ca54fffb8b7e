"""Pages under 50 concurrent viewers, on one uvicorn worker and on two.

Builds a database (a fresh SQLite file under a temporary folder, or the one
``DATABASE_URL`` names) holding ``--small`` short sessions, imported through
the importer, and one session of ``--messages`` messages: the agent workload
of ``dashboard_pages.py`` (a block of 10,000 messages fed once through a
compacting memory, repeated to the size and written with the database
store's bulk inserts, so that a 1,000,000-message session takes minutes to
build, not the importer's hour), or with ``--plain`` a chat of short
alternating turns imported like the small ones; collects the static
files; then for each worker count starts uvicorn on loopback (two workers need
``REDIS_URL``: without it the second refuses to start), logs in and requests
the session list and the big session's page: first one client alone (the
baseline), then ``--viewers`` clients at once, each ``--requests`` times per
page. Prints p50/p95/max in milliseconds and the errors (any answer but 200,
or a failed connection); on PostgreSQL also the most connections the database
had open during the run. The client runs on the same machine as the server.
Beside each 50-viewer p50: its ratio to one viewer's and the ideal ratio
for the machine's cores (viewers / cores: each request needs the CPU that one
alone needs); the load average beside each line (the machine is shared).
``BENCH_PORT`` picks the server's port (default: any free one).
Figures, not assertions.

Usage: ``python bench/load_pages.py [--messages 1000000] [--viewers 50] [--requests 4]
[--workers 1,2] [--plain]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=50)
    parser.add_argument("--viewers", type=int, default=50)
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--plain", action="store_true", help="the big session as imported chat")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        env = {
            **os.environ,
            "DATABASE_URL": os.environ.get("DATABASE_URL") or f"sqlite:///{folder}/bench.sqlite3",
            "STATIC_ROOT": f"{folder}/static",
            "MOTUS_IMPORT_SPOOL_DIR": f"{folder}/spool",
            "MOTUS_IN_MEMORY_LAYER_LOCK": f"{folder}/layer.lock",
            "DJANGO_SETTINGS_MODULE": "motus_web.settings",
        }
        big = build(env, Path(folder), args.messages, args.small, plain=args.plain)
        for workers in [int(n) for n in args.workers.split(",")]:
            if workers > 1 and not env.get("REDIS_URL"):
                print(f"{workers} workers: skipped, they need REDIS_URL (a shared channel layer)")
                continue
            with server(env, workers) as base:
                measure(base, big, workers, args.viewers, args.requests, env)


def build(env: dict[str, str], folder: Path, messages: int, small: int, *, plain: bool) -> str:
    """The database of the run; the big session's public id."""
    manage = [sys.executable, "manage.py"]
    for command in (["migrate"], ["collectstatic", "--noinput"]):
        subprocess.run([*manage, *command, "-v", "0"], cwd=REPO, env=env, check=True)
    runs = [
        {"messages": [{"role": "user", "content": f"small session {n}: where is my bag?"},
                      {"role": "assistant", "content": "It is on the next flight."}]}
        for n in range(small)
    ]  # fmt: skip
    if plain:
        turns = [
            {"role": "user" if t % 2 == 0 else "assistant", "content": f"turn {t} " * 20}
            for t in range(messages)
        ]
        runs.append({"messages": turns})
    source = folder / "sessions.jsonl"
    source.write_text("".join(json.dumps(run) + "\n" for run in runs))
    started = time.perf_counter()
    script = (
        "from django.contrib.auth.models import User; "
        "owner = User.objects.create_user('viewer', password='viewer-pass-1234'); "
        "from django.core.management import call_command; "
        f"call_command('import_sessions', '--owner', 'viewer', {str(source)!r}, verbosity=0); "
        + (
            ""
            if plain
            else "import sys; sys.path.insert(0, 'bench'); "
            "from dashboard_pages import block_log, build; "
            f"build(block_log(30_000), 'big', {messages}, True, owner); "
        )
        + "from motus_web.sessions.models import Session; "
        "print(Session.objects.order_by('-message_count').values_list('public_id', flat=True)[0])"
    )
    done = subprocess.run(
        [*manage, "shell", "-c", script], cwd=REPO, env=env, check=True, capture_output=True,
        text=True,
    )  # fmt: skip
    print(
        f"database: {small} short sessions and one of {messages:,} messages "
        f"({'imported' if plain else 'bulk-written'} in {time.perf_counter() - started:.0f} s), "
        f"{env['DATABASE_URL'].split(':', 1)[0]}"
    )
    return done.stdout.strip().splitlines()[-1]


class server:
    """uvicorn with ``workers`` workers on a free loopback port, as a context manager."""

    def __init__(self, env: dict[str, str], workers: int) -> None:
        self.env, self.workers = env, workers

    def __enter__(self) -> str:
        port = int(os.environ.get("BENCH_PORT", "0"))
        if not port:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--host", "127.0.0.1", "--port", str(port),
             "--workers", str(self.workers), "--ws", "websockets-sansio", "--lifespan", "off",
             "--log-level", "warning", "motus_web.asgi:application"],
            cwd=REPO, env=self.env, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code < 500:
                    return f"http://127.0.0.1:{port}"
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise SystemExit("uvicorn did not start")
            time.sleep(0.2)

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:  # stuck in its shutdown: end it and its workers
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def log_in(base: str) -> httpx.Cookies:
    with httpx.Client(base_url=base, timeout=60) as client:
        page = client.get("/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert token is not None
        form = {"csrfmiddlewaretoken": token[1], "username": "viewer",
                "password": "viewer-pass-1234"}  # fmt: skip
        answer = client.post("/login/", data=form)
        assert answer.status_code == 302, answer.status_code
        return client.cookies


def measure(
    base: str, big: str, workers: int, viewers: int, requests: int, env: dict[str, str]
) -> None:
    cookies = log_in(base)
    pages = {"session list": "/", "big session": f"/sessions/{big}/"}
    peak = _ConnectionPeak(env)
    peak.start()

    async def view(
        client: httpx.AsyncClient, url: str, times: list[float], errors: list[str]
    ) -> None:
        begun = time.perf_counter()
        try:
            answer = await client.get(url)
            if answer.status_code != 200:
                errors.append(str(answer.status_code))
        except httpx.HTTPError as error:
            errors.append(type(error).__name__)
        times.append(time.perf_counter() - begun)

    async def run(url: str, clients: int) -> tuple[list[float], list[str]]:
        times: list[float] = []
        errors: list[str] = []
        limits = httpx.Limits(max_connections=clients)
        async with httpx.AsyncClient(base_url=base, cookies=cookies, timeout=120,
                                     limits=limits) as client:  # fmt: skip

            async def viewer() -> None:
                for _ in range(requests):
                    await view(client, url, times, errors)

            await asyncio.gather(*(viewer() for _ in range(clients)))
        return times, errors

    print(f"{workers} worker{'s' if workers > 1 else ''}:")
    cores = os.cpu_count() or 1
    for label, url in pages.items():
        alone = 0.0
        for clients in (1, viewers):
            times, errors = asyncio.run(run(url, clients))
            ms = sorted(t * 1e3 for t in times)
            p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
            print(
                f"  {label:<13} {clients:>3} client{'s' if clients > 1 else ' '} "
                f"{len(ms):>4} requests: p50 {statistics.median(ms):7.0f} ms, "
                f"p95 {p95:7.0f} ms, max {ms[-1]:7.0f} ms, errors {len(errors)}"
                + (f" ({', '.join(sorted(set(errors)))})" if errors else "")
                + f"; load {' '.join(Path('/proc/loadavg').read_text().split()[:3])}"
            )
            if clients == 1:
                alone = statistics.median(ms)
            else:
                # Each request needs the CPU one request alone needs: with
                # ``clients`` at once on ``cores`` cores, each waits for
                # clients / cores of them at best.
                print(
                    f"    p50 ratio to one viewer {statistics.median(ms) / alone:.1f}x "
                    f"(ideal for {cores} cores: {clients / min(cores, clients):.0f}x)"
                )
    peak.stop()
    if peak.most is not None:
        print(f"  most PostgreSQL connections open during the run: {peak.most}")


class _ConnectionPeak(threading.Thread):
    """Polls ``pg_stat_activity`` for the database's connections (PostgreSQL only)."""

    def __init__(self, env: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.url = env["DATABASE_URL"]
        self.most: int | None = None
        self.running = True

    def run(self) -> None:
        if not self.url.startswith("postgres"):
            return
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as connection:
            while self.running:
                row = connection.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                ).fetchone()
                self.most = max(self.most or 0, row[0] if row else 0)
                time.sleep(0.1)

    def stop(self) -> None:
        self.running = False
        self.join(timeout=5)


if __name__ == "__main__":
    main()
