"""How long the dashboard's pages take on one long session, and how many queries they run.

Builds a session of ``--messages`` messages (the generated agent workload of
``memory_bench.session``, compacting at ``--threshold`` tokens with a stub
summariser) in a fresh SQLite database under a temporary folder (or the
database ``DATABASE_URL`` names), then requests every page of it through
Django's test client, as its owner: the median of ``--runs`` requests each,
in milliseconds, with the number of SQL queries. Figures, not assertions.

The step page (what the model saw for a reply) is requested for a reply
near the start, the middle and the end of the session: its time and queries
must not grow with the session's length or the reply's place. With
``--claude-code FILE`` (the real Claude Code session with a compaction in
the shared data), it is imported and its compaction page requested too.

Usage: ``python bench/dashboard_pages.py [--messages 50000] [--runs 3] [--claude-code FILE]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

# The project (for Django's settings) and bench/ (for the workload).
sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--threshold", type=int, default=30_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--claude-code", type=Path, help="a Claude Code session with a compaction")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        os.environ.setdefault("DATABASE_URL", f"sqlite:///{folder}/bench.sqlite3")
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "motus_web.settings")
        import django

        django.setup()
        run(args.messages, args.threshold, args.runs, args.claude_code)


def run(size: int, threshold: int, runs: int, claude_code: Path | None) -> None:
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse
    from memory_bench import session

    from memory import ChatMessage, CompactionMemory, CompactionMemoryConfig, InMemoryLogStore
    from motus_web.sessions.log_store import DatabaseLogStore
    from motus_web.sessions.models import Session

    settings.ALLOWED_HOSTS = ["testserver"]
    # Serve the static files' own names: the bench does not run collectstatic.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    call_command("migrate", verbosity=0)
    staging = InMemoryLogStore()

    async def summarise(messages: list[ChatMessage], system_prompt: str) -> str:
        return f"{len(messages)} messages folded."

    memory = CompactionMemory(
        config=CompactionMemoryConfig(session_id="long", token_threshold=threshold),
        log_store=staging,
        model_name="gpt-4o",
        compact_fn=summarise,
    )

    async def feed() -> None:
        for message in session(size, seed=5):
            await memory.add_message(message)

    started = time.perf_counter()
    asyncio.run(feed())
    DatabaseLogStore(announce=False).extend("long", staging.read("long"))
    owner = get_user_model().objects.create_user("bench", password="bench-pass-1")
    Session.objects.filter(public_id="long").update(owner=owner)
    stored = Session.objects.get(public_id="long")
    print(
        f"{stored.message_count:,} messages, {stored.compaction_count} compactions, "
        f"built in {time.perf_counter() - started:.0f} s; median of {runs} requests each:"
    )
    client = Client()
    client.force_login(owner)
    last = stored.compaction_events.filter(kind="ok").order_by("-position").first()
    replies = stored.messages.filter(role="assistant")

    def reply_near(seq: int) -> int:
        found = replies.filter(seq__gte=seq).order_by("seq").values_list("seq", flat=True).first()
        assert found is not None
        return found

    pages = {
        "session list": reverse("dashboard:session_list"),
        "session detail": reverse("dashboard:session_detail", args=["long"]),
        "session detail, last page": reverse("dashboard:session_detail", args=["long"])
        + f"?page={size // 50}",
        "what the model sees now": reverse("dashboard:session_context", args=["long"]),
        "trace": reverse("dashboard:session_trace", args=["long"]),
        "message detail (middle)": reverse("dashboard:message_detail", args=["long", size // 2]),
        "latest compaction": reverse(
            "dashboard:compaction_detail", args=["long", last.position if last else 0]
        ),
        "fork confirmation": reverse("dashboard:fork_confirm", args=["long", size // 2]),
        "undo confirmation": reverse("dashboard:undo_confirm", args=["long"]),
        "rewind confirmation (middle)": reverse(
            "dashboard:rewind_confirm", args=["long", size // 2]
        ),
        "rewind to before the latest compaction": reverse(
            "dashboard:rewind_before_confirm", args=["long", last.position if last else 0]
        ),
    }
    for label, seq in (("start", 100), ("middle", size // 2), ("end", size - 100)):
        reply = reply_near(seq)
        pages[f"step page, reply #{reply} ({label})"] = reverse(
            "dashboard:step_detail", args=["long", reply]
        )
    if claude_code is not None:
        pages.update(_claude_code(claude_code, owner))
    for label, url in pages.items():
        times = []
        for _ in range(runs):
            with CaptureQueriesContext(connection) as queries:
                begun = time.perf_counter()
                response = client.get(url)
                times.append(time.perf_counter() - begun)
            assert response.status_code == 200, (label, response.status_code)
        print(f"  {label:<36} {statistics.median(times) * 1e3:8.0f} ms {len(queries):4d} queries")


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
