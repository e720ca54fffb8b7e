"""The hot path of the memory, against its floor and, optionally, the reference implementation.

One run, one generated agent workload (``memory_bench.session``: units A/B/C,
1-3 parallel calls, tool results of 50-3,000 tokens), the same stub
``compact_fn`` for every compacting memory, so no summariser is timed. Prints
the mean cost per message of:

- the floor: tiktoken's raw encode of the same texts;
- ``BasicMemory``; ``CompactionMemory`` without a log, with a JSONL log, and
  with compaction on (threshold 8,000);
- ``get_session_state().to_dict()`` with every message in context (ms: the
  first call, then the median of five more);
- ``restore_from_log`` (from checkpoints, and replaying everything) against a
  plain orjson parse of the same file, at 1k, 10k and 100k messages;
- a cold process (median of ``--cold-runs`` fresh interpreters, with compiled
  bytecode as an installed package has it): ``import memory``, then a
  ``CompactionMemory`` built and its first ``add_message`` (a short user
  message) awaited, then the first text that needs tiktoken's own encoder.

With ``--reference WHEEL`` (``pip download lithosai-motus==0.4.3 --no-deps``),
the reference's ``BasicMemory`` and ``CompactionMemory`` run the same workload
(its package is unpacked to a temporary folder with only ``motus.memory`` and
``motus.models`` importable; it is never shipped here). The reference
re-tokenises the whole context on every add, so its compaction-off case runs
on ``--reference-messages`` messages only.

Usage: ``python bench/hot_path.py [--messages 8000] [--restore-sizes 1000 10000 100000]``.
Figures, not assertions: compare within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory_bench import session

from memory import (
    BasicMemory,
    ChatMessage,
    CompactionMemory,
    CompactionMemoryConfig,
)
from memory.tokens import encodings
from memory.tokens.encodings import encoding_for_model, load_bundled_encoding

MODEL = "gpt-4o"
NO_COMPACTION = 10**12


def stub(messages: list[Any], system_prompt: str) -> str:
    return "The user asked about flights; the agent searched and answered."


async def per_message(add: Callable[[Any], Awaitable[Any]], messages: list[Any]) -> float:
    started = time.perf_counter()
    for message in messages:
        await add(message)
    return (time.perf_counter() - started) / len(messages) * 1e6


def floor_us(messages: list[dict[str, Any]]) -> float:
    encode = load_bundled_encoding(encoding_for_model(MODEL).encoding_name).encode_ordinary
    texts = [m["content"] for m in messages if isinstance(m.get("content"), str)]
    texts += [c["function"]["arguments"] for m in messages for c in m.get("tool_calls") or ()]
    started = time.perf_counter()
    for text in texts:
        encode(text)
    return (time.perf_counter() - started) / len(messages) * 1e6


STATE = "get_session_state().to_dict() (ms)"


def state_ms(memory: Any) -> tuple[float, float]:
    """The first ``get_session_state().to_dict()`` and the median of five more (ms)."""
    runs = []
    for _ in range(6):
        started = time.perf_counter()
        memory.get_session_state().to_dict()
        runs.append((time.perf_counter() - started) * 1e3)
    return runs[0], statistics.median(runs[1:])


CUT = 1_000  # the tool-result limit of the truncation rows, in tokens
CUT_LABEL = f"BasicMemory, tool results cut to {CUT:,} tokens"


def ours(messages: list[dict[str, Any]], folder: Path) -> dict[str, Any]:
    typed = [ChatMessage.from_dict(m) for m in messages]
    out: dict[str, Any] = {}
    out["BasicMemory"] = asyncio.run(per_message(BasicMemory(model_name=MODEL).add_message, typed))
    cut = BasicMemory(model_name=MODEL, max_tool_result_tokens=CUT)
    out[CUT_LABEL] = asyncio.run(per_message(cut.add_message, typed))
    for label, threshold, log in (
        ("CompactionMemory, compaction off, no log", NO_COMPACTION, None),
        ("CompactionMemory, compaction off, JSONL log", NO_COMPACTION, folder / "off"),
        ("CompactionMemory, compaction on (8,000), JSONL log", 8_000, folder / "on"),
    ):
        memory = CompactionMemory(
            config=CompactionMemoryConfig(token_threshold=threshold, log_base_path=log),
            model_name=MODEL,
            compact_fn=stub,
        )
        out[label] = asyncio.run(per_message(memory.add_message, typed))
        if threshold == NO_COMPACTION:
            state_memory = memory
    out[STATE] = state_ms(state_memory)
    return out


def offline_tiktoken_cache(folder: Path) -> None:
    """Put the shipped BPE files where tiktoken's own loader looks first, so the
    reference (which calls tiktoken directly) never tries to download them."""
    cache = folder / "tiktoken-cache"
    cache.mkdir()
    for name in ("cl100k_base", "o200k_base"):
        url = f"https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
        data = gzip.decompress(encodings._read_bundled_file(name))
        (cache / hashlib.sha1(url.encode()).hexdigest()).write_bytes(data)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)


def load_reference(wheel: Path, folder: Path) -> Any:
    """The reference's ``motus`` package, unpacked from ``wheel`` into ``folder``
    with only its memory and message types importable."""
    offline_tiktoken_cache(folder)
    root = folder / "reference"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(root)
    # Only its memory and message types: the package's own __init__ imports a web server.
    (root / "motus" / "__init__.py").write_text("")
    (root / "motus" / "models" / "__init__.py").write_text(
        "from .base import BaseChatClient, ChatCompletion, ChatMessage, FunctionCall, ToolCall\n"
    )
    sys.path.insert(0, str(root))
    import motus.memory.basic_memory
    import motus.memory.compaction_memory
    import motus.memory.config
    import motus.models

    return motus


def reference(motus: Any, messages: list[dict[str, Any]], few: int, folder: Path) -> dict[str, Any]:
    RefBasic = motus.memory.basic_memory.BasicMemory
    RefCompaction = motus.memory.compaction_memory.CompactionMemory
    RefConfig = motus.memory.config.CompactionMemoryConfig
    typed = [motus.models.ChatMessage(**m) for m in messages]
    out: dict[str, Any] = {}
    out["BasicMemory"] = asyncio.run(per_message(RefBasic(model_name=MODEL).add_message, typed))
    cut = RefBasic(model_name=MODEL, max_tool_result_tokens=CUT)
    out[CUT_LABEL] = asyncio.run(per_message(cut.add_message, typed))
    off = RefCompaction(
        config=RefConfig(token_threshold=NO_COMPACTION), model_name=MODEL, compact_fn=stub
    )
    out[f"CompactionMemory, compaction off, no log ({few} messages)"] = asyncio.run(
        per_message(off.add_message, typed[:few])
    )
    on = RefCompaction(
        config=RefConfig(token_threshold=8_000, log_base_path=str(folder / "ref-on")),
        model_name=MODEL,
        compact_fn=stub,
    )
    out["CompactionMemory, compaction on (8,000), JSONL log"] = asyncio.run(
        per_message(on.add_message, typed)
    )
    state_memory = RefCompaction(
        config=RefConfig(token_threshold=NO_COMPACTION), model_name=MODEL, compact_fn=stub
    )
    state_memory._messages = list(typed)  # the context a long compaction-off run would hold
    out[STATE] = state_ms(state_memory)
    return out


def restore_figures(size: int, folder: Path) -> tuple[float, float, float]:
    """Seconds to parse the log with orjson, to restore it from its checkpoints
    and to replay it whole (``full_replay=True``)."""
    memory = CompactionMemory(
        config=CompactionMemoryConfig(
            session_id=f"r{size}", token_threshold=30_000, log_base_path=folder
        ),
        model_name=MODEL,
        compact_fn=stub,
    )

    async def feed() -> None:
        for message in session(size, seed=11):
            await memory.add_message(message)

    asyncio.run(feed())
    path = folder / f"r{size}.jsonl"
    started = time.perf_counter()
    with path.open("rb") as handle:
        for line in handle:
            orjson.loads(line)
    parse = time.perf_counter() - started
    timings = []
    for full_replay in (False, True):
        started = time.perf_counter()
        restored = CompactionMemory.restore_from_log(
            f"r{size}", log_base_path=folder, full_replay=full_replay
        )
        timings.append(time.perf_counter() - started)
        assert restored.get_context() == memory.get_context()
    return parse, timings[0], timings[1]


COLD = """
import asyncio, json, sys, time
started = time.perf_counter()
import memory
imported = time.perf_counter()

