"""The hot path of the memory, against its floor and, optionally, the reference implementation.

One run, one generated agent workload (``memory_bench.session``: units A/B/C,
1-3 parallel calls, tool results of 50-3,000 tokens), the same stub
``compact_fn`` for every compacting memory, so no summariser is timed. Every
variant, the reference's too, takes the workload ``BATCH`` messages at a
time, in turns, so that the shared machine's drifting speed falls on all of
them alike. Prints the mean cost per message of:

- the floor: tiktoken's raw encode of the same texts;
- ``BasicMemory``, also with tool results cut to ``CUT`` tokens;
  ``CompactionMemory`` without a log, with a JSONL log, and with compaction
  on (threshold 8,000);
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
from collections.abc import Awaitable, Callable, Sequence
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


# A variant of the workload: its label, how it takes a batch of messages, the
# messages in its own type, and how many of them it runs.
Variant = tuple[str, Callable[[Sequence[Any]], None], list[Any], int]
BATCH = 200  # messages per turn: every variant runs a batch, then the next one


def feeder(add: Callable[[Any], Awaitable[Any]]) -> Callable[[Sequence[Any]], None]:
    """A function that adds a batch of messages with ``add`` on its own event loop."""
    loop = asyncio.new_event_loop()

    def feed(batch: Sequence[Any]) -> None:
        async def run() -> None:
            for message in batch:
                await add(message)

        loop.run_until_complete(run())

    return feed


def floor_variant(messages: list[dict[str, Any]]) -> Variant:
    """tiktoken's own encode of each message's texts (content and call arguments)."""
    encode = load_bundled_encoding(encoding_for_model(MODEL).encoding_name).encode_ordinary

    def feed(batch: Sequence[dict[str, Any]]) -> None:
        for m in batch:
            if isinstance(m.get("content"), str):
                encode(m["content"])
            for call in m.get("tool_calls") or ():
                encode(call["function"]["arguments"])

    return FLOOR, feed, messages, len(messages)


def interleaved(variants: Sequence[Variant]) -> dict[str, float]:
    """Mean µs per message of each variant, run batch by batch in turns, so a
    drift of the shared machine's speed (and the garbage one variant leaves
    the next) falls on all of them alike."""
    spent = dict.fromkeys((label for label, *_ in variants), 0.0)
    counted = dict.fromkeys(spent, 0)
    longest = max(limit for *_, limit in variants)
    for turn, start in enumerate(range(0, longest, BATCH)):
        # Each turn starts with the next variant: none always follows the same one.
        shift = turn % len(variants)
        for label, feed, messages, limit in [*variants[shift:], *variants[:shift]]:
            if start >= limit:
                continue
            batch = messages[start : min(start + BATCH, limit)]
            began = time.perf_counter()
            feed(batch)
            spent[label] += time.perf_counter() - began
            counted[label] += len(batch)
    return {label: spent[label] / counted[label] * 1e6 for label in spent}


FLOOR = "floor, tiktoken encode of the same texts"
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


def ours(messages: list[dict[str, Any]], folder: Path) -> tuple[list[Variant], Any]:
    """Our variants, and the compaction-off memory whose state is measured after."""
    typed = [ChatMessage.from_dict(m) for m in messages]
    n = len(typed)
    out: list[Variant] = [
        ("BasicMemory", feeder(BasicMemory(model_name=MODEL).add_message), typed, n),
    ]
    cut = BasicMemory(model_name=MODEL, max_tool_result_tokens=CUT)
    out.append((CUT_LABEL, feeder(cut.add_message), typed, n))
    state_memory = None
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
        out.append((label, feeder(memory.add_message), typed, n))
        state_memory = state_memory or memory
    return out, state_memory


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


def reference(
    motus: Any, messages: list[dict[str, Any]], few: int, folder: Path
) -> tuple[list[Variant], Any]:
    """The reference's variants (labelled ``reference: ...``), and a memory
    holding every message for the state figure."""
    basic = motus.memory.basic_memory.BasicMemory
    compaction = motus.memory.compaction_memory.CompactionMemory
    config = motus.memory.config.CompactionMemoryConfig
    typed = [motus.models.ChatMessage(**m) for m in messages]
    n = len(typed)
    off = compaction(
        config=config(token_threshold=NO_COMPACTION), model_name=MODEL, compact_fn=stub
    )
    on = compaction(
        config=config(token_threshold=8_000, log_base_path=str(folder / "ref-on")),
        model_name=MODEL,
        compact_fn=stub,
    )
    out: list[Variant] = [
        ("reference: BasicMemory", feeder(basic(model_name=MODEL).add_message), typed, n),
        (
            f"reference: {CUT_LABEL}",
            feeder(basic(model_name=MODEL, max_tool_result_tokens=CUT).add_message),
            typed,
            n,
        ),
        # It re-tokenises the whole context on every add: the first ``few`` messages only.
        (
            "reference: CompactionMemory, compaction off, no log",
            feeder(off.add_message),
            typed,
            few,
        ),
        (
            "reference: CompactionMemory, compaction on (8,000), JSONL log",
            feeder(on.add_message),
            typed,
            n,
        ),
    ]
    state_memory = compaction(
        config=config(token_threshold=NO_COMPACTION), model_name=MODEL, compact_fn=stub
    )
    state_memory._messages = list(typed)  # the context a long compaction-off run would hold
    return out, state_memory


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=8_000)
    parser.add_argument("--restore-sizes", type=int, nargs="*", default=[1_000, 10_000, 100_000])
    parser.add_argument("--reference", type=Path, help="lithosai-motus 0.4.3 wheel")
    parser.add_argument("--reference-messages", type=int, default=1_000)
    parser.add_argument("--cold-runs", type=int, default=9)
    args = parser.parse_args()
    messages = session(args.messages, seed=3)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        motus = load_reference(args.reference, folder) if args.reference else None
        variants, state_memory = ours(messages, folder)
        variants.insert(0, floor_variant(messages))
        ref_state = None
        if motus is not None:
            theirs, ref_state = reference(motus, messages, args.reference_messages, folder)
            variants += theirs
        # Each side's encoders built and code warm before anything is timed.
        warm_up = [ChatMessage.from_dict(m) for m in messages[:50]]
        feeder(BasicMemory(model_name=MODEL).add_message)(warm_up)
        if motus is not None:
            reference_warm_up = [motus.models.ChatMessage(**m) for m in messages[:50]]
            basic = motus.memory.basic_memory.BasicMemory(model_name=MODEL)
            feeder(basic.add_message)(reference_warm_up)
        cost = interleaved(variants)
        floor = cost.pop(FLOOR)
        print(
            f"{len(messages):,} messages; mean µs per message (lower is better), every "
            f"variant run {BATCH} messages at a time in turns"
        )
        print(f"  {FLOOR}: {floor:8.0f}")
        for label, value in cost.items():
            if label.startswith("reference: "):
                continue
            line = f"  {label:<52} {value:8.0f} ({value / floor:4.2f}x the floor)"
            ref = cost.get(f"reference: {label}")
            if ref is not None:
                few = "" if label != "CompactionMemory, compaction off, no log" else "*"
                line += (
                    f"  reference{few} {ref:8.0f} ({ref / floor:4.2f}x)"
                    f"  reference/ours {ref / value:6.2f}x"
                )
            print(line)
        if motus is not None:
            print(f"  * the reference's first {args.reference_messages:,} messages only")
        print(f"  {STATE}, first call / median of 5 more:")
        rows = [("ours", state_ms(state_memory))]
        if ref_state is not None:
            rows.append(("reference", state_ms(ref_state)))
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
