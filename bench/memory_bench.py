"""Benchmark of the memory on a realistic agent session.

Runs a session of N messages (units A/B/C, tool results of 50-3000 tokens)
through a logging ``CompactionMemory`` with the offline summariser and prints,
for each N:

- add_message time per message, first thousand vs last thousand (the ratio
  shows whether the cost grows with the history; it should stay near 1);
- peak resident memory growth per message, and what the memory holds at the
  end (context messages, trace events) against the number added;
- restore_from_log time against a plain orjson parse of the same file;
- tiktoken's raw encode time on the same texts: the floor for add_message.

Usage: ``python bench/memory_bench.py [--sizes 1000 10000 100000]``.
Figures, not assertions: run it on a quiet machine and compare within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory import CompactionMemory, CompactionMemoryConfig, TokenCounter
from memory.tokens.encodings import encoding_for_model, load_bundled_encoding

WORDS = [
    "flight",
    "reservation",
    "passenger",
    "baggage",
    "economy",
    "business",
    "cancel",
    "refund",
    "upgrade",
    "seat",
    "JFK",
    "SEA",
    "LAX",
    "ORD",
    "2024-05-20",
    "HAT083",
    "mia_li_3668",
    "ZFA04Y",
    "total",
    "$1,204.50",
    "error",
    "found",
    "the",
    "a",
    "of",
    "to",
    "and",
    "in",
    "is",
    "was",
    "for",
    "on",
    "with",
    "as",
    "by",
    "at",
    "from",
    "that",
    "this",
    "it",
    "be",
    "are",
    "were",
]


def make_texts(rng: random.Random, counter: TokenCounter) -> dict[str, list[str]]:
    def text(tokens: int) -> str:
        words = rng.choices(WORDS, k=int(tokens * 0.8))
        return " ".join(words)

    return {
        "user": [text(rng.randint(10, 120)) for _ in range(200)],
        "answer": [text(rng.randint(20, 300)) for _ in range(200)],
        "tool": [text(int(50 * (60 ** rng.random()))) for _ in range(300)],  # 50..3000, log-uniform
    }


def session(n: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    texts = make_texts(rng, TokenCounter.for_model("gpt-4o"))
    out: list[dict[str, Any]] = []
    call = 0
    while len(out) < n:
        out.append({"role": "user", "content": rng.choice(texts["user"])})
        for _ in range(rng.randint(0, 4)):
            ids = [f"call_{call + i}" for i in range(rng.choice([1, 1, 1, 2, 3]))]
            call += len(ids)
            out.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": i,
                            "type": "function",
                            "function": {"name": "search", "arguments": '{"q": "x"}'},
                        }
                        for i in ids
                    ],
                }
            )
            out.extend(
                {"role": "tool", "tool_call_id": i, "content": rng.choice(texts["tool"])}
                for i in ids
            )
        out.append({"role": "assistant", "content": rng.choice(texts["answer"])})
    return out[:n]


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def run(n: int, folder: Path) -> dict[str, Any]:
    messages = session(n)
    memory = CompactionMemory(
        config=CompactionMemoryConfig(
            session_id=f"bench-{n}", token_threshold=30_000, log_base_path=folder
        ),
        model_name="gpt-4o",
    )
    memory.set_system_prompt("You are an airline agent.")
    gc.collect()
    rss_before = rss_mib()
    timings: list[float] = []
    for message in messages:
        started = time.perf_counter()
        await memory.add_message(message)
        timings.append(time.perf_counter() - started)
    rss_after = rss_mib()
    k = min(1000, n // 2)
    first, last = sum(timings[:k]) / k, sum(timings[-k:]) / k

    # tiktoken's own encoder, as the floor (gpt-4o's encoding is a shipped one).
    encoding = load_bundled_encoding(encoding_for_model(memory.model_name).encoding_name)
    texts = [m["content"] for m in messages if isinstance(m.get("content"), str)]
    started = time.perf_counter()
    for text in texts:
        encoding.encode_ordinary(text)
    encode_s = time.perf_counter() - started

    path = folder / f"bench-{n}.jsonl"
    started = time.perf_counter()
    with path.open("rb") as handle:
        for line in handle:
            orjson.loads(line)
    parse_s = time.perf_counter() - started
    started = time.perf_counter()
    restored = CompactionMemory.restore_from_log(f"bench-{n}", log_base_path=folder)
    restore_s = time.perf_counter() - started
    assert [m.to_dict() for m in restored.get_context()] == [
        m.to_dict() for m in memory.get_context()
    ]

    return {
        "n": n,
        "add_us_first": first * 1e6,
        "add_us_last": last * 1e6,
        "ratio": last / first,
        "add_total_s": sum(timings),
        "encode_s": encode_s,
        "rss_kib_per_msg": (rss_after - rss_before) * 1024 / n,
        "context_msgs": len(memory.messages),
        "trace_events": len(memory.get_memory_trace()["events"]),
        "compactions": memory.compaction_count,
        "log_mib": path.stat().st_size / 2**20,
        "parse_s": parse_s,
        "restore_s": restore_s,
        "restore_ratio": restore_s / parse_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    args = parser.parse_args()
    print(
        f"{'N':>7} {'add µs first/last':>18} {'ratio':>6} {'add s':>7} {'encode s':>8} "
        f"{'RSS KiB/msg':>11} {'ctx msgs':>8} {'trace':>6} {'compactions':>11} {'log MiB':>8} "
        f"{'parse s':>8} {'restore s':>9} {'restore/parse':>13}"
    )
    for n in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            r = asyncio.run(run(n, Path(tmp)))
        print(
            f"{r['n']:>7} {r['add_us_first']:>8.0f}/{r['add_us_last']:<9.0f} {r['ratio']:>6.2f} "
            f"{r['add_total_s']:>7.2f} {r['encode_s']:>8.2f} {r['rss_kib_per_msg']:>11.2f} "
            f"{r['context_msgs']:>8} {r['trace_events']:>6} {r['compactions']:>11} "
            f"{r['log_mib']:>8.1f} "
            f"{r['parse_s']:>8.2f} {r['restore_s']:>9.2f} {r['restore_ratio']:>13.2f}"
        )


if __name__ == "__main__":
    main()