async def first() -> None:
    m = memory.CompactionMemory(model_name="gpt-4o")
    await m.add_message({"role": "user", "content": "The first message of a process."})
    global counted
    counted = time.perf_counter()
    # A tool result tiktoken's own encoder must tokenise (JSON, numbers, a name).
    await m.add_message({"role": "assistant", "content": None, "tool_calls": [{"id": "c1",
        "type": "function", "function": {"name": "search", "arguments": "{}"}}]})
    await m.add_message({"role": "tool", "tool_call_id": "c1",
        "content": json.dumps({"flights": [{"id": "HAT083", "fare": 312.5, "to": "Zürich"}]})})

asyncio.run(first())
built = time.perf_counter()
print(json.dumps([(imported - started) * 1e3, (counted - imported) * 1e3,
    (built - counted) * 1e3]))
"""


def cold_start(runs: int) -> list[float]:
    """Median ms of fresh interpreters: ``import memory``; from there to the
    first message counted; from there to a tool result counted with tiktoken's
    encoder. Bytecode is compiled once into a temporary prefix first (an
    installed package has its ``.pyc`` files; this checkout may not)."""
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as pyc:
        env = {**os.environ, "PYTHONPYCACHEPREFIX": pyc, "PYTHONPATH": str(root)}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        command = [sys.executable, "-c", COLD]
        subprocess.run(command, env=env, cwd=root, capture_output=True, check=True)
        figures = [
            orjson.loads(
                subprocess.run(
                    command, env=env, cwd=root, capture_output=True, text=True, check=True
                ).stdout
            )
            for _ in range(runs)
        ]
    return [statistics.median(f[i] for f in figures) for i in range(3)]


def _same(a: str, b: str) -> bool:
    return a.split(" (")[0] == b.split(" (")[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=8_000)
    parser.add_argument("--restore-sizes", type=int, nargs="*", default=[1_000, 10_000, 100_000])
    parser.add_argument("--reference", type=Path, help="lithosai-motus 0.4.3 wheel")
    parser.add_argument("--reference-messages", type=int, default=1_000)
    parser.add_argument("--cold-runs", type=int, default=9)
    parser.add_argument("--rounds", type=int, default=3, help="measurements in turns")
    args = parser.parse_args()
    messages = session(args.messages, seed=3)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        motus = load_reference(args.reference, folder) if args.reference else None
        # In turns, round after round: the machine's speed drifts, the ratios
        # within a round hold.
        floors, mine, theirs = [], [], []
        for n in range(args.rounds):
            floors.append(floor_us(messages))
            mine.append(ours(messages, folder / f"ours-{n}"))
            if motus is not None:
                theirs.append(
                    reference(motus, messages, args.reference_messages, folder / f"ref-{n}")
                )
        print(
            f"{len(messages):,} messages; mean µs per message (lower is better), "
            f"median of {args.rounds} rounds; ratios are medians of each round's own"
        )
        print(f"  floor, tiktoken encode of the same texts: {statistics.median(floors):10.0f}")
        for label in mine[0]:
            if label == STATE:
                continue
            value = statistics.median(r[label] for r in mine)
            floor = statistics.median(r[label] / f for r, f in zip(mine, floors, strict=True))
            line = f"  {label:<52} {value:8.0f} ({floor:4.2f}x the floor)"
            key = next((k for k in (theirs[0] if theirs else {}) if _same(k, label)), None)
            if key is not None:
                ref = statistics.median(r[key] for r in theirs)
                ratio = statistics.median(
                    t[key] / o[label] for t, o in zip(theirs, mine, strict=True)
                )
                ref_floor = statistics.median(
                    t[key] / f for t, f in zip(theirs, floors, strict=True)
                )
                line += f"  reference {ref:8.0f} ({ref_floor:4.2f}x)  reference/ours {ratio:6.2f}x"
            print(line)
        print(f"  {STATE}, first call / median of 5 more (last round):")
        rows = [("ours", mine[-1][STATE])] + ([("reference", theirs[-1][STATE])] if theirs else [])
        for who, (first, median) in rows:
            print(f"    {who:<10} {first:6.1f} / {median:6.1f}")
        for size in args.restore_sizes:
            parse, restore, full = restore_figures(size, folder)
            print(
                f"  restore {size:>7,} messages: {restore * 1e3:8.1f} ms "
                f"(full replay {full * 1e3:8.1f} ms), orjson parse of the file "
                f"{parse * 1e3:8.1f} ms, parse/restore {parse / restore:6.1f}x"
            )
    imported, counted, built = cold_start(args.cold_runs)
    print(
        f"  cold process (median of {args.cold_runs}): import memory {imported:.0f} ms; "
        f"first message counted {counted:.0f} ms after it; a tool result needing "
        f"tiktoken's encoder {built:.0f} ms after that"
    )


if __name__ == "__main__":
    main()
