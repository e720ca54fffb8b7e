"""The hot path of the memory, against its floor and, optionally, the reference implementation.

One run, one generated agent workload (``memory_bench.session``: units A/B/C,
1-3 parallel calls, tool results of 50-3,000 tokens), the same stub
``compact_fn`` for every compacting memory, so no summariser is timed. Every
variant, the reference's too, takes the workload ``BATCH`` messages at a
time, in turns, so that the shared machine's drifting speed falls on all of
them alike; the time is the process's CPU time (``time.process_time``), so
the other jobs of a shared machine weigh less than in wall time. Prints the
mean cost per message of:

- the floor: tiktoken's raw encode of the texts a message's count covers
  (its content, its calls' arguments, a result's ``tool_call_id``; the
  roles and tool names, a handful of short strings, are counted once each);
- ``BasicMemory``, also with its size read after every message (which
  counts every message: on its way in a basic memory counts only a tool
  result that could be over its limit), and with tool results cut to
  ``CUT`` tokens;
  ``CompactionMemory`` without a log, with a JSONL log, and with compaction
  on (threshold 8,000);
- ``get_session_state().to_dict()`` with every message in context (ms: the
  first call, then the median of five more);
- ``restore_from_log`` (from checkpoints, and replaying everything) against a
  plain orjson parse of the same file and the reference's restore, at 1k,
  10k and 100k messages, of a log with compactions and of one without;
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

Ends with the same figures as the Markdown table bench/README.md carries.

Usage: ``python bench/hot_path.py [--messages 8000] [--restore-sizes 1000 10000 100000]
[--restore-runs 3] [--reference WHEEL] [--cold-runs 9]`` (``--restore-sizes``
with no size skips the restores, ``--cold-runs 0`` the cold process).
Figures, not assertions: compare within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
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
    """tiktoken's own encode of each message's texts that a count covers:
    content, call arguments, a result's ``tool_call_id``."""
    encode = load_bundled_encoding(encoding_for_model(MODEL).encoding_name).encode_ordinary

    def feed(batch: Sequence[dict[str, Any]]) -> None:
        for m in batch:
            if isinstance(m.get("content"), str):
                encode(m["content"])
            for call in m.get("tool_calls") or ():
                encode(call["function"]["arguments"])
            if isinstance(m.get("tool_call_id"), str):
                encode(m["tool_call_id"])

    return FLOOR, feed, messages, len(messages)


def interleaved(variants: Sequence[Variant]) -> dict[str, float]:
    """Mean CPU µs per message of each variant, run batch by batch in turns,
    so a drift of the shared machine's speed (and the garbage one variant
    leaves the next) falls on all of them alike."""
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
            began = time.process_time()
            feed(batch)
            spent[label] += time.process_time() - began
            counted[label] += len(batch)
    return {label: spent[label] / counted[label] * 1e6 for label in spent}


FLOOR = "floor, tiktoken encode of the same texts"
STATE = "get_session_state().to_dict() (ms)"


def state_ms(memory: Any) -> tuple[float, float]:
    """The first ``get_session_state().to_dict()`` and the median of five more
    (CPU ms, as the per-message figures)."""
    runs = []
    for _ in range(6):
        started = time.process_time()
        memory.get_session_state().to_dict()
        runs.append((time.process_time() - started) * 1e3)
    return runs[0], statistics.median(runs[1:])


CUT = 1_000  # the tool-result limit of the truncation rows, in tokens
CUT_LABEL = f"BasicMemory, tool results cut to {CUT:,} tokens"
SIZED_LABEL = "BasicMemory, its size read after every message"


def sized_feeder(memory: Any) -> Callable[[Sequence[Any]], None]:
    """``feeder`` that reads ``estimate_context_tokens()`` after each message."""
    loop = asyncio.new_event_loop()

    def feed(batch: Sequence[Any]) -> None:
        async def run() -> None:
            for message in batch:
                await memory.add_message(message)
                memory.estimate_context_tokens()

        loop.run_until_complete(run())

    return feed


