"""What ``BackgroundMemory`` recalls across sessions, at what cost, and without duplicates.

    .venv/bin/python bench/background_memory.py [--locomo PATH] [--limit N]
        [--budget 2000] [--memories 10000] [--skip-locomo] [--skip-latency]

LoCoMo, cross-session (the conversations of the file, the messages as
``bench/compaction_quality.py`` builds them: speaker A's turns are user
messages, B's assistant ones). For each conversation, one scope; its sessions
1..N are fed one by one, each as a separate session (a new
``BackgroundMemory`` in the scope, every message through ``add_message``,
the offline extractor over every speaker's lines, extraction in the
background as in a chat, drained at the session's end). Each question
(categories 1-4) is asked twice, in one run: right after the session its
evidence ends in (at the start of the next, so all of it lies in earlier
sessions), and after all sessions. For each, it checks whether the
normalised answer occurs in what each contender places within ``--budget``
tokens, and whether every evidence turn is placed (verbatim, or through a
placed memory whose provenance names its message):

* no memory: nothing (the floor: an answer the question itself contains);
* raw-turn BM25: the earlier turns ranked by SQLite FTS5's ``bm25()`` against
  the question (porter stemming), the best that fit the budget;
* newest turns: the newest earlier turns that fit (what a drop-oldest
  context would hold);
* background recall: the block a new session of the scope places for the
  question (``BackgroundMemory.recall``: ``scoring.recall_ranking``);
* the whole history of the earlier sessions, without a budget.

The answer check is ``compaction_quality``'s (``normalise``; an answer counts
when it occurs in the normalised text). Conversations 1, 3, 5 are the ones the
recall weights were set on; 2, 4 are held out and reported apart, and so are
the questions that do not ask for a time (LoCoMo's category 2 asks one, and a
memory's resolved date, ``dates.plain_when``, answers many of those).

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
    ratio,
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
SPLITS = ("all", "tuned on", "held out", "not temporal")


@dataclass(slots=True)
class Question:
    text: str
    answer: str  # normalised
    owner: str | None  # "A", "B", "both"
    asked_in: int  # the session it is asked at the start of (evidence in earlier ones)
    evidence: frozenset[str]  # the dia_ids of its evidence turns ("D1:3")
    temporal: bool  # LoCoMo's category 2: the answer is a time


@dataclass(slots=True)
class Sessions:
    """One LoCoMo conversation as sessions of messages, and its questions."""

    sessions: list[list[ChatMessage]]
    turn_ids: list[list[str]]  # each message's dia_id, session by session
    dates: list[str]  # each session's date and time, as LoCoMo writes it
    questions: list[Question]


@dataclass(slots=True)
class Tally:
    """Per split: answers found in what is placed, questions whose evidence is placed."""

    hits: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SPLITS, 0))
    evidence: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SPLITS, 0))
    tokens: list[int] = field(default_factory=list)

    def count(
        self, question: Question, split: str, placed: str, tokens: int, turns: set[str] | None
    ) -> None:
        self.tokens.append(tokens)
        for name in ("all", split, *(() if question.temporal else ("not temporal",))):
            if question.answer and question.answer in normalise(placed):
                self.hits[name] += 1
            if turns is not None and question.evidence <= turns:
                self.evidence[name] += 1


def locomo_sessions(sample: dict[str, Any]) -> Sessions:
    """The conversation's messages (``locomo_conversation``) cut at its sessions,
    and each answerable question with the session it is asked in."""
    conversation = locomo_conversation(sample)
    conv = sample["conversation"]
    numbers = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
    sessions, turn_ids, at = [], [], 0
    for n in numbers:
        size = len(conv[f"session_{n}"])
        sessions.append(conversation.messages[at : at + size])
        turn_ids.append([turn["dia_id"] for turn in conv[f"session_{n}"]])
        at += size
    position = {n: i for i, n in enumerate(numbers)}
    asked = [qa for qa in sample["qa"] if qa.get("category") in QA_CATEGORIES and "answer" in qa]
    questions = []
    for qa, (answer, owner) in zip(asked, conversation.answers, strict=True):
        evidence = [int(d) for e in qa.get("evidence", []) for d in _DIA.findall(e)]
        known = [position[d] for d in evidence if d in position]
        ids = frozenset(m.group(0) for e in qa.get("evidence", []) for m in _DIA.finditer(e))
        if known:
            temporal = qa["category"] == 2
            questions.append(Question(qa["question"], answer, owner, max(known) + 1, ids, temporal))
    dates = [conv.get(f"session_{n}_date_time", "") for n in numbers]
    return Sessions(sessions, turn_ids, dates, questions)


def fit(turns: Sequence[tuple[str, str]], budget: int, counter: TokenCounter) -> Placed:
    """The turns (``(dia_id, text)``, in order of preference) that fit ``budget``
    tokens, one a line, passing over one too large for the room left."""
    lines, ids, used = [], set(), 0
    for dia_id, text in turns:
        cost = counter.count(text) + 1
        if used + cost <= budget:
            lines.append(text)
            ids.add(dia_id)
            used += cost
    return Placed("\n".join(lines), used, ids)


@dataclass(slots=True)
class Placed:
    text: str
    tokens: int
    turns: set[str]


class RawTurns:
    """The earlier sessions' turns in an FTS5 table, ranked by ``bm25()``."""

    def __init__(self) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute(
            "CREATE VIRTUAL TABLE turns USING fts5(text, dia_id UNINDEXED, "
            "tokenize='porter unicode61')"
        )
        self.turns: list[tuple[str, str]] = []

    def add(self, messages: Sequence[ChatMessage], ids: Sequence[str]) -> None:
        pairs = [(m.text, i) for m, i in zip(messages, ids, strict=True)]
        self.db.executemany("INSERT INTO turns (text, dia_id) VALUES (?, ?)", pairs)
        self.turns.extend((i, t) for t, i in pairs)

    def bm25(self, question: str, budget: int, counter: TokenCounter) -> Placed:
        terms = query_terms(question)
        if not terms:
            return Placed("", 0, set())
        match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
        rows = self.db.execute(
            "SELECT dia_id, text FROM turns WHERE turns MATCH ? ORDER BY bm25(turns) LIMIT 200",
            (match,),
        ).fetchall()
        return fit(rows, budget, counter)

    def newest(self, budget: int, counter: TokenCounter) -> Placed:
        """The newest turns that fit, as a drop-oldest context keeps them."""
        placed, used, ids = [], 0, set()
        for dia_id, text in reversed(self.turns):
            cost = counter.count(text) + 1
            if used + cost > budget:
                break
            placed.append(text)
            ids.add(dia_id)
            used += cost
        return Placed("\n".join(reversed(placed)), used, ids)

    def whole(self, counter: TokenCounter) -> Placed:
        text = "\n".join(t for _, t in self.turns)
        return Placed(text, counter.count(text), {i for i, _ in self.turns})


