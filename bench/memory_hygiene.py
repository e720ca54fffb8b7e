"""Memory hygiene: what BackgroundMemory's offline extractor keeps of real conversations.

Usage::

    .venv/bin/python bench/memory_hygiene.py [--data ../shared/data] [--sample 60]
        [--labels bench/memory_hygiene_labels.json] [--write-sample FILE]

Each conversation of each stream is fed, as it was said, to its own
``BackgroundMemory`` (the offline extractor, an in-memory store, one scope per
conversation): its user and assistant text in order, tool calls and tool
output left out (``BackgroundMemory`` reads only what is said; what a user
pastes is in the user's text, and is read).
Streams: LoCoMo (every speaker speaks for themselves, so every turn is a
user turn), tau-bench airline, and the Claude Code, Codex CLI and ChatGPT
session files of ``agent-sessions/`` read with the dashboard's own parsers.

Figures per stream, all measured in one run:

- memories per 1,000 user turns (every memory made: active, superseded or
  flagged);
- duplicate share: of the active memories, the share that is a
  ``near_duplicate`` of another active memory of the same conversation;
- flagged: memories kept as instructions to the model (on real data, each
  one is a false alarm unless it is an injection);
- junk share: of a seeded random sample of the active memories, the share a
  person labelled junk (not a statement worth recalling: a fragment, a piece
  of code, log or tool output, a line of small talk). The labels are in
  ``--labels`` (keyed by the memory's ``dedupe_key``); a sampled memory with no
  label is counted and listed, never guessed. ``--write-sample`` writes the
  sample unlabelled, for a person to label.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import django

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

# The dashboard's parsers are plain Python, but their package loads Django's models.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "motus_web.settings")
django.setup()

from compaction_quality import locomo_conversation  # noqa: E402

from memory import (  # noqa: E402
    BackgroundMemory,
    ChatMessage,
    InMemoryLogStore,
    Scope,
    SQLiteLongTermStore,
)
from memory.background import Filters, OfflineExtractor  # noqa: E402
from memory.background.types import dedupe_key, near_duplicate  # noqa: E402
from motus_web.sessions.importers.formats import FormatProblem, parse_path  # noqa: E402

Said = list[tuple[str, str]]  # (role, text) in order; role "tool": a tool's output
Conversation = list[Said]  # its sessions, one scope


def locomo(data: Path) -> Iterator[Conversation]:
    for sample in json.loads((data / "locomo" / "locomo10-part1.json").read_text()):
        sessions: Conversation = []
        for message in locomo_conversation(sample).messages:
            if message.text.startswith("[") or not sessions:  # a session opens with its date
                sessions.append([])
            # Between people every turn is a user turn: each speaks for themselves.
            sessions[-1].append(("user" if message.role == "user" else "person", message.text))
        yield sessions


def tau(data: Path) -> Iterator[Conversation]:
    for run in json.loads((data / "tau-bench" / "gpt-4o-airline.json").read_text()):
        yield [_chat(run["traj"])]


def agent_sessions(data: Path, folder: str) -> Iterator[Conversation]:
    for path in sorted((data / "agent-sessions" / folder).glob("*.json*")):
        for item in parse_path(path):
            if not isinstance(item, FormatProblem):
                yield [_chat(item.messages)]


def _chat(messages: list[dict[str, Any]]) -> Said:
    said: Said = []
    for message in messages:
        role, content = message.get("role"), message.get("content")
        text = content if isinstance(content, str) else _text_of(content)
        if role in ("user", "assistant", "tool") and text and text.strip():
            said.append((str(role), text))
    return said


def _text_of(content: object) -> str:
    if not isinstance(content, list):
        return ""
    return "\n".join(
        part.get("text", "") for part in content if isinstance(part, dict) and part.get("text")
    )


STREAMS = {
    "LoCoMo": locomo,
    "tau-bench": tau,
    "Claude Code": lambda d: agent_sessions(d, "claude-code"),
    "Codex CLI": lambda d: agent_sessions(d, "codex-cli"),
    "ChatGPT": lambda d: agent_sessions(d, "chatgpt-export"),
}


async def run_stream(name: str, conversations: Iterator[Conversation]) -> dict[str, Any]:
    store = SQLiteLongTermStore()
    turns = made = duplicates = flagged = 0
    active_texts: list[tuple[str, str]] = []
    for index, sessions in enumerate(conversations):
        scope = Scope(user_id=f"h{index}")
        for said in sessions:
            turns += await _session(store, scope, said)
        made += store.count(scope, status=None)
        flagged += store.count(scope, status="flagged")
        active = store.memories(scope, Filters(status="active"), limit=100_000)
        keys = [dedupe_key(m.text) for m in active]
        duplicates += sum(
            1
            for i, key in enumerate(keys)
            if any(near_duplicate(key, other) for j, other in enumerate(keys) if j != i)
        )
        active_texts.extend((name, m.text) for m in active)
    count = len(active_texts)
    return {
        "stream": name,
        "user_turns": turns,
        "memories": made,
        "per_1000": 1000 * made / turns if turns else 0.0,
        "active": count,
        "duplicate_share": duplicates / count if count else 0.0,
        "flagged": flagged,
        "texts": active_texts,
    }


async def _session(store: SQLiteLongTermStore, scope: Scope, said: Said) -> int:
    """Feed one session to its own BackgroundMemory; returns its user turns."""
    memory = BackgroundMemory(
        store=store,
        scope=scope,
        log_store=InMemoryLogStore(),
        extractor=OfflineExtractor(),
        recall_budget_tokens=0,
    )
    turns = 0
    for role, text in said:
        if role in ("user", "person"):
            turns += 1
        if role == "tool":
            continue  # BackgroundMemory never reads a tool's output (only what is said)
        if role == "user":
            await memory.add_message(ChatMessage.user(text))
        else:
            await memory.add_message(ChatMessage.assistant(text))
    if said and said[-1][0] != "assistant":
        await memory.add_message(ChatMessage.assistant("(end)"))
    await memory.drain()
    return turns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(REPO.parent.parent / "shared" / "data"))
    parser.add_argument("--sample", type=int, default=60, help="active memories labelled")
    parser.add_argument("--labels", default=str(REPO / "bench" / "memory_hygiene_labels.json"))
    parser.add_argument("--write-sample", default=None, help="write the sample to label")
    args = parser.parse_args()
    data = Path(args.data)
    if not (data / "locomo").exists():
        data = next((p / "shared" / "data" for p in REPO.parents if (p / "shared").exists()), data)
    results = [asyncio.run(run_stream(name, load(data))) for name, load in STREAMS.items()]
    print(
        f"{'stream':<12} {'user turns':>10} {'memories':>9} {'/1k turns':>9} "
        f"{'active':>7} {'dup share':>9} {'flagged':>7}"
    )
    for r in results:
        print(
            f"{r['stream']:<12} {r['user_turns']:>10,} {r['memories']:>9,} {r['per_1000']:>9.0f} "
            f"{r['active']:>7,} {r['duplicate_share']:>9.1%} {r['flagged']:>7}"
        )
    everything = [t for r in results for t in r["texts"]]
    sample = random.Random(27).sample(everything, min(args.sample, len(everything)))
    if args.write_sample:
        rows = [{"stream": s, "text": t, "key": dedupe_key(t), "junk": None} for s, t in sample]
        Path(args.write_sample).write_text(json.dumps(rows, indent=1, ensure_ascii=False))
    labels_path = Path(args.labels)
    labels = {
        row["key"]: row["junk"]
        for row in (json.loads(labels_path.read_text()) if labels_path.exists() else [])
    }
    labelled = [(s, t) for s, t in sample if isinstance(labels.get(dedupe_key(t)), bool)]
    junk = [(s, t) for s, t in labelled if labels[dedupe_key(t)]]
    share = len(junk) / len(labelled) if labelled else 0.0
    print(
        f"junk share (hand-labelled, seeded sample of {len(sample)} active memories, "
        f"{len(labelled)} labelled): {share:.1%} ({len(junk)} junk)"
    )
    for stream, text in junk:
        print(f"  junk [{stream}] {text[:100]}")
    for stream, text in sample:
        if dedupe_key(text) not in labels:
            print(f"  unlabelled [{stream}] {text[:100]}")


if __name__ == "__main__":
    main()
