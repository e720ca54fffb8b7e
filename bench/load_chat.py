"""Chat under load: concurrent chat sessions against the scripted streaming model server.

Builds a database (a fresh SQLite file under a temporary folder, or the one
``DATABASE_URL`` names), starts ``memory.testing.scripted_server`` on loopback
(its echo streams one 8-character piece every ``--pace`` seconds) as the only
chat model, then for each worker count starts uvicorn (two workers need
``REDIS_URL``: without it the second refuses to start) and runs
``--sessions`` chat sessions at once, each its own user's, each sending
``--messages`` messages one after the other over its socket, as a browser
does (after 5 s of silence it sends ``resume``, as the page does, and a
``sync`` saying the writer is gone ends the turn). Prints: messages sent
against messages persisted (user messages in the
database; they must be equal) and answers persisted; errors (a socket that
failed, an error frame, a turn that did not end with an answer); the
turns ended by the resume (their end frame not there in time), and of those
the end frames that came later all the same; the turns whose streamed text
fell short of the answer; the numbered frames of a socket's own turns that
never reached it; the added
latency of each streamed delta, p50/p95 (from the model server sending the
piece that ends it to the browser's socket receiving it: the chat's
batching, the channel layer, the server's queueing); the server's peak
resident memory (every process of it together); the client's own CPU use
and event-loop lateness (is the client the bottleneck?). The client and the
model server run on the same machine as the server. Figures, not assertions.
``--trace`` adds the server's own counters (``bench/chat_trace``): frames
dropped by the channel layer (and where), its backlogs, the websocket's
write buffer, the dispatch and sync-thread waits.

Each worker count first runs one chat alone on the same server (its delta p95
is the baseline of the ratio printed after the crowd's), and with ``--long N``
a turn on a never-compacted session of N messages while ``/login/`` is polled.
The load average is printed beside each figure (the machine is shared).
``BENCH_PORT`` picks the server's port (default: any free one).

Usage: ``python bench/load_chat.py [--sessions 200] [--messages 3] [--pace 0.05]
[--workers 1,2] [--long 49000] [--trace]`` (``m1`` in ``--workers``: one worker on the
in-memory layer even with ``REDIS_URL``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from websockets.asyncio.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from load_pages import REPO, server

from memory.testing.scripted_server import PACED_ECHO_NOTE, ScriptedServer

PIECE = 8  # characters per streamed event of the scripted echo
SILENCE_S = 5.0  # a socket silent this long asks the store, as the page's stall check does


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--messages", type=int, default=3)
    parser.add_argument("--pace", type=float, default=0.05)
    parser.add_argument(
        "--workers",
        default="1,2",
        help="worker counts, comma-separated; 'm1' is one worker on the in-memory layer "
        "(REDIS_URL left out)",
    )
    parser.add_argument(
        "--long",
        type=int,
        default=0,
        help="also: a turn on a never-compacted session of this many messages, /login/ "
        "polled meanwhile (on the last worker count)",
    )
    parser.add_argument(
        "--trace",
        action="store_true",
        help="count, in the server, where frames wait or are dropped (bench/chat_trace)",
    )
    args = parser.parse_args()
    model = ScriptedServer(fallback="echo", pace_s=args.pace).start()
    try:
        with tempfile.TemporaryDirectory() as folder:
            env = {
                **os.environ,
                "DATABASE_URL": os.environ.get("DATABASE_URL")
                or f"sqlite:///{folder}/bench.sqlite3",
                "STATIC_ROOT": f"{folder}/static",
                "MOTUS_IMPORT_SPOOL_DIR": f"{folder}/spool",
                "MOTUS_IN_MEMORY_LAYER_LOCK": f"{folder}/layer.lock",
                "MOTUS_IMPORT_THREADS": "0",
                "DJANGO_SETTINGS_MODULE": "motus_web.settings",
                "LOG_LEVEL": "WARNING",
                "MOTUS_CHAT_MODELS": "scripted",
                "MOTUS_CHAT_SCRIPTED_MODEL": "gpt-4o",
                "MOTUS_CHAT_SCRIPTED_BASE_URL": model.openai_base_url,
                "MOTUS_CHAT_SCRIPTED_API_KEY": "none",
                "MOTUS_CHAT_SCRIPTED_COMPACT_MODEL": "offline",
            }
            for command in (["migrate"], ["collectstatic", "--noinput"]):
                subprocess.run([sys.executable, "manage.py", *command, "-v", "0"],
                               cwd=REPO, env=env, check=True)  # fmt: skip
            print(
                f"{args.sessions} sessions x {args.messages} messages, echo pace {args.pace} s "
                f"per {PIECE} characters, {env['DATABASE_URL'].split(':', 1)[0]}"
                + (", Redis" if env.get("REDIS_URL") else "")
            )
            for spec in args.workers.split(","):
                workers = int(spec.lstrip("m"))
                here = dict(env)
                if spec.startswith("m"):
                    here.pop("REDIS_URL", None)
                if workers > 1 and not here.get("REDIS_URL"):
                    print(f"{workers} workers: skipped, they need REDIS_URL (a shared layer)")
                    continue
                sessions = prepare(here, f"w{spec}", args.sessions + 1)
                trace = Path(folder) / f"trace-{spec}"
                if args.trace:
                    trace.mkdir()
                    here["MOTUS_CHAT_TRACE"] = str(trace)
                    here["PYTHONPATH"] = str(Path(__file__).resolve().parent / "chat_trace")
                uvicorn = server(here, workers)
                with uvicorn as base:
                    layer = "Redis" if here.get("REDIS_URL") else "in-memory layer"
                    alone = run(base, uvicorn.process.pid, f"{workers} ({layer}), one chat",
                                sessions[:1], args.messages, model, here)  # fmt: skip
                    crowd = run(base, uvicorn.process.pid, f"{workers} ({layer})", sessions[1:],
                                args.messages, model, here)  # fmt: skip
                    print(
                        f"  delta p95 ratio: {crowd / max(alone, 200):.1f}x one chat's "
                        f"(its p95 counted as at least 200 ms; target at most 5x); load {load()}"
                    )
                    if args.long and spec == args.workers.split(",")[-1]:
                        long_turn(base, here, args.long)
                if args.trace:
                    print_trace(trace)
    finally:
        model.stop()


def prepare(env: dict[str, str], tag: str, count: int) -> list[tuple[str, str]]:
    """``count`` users, each with a chat session and a logged-in browser cookie."""
    script = f"""