async def feed_session(
    store: SQLiteLongTermStore,
    scope: Scope,
    messages: Sequence[ChatMessage],
    roles: tuple[str, ...] | None,
    said_on: str | None = None,
    turn_ids: Sequence[str] = (),
    turn_of: dict[tuple[str, int], str] | None = None,
) -> BackgroundMemory:
    """One session of ``messages`` through a new ``BackgroundMemory`` of ``scope``;
    ``turn_of`` gets each message's ``(session_id, seq)`` -> its ``turn_ids`` entry."""
    memory = BackgroundMemory(
        store=store,
        scope=scope,
        said_on=said_on,
        model_name=MODEL,
        extractor=OfflineExtractor(roles=roles),
        enable_memory_tools=False,
    )
    for index, message in enumerate(messages):
        if turn_of is not None:
            turn_of[(memory.session_id, memory.next_seq)] = turn_ids[index]
        await memory.add_message(message)
    await memory.drain()
    return memory


def recalled(
    store: SQLiteLongTermStore,
    scope: Scope,
    question: str,
    budget: int,
    turn_of: dict[tuple[str, int], str],
) -> Placed:
    """The block a new session of ``scope`` places for ``question`` (its recall
    path), with the turns its memories' provenance names."""
    probe = BackgroundMemory(
        store=store, scope=scope, model_name=MODEL, recall_budget_tokens=budget
    )
    record = probe.recall(question)
    turns: set[str] = set()
    for memory_id in (record.memory_ids or []) if record else []:
        for link in store.get(scope, memory_id).provenance:
            if link.session_id is None or link.first_seq is None:
                continue
            for seq in range(link.first_seq, (link.last_seq or link.first_seq) + 1):
                if (link.session_id, seq) in turn_of:
                    turns.add(turn_of[(link.session_id, seq)])
    block = probe.memory_block
    return Placed(block, probe.token_counter.count(block) if block else 0, turns)


