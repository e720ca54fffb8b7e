"""What ``BackgroundMemory`` recalls across sessions, at what cost, and without duplicates.

    .venv/bin/python bench/background_memory.py [--locomo PATH] [--limit N]
        [--budget 2000] [--memories 10000] [--skip-locomo] [--skip-latency]

LoCoMo, cross-session (conversations 1-5, the messages as
``bench/compaction_quality.py`` builds them: speaker A's turns are user
messages, B's assistant ones). For each conversation, one scope; its sessions
1..N are fed one by one, each as a separate session (a new
``BackgroundMemory`` in the scope, every message through ``add_message``,
extraction in the background as in a chat, drained at the session's end). A
question (categories 1-4) is asked at the start of the session after the
latest session its evidence is in, so all of it lies in earlier sessions.
For each question it checks whether the normalised answer occurs in what
each contender places in the context within ``--budget`` tokens:

* no memory: nothing (the floor: an answer the question itself contains);
* raw-turn BM25: the earlier sessions' turns ranked by SQLite FTS5's
  ``bm25()`` against the question, the best that fit the budget;
* background, offline extractor: the recalled block of a new session
  (``BackgroundMemory.recall``), with the extractor reading the user's
  statements only (the library's default), and reading both speakers (in
  LoCoMo both are people talking about themselves);
* the whole history of the earlier sessions, without a budget (the upper bound).

The answer check is ``compaction_quality``'s (``normalise``; an answer counts
when it occurs in the normalised text), per owner of the evidence (A, B, both).

Also: duplicates (one session fed three times as three sessions: memories
after one and after three, and the provenance links per memory); the time
``add_message`` takes for a reply with and without background extraction,
beside the extraction's own time (extraction must add nothing to a reply);
and recall at ``--memories`` memories in one scope on SQLite (the search and
the block), p50 / p95 / max over the LoCoMo questions.

LoCoMo is CC BY-NC: read from ``shared/data/locomo/`` beside the checkout, from
``$MOTUS_LOCOMO`` or from ``--locomo``; never copied into the repository.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sqlite3
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from compaction_quality import (
    LOCOMO_FILE,
    QA_CATEGORIES,
    locomo_conversation,
    locomo_path,
    normalise,
    percent,
    table,
)

from memory import (
    BackgroundMemory,
    ChatMessage,
    CompactionMemory,
    InMemoryLogStore,
    Scope,
    TokenCounter,
)
from memory.background import OfflineExtractor, Provenance, SQLiteLongTermStore
from memory.background.extract import sentence_candidates
from memory.background.recall import render_block
from memory.background.scoring import query_terms

MODEL = "gpt-4o"
_DIA = re.compile(r"D(\d+):\d+")
SIDES = ("all", "A", "B", "both")


@dataclass(slots=True)
class Question:
    text: str
    answer: str  # normalised
    owner: str | None  # "A", "B", "both"
    asked_in: int  # the session it is asked at the start of (evidence in earlier ones)


@dataclass(slots=True)
class Sessions:
    """One LoCoMo conversation as sessions of messages, and its questions."""

    sessions: list[list[ChatMessage]]
    dates: list[str]  # each session's date and time, as LoCoMo writes it
    questions: list[Question]


@dataclass(slots=True)
class Tally:
    hits: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SIDES, 0))
    tokens: list[int] = field(default_factory=list)

    def count(self, question: Question, placed: str, tokens: int) -> None:
        self.tokens.append(tokens)
        if question.answer and question.answer in normalise(placed):
            self.hits["all"] += 1
            if question.owner is not None:
                self.hits[question.owner] += 1


def locomo_sessions(sample: dict[str, Any]) -> Sessions:
    """The conversation's messages (``locomo_conversation``) cut at its sessions,
    and each answerable question with the session it is asked in."""
    conversation = locomo_conversation(sample)
    conv = sample["conversation"]
    numbers = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
    sessions, at = [], 0
    for n in numbers:
        size = len(conv[f"session_{n}"])
        sessions.append(conversation.messages[at : at + size])
        at += size
    position = {n: i for i, n in enumerate(numbers)}
    asked = [qa for qa in sample["qa"] if qa.get("category") in QA_CATEGORIES and "answer" in qa]
    questions = []
    for qa, (answer, owner) in zip(asked, conversation.answers, strict=True):
        evidence = [int(d) for e in qa.get("evidence", []) for d in _DIA.findall(e)]
        known = [position[d] for d in evidence if d in position]
        if known:
            questions.append(Question(qa["question"], answer, owner, max(known) + 1))
    dates = [conv.get(f"session_{n}_date_time", "") for n in numbers]
    return Sessions(sessions, dates, questions)


class RawTurns:
    """The earlier sessions' turns in an FTS5 table, ranked by ``bm25()``."""

    def __init__(self) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE turns USING fts5(text, tokenize='porter unicode61')")

    def add(self, messages: Sequence[ChatMessage]) -> None:
        self.db.executemany("INSERT INTO turns (text) VALUES (?)", [(m.text,) for m in messages])

    def placed(self, question: str, budget: int, counter: TokenCounter) -> tuple[str, int]:
        terms = query_terms(question)
        if not terms:
            return "", 0
        match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
        rows = self.db.execute(
            "SELECT text FROM turns WHERE turns MATCH ? ORDER BY bm25(turns) LIMIT 200", (match,)
        ).fetchall()
        lines, used = [], 0
        for (text,) in rows:
            cost = counter.count(text) + 1
            if used + cost <= budget:
                lines.append(text)
                used += cost
        return "\n".join(lines), used