def ours(messages: list[dict[str, Any]], folder: Path) -> tuple[list[Variant], Any]:
    """Our variants, and the compaction-off memory whose state is measured after."""

    # Each memory gets messages of its own, as it would in use: a message
    # caches its dict form, which must not pass from one variant to the next.
    def typed() -> list[ChatMessage]:
        return [ChatMessage.from_dict(m) for m in messages]

    n = len(messages)
    out: list[Variant] = [
        ("BasicMemory", feeder(BasicMemory(model_name=MODEL).add_message), typed(), n),
        (SIZED_LABEL, sized_feeder(BasicMemory(model_name=MODEL)), typed(), n),
    ]
    cut = BasicMemory(model_name=MODEL, max_tool_result_tokens=CUT)
    out.append((CUT_LABEL, feeder(cut.add_message), typed(), n))
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
        out.append((label, feeder(memory.add_message), typed(), n))
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

    def typed() -> list[Any]:  # messages of its own for each memory, as for ours
        return [motus.models.ChatMessage(**m) for m in messages]

    n = len(messages)
    off = compaction(
        config=config(token_threshold=NO_COMPACTION), model_name=MODEL, compact_fn=stub
    )
    on = compaction(
        config=config(token_threshold=8_000, log_base_path=str(folder / "ref-on")),
        model_name=MODEL,
        compact_fn=stub,
    )
    out: list[Variant] = [
        ("reference: BasicMemory", feeder(basic(model_name=MODEL).add_message), typed(), n),
        (
            f"reference: {CUT_LABEL}",
            feeder(basic(model_name=MODEL, max_tool_result_tokens=CUT).add_message),
            typed(),
            n,
        ),
        # It re-tokenises the whole context on every add: the first ``few`` messages only.
        (
            "reference: CompactionMemory, compaction off, no log",
            feeder(off.add_message),
            typed(),
            few,
        ),
        (
            "reference: CompactionMemory, compaction on (8,000), JSONL log",
            feeder(on.add_message),
            typed(),
            n,
        ),
    ]
    state_memory = compaction(
        config=config(token_threshold=NO_COMPACTION), model_name=MODEL, compact_fn=stub
    )
    state_memory._messages = typed()  # the context a long compaction-off run would hold
    return out, state_memory


RESTORE_CASES = (("with compactions", 30_000), ("without compactions", NO_COMPACTION))
"""The logs restored: threshold 30,000 tokens (a compaction every few hundred
messages) and no compaction at all (the live context is the whole log)."""


def restore_log(size: int, threshold: int, folder: Path) -> str:
    """Write the log of ``size`` messages of the workload (session ``r{size}-{threshold}``)."""
    session_id = f"r{size}-{threshold}"
    memory = CompactionMemory(
        config=CompactionMemoryConfig(
            session_id=session_id, token_threshold=threshold, log_base_path=folder
        ),
        model_name=MODEL,
        compact_fn=stub,
    )

    async def feed() -> None:
        for message in session(size, seed=11):
            await memory.add_message(message)

    asyncio.run(feed())
    restored = CompactionMemory.restore_from_log(session_id, log_base_path=folder)
    assert restored.get_context() == memory.get_context()
    return session_id


def restore_figures(
    size: int, threshold: int, folder: Path, motus: Any, runs: int
) -> dict[str, float]:
    """Median seconds, over ``runs`` turns (each taking every reader once, in
    turn), to parse the log with orjson, to restore it (from its checkpoints,
    then replaying everything: ``full_replay=True``) and to restore it with
    the reference when it is loaded."""
    session_id = restore_log(size, threshold, folder)
    path = folder / f"{session_id}.jsonl"

    def parse() -> None:
        with path.open("rb") as handle:
            for line in handle:
                orjson.loads(line)

    readers: dict[str, Callable[[], object]] = {
        "parse": parse,
        "restore": lambda: CompactionMemory.restore_from_log(session_id, log_base_path=folder),
        "full": lambda: CompactionMemory.restore_from_log(
            session_id, log_base_path=folder, full_replay=True
        ),
    }
    if motus is not None:
        theirs = motus.memory.compaction_memory.CompactionMemory
        readers["reference"] = lambda: theirs.restore_from_log(
            session_id, log_base_path=str(folder), model_name=MODEL, compact_fn=stub
        )
    seconds: dict[str, list[float]] = {name: [] for name in readers}
    for turn in range(runs):
        names = list(readers)
        for name in names[turn % len(names) :] + names[: turn % len(names)]:
            started = time.perf_counter()
            readers[name]()
            seconds[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in seconds.items()}


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