TIMINGS = ("after all sessions", "right after the evidence session")
CONTENDERS = (
    "no memory",
    "raw-turn BM25",
    "newest turns",
    "background recall",
    "whole history (no budget)",
)


def split_of(index: int) -> str:
    """Conversations 1, 3, 5... tuned the recall weights; 2, 4... are held out."""
    return "tuned on" if index % 2 == 0 else "held out"


async def bench_locomo(samples: list[dict[str, Any]], budget: int) -> None:
    counter = TokenCounter.for_model(MODEL)
    tallies = {(t, name): Tally() for t in TIMINGS for name in CONTENDERS}
    totals = dict.fromkeys(SPLITS, 0)
    kept = 0

    def ask(timing: str, question: Question, split: str, store: Any, raw: RawTurns) -> None:
        placed = {
            "no memory": Placed("", 0, set()),
            "raw-turn BM25": raw.bm25(question.text, budget, counter),
            "newest turns": raw.newest(budget, counter),
            "background recall": recalled(store, scope, question.text, budget, turn_of),
            "whole history (no budget)": raw.whole(counter),
        }
        for name, p in placed.items():
            turns = None if name == "no memory" else p.turns
            tallies[(timing, name)].count(question, split, p.text, p.tokens, turns)

    for index, sample in enumerate(samples):
        conversation = locomo_sessions(sample)
        split = split_of(index)
        raw = RawTurns()
        store = SQLiteLongTermStore()
        scope = Scope(user_id=f"locomo-{index + 1}")
        turn_of: dict[tuple[str, int], str] = {}
        sessions = conversation.sessions
        for k in range(len(sessions)):
            # Asked at the start of session k, right after the evidence's last session.
            for question in (q for q in conversation.questions if q.asked_in == k):
                ask(TIMINGS[1], question, split, store, raw)
            await feed_session(
                store,
                scope,
                sessions[k],
                None,  # a conversation between people: everyone's lines
                conversation.dates[k],
                conversation.turn_ids[k],
                turn_of,
            )
            raw.add(sessions[k], conversation.turn_ids[k])
        for question in conversation.questions:
            totals["all"] += 1
            totals[split] += 1
            totals["not temporal"] += 0 if question.temporal else 1
            if question.asked_in == len(sessions):
                ask(TIMINGS[1], question, split, store, raw)
            ask(TIMINGS[0], question, split, store, raw)
        kept += store.count(scope)
    print(
        f"LoCoMo cross-session, {len(samples)} conversations, {totals['all']} questions "
        f"(tuned on {totals['tuned on']}, held out {totals['held out']}), "
        f"budget {budget:,} tokens; {kept:,} memories kept"
    )
    for timing in TIMINGS:
        print(f"\nAsked {timing}:")
        rows = []
        for name in CONTENDERS:
            tally = tallies[(timing, name)]
            rows.append(
                [
                    name,
                    *(percent(tally.hits[s], totals[s]) for s in SPLITS),
                    "n/a" if name == "no memory" else percent(tally.evidence["all"], totals["all"]),
                    f"{statistics.mean(tally.tokens):,.0f}" if tally.tokens else "0",
                ]
            )
        table(
            [
                "contender",
                "answers placed",
                "tuned on (1, 3, 5)",
                "held out (2, 4)",
                "not temporal",
                "evidence placed",
                "mean tokens placed",
            ],
            rows,
        )
        ours = tallies[(timing, "background recall")].hits
        for baseline in ("raw-turn BM25", "newest turns"):
            theirs = tallies[(timing, baseline)].hits
            print(
                f"background recall / {baseline}: "
                + ", ".join(f"{s} {ratio(ours[s], theirs[s])}" for s in SPLITS)
            )
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
        extractor=OfflineExtractor(),
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
    """Recall (``BackgroundMemory.ranked``: search, newest, ranking; then the
    block) at ``count`` memories of one scope, on SQLite."""
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
    probe = BackgroundMemory(store=store, scope=scope, model_name=MODEL)
    times = []
    for question in questions:
        started = time.perf_counter()
        # The recall path: the matches and the newest memories, ranked, then the block.
        ranked = probe.ranked(question)
        render_block([hit for hit, _ in ranked], budget, counter)
        times.append(time.perf_counter() - started)
    ordered = sorted(times)
    p95 = ordered[int(0.95 * (len(ordered) - 1))]
    print(
        f"Recall at {store.count(scope):,} memories in one scope (SQLite FTS5, a file): "
        f"{len(times)} questions, ranking + block of {budget:,} tokens: "
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