async def feed_session(
    store: SQLiteLongTermStore,
    scope: Scope,
    messages: Sequence[ChatMessage],
    roles: tuple[str, ...],
    said_on: str | None = None,
) -> BackgroundMemory:
    memory = BackgroundMemory(
        store=store,
        scope=scope,
        said_on=said_on,
        model_name=MODEL,
        extractor=OfflineExtractor(roles=roles),
        enable_memory_tools=False,
    )
    for message in messages:
        await memory.add_message(message)
    await memory.drain()
    return memory


def recalled(store: SQLiteLongTermStore, scope: Scope, question: str, budget: int) -> str:
    """The block a new session of ``scope`` places for ``question`` (its recall path)."""
    probe = BackgroundMemory(
        store=store, scope=scope, model_name=MODEL, recall_budget_tokens=budget
    )
    probe.recall(question)
    return probe.memory_block


async def bench_locomo(samples: list[dict[str, Any]], budget: int) -> None:
    counter = TokenCounter.for_model(MODEL)
    names = [
        "no memory",
        "raw-turn BM25",
        "background (user's statements)",
        "background (both speakers)",
        "whole history (no budget)",
    ]
    tallies = {name: Tally() for name in names}
    totals = dict.fromkeys(SIDES, 0)
    memories = {"background (user's statements)": 0, "background (both speakers)": 0}
    roles = {
        "background (user's statements)": ("user",),
        "background (both speakers)": ("user", "assistant"),
    }
    for index, sample in enumerate(samples):
        conversation = locomo_sessions(sample)
        raw = RawTurns()
        stores = {name: SQLiteLongTermStore() for name in memories}
        scope = Scope(user_id=f"locomo-{index + 1}")
        history: list[ChatMessage] = []
        sessions = conversation.sessions
        for k in range(len(sessions) + 1):
            # Asked at the start of session k (k = N: after the last): evidence before k.
            for question in (q for q in conversation.questions if q.asked_in == k):
                totals["all"] += 1
                if question.owner is not None:
                    totals[question.owner] += 1
                tallies["no memory"].count(question, "", 0)
                placed, used = raw.placed(question.text, budget, counter)
                tallies["raw-turn BM25"].count(question, placed, used)
                for name, store in stores.items():
                    block = recalled(store, scope, question.text, budget)
                    tallies[name].count(question, block, counter.count(block) if block else 0)
                whole = "\n".join(m.text for m in history)
                tallies["whole history (no budget)"].count(question, whole, counter.count(whole))
            if k == len(sessions):
                break
            for name, store in stores.items():
                await feed_session(store, scope, sessions[k], roles[name], conversation.dates[k])
            raw.add(sessions[k])
            history.extend(sessions[k])
        for name, store in stores.items():
            memories[name] += store.count(scope)
    print(
        f"LoCoMo cross-session, {len(samples)} conversations, {totals['all']} questions "
        f"(evidence owner A {totals['A']}, B {totals['B']}, both {totals['both']}), "
        f"budget {budget:,} tokens"
    )
    rows = []
    for name in names:
        tally = tallies[name]
        rows.append(
            [
                name,
                percent(tally.hits["all"], totals["all"]),
                percent(tally.hits["A"], totals["A"]),
                percent(tally.hits["B"], totals["B"]),
                percent(tally.hits["both"], totals["both"]),
                f"{statistics.mean(tally.tokens):,.0f}" if tally.tokens else "0",
            ]
        )
    table(["contender", "answers placed", "A's", "B's", "both", "mean tokens placed"], rows)
    for name, count in memories.items():
        print(f"memories kept, {name}: {count:,}")
    print()


async def bench_duplicates(sample: dict[str, Any]) -> None:
    """One session fed as three sessions of one scope: memories and links."""
    session = locomo_sessions(sample).sessions[0]
    store = SQLiteLongTermStore()
    scope = Scope(user_id="duplicates")
    rows = []
    for n in range(1, 4):
        await feed_session(store, scope, session, ("user", "assistant"))
        links = [len(m.provenance) for m in store.memories(scope, limit=10_000)]
        spread = f"{min(links)}-{max(links)}" if min(links) != max(links) else str(links[0])
        rows.append([n, store.count(scope), spread])
    print("Duplicates: LoCoMo conversation 1, session 1, fed as three sessions of one scope")
    table(["after session", "memories", "provenance links per memory"], rows)
    print()