ROWS = (
    ("BasicMemory", "`BasicMemory`"),
    (SIZED_LABEL, "`BasicMemory`, its size read after every message"),
    (CUT_LABEL, f"`BasicMemory`, tool results cut to {CUT:,} tokens"),
    ("CompactionMemory, compaction off, no log", "`CompactionMemory`, compaction off, no log"),
    (
        "CompactionMemory, compaction off, JSONL log",
        "`CompactionMemory`, compaction off, JSONL log",
    ),
    (
        "CompactionMemory, compaction on (8,000), JSONL log",
        "`CompactionMemory`, compaction on (threshold 8,000), JSONL log",
    ),
)
"""bench/README.md's rows of the per-message figures: (variant label, row name)."""


class Table:
    """bench/README.md's Markdown table, filled as the figures come."""

    def __init__(self) -> None:
        self.lines = [
            "| case | ours | reference | reference / ours |",
            "| --- | ---: | ---: | ---: |",
        ]

    def row(self, *cells: str) -> None:
        self.lines.append("| " + " | ".join(cells) + " |")

    def print(self) -> None:
        print("\nThe table of bench/README.md:\n")
        print("\n".join(self.lines))


def per_message_rows(table: Table, cost: dict[str, float], floor: float, few: int) -> None:
    table.row("floor: tiktoken's own encode of the same texts", f"{floor:,.0f} µs", "", "")
    for label, name in ROWS:
        if label not in cost:
            continue
        value = cost[label]
        ours = f"{value:,.0f} µs ({value / floor:.2f}x the floor)"
        ref = cost.get(f"reference: {label}")
        if ref is None:
            table.row(name, ours, "", "")
            continue
        note = (
            f"{few:,} messages: it re-tokenises the context on every add"
            if label == "CompactionMemory, compaction off, no log"
            else f"{ref / floor:.2f}x"
        )
        table.row(name, ours, f"{ref:,.0f} µs ({note})", f"{ref / value:.2f}x")


def restore_rows(table: Table, figures: dict[tuple[str, int], dict[str, float]]) -> None:
    sizes = sorted({size for _, size in figures})
    if not sizes:
        return
    counts = " / ".join(f"{size:,}" for size in sizes)

    def cells(case: str, key: str) -> str:
        return " / ".join(_ms(figures[case, size][key]) for size in sizes)

    for case, _ in RESTORE_CASES:
        ours = f"{cells(case, 'restore')} ms (`full_replay=True`: {cells(case, 'full')} ms)"
        if "reference" in figures[case, sizes[0]]:
            ratios = " / ".join(
                f"{figures[case, n]['reference'] / figures[case, n]['restore']:.1f}x" for n in sizes
            )
            table.row(
                f"`restore_from_log`, log {case}, {counts} messages",
                ours,
                f"{cells(case, 'reference')} ms",
                ratios,
            )
        else:
            table.row(f"`restore_from_log`, log {case}, {counts} messages", ours, "", "")
    without, with_ = RESTORE_CASES[1][0], RESTORE_CASES[0][0]
    parse_ratios = " / ".join(
        f"{figures[without, n]['restore'] / figures[without, n]['parse']:.2f}x" for n in sizes
    )
    table.row(
        f"orjson parse of the same file, {without} ({with_})",
        f"{cells(without, 'parse')} ms ({cells(with_, 'parse')} ms)",
        "",
        f"ours {parse_ratios} the parse",
    )