import json
from django.contrib.auth.models import User
from django.test import Client
from memory import CompactionMemoryConfig
from motus_web.chat.tools import new_chat_tool_schemas
from motus_web.sessions.operations import create_session
out = []
for n in range({count}):
    user = User.objects.create(username=f"bench-{tag}-{{n}}")
    config = CompactionMemoryConfig()
    session = create_session(user, config, title="Load", model_name="gpt-4o",
                             system_prompt="Be brief.", tools=new_chat_tool_schemas(config))
    client = Client()
    client.force_login(user)
    out.append([session.public_id, client.cookies["sessionid"].value])
print(json.dumps(out))
"""
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", script], cwd=REPO,
                          env=env, check=True, capture_output=True, text=True)  # fmt: skip
    return [(public_id, cookie) for public_id, cookie in json.loads(done.stdout.splitlines()[-1])]


def run(
    base: str,
    pid: int,
    label: str,
    sessions: list[tuple[str, str]],
    messages: int,
    model: ScriptedServer,
    env: dict[str, str],
) -> float:
    """Runs the chats; prints the figures; returns the deltas' added latency p95 (ms)."""
    peak = _MemoryPeak(pid)
    peak.start()
    received: dict[str, list[tuple[float, int]]] = {}  # message text -> (time, characters so far)
    errors: list[str] = []
    lost_ends = [0]  # turns whose end came from a resume, their last frames dropped
    late_ends = [0]  # of those, end frames that arrived after all (late, not dropped)
    short_text = [0]  # turns whose streamed text fell short of the stored answer's
    gaps = [0]  # numbered frames of this socket's own runs that never reached it
    busy = [0]  # sends refused while the previous turn held the lease, sent again
    lag = [0.0, 0]  # the client's own event-loop lateness: most, samples
    sent = 0

    async def chat(public_id: str, cookie: str, n: int) -> None:
        nonlocal sent
        url = base.replace("http://", "ws://") + f"/ws/sessions/{public_id}/"
        headers = {"Cookie": f"sessionid={cookie}", "Origin": base}
        ended_by_resume: set[str] = set()
        done_runs: set[str] = set()  # this socket's earlier turns
        try:
            async with connect(url, additional_headers=headers, open_timeout=300) as ws:
                await ws.send(json.dumps({"type": "resume", "last_pos": -1}))
                while json.loads(await ws.recv())["type"] != "sync":
                    pass
                last_pos = -1
                for m in range(messages):
                    text = f"session {n} message {m}: where is my bag?"
                    await ws.send(json.dumps({"type": "send", "text": text}))
                    sent += 1
                    arrivals = received.setdefault(text, [])
                    characters, asked_at, run, sn = 0, None, None, 0
                    while True:
                        try:
                            raw = await asyncio.wait_for(ws.recv(), SILENCE_S)
                        except TimeoutError:  # as the page's stall check: ask the store
                            await ws.send(json.dumps({"type": "resume", "last_pos": last_pos}))
                            continue
                        frame = json.loads(raw)
                        kind = frame["type"]
                        if frame.get("run") in ended_by_resume and kind == "finished":
                            late_ends[0] += 1
                        if run is None and frame.get("run") not in (None, *done_runs):
                            run = frame["run"]  # this turn's (its turn_started may be lost)
                        if run is not None and frame.get("run") == run:
                            gaps[0] += frame["sn"] - sn - 1
                            sn = frame["sn"]
                        if kind == "record":
                            last_pos = max(last_pos, frame["pos"])
                            if frame.get("role") == "user" and text in frame.get("html", ""):
                                asked_at = frame["pos"]  # this message is stored
                        elif kind == "delta" and run is not None and frame.get("run") == run:
                            characters += len(frame["text"])
                            arrivals.append((time.monotonic(), characters))
                        elif kind == "error" and frame.get("code") == "busy":
                            # The last turn still holds the lease (it ends after its end
                            # frame): send again, as a person would. Not stored, not counted.
                            busy[0] += 1
                            await asyncio.sleep(0.5)
                            await ws.send(json.dumps({"type": "send", "text": text}))
                        elif kind == "error":
                            errors.append(frame.get("code", "error"))
                        elif kind == "finished" and run is not None and frame.get("run") == run:
                            if frame["reason"] != "answer":
                                errors.append(f"finished: {frame['reason']}")
                            if characters < len(f"echo: {text}\n\n{PACED_ECHO_NOTE}"):
                                short_text[0] += 1  # the echo's answer, streamed short
                            break
                        elif (
                            kind == "sync"
                            and not frame["running"]
                            and asked_at is not None
                            and last_pos > asked_at  # its answer stored, the writer gone
                        ):
                            lost_ends[0] += 1  # its end frame was dropped (or is late)
                            if run is not None:
                                ended_by_resume.add(run)
                            break
                    if run is not None:
                        done_runs.add(run)
                # Frames still on their way (a late end) before the socket closes.
                with contextlib.suppress(TimeoutError):
                    while True:
                        frame = json.loads(await asyncio.wait_for(ws.recv(), 1.0))
                        if frame.get("run") in ended_by_resume and frame["type"] == "finished":
                            late_ends[0] += 1
        except Exception as error:  # a failed socket counts as an error, the run goes on
            code = getattr(getattr(error, "rcvd", None), "code", None)
            errors.append(type(error).__name__ + (f" {code}" if code is not None else ""))

    async def lateness() -> None:
        while True:
            started = time.perf_counter()
            await asyncio.sleep(0.1)
            lag[0] = max(lag[0], time.perf_counter() - started - 0.1)
            lag[1] += 1

    async def everyone() -> None:
        watch = asyncio.create_task(lateness())
        await asyncio.gather(*(chat(p, c, n) for n, (p, c) in enumerate(sessions)))
        watch.cancel()

    started = time.perf_counter()
    cpu = time.process_time()
    asyncio.run(everyone())
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu
    peak.stop()
    persisted, answers = _persisted(env, [p for p, _ in sessions])
    latencies = _added_latencies(received, model)
    ms = sorted(t * 1e3 for t in latencies)
    p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))] if ms else float("nan")
    closed = sum(1 for e in errors if e.startswith("ConnectionClosed"))
    print(
        f"{label}: sent {sent}, persisted {persisted} "
        f"(answers {answers}), errors {len(errors)}"
        + (f" ({', '.join(sorted(set(errors)))})" if errors else "")
        + f", turns ended by a resume {lost_ends[0]} (their end frame arriving later: "
        f"{late_ends[0]}), turns whose streamed text fell short {short_text[0]}, "
        f"own-run frames missing at the socket {gaps[0]}, "
        f"sends refused busy and sent again {busy[0]}"
        f"; added latency per delta p50 {statistics.median(ms) if ms else float('nan'):.0f} ms, "
        f"p95 {p95:.0f} ms ({len(ms)} deltas); peak server memory {peak.most / 2**20:.0f} MB; "
        f"{wall:.0f} s; the client used {cpu / wall:.0%} of a core, its loop at most "
        f"{lag[0] * 1e3:.0f} ms late; sockets closed by the server {closed}; load {load()}"
    )
    return p95