async def bench_latency(samples: list[dict[str, Any]]) -> None:
    """``add_message`` of each reply, with and without background extraction."""
    messages = [m for s in samples for m in locomo_conversation(s).messages]

    async def replies(memory: CompactionMemory) -> list[float]:
        times = []
        for message in messages:
            started = time.perf_counter()
            await memory.add_message(message)
            if message.role == "assistant":
                times.append(time.perf_counter() - started)
        return times

    compact = CompactionMemory(
        model_name=MODEL, enable_memory_tools=False, log_store=InMemoryLogStore()
    )
    plain = await replies(compact)
    log = InMemoryLogStore()
    background = BackgroundMemory(
        store=SQLiteLongTermStore(),
        scope=Scope(user_id="latency"),
        model_name=MODEL,
        extractor=OfflineExtractor(roles=("user", "assistant")),
        log_store=log,
    )
    with_extraction = await replies(background)
    drained = time.perf_counter()
    await background.drain()
    tail = time.perf_counter() - drained
    extractions = [
        r["duration_s"] for r in log.read(background.session_id) if r["type"] == "memory_extraction"
    ]

    def ms(values: Sequence[float]) -> list[str]:
        ordered = sorted(values)
        p95 = ordered[int(0.95 * (len(ordered) - 1))]
        return [f"{1000 * statistics.median(ordered):.2f}", f"{1000 * p95:.2f}"]

    print(
        f"Reply latency: add_message of {len(plain):,} replies "
        f"(LoCoMo, {len(samples)} conversations)"
    )
    table(
        ["memory", "median ms", "p95 ms"],
        [["CompactionMemory", *ms(plain)], ["BackgroundMemory (extracting)", *ms(with_extraction)]],
    )
    if extractions:
        print(
            f"the {len(extractions):,} background extractions took median "
            f"{1000 * statistics.median(extractions):.2f} ms, off the replies; draining the last "
            f"took {1000 * tail:.1f} ms"
        )
    print()


def bench_recall(samples: list[dict[str, Any]], count: int, budget: int) -> None:
    """Recall (search + block) at ``count`` memories of one scope, on SQLite."""
    found: dict[str, None] = {}
    for sample in samples:
        for message in locomo_conversation(sample).messages:
            found.update(dict.fromkeys(c.text for c in sentence_candidates(message.text)))
    sentences = list(found)
    questions = [q.text for s in samples for q in locomo_sessions(s).questions]
    store = SQLiteLongTermStore(Path("/tmp") / f"bench-recall-{count}.sqlite3")
    scope = Scope(user_id="recall-bench")
    store.purge(scope)
    link = Provenance("bench", 0, 0, "bench", "2025-01-01T00:00:00+00:00")
    started = time.perf_counter()
    for i in range(count):
        text = sentences[i % len(sentences)]
        if i >= len(sentences):
            text = f"{text} (note {i // len(sentences)})"
        store.add(scope, text=text, kind="fact", provenance=link)
    filled = time.perf_counter() - started
    counter = TokenCounter.for_model(MODEL)
    times = []
    for question in questions:
        started = time.perf_counter()
        hits = store.search(scope, question, limit=40)
        render_block(hits, budget, counter)
        times.append(time.perf_counter() - started)
    ordered = sorted(times)
    p95 = ordered[int(0.95 * (len(ordered) - 1))]
    print(
        f"Recall at {store.count(scope):,} memories in one scope (SQLite FTS5, a file): "
        f"{len(times)} questions, search + block of {budget:,} tokens: "
        f"p50 {1000 * statistics.median(ordered):.1f} ms, p95 {1000 * p95:.1f} ms, "
        f"max {1000 * ordered[-1]:.1f} ms (filling took {filled:.1f} s)"
    )
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--locomo", default=None, help="path of locomo10-part1.json")
    parser.add_argument("--limit", type=int, default=None, help="conversations to use")
    parser.add_argument("--budget", type=int, default=2_000, help="recall budget, in tokens")
    parser.add_argument("--memories", type=int, default=10_000, help="memories for recall p95")
    parser.add_argument("--skip-locomo", action="store_true", help="no cross-session check")
    parser.add_argument("--skip-latency", action="store_true", help="no reply latency")
    args = parser.parse_args()
    path = locomo_path(args.locomo)
    if path is None or not path.exists():
        print(f"LoCoMo not found ({path or LOCOMO_FILE}): nothing to measure")
        return
    samples = json.loads(path.read_text())
    if not args.skip_locomo:
        asyncio.run(bench_locomo(samples[: args.limit], args.budget))
    asyncio.run(bench_duplicates(samples[0]))
    if not args.skip_latency:
        asyncio.run(bench_latency(samples[: args.limit]))
    bench_recall(samples, args.memories, args.budget)


if __name__ == "__main__":
    main()