def _ms(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=8_000)
    parser.add_argument("--restore-sizes", type=int, nargs="*", default=[1_000, 10_000, 100_000])
    parser.add_argument("--reference", type=Path, help="lithosai-motus 0.4.3 wheel")
    parser.add_argument("--reference-messages", type=int, default=1_000)
    parser.add_argument("--restore-runs", type=int, default=3)
    parser.add_argument("--cold-runs", type=int, default=9)
    parser.add_argument(
        "--only-restore",
        action="store_true",
        help="only the restore_from_log figures (no per-message variants, no cold process)",
    )
    args = parser.parse_args()
    started = time.gmtime()
    messages = session(args.messages, seed=3)
    table = Table()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        motus = load_reference(args.reference, folder) if args.reference else None
        held: list[Any] = []
        if not args.only_restore:
            held, load = per_message(args, messages, folder, motus, table)
        print(
            f"  restore_from_log, ms (median of {args.restore_runs} turns; ratios: "
            "to the orjson parse of the file, and reference / ours):"
        )
        restores: dict[tuple[str, int], dict[str, float]] = {}
        for case, threshold in RESTORE_CASES:
            for size in args.restore_sizes:
                restores[case, size] = print_restore(
                    case, size, threshold, folder, motus, args.restore_runs
                )
        restore_rows(table, restores)
        del held
    if args.cold_runs > 0 and not args.only_restore:
        imported, counted, built = cold_start(args.cold_runs)
        print(
            f"  cold process (median of {args.cold_runs}): import memory {imported:.0f} ms; "
            f"first message counted {counted:.0f} ms after it; a tool result needing "
            f"tiktoken's encoder {built:.0f} ms after that"
        )
        table.row(
            "cold process: `import memory`, then the first message counted",
            f"{imported:.0f} ms, then {counted:.0f} ms",
            "",
            "",
        )
    print(
        f"\nRun on {time.strftime('%Y-%m-%d at %H:%M UTC', started)}; load average "
        f"{load:.1f} when the per-message figures began, {os.getloadavg()[0]:.1f} at the end "
        f"({os.cpu_count()} CPUs)"
    )
    table.print()


def per_message(
    args: argparse.Namespace, messages: list[dict[str, Any]], folder: Path, motus: Any, table: Table
) -> tuple[list[Any], float]:
    """Print the per-message variants' figures and the session state's, and add
    their rows to ``table``; returns what they hold (the memories), which the
    caller keeps alive through the restores so those run in the same process as
    always (a large heap), and the load average when the timing began."""
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
    # The inputs (every variant's own messages) are in place: the cyclic
    # collector is told to leave them alone, so its walks over the bench's
    # own data are charged to no variant (what each memory keeps it walks).
    gc.collect()
    gc.freeze()
    load = os.getloadavg()[0]
    cost = interleaved(variants)
    floor = cost.pop(FLOOR)
    print(
        f"{len(messages):,} messages; mean CPU µs per message (lower is better), every "
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
    per_message_rows(table, cost, floor, args.reference_messages)
    print(f"  {STATE}, first call / median of 5 more:")
    rows = [("ours", state_ms(state_memory))]
    if ref_state is not None:
        rows.append(("reference", state_ms(ref_state)))
    for who, (first, median) in rows:
        print(f"    {who:<10} {first:6.1f} / {median:6.1f}")
    state_cells = [f"{first:.1f} / {median:.1f} ms" for _, (first, median) in rows]
    if len(state_cells) == 2:
        ratio = f"{rows[1][1][0] / rows[0][1][0]:.1f}x / {rows[1][1][1] / rows[0][1][1]:.1f}x"
        table.row(
            "`get_session_state().to_dict()`, every message in context: first call / "
            "median of 5 more",
            *state_cells,
            ratio,
        )
    return [variants, state_memory, ref_state], load


def print_restore(
    case: str, size: int, threshold: int, folder: Path, motus: Any, runs: int
) -> dict[str, float]:
    """Print one restore row (ours, full replay, the orjson parse, the reference)
    and return its figures in ms."""
    ms = {k: v * 1e3 for k, v in restore_figures(size, threshold, folder, motus, runs).items()}
    line = (
        f"    {case:<20} {size:>7,} messages: ours {ms['restore']:8.1f} "
        f"({ms['restore'] / ms['parse']:4.2f}x the parse), full replay "
        f"{ms['full']:8.1f}, orjson parse {ms['parse']:8.1f}"
    )
    if "reference" in ms:
        line += (
            f", reference {ms['reference']:8.1f} "
            f"({ms['reference'] / ms['parse']:4.2f}x)"
            f"  reference/ours {ms['reference'] / ms['restore']:6.2f}x"
        )
    print(line)
    return ms


if __name__ == "__main__":
    main()