def load() -> str:
    """The machine's load average (1, 5, 15 minutes), shared with other work."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def long_turn(base: str, env: dict[str, str], messages: int) -> None:
    """A turn on a never-compacted session of ``messages`` messages (imported as
    short alternating turns, so its context is far past the model's window),
    ``/login/`` polled one request at a time before it (idle) and during it."""
    import httpx

    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "long.jsonl"
        turns = [
            {"role": "user" if t % 2 == 0 else "assistant", "content": f"turn {t} " * 20}
            for t in range(messages)
        ]
        source.write_text(json.dumps({"messages": turns}) + "\n")
        script = f"""
import json
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from motus_web.sessions.models import Session
user = User.objects.create_user("long-owner")
call_command("import_sessions", "--owner", "long-owner", {str(source)!r}, verbosity=0)
client = Client()
client.force_login(user)
found = Session.objects.get(owner=user)
print(json.dumps([found.public_id, client.cookies["sessionid"].value, found.compaction_count]))
"""
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "manage.py", "shell", "-c", script], cwd=REPO,
                              env=env, check=True, capture_output=True, text=True)  # fmt: skip
    public_id, cookie, compactions = json.loads(done.stdout.splitlines()[-1])
    print(f"long session: {messages:,} messages, {compactions} compactions, imported in "
          f"{time.perf_counter() - started:.0f} s")  # fmt: skip

    async def polls(until: asyncio.Event | None, count: int) -> list[float]:
        times: list[float] = []
        async with httpx.AsyncClient(base_url=base, timeout=120) as client:
            while (until is None and len(times) < count) or (until and not until.is_set()):
                begun = time.perf_counter()
                answer = await client.get("/login/")
                answer.raise_for_status()
                times.append(time.perf_counter() - begun)
        return times

    async def turn(ended: asyncio.Event) -> tuple[str, float]:
        url = base.replace("http://", "ws://") + f"/ws/sessions/{public_id}/"
        headers = {"Cookie": f"sessionid={cookie}", "Origin": base}
        begun = time.perf_counter()
        try:
            async with connect(url, additional_headers=headers, open_timeout=300) as ws:
                await ws.send(json.dumps({"type": "send", "text": "And now?"}))
                while True:
                    frame = json.loads(await ws.recv())
                    if frame["type"] == "finished":
                        return f"finished: {frame['reason']}", time.perf_counter() - begun
                    if frame["type"] == "error" and frame.get("refused"):
                        return f"refused: {frame['message']}", time.perf_counter() - begun
        finally:
            ended.set()

    async def during() -> tuple[tuple[str, float], list[float]]:
        ended = asyncio.Event()
        outcome, times = await asyncio.gather(turn(ended), polls(ended, 0))
        return outcome, times

    idle = sorted(asyncio.run(polls(None, 40)))
    (outcome, seconds), busy = asyncio.run(during())
    busy.sort()
    idle_p95 = idle[min(len(idle) - 1, int(len(idle) * 0.95))]
    busy_p95 = busy[min(len(busy) - 1, int(len(busy) * 0.95))] if busy else float("nan")
    print(
        f"  the turn: {outcome} in {seconds:.1f} s; /login/ p95 idle {idle_p95 * 1e3:.0f} ms, "
        f"during the turn {busy_p95 * 1e3:.0f} ms ({len(busy)} requests, most "
        f"{busy[-1] * 1e3 if busy else float('nan'):.0f} ms): {busy_p95 / max(idle_p95, 0.1):.1f}x "
        f"idle (idle counted as at least 100 ms; target at most 3x); load {load()}"
    )


def print_trace(folder: Path) -> None:
    """The server's counters (bench/chat_trace), summed over its processes."""
    counts: dict[str, float] = {}
    most: dict[str, float] = {}
    totals: dict[str, float] = {}
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        for key, value in data["counts"].items():
            counts[key] = counts.get(key, 0) + value
        for key, value in data["totals"].items():
            totals[key] = totals.get(key, 0) + value
        for key, value in data["most"].items():
            most[key] = max(most.get(key, 0), value)
    for key in sorted(counts):
        print(f"  {key}: {counts[key]:,.0f}")
    for key in sorted(totals):
        print(f"  total {key}: {totals[key]:,.1f}")
    for key in sorted(most):
        print(f"  most {key}: {most[key]:,.3f}")


def _added_latencies(
    received: dict[str, list[tuple[float, int]]], model: ScriptedServer
) -> list[float]:
    """Each delta's arrival less the time the model server sent the piece that ends it."""
    sent_at: dict[str, list[float]] = {}
    for request in model.requests:
        users = [m for m in (request.body or {}).get("messages", []) if m.get("role") == "user"]
        if users and isinstance(users[-1].get("content"), str):
            sent_at[users[-1]["content"]] = request.sent_at
    out = []
    for text, arrivals in received.items():
        events = sent_at.get(text)
        if not events:
            continue
        for at, characters in arrivals:
            event = (characters - 1) // PIECE + 1  # the first event is the role's, no text
            if event < len(events):
                out.append(at - events[event])
    return out


def _persisted(env: dict[str, str], public_ids: list[str]) -> tuple[int, int]:
    script = (
        "from motus_web.sessions.models import Message; "
        f"rows = Message.objects.filter(session__public_id__in={public_ids!r}); "
        "print(rows.filter(role='user').count(), rows.filter(role='assistant').count())"
    )
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", script], cwd=REPO,
                          env=env, capture_output=True, text=True)  # fmt: skip
    if done.returncode:  # (the server may still be writing: the figures say so, not a crash)
        print(f"could not count the stored messages: {done.stderr.strip().splitlines()[-1:]}")
        return -1, -1
    users, answers = done.stdout.split()[-2:]
    return int(users), int(answers)


def _tree(pid: int) -> list[int]:
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return [pid]
    return [pid, *(p for child in children for p in _tree(int(child)))]


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class _MemoryPeak(threading.Thread):
    """The most resident memory the server's processes held together, polled."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.most, self._done = pid, 0, threading.Event()

    def run(self) -> None:
        while not self._done.wait(0.2):
            self.most = max(self.most, sum(_rss(p) for p in _tree(self.pid)))

    def stop(self) -> None:
        self._done.set()
        self.join()


if __name__ == "__main__":
    main()
