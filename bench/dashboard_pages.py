"""How long the dashboard's pages take on long sessions, how big they are and how
many queries they run.

Builds, in a fresh SQLite database under a temporary folder (or the database
``DATABASE_URL`` names), one session of each size in ``--sizes`` with
compactions and, with ``--without``, one that never compacted, then requests
their pages through Django's test client, as their owner: the median of
``--runs`` requests each, in milliseconds, with the response's size in bytes
and its number of SQL queries. Figures, not assertions: the session page and
the context page should give the same bytes and queries at every size. At
the end it says, for each page, whether it gave the same bytes at every
size, or the same once every number is read as one digit.

A session is the generated agent workload of ``memory_bench.session``: a block
of ``BLOCK`` messages fed once through a ``CompactionMemory`` (threshold
``--threshold`` tokens, a stub summariser), whose log is then repeated with
its seqs, compaction numbers and checkpoints shifted until it reaches the
size, and written with the database store's bulk inserts. Feeding 290,000
messages through the memory would take minutes; the repeated block gives the
same rows a long session has. The session without compactions is the same
messages with a threshold no message reaches and no compaction records.

The step page (what the model saw for a reply) is requested for a reply 100
messages from the end. Then the latest compaction is undone (the dashboard's
action) and the pages that read what is in force are requested again. With ``--claude-code FILE``
(the real Claude Code session with a compaction in the shared data), it is
imported and its compaction page requested too.

Usage: ``python bench/dashboard_pages.py [--sizes 10000 50000 290000] [--without]
[--runs 3] [--claude-code FILE]``.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# The project (for Django's settings) and bench/ (for the workload).
sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]

BLOCK = 10_000  # messages fed through the memory once, then repeated


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 50_000, 290_000])
    parser.add_argument("--without", action="store_true", help="also sessions without compactions")
    parser.add_argument("--threshold", type=int, default=30_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--claude-code", type=Path, help="a Claude Code session with a compaction")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        os.environ.setdefault("DATABASE_URL", f"sqlite:///{folder}/bench.sqlite3")
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "motus_web.settings")
        import django

        django.setup()
        run(args)


def block_log(threshold: int) -> list[dict[str, Any]]:
    """The records of ``BLOCK`` messages fed through a compacting memory."""
    from memory_bench import session

    from memory import ChatMessage, CompactionMemory, CompactionMemoryConfig, InMemoryLogStore

    staging = InMemoryLogStore()

    async def summarise(messages: list[ChatMessage], system_prompt: str) -> str:
        return f"{len(messages)} messages folded."

    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="block", token_threshold=threshold),
        log_store=staging,
        model_name="gpt-4o",
        compact_fn=summarise,
    )

    async def feed() -> None:
        for message in session(BLOCK, seed=5):
            await memory.add_message(message)

    asyncio.run(feed())
    return list(staging.read("block"))


def repeated(
    block: list[dict[str, Any]], session_id: str, size: int, *, compactions: bool
) -> Iterator[dict[str, Any]]:
    """The block's log repeated to ``size`` messages under ``session_id``.

    Each repeat shifts seqs and compaction numbers past the one before; its
    first compaction folds from where the previous repeat's last one stopped.
    Without ``compactions``, only the messages, their logged context size
    growing by each message's tokens, under a threshold none reaches."""
    meta = copy.deepcopy(block[0])
    meta["session_id"] = session_id
    if not compactions:
        meta["config"] = {**meta["config"], "token_threshold": 10**12, "auto_compact": False}
    yield meta
    body = block[1:]
    per_block = sum(1 for record in body if record["type"] == "message")
    numbers = sum(1 for record in body if record["type"] == "compaction")
    first_message = next(record for record in body if record["type"] == "message")
    # The instructions and the reply's priming, which every logged context size includes.
    context = first_message["context_tokens"] - first_message["tokens"]
    folded_to, written = -1, 0
    for repeat in range(-(-size // per_block)):
        shift = repeat * per_block
        first = True
        for record in body:
            if record["type"] == "message":
                if written == size:
                    return
                written += 1
                out = {**record, "seq": record["seq"] + shift}
                if not compactions:
                    context += record["tokens"]
                    out["context_tokens"] = context
                yield out
            elif compactions and record["type"] == "compaction":
                out = copy.deepcopy(record)
                out["compaction_number"] += repeat * numbers
                out["through_seq"] += shift
                low, high = out["summarized_seqs"]
                low = folded_to + 1 if first and repeat else low + shift
                out["summarized_seqs"] = [low, high + shift]
                out["replayed_seqs"] = [seq + shift for seq in out["replayed_seqs"]]
                out["checkpoint"]["next_seq"] += shift
                folded_to, first = high + shift, False
                yield out


def build(
    block: list[dict[str, Any]], session_id: str, size: int, compactions: bool, owner: object
) -> float:
    """Write the session with the database store's bulk inserts; seconds taken."""
    from motus_web.sessions.log_store import DatabaseLogStore

    started = time.perf_counter()
    store = DatabaseLogStore(announce=False, owner=owner)  # type: ignore[arg-type]
    store.extend(session_id, repeated(block, session_id, size, compactions=compactions))
    return time.perf_counter() - started


def run(args: argparse.Namespace) -> None:
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    settings.ALLOWED_HOSTS = ["testserver"]
    # Serve the static files' own names: the bench does not run collectstatic.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user("bench", password="bench-pass-1")
    started = time.perf_counter()
    block = block_log(args.threshold)
    took = time.perf_counter() - started
    print(f"a block of {BLOCK:,} messages fed through the memory in {took:.0f} s")
    kinds = [True, False] if args.without else [True]
    seen: dict[str, dict[int, bytes]] = {}
    for size in args.sizes:
        for compactions in kinds:
            session_id = f"s{size}" + ("" if compactions else "-flat")
            took = build(block, session_id, size, compactions, owner)
            found = measure(session_id, took, args.runs, owner, full=compactions)
            if compactions:
                found |= after_undo(session_id, args.runs, owner)
            for label, body in found.items():
                # Links name the session: read them as one name.
                body = body.replace(session_id.encode(), b"SESSION")
                seen.setdefault(label + ("" if compactions else ", never compacted"), {})[size] = (
                    body
                )
    compare(seen)
    if args.claude_code is not None:
        print("the real Claude Code session:")
        report(_claude_code(args.claude_code, owner), args.runs, owner)


def measure(
    session_id: str, took: float, runs: int, owner: object, *, full: bool
) -> dict[str, bytes]:
    from django.urls import reverse

    from motus_web.sessions.models import Session

    stored = Session.objects.get(public_id=session_id)
    size = stored.message_count
    print(
        f"{size:,} messages, {stored.compaction_count:,} compactions, "
        f"written in {took:.0f} s; median of {runs} requests each:"
    )
    last = stored.compaction_events.filter(kind="ok").order_by("-position").first()
    replies = stored.messages.filter(role="assistant")

    def reply_near(seq: int) -> int:
        found = replies.filter(seq__gte=seq).order_by("seq").values_list("seq", flat=True).first()
        assert found is not None
        return found

    sid = session_id
    detail = reverse("dashboard:session_detail", args=[sid])
    pages = {
        "session detail": detail,
        "session detail, last page": detail + f"?page={-(-size // 50)}",
        "what the model sees now": reverse("dashboard:session_context", args=[sid]),
    }
    if full:
        pages |= {
            "session list": reverse("dashboard:session_list"),
            "trace": reverse("dashboard:session_trace", args=[sid]),
            "message detail (middle)": reverse("dashboard:message_detail", args=[sid, size // 2]),
            "latest compaction": reverse(
                "dashboard:compaction_detail", args=[sid, last.position if last else 0]
            ),
            "fork confirmation": reverse("dashboard:fork_confirm", args=[sid, size // 2]),
            "undo confirmation": reverse("dashboard:undo_confirm", args=[sid]),
            "rewind to before the latest compaction": reverse(
                "dashboard:rewind_before_confirm", args=[sid, last.position if last else 0]
            ),
            "rewind confirmation (middle)": reverse(
                "dashboard:rewind_confirm", args=[sid, size // 2]
            ),
        }
        reply = reply_near(size - 100)
        pages["step page, a reply 100 from the end"] = reverse(
            "dashboard:step_detail", args=[sid, reply]
        )
    return report(pages, runs, owner)


def after_undo(session_id: str, runs: int, owner: object) -> dict[str, bytes]:
    """Undo the latest compaction (the dashboard's action, through the library)
    and request the pages that read what is in force again."""
    from django.urls import reverse

    from motus_web.sessions import operations
    from motus_web.sessions.models import Session

    stored = Session.objects.get(public_id=session_id)
    event, _ = operations.undoable_now(stored)
    assert event is not None
    operations.undo_compaction(stored, "bench", target=event.position, as_of=stored.record_count)
    print("  after undoing the latest compaction:")
    detail = reverse("dashboard:session_detail", args=[session_id])
    pages = {
        "session detail, after an undo": detail,
        "undo confirmation, after an undo": reverse("dashboard:undo_confirm", args=[session_id]),
        "the undone compaction": reverse(
            "dashboard:compaction_detail", args=[session_id, event.position]
        ),
    }
    return report(pages, runs, owner)


def report(pages: dict[str, str], runs: int, owner: object) -> dict[str, bytes]:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client()
    client.force_login(owner)  # type: ignore[arg-type]
    contents = {}
    for label, url in pages.items():
        times = []
        for _ in range(runs):
            with CaptureQueriesContext(connection) as queries:
                begun = time.perf_counter()
                response = client.get(url)
                times.append(time.perf_counter() - begun)
            assert response.status_code == 200, (label, response.status_code)
        print(
            f"  {label:<40} {statistics.median(times) * 1e3:8.0f} ms "
            f"{len(response.content):>10,} bytes {len(queries):4d} queries"
        )
        contents[label] = response.content
    return contents


def compare(pages: dict[str, dict[int, bytes]]) -> None:
    """Whether each page gives the same bytes at every size: byte for byte,
    else once every number in it is read as one digit (the message count,
    seqs and token figures differ legitimately), else how much differs."""
    print("the same page at every size:")
    for label, by_size in pages.items():
        # The forms' one-time and CSRF tokens are new on every request.
        bodies = [re.sub(rb"[A-Za-z0-9_-]{32,}", b"TOKEN", body) for body in by_size.values()]
        if len(bodies) < 2 or label == "session list":  # it lists every session built so far
            continue
        shapes = {re.sub(rb"[0-9][0-9,.]*", b"0", body) for body in bodies}
        if len(set(bodies)) == 1:
            verdict = "identical bytes"
        elif len(shapes) == 1:
            lengths = sorted({len(body) for body in bodies})
            verdict = f"identical but for numbers ({'/'.join(f'{n:,}' for n in lengths)} bytes)"
        else:
            verdict = f"differs in more than numbers ({len(shapes)} shapes)"
        print(f"  {label:<40} {verdict}")


def _claude_code(path: Path, owner: object) -> dict[str, str]:
    """Import the Claude Code session; the pages of its compactions."""
    from django.urls import reverse

    from motus_web.sessions.importers import ImportOptions, import_stream
    from motus_web.sessions.models import CompactionEvent

    with path.open("rb") as stream:
        report = import_stream(stream, path.name, ImportOptions(owner=owner))  # type: ignore[arg-type]
    assert not report.problems, report.problems
    pages = {}
    events = CompactionEvent.objects.filter(
        session__public_id__in=report.imported, kind=CompactionEvent.Kind.OK
    )
    for event in events.select_related("session"):
        sid = event.session.public_id
        url = reverse("dashboard:compaction_detail", args=[sid, event.position])
        pages[f"Claude Code compaction {event.number}"] = url
        pages[f"Claude Code compaction {event.number}, lost only"] = url + "?show=lost"
    return pages


if __name__ == "__main__":
    main()
