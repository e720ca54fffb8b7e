"""What the offline compactor keeps, against dropping the oldest turns at the same budget.

    .venv/bin/python bench/compaction_quality.py [--budgets 1000,2000,4000]
        [--tau-budgets 300,500,1000,1500] [--limit N]

LoCoMo: each conversation becomes chat messages (speaker A as user, B as
assistant, the session date before the first turn of each session). All but the
last few turns are folded: by ``offline_summary`` into ``budget`` tokens, or by
keeping the newest turns that fit ``budget`` tokens. A QA item (categories 1-4)
counts as kept when its answer's content words are all in the context (summary
or kept turns + the last turns), and, separately, when the key words of its
evidence turns (their three rarest content words) are.

tau-bench: each airline run (system prompt aside) is folded up to its last unit
(the last user message and what follows); we count the ids named in the task's
expected actions (user ids, reservation ids, flight numbers, payment ids) that
are still in the context, among those that appear in the run at all.

The data is read from ../shared/data beside the checkout (LoCoMo is CC BY-NC: never copy it into
the repository).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory.messages import ChatMessage
from memory.offline_compactor import offline_summary

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"  # ../shared beside the checkout
LOCOMO = DATA / "locomo" / "locomo10-part1.json"
TAU = DATA / "tau-bench" / "gpt-4o-airline.json"
TAIL_TURNS = 4
STOP_WORDS = (
    "a an the and or of to in on at for with by from is was are were be been it its this that "
    "her his their she he they them i my me you your we our as than then into about"
)
STOP = frozenset(STOP_WORDS.split())


def make_counter() -> Any:
    try:
        from memory.tokens import TokenCounter
    except ImportError:  # memory.tokens not written yet: a rough stand-in
        print("note: memory.tokens not available, counting ~4 characters per token\n")

        class Approx:
            def count(self, text: str) -> int:
                return (len(text) + 3) // 4

        return Approx()
    return TokenCounter.for_model(None)


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def content_words(text: str) -> list[str]:
    all_words = words(text)
    return [w for w in all_words if w not in STOP] or all_words


def message_tokens(counter: Any, message: ChatMessage) -> int:
    if hasattr(counter, "message_tokens"):
        return int(counter.message_tokens(message))
    calls = " ".join(c.name + c.arguments for c in message.tool_calls)
    return int(counter.count(message.text + calls)) + 4


def drop_oldest(messages: Sequence[ChatMessage], budget: int, counter: Any) -> list[ChatMessage]:
    """The newest messages that fit ``budget`` tokens."""
    kept: list[ChatMessage] = []
    used = 0
    for message in reversed(messages):
        used += message_tokens(counter, message)
        if used > budget:
            break
        kept.append(message)
    return kept[::-1]


def context_of(messages: Sequence[ChatMessage]) -> str:
    parts = []
    for m in messages:
        parts.append(m.text)
        parts.extend(f"{c.name}({c.arguments})" for c in m.tool_calls)
    return "\n".join(parts)


def timed(fn: Callable[[], str], clock: list[float]) -> str:
    started = time.perf_counter()
    out = fn()
    clock.append(time.perf_counter() - started)
    return out


# --- LoCoMo --------------------------------------------------------------------------------


def locomo_turns(sample: dict[str, Any]) -> Iterator[tuple[str, ChatMessage]]:
    conv = sample["conversation"]
    numbers = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
    for n in numbers:
        date = conv.get(f"session_{n}_date_time", "")
        for i, turn in enumerate(conv[f"session_{n}"]):
            text = turn["text"] if i or not date else f"[{date}] {turn['text']}"
            is_a = turn["speaker"] == conv["speaker_a"]
            yield turn["dia_id"], ChatMessage.user(text) if is_a else ChatMessage.assistant(text)


def key_words(text: str, doc_freq: dict[str, int]) -> list[str]:
    """The three rarest content words of an evidence turn."""
    candidates = sorted({w for w in content_words(text) if len(w) > 2 or w.isdigit()})
    return sorted(candidates, key=lambda w: (doc_freq.get(w, 0), w))[:3]


def bench_locomo(budgets: list[int], limit: int | None, counter: Any) -> None:
    samples = json.loads(LOCOMO.read_text())[:limit]
    rows = {b: [0, 0, 0, 0] for b in budgets}  # answers offline/drop, evidence offline/drop
    full_answers = total = 0
    clock: list[float] = []
    for sample in samples:
        turns = list(locomo_turns(sample))
        by_id = {dia_id: m.text for dia_id, m in turns}
        messages = [m for _, m in turns]
        doc_freq: dict[str, int] = {}
        for text in by_id.values():
            for w in set(words(text)):
                doc_freq[w] = doc_freq.get(w, 0) + 1
        folded, tail = messages[:-TAIL_TURNS], messages[-TAIL_TURNS:]
        items = []
        for qa in sample["qa"]:
            if qa.get("category") == 5 or "answer" not in qa:
                continue
            evidence_ids = re.findall(r"D\d+:\d+", " ".join(qa.get("evidence", [])))
            keys = {w for e in evidence_ids if e in by_id for w in key_words(by_id[e], doc_freq)}
            items.append((set(content_words(str(qa["answer"]))), keys))
        total += len(items)
        everything = set(words(context_of(messages)))
        full_answers += sum(answer <= everything for answer, _ in items)
        for budget in budgets:
            summary = timed(
                partial(offline_summary, folded, budget_tokens=budget, counter=counter), clock
            )
            ours = set(words(summary + "\n" + context_of(tail)))
            theirs = set(words(context_of(drop_oldest(folded, budget, counter) + tail)))
            row = rows[budget]
            row[0] += sum(answer <= ours for answer, _ in items)
            row[1] += sum(answer <= theirs for answer, _ in items)
            row[2] += sum(bool(keys) and keys <= ours for _, keys in items)
            row[3] += sum(bool(keys) and keys <= theirs for _, keys in items)

    def pct(n: int) -> str:
        return f"{100 * n / max(1, total):5.1f}%"

    print(
        f"LoCoMo: {len(samples)} conversations, {total} QA items (categories 1-4), "
        f"the last {TAIL_TURNS} turns kept as they are"
    )
    print(f"answers present in the full conversation: {pct(full_answers)} (the ceiling)")
    print("budget | answers kept: offline  drop-oldest | evidence kept: offline  drop-oldest")
    for budget, (a_ours, a_drop, e_ours, e_drop) in rows.items():
        print(
            f"{budget:6d} | {pct(a_ours):>21} {pct(a_drop):>12} | "
            f"{pct(e_ours):>22} {pct(e_drop):>12}"
        )
    print(f"offline_summary: {1000 * sum(clock) / max(1, len(clock)):.0f} ms per call\n")


# --- tau-bench ---------------------------------------------------------------------------


def action_ids(value: Any, key: str = "") -> Iterator[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from action_ids(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from action_ids(v, key)
    elif isinstance(value, str) and (key.endswith("_id") or key == "flight_number"):
        yield value


def bench_tau(budgets: list[int], limit: int | None, counter: Any) -> None:
    runs = json.loads(TAU.read_text())[:limit]
    header = "budget | ids kept: offline  drop-oldest | runs keeping every id: offline  drop-oldest"
    lines = []
    clock: list[float] = []
    for budget in budgets:
        kept = [0, 0]
        complete = [0, 0]
        per_run: list[tuple[float, float]] = []
        named = 0
        for run in runs:
            messages = [ChatMessage.from_dict(m) for m in run["traj"] if m["role"] != "system"]
            last_user = max(i for i, m in enumerate(messages) if m.role == "user")
            folded, tail = messages[:last_user], messages[last_user:]
            everything = context_of(messages)
            ids = sorted({i for a in run["info"]["task"]["actions"] for i in action_ids(a)})
            ids = [i for i in ids if i in everything]
            if not ids:
                continue
            summary = timed(
                partial(offline_summary, folded, budget_tokens=budget, counter=counter), clock
            )
            ours = summary + "\n" + context_of(tail)
            theirs = context_of(drop_oldest(folded, budget, counter) + tail)
            n_ours = sum(i in ours for i in ids)
            n_theirs = sum(i in theirs for i in ids)
            named += len(ids)
            kept[0] += n_ours
            kept[1] += n_theirs
            complete[0] += n_ours == len(ids)
            complete[1] += n_theirs == len(ids)
            per_run.append((n_ours / len(ids), n_theirs / len(ids)))
        n = max(1, len(per_run))
        ours_pct, drop_pct = (100 * k / max(1, named) for k in kept)
        lines.append(
            f"{budget:6d} | {ours_pct:16.1f}% {drop_pct:11.1f}%"
            f" | {100 * complete[0] / n:30.1f}% {100 * complete[1] / n:11.1f}%"
            f"   (mean per run: {100 * sum(o for o, _ in per_run) / n:.1f}% vs "
            f"{100 * sum(t for _, t in per_run) / n:.1f}%; {named} ids in {len(per_run)} runs)"
        )
    print(f"tau-bench airline: {len(runs)} runs folded up to their last unit")
    print(header)
    print("\n".join(lines))
    ms = 1000 * sum(clock) / max(1, len(clock))
    print(f"offline_summary: {ms:.0f} ms per call (max {1000 * max(clock, default=0):.0f} ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budgets", default="1000,2000,4000", help="LoCoMo budgets, in tokens")
    parser.add_argument(
        "--tau-budgets", default="300,500,1000,1500", help="tau-bench budgets, in tokens"
    )
    parser.add_argument("--limit", type=int, default=None, help="conversations / runs to use")
    args = parser.parse_args()
    counter = make_counter()

    def ints(text: str) -> list[int]:
        return [int(x) for x in text.split(",") if x.strip()]

    if LOCOMO.exists():
        bench_locomo(ints(args.budgets), args.limit, counter)
    else:
        print(f"skipped LoCoMo: {LOCOMO} not found")
    if TAU.exists():
        bench_tau(ints(args.tau_budgets), args.limit, counter)
    else:
        print(f"skipped tau-bench: {TAU} not found")


if __name__ == "__main__":
    main()
